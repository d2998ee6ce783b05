# The PyPI RocketMQ 5 Python client (rocketmq-python-client 5.1.2) running differential scenarios against one
# endpoint; run by test_grpc5_python.py with clientrunner.run_client_script (which adds emit() and friends).
# 5.1.2 keeps one channel and Telemetry stream per endpoint and process: with two clients of one endpoint in a
# process, a Java proxy may lose one client's Settings (its receives then fail with a NullPointerException; rmqd
# does not need them). So each section runs in a process of its own, its producer on 127.0.0.1:<port> and its
# consumer on localhost:<port> (two endpoints to the client, each with its own channel), and no client is shut down.
# Env: ENDPOINT, LITE_ENDPOINT, SUFFIX, SECTIONS (comma-separated). Each section runs on its own
# topics and groups (P5<Kind><suffix>, made with mqadmin beforehand) and prints JSON lines
# {"op": ..., "section": ..., ...}; message ids are reported as the label of the send that made them.
import re
import threading
import time
import traceback

from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression, LitePushConsumer,
                      LiteSimpleConsumer, Message, MessageListener, Producer, PushConsumer, SimpleConsumer,
                      TransactionChecker, TransactionResolution)

ENDPOINT, LITE_ENDPOINT = _os.environ["ENDPOINT"], _os.environ["LITE_ENDPOINT"]
SUFFIX = _os.environ.get("SUFFIX", "")
LABELS = {}


def name(kind):
    return f"P5{kind}{SUFFIX}"


def conf(endpoint=ENDPOINT):
    return ClientConfiguration(endpoint, Credentials("", ""), request_timeout=10)


def consumer_conf(endpoint=ENDPOINT):
    """The same server under another name: the consumer gets a channel of its own (see above)."""
    return conf(endpoint.replace("127.0.0.1:", "localhost:"))


def code_of(e):
    code = getattr(e, "code", None)
    return code if code is not None else type(e).__name__


def text_of(e):
    return re.sub(r"request-id[=:] ?[0-9a-f-]+", "request-id=<id>", str(e))


def view(m):
    return dict(id=LABELS.get(m.message_id, "<other>"), body=m.body.decode(), tag=m.tag, keys=sorted(m.keys or []),
                props=dict(sorted((m.properties or {}).items())), group=m.message_group, lite=m.lite_topic,
                priority=m.priority, delivery=m.delivery_timestamp is not None, attempt=m.delivery_attempt)


def msg(topic, body, tag=None, keys=(), props=None, group=None, delivery=None, lite=None, priority=None):
    m = Message()
    m.topic, m.body = topic, body.encode()
    if tag:
        m.tag = tag
    for k in keys:
        m.keys = k
    for k, v in (props or {}).items():
        m.add_property(k, v)
    if group:
        m.message_group = group
    if delivery:
        m.delivery_timestamp = delivery
    if lite:
        m.lite_topic = lite
    if priority is not None:
        m.priority = priority
    return m


def send(section, p, label, m, tx=None):
    try:
        r = p.send(m, tx) if tx is not None else p.send(m)
        LABELS[r.message_id] = label
        emit(op="sent", section=section, label=label, recall=bool(getattr(r, "recall_handle", None)))
        return r
    except Exception as e:
        emit(op="refused", section=section, label=label, code=code_of(e), error=text_of(e))
        return None


def receive(c, want, invisible, timeout, ack=True):
    got, end = [], time.time() + timeout
    while len(got) < want and time.time() < end:
        for m in c.receive(16, invisible) or []:
            got.append(m)
            if ack:
                c.ack(m)
    return got


def simple(group, topic):
    c = SimpleConsumer(consumer_conf(), group, {topic: FilterExpression()}, await_duration=3)
    c.startup()
    return c


def producer(*topics, endpoint=ENDPOINT, checker=None):
    p = Producer(conf(endpoint), topics, checker) if checker else Producer(conf(endpoint), topics)
    p.startup()
    return p


def got(section, op, msgs):
    emit(op=op, section=section, messages=[view(m) for m in msgs])


