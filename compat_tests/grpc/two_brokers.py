"""The 5.x clients over two brokers (``rmqd serve --brokers 2``, brokers on hosts of their own, or Java's behind a
proxy): the cluster's brokers and their gRPC ports as the name server has them, where the messages of a topic were
stored, the Python script that drains a topic with a PushConsumer, and the checks of what the clients received."""
from __future__ import annotations

import collections
import json
import subprocess
import sys

from rmqd.grpc.advertise import NAMESPACE
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode
from rmqd.remoting.command import new_request
from tests.kit.waits import wait_until

#: ``SPREAD_COUNT`` messages ``spread-<i>`` sent to ``SPREAD_TOPIC`` (each an ``op=sent`` event), then received by
#: a SimpleConsumer of ``SIMPLE_GROUP`` (long polls of ``AWAIT`` s; each an ``op=SIMPLE_OP`` event)
SEND_AND_RECEIVE = '''
p = Producer(CONFIG, (SPREAD_TOPIC,))
p.startup()
for i in range(SPREAD_COUNT):
    m = Message(); m.topic = SPREAD_TOPIC; m.body = f"spread-{i}".encode()
    emit(op="sent", id=p.send(m).message_id)
p.shutdown()
c = SimpleConsumer(CONFIG, SIMPLE_GROUP, {SPREAD_TOPIC: FilterExpression()}, await_duration=AWAIT)
c.startup()
for m in receive_all(c, SPREAD_COUNT, timeout=60):
    emit(op=SIMPLE_OP, id=m.message_id, body=m.body.decode())
c.shutdown()
'''

#: a PushConsumer of ``PUSH_GROUP`` on ``PUSH_TOPIC`` until it has ``PUSH_COUNT`` distinct messages (60 s at most),
#: then one more second (a redelivery shows), each delivery an ``op=push`` event (``TLS``: the client's TLS keywords)
PUSH_ALL = '''
seen, lock = [], threading.Lock()
class L(MessageListener):
    def consume(self, m):
        with lock:
            seen.append(m.message_id)
        return ConsumeResult.SUCCESS
pc = PushConsumer(CONFIG, PUSH_GROUP, L(), {PUSH_TOPIC: FilterExpression()}, **TLS)
pc.startup()
end = time.time() + 60
while len(set(seen)) < PUSH_COUNT and time.time() < end:
    time.sleep(0.2)
time.sleep(1.0)
pc.shutdown()
for mid in seen:
    emit(op="push", id=mid)
'''


def cluster_brokers(namesrv: str) -> dict[str, str]:
    """broker name -> master address, as the name server's cluster info (GET_BROKER_CLUSTER_INFO) has them."""
    with BlockingClient(namesrv) as c:
        info = json.loads(c.invoke(new_request(106)).body_bytes().replace(b"{0:", b'{"0":'))
    return {name: data["brokerAddrs"]["0"] for name, data in info["brokerAddrTable"].items()}


def wait_two_brokers(namesrv: str, timeout: float = 30.0) -> dict[str, str]:
    """:func:`cluster_brokers` once both brokers registered."""
    return wait_until(lambda: (lambda b: b if len(b) == 2 else None)(cluster_brokers(namesrv)), timeout,
                      interval=0.2, what="both brokers registered with the name server")


def grpc_ports(namesrv: str) -> dict[str, str]:
    """The brokers' gRPC ports as the name server's KV table has them (broker address -> port)."""
    with BlockingClient(namesrv) as c:
        resp = c.invoke(new_request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": NAMESPACE}))
    return json.loads(resp.body_bytes()).get("table", {}) if resp.code == 0 and resp.body_bytes() else {}


def stored_per_queue(brokers: dict[str, str], topic: str, queues: int = 8) -> dict[tuple[str, int], int]:
    """The max offset of each of ``topic``'s queues on each broker (updateTopic's default: 8 queues)."""
    out = {}
    for name, addr in brokers.items():
        with BlockingClient(addr) as c:
            for qid in range(queues):
                resp = c.invoke(new_request(30, {"topic": topic, "queueId": str(qid)}))
                out[(name, qid)] = int(resp.ext_fields["offset"])
    return out


def stored_per_broker(brokers: dict[str, str], topic: str) -> dict[str, int]:
    """How many messages of ``topic`` each broker stores."""
    per: collections.Counter[str] = collections.Counter()
    for (name, _qid), n in stored_per_queue(brokers, topic).items():
        per[name] += n
    return dict(per)


def admin(*args: str) -> None:
    """``rmqd admin ARGS``, which must print success."""
    res = subprocess.run([sys.executable, "-m", "rmqd.runtime.cli", "admin", *args], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0 and "success" in res.stdout.lower(), (res.stdout, res.stderr)


def assert_each_once(res, sent: list[str], *ops: str) -> None:
    """Every consumer (``op`` events of the client run ``res``) received every sent message id exactly once."""
    for op in ops:
        got = collections.Counter(e["id"] for e in res.events_of(op))
        assert set(got) == set(sent) and set(got.values()) == {1}, (op, got)


def assert_spread(res, brokers: dict[str, str], topic: str, count: int, *ops: str) -> dict[str, int]:
    """``count`` distinct messages sent (``op=sent``), stored on both brokers (each some), each received once by
    every consumer of ``ops``; returns how many each broker stores."""
    sent = [e["id"] for e in res.events_of("sent")]
    assert len(set(sent)) == count
    per = stored_per_broker(brokers, topic)
    assert sum(per.values()) == count and min(per.values()) > 0, per          # both brokers store some
    assert_each_once(res, sent, *ops)
    return per


def assert_fifo_tx_delay(res) -> None:
    """The FIFO, transaction and delay sections of test_proxy_brokers.PYTHON: each message group in order, both
    transactions delivered (the open one committed by the check-back, asked first), the delay message on time."""
    fifo = collections.defaultdict(list)
    for e in res.events_of("fifo"):
        fifo[e["group"]].append(e["body"])
    assert dict(fifo) == {f"order-{g}": [f"g{g}-{i}" for i in range(4)] for g in range(3)}, dict(fifo)
    assert sorted(e["body"] for e in res.events_of("tx")) == ["tx-commit", "tx-open"]
    assert [e["body"] for e in res.events_of("check")][:1] == ["tx-open"], res.events_of("check")
    delay = res.events_of("delay")
    # at its delivery time, give or take a Java 5.x timer's precision (timerPrecisionMs 1000: its slot's second)
    assert [e["body"] for e in delay] == ["later"] and delay[0]["late"] >= -1.0, delay
