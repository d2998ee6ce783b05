"""Client-side scenario scripts run by the C++ client in a subprocess (see clientrunner).

Each script reads its parameters from the JSON env var ``SCENARIO_ARGS`` and reports events as
JSON lines through ``emit``.  Helpers here start them (optionally in a background thread).
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from clientrunner import ClientRun, run_client_script

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from tests.kit.clients import create_topic  # noqa: F401  (UPDATE_AND_CREATE_TOPIC as `mqadmin updateTopic` sends it)
from tests.kit.waits import wait_until as wait_for  # noqa: F401  (the scenarios' name for it)

PRODUCER = r'''
from rocketmq.client import Producer, Message
A = _json.loads(_os.environ['SCENARIO_ARGS'])
p = Producer(A['group'])
p.set_namesrv_addr(NAMESRV)
p.start()

def make(i):
    m = Message(A['topic'])
    m.set_body('%s-%d' % (A['prefix'], i))
    if A.get('tag'):
        m.set_tags(A['tag'])
    m.set_keys('key-%s-%d' % (A['prefix'], i))
    m.set_property('seq', str(i))
    m.set_property('origin', 'compat')
    if A.get('delay_level'):
        m.set_delay_time_level(A['delay_level'])
    return m

mode = A['mode']
done = []
for i in range(A['count']):
    m = make(i)
    t0 = _time.time()
    if mode == 'sync':
        r = p.send_sync(m)
        emit(op='send', i=i, status=int(r.status), msg_id=r.msg_id, offset=r.offset, ts=t0)
    elif mode == 'oneway':
        p.send_oneway(m)
        emit(op='send', i=i, ts=t0)
    elif mode == 'orderly':
        arg = A['keys'][i]
        r = p.send_orderly(m, arg)
        emit(op='send', i=i, status=int(r.status), msg_id=r.msg_id, offset=r.offset, arg=arg, ts=t0)
    elif mode == 'async':
        def ok(r, i=i):
            emit(op='send', i=i, status=int(r.status), msg_id=r.msg_id, offset=r.offset)
            done.append(i)
        def fail(e, i=i):
            emit(op='send_error', i=i, error=str(e))
            done.append(i)
        p.send_async(m, ok, fail)
    elif mode == 'batch':
        pass
if mode == 'batch':
    msgs = [make(i) for i in range(A['count'])]
    r = p.send_batch(msgs)
    emit(op='batch', status=int(r.status), msg_id=r.msg_id, offset=r.offset)
if mode == 'async':
    wait_until(lambda: len(done) >= A['count'], 30)
if mode == 'oneway':
    _time.sleep(1.0)
p.shutdown()
emit(op='producer_done')
'''

PUSH_CONSUMER = r'''
from rocketmq.client import PushConsumer
A = _json.loads(_os.environ['SCENARIO_ARGS'])
if A.get('broadcast'):
    from rocketmq.client import MessageModel
    c = PushConsumer(A['group'], message_model=MessageModel.BROADCASTING)
else:
    c = PushConsumer(A['group'], orderly=A.get('orderly', False))
c.set_namesrv_addr(NAMESRV)
if A.get('instance'):
    c.set_instance_name(A['instance'])
seen = []
fail_first = set(A.get('fail_bodies', []))
failed = set()

def on_message(msg):
    body = msg.body.decode('utf-8', 'replace')
    props = {k: (msg.get_property(k) or b'').decode() for k in A.get('props', [])}
    emit(op='recv', body=body, topic=msg.topic, tags=(msg.tags or b'').decode(), keys=(msg.keys or b'').decode(),
         props=props, queue_id=msg.queue_id, offset=msg.queue_offset, id=msg.id,
         reconsume=msg.reconsume_times, t=_time.time())
    if body in fail_first and body not in failed:
        failed.add(body)
        return 'RECONSUME_LATER'
    seen.append(body)
    return True

subscribe_raw(c, A['topic'], A.get('expr', '*'), on_message)
c.start()
emit(op='started')
prefix = A.get('expect_prefix')
stop_file = A.get('stop_file')      # the test creates it to end the wait early (the consumer then lingers and stops)
wait_until(lambda: (sum(1 for b in seen if b.startswith(prefix)) if prefix else len(seen)) >= A['expect']
           or bool(stop_file and _os.path.exists(stop_file)), A['timeout'])
if A.get('linger_until'):      # linger until the test creates this file (it saw the offsets committed), at most linger
    wait_until(lambda: _os.path.exists(A['linger_until']), A.get('linger', 0))
else:
    _time.sleep(A.get('linger', 0))
emit(op='done', n=len(seen))
if A.get('shutdown', True):
    c.shutdown()
    emit(op='shutdown')
'''

PULL_CONSUMER = r'''
from rocketmq.client import PullConsumer
A = _json.loads(_os.environ['SCENARIO_ARGS'])
c = PullConsumer(A['group'])
c.set_namesrv_addr(NAMESRV)
c.start()
got = []
deadline = _time.time() + A['timeout']
while len(got) < A['expect'] and _time.time() < deadline:
    for msg in c.pull(A['topic'], A.get('expr', '*')):
        got.append(1)
        emit(op='recv', body=msg.body.decode(), queue_id=msg.queue_id, offset=msg.queue_offset,
             tags=(msg.tags or b'').decode(), keys=(msg.keys or b'').decode())
    _time.sleep(0.2)
emit(op='done', n=len(got))
c.shutdown()
'''


def run(python: str, script: str, namesrv: str, args: dict[str, Any], timeout: float = 60.0) -> ClientRun:
    """Run one scenario script to completion."""
    return run_client_script(python, script, env={"NAMESRV": namesrv, "SCENARIO_ARGS": json.dumps(args)},
                             timeout=timeout)


class Background:
    """Run a scenario in a thread; ``result()`` joins and returns the ClientRun."""

    def __init__(self, python: str, script: str, namesrv: str, args: dict[str, Any], timeout: float = 90.0):
        self._result: ClientRun | None = None
        self._thread = threading.Thread(target=self._run, args=(python, script, namesrv, args, timeout), daemon=True)
        self._thread.start()

    def _run(self, *a: Any) -> None:
        self._result = run(*a)

    def result(self, timeout: float = 120.0) -> ClientRun:
        self._thread.join(timeout)
        assert self._result is not None, "scenario did not finish"
        return self._result


def produce(python: str, namesrv: str, topic: str, count: int, mode: str = "sync", prefix: str = "m",
            group: str = "PG_COMPAT", **extra: Any) -> ClientRun:
    res = run(python, PRODUCER, namesrv, dict(topic=topic, count=count, mode=mode, prefix=prefix, group=group, **extra))
    for _ in range(2):
        if res.returncode == 0 or res.events_of("send") or "get timed_mutex timeout" not in res.client_log:
            break
        # the C++ client's own start-up race: its first send's five attempts all failed within a millisecond to get
        # the connection its heartbeat thread was opening (GetTransport ... get timed_mutex timeout), before any
        # request left it; nothing was sent, so the producer is run again (at most twice more)
        res = run(python, PRODUCER, namesrv, dict(topic=topic, count=count, mode=mode, prefix=prefix, group=group,
                                                  **extra))
    # the C++ client says "No route info of this topic" when every retry of a send failed, for whatever reason:
    # its log's errors and warnings name each attempt's (the tail alone shows only the last)
    assert res.returncode == 0 and not res.timed_out, (
        f"producer failed: {res.stderr[-2000:]}\nthe client log's errors and warnings:\n"
        + "\n".join([ln for ln in res.client_log.splitlines() if "(error)" in ln or "(warning)" in ln][:40])
        + f"\nits tail:\n{res.client_log[-3000:]}")
    return res


def group_caught_up(broker_addr: str, topic: str, group: str, queues: int = 4) -> bool:
    """Every queue's committed offset of ``group`` is the queue's max offset: everything consumed and committed
    (QUERY_CONSUMER_OFFSET and GET_MAX_OFFSET, answered alike by rmqd and the Java broker)."""
    with BlockingClient(broker_addr) as c:
        for qid in range(queues):
            top = c.invoke(new_request(30, {"topic": topic, "queueId": str(qid)}))               # GET_MAX_OFFSET
            if top.code != 0:
                return False
            if int(top.ext_fields["offset"]) == 0:
                continue                                  # nothing was ever sent to this queue
            got = c.invoke(new_request(14, {"consumerGroup": group, "topic": topic, "queueId": str(qid)}))
            if got.code != 0 or int(got.ext_fields["offset"]) < int(top.ext_fields["offset"]):
                return False
    return True


def consume_until_committed(python: str, namesrv: str, broker_addr: str, signal_dir: Path, args: dict[str, Any],
                            commit_wait: float = 30.0, timeout: float = 90.0) -> ClientRun:
    """PUSH_CONSUMER with ``args`` that, once it has what it expects, stays up until the broker holds its
    committed offsets for every queue of the topic (the client commits every 5 s), then stops: instead of a fixed
    linger longer than the commit period."""
    flag = Path(signal_dir) / f"committed-{args['group']}"
    bg = Background(python, PUSH_CONSUMER, namesrv, dict(args, linger=commit_wait, linger_until=str(flag)),
                    timeout=timeout)
    try:
        wait_for(lambda: group_caught_up(broker_addr, args["topic"], args["group"]),
                 args.get("timeout", 40) + commit_wait, interval=0.5, what=f"the offsets of {args['group']} committed")
    finally:
        flag.touch()
    return bg.result(timeout + 10)