class Collect(MessageListener):
    def __init__(self, fail_first_attempt_of=None):
        self.seen, self.lock, self.fail = [], threading.Lock(), fail_first_attempt_of

    def consume(self, m):
        with self.lock:
            self.seen.append(m)
        return ConsumeResult.FAILURE if m.body.decode() == self.fail and m.delivery_attempt == 1 \
            else ConsumeResult.SUCCESS


# ------------------------------------------------------------------------------------------------ sections
def normal():
    t = name("Normal")
    p = producer(t)
    send("normal", p, "n0", msg(t, "n0", tag="TagA", keys=("k1", "k2"), props={"color": "red"}))
    send("normal", p, "n1", msg(t, "n1"))
    send("normal", p, "fifo-on-normal", msg(t, "x", group="g"))
    send("normal", p, "priority-on-normal", msg(t, "x", priority=3))
    c = simple(name("NormalG"), t)
    got("normal", "got", receive(c, 2, 15, 30))


def fifo():
    t = name("Fifo")
    p = producer(t)
    for i in range(3):
        for g in range(2):
            send("fifo", p, f"g{g}-{i}", msg(t, f"g{g}-{i}", group=f"order-{g}"))
    c = simple(name("FifoG"), t)
    got("fifo", "got", receive(c, 6, 15, 40))


def delay():
    t = name("Delay")
    p = producer(t)
    c = simple(name("DelayG"), t)
    time.sleep(1.0 - time.time() % 1.0)          # the client takes whole seconds: "+ 3" is 3 s from now
    sent_at = time.time()
    send("delay", p, "later", msg(t, "later", delivery=int(sent_at) + 3))
    got("delay", "got", receive(c, 1, 15, 30))
    emit(op="age", section="delay", early=time.time() - sent_at < 2.5)


def tx():
    t = name("Tx")
    checked = []

    class Checker(TransactionChecker):
        def check(self, m):
            label = LABELS.get(m.message_id, "<other>")
            checked.append(label)
            return TransactionResolution.COMMIT if label == "orphan" else TransactionResolution.UNKNOWN
    p = producer(t, checker=Checker())
    for what in ("commit", "rollback", "orphan"):
        transaction = p.begin_transaction()
        r = p.send(msg(t, what, tag="tx"), transaction)
        LABELS[r.message_id] = what
        if what == "commit":
            transaction.commit()
        elif what == "rollback":
            transaction.rollback()
    c = simple(name("TxG"), t)
    msgs = receive(c, 2, 15, 40)
    msgs += receive(c, 1, 15, 3)
    got("tx", "got", msgs)
    emit(op="checked", section="tx", orphan="orphan" in checked)


def change():
    t = name("Change")
    p = producer(t)
    send("change", p, "extend", msg(t, "extend"))
    c = simple(name("ChangeG"), t)
    first = receive(c, 1, 3, 20, ack=False)            # 3 s: room to change it in time on a loaded machine
    got("change", "first", first)
    c.change_invisible_duration(first[0], 6)
    changed = time.time()
    again = receive(c, 1, 15, 25, ack=False)
    got("change", "again", again)
    emit(op="after", section="change", early=time.time() - changed < 5.5)
    for m in again:
        c.ack(m)


def push():
    t = name("Push")
    col = Collect(fail_first_attempt_of="fail-once")
    p = producer(t)
    c = PushConsumer(consumer_conf(), name("PushG"), col, {t: FilterExpression()})
    c.startup()
    for i in range(3):
        send("push", p, f"push{i}", msg(t, f"push{i}"))
    send("push", p, "fail-once", msg(t, "fail-once"))
    end = time.time() + 40
    while time.time() < end and len(col.seen) < 5:
        time.sleep(0.1)
    time.sleep(0.5)
    got("push", "got", list(col.seen))


def dlq():
    t, g = name("Dlq"), name("DlqG")
    p = producer(t)
    send("dlq", p, "poison", msg(t, "poison"))
    c = simple(g, t)
    attempts = []
    for _ in range(2):
        attempts += receive(c, 1, 1, 20, ack=False)
    got("dlq", "attempts", attempts)
    got("dlq", "after", receive(c, 1, 1, 5, ack=False))
    c.unsubscribe(t)                                 # the same consumer reads the DLQ (a third client would not do)
    c.subscribe(f"%DLQ%{g}", FilterExpression())
    got("dlq", "dlq", receive(c, 1, 15, 20))


