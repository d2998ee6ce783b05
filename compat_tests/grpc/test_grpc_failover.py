"""The PyPI RocketMQ 5 Python client (rocketmq-python-client 5.1.2, gRPC) through an automatic failover: a
controller-mode group of three rmqd brokers, each with its gRPC endpoint. A slave's endpoint passes sends on to
its master (``MessagingService._master_to_forward``), as a 5.x proxy routes them; the client is given the two
slaves' endpoints (``a;b``, as one names a proxy fleet), so every send before the kill crosses a forward (the
test fails without it), and produces while the master is killed with kill -9: one of the two becomes master,
and the client keeps sending through whichever endpoint its channel is on. Then a SimpleConsumer on the new master's endpoint reads
everything back; the checker proves every key the client saw acknowledged was consumed and counts duplicates."""
from __future__ import annotations

import json
import os
import time

from clientrunner import run_client_script
from tests.failover.kit import FailoverGroup, check_acked, wait_until

TOPIC = "FailoverGrpcTopic"
AFTER_KILL = 30

PRODUCER = r'''
import logging
from rocketmq import ClientConfiguration, Credentials, Message, Producer
A = _json.loads(_os.environ['SCENARIO_ARGS'])
p = Producer(ClientConfiguration(A['endpoints'], Credentials("", "")), (A['topic'],))
p.startup()
emit(op='ready', t=_time.time())
deadline = _time.time() + A['seconds']
i, after = 0, 0
while _time.time() < deadline and after < A['after_kill']:
    killed = _os.path.exists(A['flag'])
    key = 'g%d' % i
    m = Message(); m.topic = A['topic']; m.body = ('body-%d' % i).encode(); m.keys = key
    i += 1
    try:
        r = p.send(m)
    except Exception as e:
        emit(op='err', key=key, error=str(e)[:200], t=_time.time())
        _time.sleep(0.1)
        continue
    emit(op='ok', key=key, id=r.message_id, t=_time.time())
    if killed:
        after += 1
    _time.sleep(0.01)
p.shutdown()
emit(op='producer_done', sent=i)
'''

CONSUMER = r'''
from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
A = _json.loads(_os.environ['SCENARIO_ARGS'])
c = SimpleConsumer(ClientConfiguration(A['endpoint'], Credentials("", "")), A['group'],
                   {A['topic']: FilterExpression()}, await_duration=2)
c.startup()
want, seen = set(A['expect']), set()
end = _time.time() + A['timeout']
while not want <= seen and _time.time() < end:
    for m in c.receive(32, 15) or []:
        key = sorted(m.keys)[0] if m.keys else ''
        emit(op='recv', key=key, id=m.message_id)
        seen.add(key)
        c.ack(m)
emit(op='done', n=len(seen), missing=len(want - seen))
c.shutdown()
'''


def run5(python: str, script: str, args: dict, timeout: float):
    return run_client_script(python, script, env={"SCENARIO_ARGS": json.dumps(args)}, timeout=timeout)


def test_grpc_python_client_produces_through_a_kill9_failover_and_consumes_everything(tmp_path, py5_python):
    import threading

    group = FailoverGroup(str(tmp_path / "group"), grpc=True)
    try:
        group.start_all()
        st = group.wait_group(TOPIC, 3)
        old = st["masterAddress"]
        old_i = group.index_of(old)
        flag = str(tmp_path / "killed")
        result = {}
        worker = threading.Thread(target=lambda: result.setdefault("res", run5(
            py5_python, PRODUCER, {"endpoints": ";".join(a for i, a in enumerate(group.grpc_addrs) if i != old_i), "topic": TOPIC, "seconds": 60,
                                   "flag": flag, "after_kill": AFTER_KILL}, timeout=90)), daemon=True)
        worker.start()
        wait_until(lambda: check_acked(old, TOPIC, set())["stored"] >= 50, 40, 0.2, "the client's sends")
        group.kill9(old_i)
        t_kill = time.time()
        open(flag, "w").close()
        new = wait_until(lambda: (lambda a: a if a not in (None, old) else None)(group.master_addr(TOPIC)),
                         15, 0.05, "a new master")
        worker.join(120)
        res = result.get("res")
        assert res is not None and res.returncode == 0 and not res.timed_out, (res and res.stderr[-3000:])
        acked = {e["key"]: e["t"] for e in res.events_of("ok")}
        after = sorted(t for t in acked.values() if t > t_kill)
        assert len(after) >= AFTER_KILL, (f"{len(after)} sends acknowledged after the kill",
                                          res.events_of("err")[-3:], res.stderr[-2000:])
        new_grpc = group.grpc_addrs[group.index_of(new)]
        consumer = run5(py5_python, CONSUMER, {"endpoint": new_grpc, "topic": TOPIC, "group": "FoGrpcCG",
                                               "expect": sorted(acked), "timeout": 40}, timeout=70)
        assert consumer.returncode == 0, consumer.stderr[-3000:]
        got: dict[str, int] = {}
        for e in consumer.events_of("recv"):
            got[e["key"]] = got.get(e["key"], 0) + 1
        lost = sorted(set(acked) - set(got))
        stored = check_acked(new, TOPIC, acked)
        print(f"gRPC 5.x Python: {len(acked)} acknowledged ({len(res.events_of('err'))} send errors), first SEND_OK "
              f"{after[0] - t_kill:.2f} s after the kill; consumed {len(got)} keys, "
              f"{sum(n - 1 for n in got.values())} delivered twice; stored duplicates {stored['duplicates']}")
        report = os.environ.get("RMQD_FAILOVER_REPORT")
        if report:
            with open(report, "a", encoding="utf-8") as f:
                f.write(json.dumps({"fault": "kill-grpc-py5", "summary": True, "acked": len(acked),
                                    "lost": len(lost), "duplicates": stored["duplicates"],
                                    "first_send_s": round(after[0] - t_kill, 3)}) + "\n")
        assert not lost, f"{len(lost)} of {len(acked)} acknowledged keys not consumed: {lost[:5]}"
        assert not stored["lost"]
    finally:
        group.stop()