def recall():
    t = name("Recall")
    p = producer(t)
    at = int(time.time()) + 9                       # room for a loaded machine before the recall
    send("recall", p, "keep", msg(t, "keep", delivery=at))
    drop = send("recall", p, "drop", msg(t, "drop", delivery=at))
    for attempt, handle in (("first", drop.recall_handle), ("garbage", "garbage")):
        try:
            r = p.recall_message(t, handle)
            mid = getattr(r, "message_id", r)           # 5.1.2 answers the id itself
            emit(op="recalled", section="recall", attempt=attempt, id=LABELS.get(mid, "<other>"))
        except Exception as e:
            emit(op="recall-refused", section="recall", attempt=attempt, code=code_of(e), error=text_of(e))
    c = simple(name("RecallG"), t)
    got("recall", "got", receive(c, 2, 15, 20))


def subscribe(consumer, *names):
    for n in names:
        end = time.time() + 10
        while True:      # the client's quota is 0 until the server's Settings arrive (asynchronously)
            try:
                consumer.subscribe_lite(n)
                break
            except Exception as e:
                if "quota: 0" not in str(e) or time.time() > end:
                    raise
                time.sleep(0.05)
    consumer.subscribe_lite_all()


def lite():
    t = name("Lite")
    col = Collect()
    p = producer(t, endpoint=LITE_ENDPOINT)
    c = LitePushConsumer(consumer_conf(LITE_ENDPOINT), name("LiteG"), t, col)
    c.startup()
    subscribe(c, "chat-1")
    for i in range(3):
        send("lite", p, f"c1-{i}", msg(t, f"c1-{i}", lite="chat-1"))
    send("lite", p, "c2-0", msg(t, "c2-0", lite="chat-2"))
    send("lite", p, "no-lite-on-lite", msg(t, "x"))
    end = time.time() + 30
    while time.time() < end and len(col.seen) < 3:
        time.sleep(0.1)
    time.sleep(1.0)
    got("lite", "got", list(col.seen))


def lite_client_of_a_new_group(kind):
    """What an application sees starting a lite consumer of a group nobody created."""
    t = name("Lite")
    try:
        if kind == "push":
            c = LitePushConsumer(conf(LITE_ENDPOINT), name("LiteNewG"), t, Collect())
        else:
            c = LiteSimpleConsumer(t, conf(LITE_ENDPOINT), name("LiteNewG"), await_duration=1)
        c.startup()
        emit(op="started", section=f"litenew-{kind}")
        c.subscribe_lite("agent-1")
        emit(op="subscribed", section=f"litenew-{kind}")
    except Exception as e:
        emit(op="error", section=f"litenew-{kind}", code=code_of(e), error=text_of(e))


def litesimple():
    t = name("Lite")
    p = producer(t, endpoint=LITE_ENDPOINT)
    try:
        c = LiteSimpleConsumer(t, consumer_conf(LITE_ENDPOINT), name("LiteG"), await_duration=2)
        c.startup()
    except Exception as e:
        emit(op="error", section="litesimple", code=code_of(e), error=text_of(e))
        return
    subscribe(c, "room-1")
    for i in range(2):
        send("litesimple", p, f"r{i}", msg(t, f"r{i}", lite="room-1"))
    got("litesimple", "got", receive(c, 2, 15, 20))


SECTIONS = {"normal": normal, "fifo": fifo, "delay": delay, "tx": tx, "change": change, "push": push, "dlq": dlq,
            "recall": recall, "lite": lite, "litesimple": litesimple,
            "litenew-push": lambda: lite_client_of_a_new_group("push"),
            "litenew-simple": lambda: lite_client_of_a_new_group("simple")}


def run(section):
    t0 = time.time()
    try:
        SECTIONS[section]()
    except Exception as e:
        emit(op="error", section=section, code=code_of(e), error=text_of(e), trace=traceback.format_exc()[-1500:])
    emit(op="done", section=section, ms=int((time.time() - t0) * 1000))


for s in _os.environ["SECTIONS"].split(","):
    run(s)
_os._exit(0)
