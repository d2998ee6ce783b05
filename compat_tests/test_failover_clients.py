"""Unmodified clients through an automatic failover: a controller-mode group of three rmqd brokers
(tests/failover/kit.py) with their gRPC endpoints; the C++ client (1.x wheel; with ``RMQD_FAILOVER_CPP_CLIENTS``
also 2.x) and the PyPI RocketMQ 5 Python client (rocketmq-python-client 5.1.2, gRPC) produce at the same time
while the master is killed with kill -9, each recording every key it saw acknowledged, then each consumes the
topic: the checker proves every acknowledged key was consumed (0 acknowledged lost) and counts duplicates.
The Java 4.9.8 producer is in tests/failover.

* C++: follows the name server's route. After the kill it sends again when its route poll (30 s, fixed in the
  C++ client, as against the Java broker) names the new master: this test takes ~45 s for that reason.
* gRPC: given the two slaves' endpoints (``a;b``, as one names a 5.x proxy fleet). A slave's endpoint passes
  sends on to its master (``MessagingService._master_to_forward``), as a 5.x proxy routes them, so every send
  before the kill crosses a forward (it fails without it); one of the two becomes master, and the client keeps
  sending through whichever endpoint its channel is on. A SimpleConsumer on the new master's endpoint reads back.

Each producer stops ``AFTER_KILL`` acknowledged sends after the kill (or at its deadline); every wait is bounded.
"""
from __future__ import annotations

import os
import time

import client5_env     # compat_tests/grpc/ (pyproject's pythonpath)
from clientrunner import ClientRun
from scenarios import Background

from tests.failover.kit import FailoverGroup, check_acked, read_key_counts, report, wait_until

TOPIC = "FailoverClientTopic"
AFTER_KILL = 30
#: the C++ generations driven (CI: the 1.x wheel; scripts/failover_rounds.py --clients: both)
CPP_CLIENTS = os.environ.get("RMQD_FAILOVER_CPP_CLIENTS", "cpp1").split(",")

CPP_PRODUCER = r'''
from rocketmq.client import Producer, Message
A = _json.loads(_os.environ['SCENARIO_ARGS'])
p = Producer(A['group'])
p.set_namesrv_addr(NAMESRV)
p.start()
emit(op='ready', t=_time.time())
deadline = _time.time() + A['seconds']
i, after = 0, 0
while _time.time() < deadline and after < A['after_kill']:
    killed = _os.path.exists(A['flag'])
    key = '%s%d' % (A['prefix'], i)
    m = Message(A['topic'])
    m.set_keys(key)
    m.set_body('body-%d' % i)
    i += 1
    try:
        r = p.send_sync(m)
    except Exception as e:
        emit(op='err', key=key, error=str(e)[:200], t=_time.time())
        _time.sleep(0.1)
        continue
    if int(r.status) == 0:
        emit(op='ok', key=key, t=_time.time())
        if killed:
            after += 1
    else:
        emit(op='status', key=key, status=int(r.status), t=_time.time())
    _time.sleep(0.01)
p.shutdown()
emit(op='producer_done', sent=i)
'''


GRPC_PRODUCER = r'''
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
    key = '%s%d' % (A['prefix'], i)
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

GRPC_CONSUMER = r'''
from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
A = _json.loads(_os.environ['SCENARIO_ARGS'])
# a receive's deadline is request_timeout (3 s) + await_duration; the long poll (5 s at least) must fit in it
c = SimpleConsumer(ClientConfiguration(A['endpoint'], Credentials("", "")), A['group'],
                   {A['topic']: FilterExpression()}, await_duration=5)
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


def finished(client: Background, timeout: float) -> ClientRun:
    res = client.result(timeout)
    assert res.returncode == 0 and not res.timed_out, \
        f"exit {res.returncode}, timed out {res.timed_out}\nstderr:\n{res.stderr[-3000:]}\nlog:\n{res.client_log[-2000:]}"
    return res


def test_cpp_and_grpc_clients_produce_through_a_kill9_failover_and_consume_everything(tmp_path, client_pythons):
    py5 = client5_env.py5_python()
    group = FailoverGroup(str(tmp_path / "group"), grpc=True)
    try:
        group.start_all()
        st = group.wait_group(TOPIC, 3)
        old = st["masterAddress"]
        old_i = group.index_of(old)
        flag = str(tmp_path / "killed")
        common = {"topic": TOPIC, "seconds": 75, "flag": flag, "after_kill": AFTER_KILL}
        producers = {name: Background(client_pythons[name], CPP_PRODUCER, group.namesrv,
                                      dict(common, group=f"FoPG_{name}", prefix=f"{name}-"), 100)
                     for name in CPP_CLIENTS}
        slaves = ";".join(a for i, a in enumerate(group.grpc_addrs) if i != old_i)
        producers["grpc-py5"] = Background(py5, GRPC_PRODUCER, group.namesrv,
                                           dict(common, endpoints=slaves, prefix="py5-"), 100)
        wait_until(lambda: check_acked(old, TOPIC, set())["stored"] >= 50 * len(producers), 40, interval=0.2,
                   what="every client's sends on the master")
        group.kill9(old_i)
        t_kill = time.time()
        open(flag, "w").close()
        new = group.wait_new_master(TOPIC, old, 15, "a new master")
        acked: dict[str, dict[str, float]] = {}
        for name, producer in producers.items():
            res = finished(producer, 130)
            acked[name] = {e["key"]: e["t"] for e in res.events_of("ok")}
            after = sorted(t for t in acked[name].values() if t > t_kill)
            assert len(after) >= AFTER_KILL, (name, f"{len(after)} sends acknowledged after the kill",
                                              res.events_of("err")[-3:], res.stderr[-2000:])
            print(f"{name}: {len(acked[name])} acknowledged ({len(res.events_of('err'))} send errors), first "
                  f"SEND_OK {after[0] - t_kill:.2f} s after the kill")
            report(fault=f"kill-{name}", round=0, first_send_s=round(after[0] - t_kill, 3))
        every = set().union(*acked.values())
        stored = check_acked(new, TOPIC, every)
        counts = read_key_counts(new, TOPIC)
        consumers = {"cpp1": Background(client_pythons["cpp1"], CPP_CONSUMER, group.namesrv,
                                        {"group": "FoCG_cpp1", "topic": TOPIC, "expect": sorted(every),
                                         "timeout": 40}, 70),
                     "grpc-py5": Background(py5, GRPC_CONSUMER, group.namesrv,
                                            {"endpoint": group.grpc_addrs[group.index_of(new)], "topic": TOPIC,
                                             "group": "FoGrpcCG", "expect": sorted(every), "timeout": 40}, 70)}
        failures = []
        for cname, consumer in consumers.items():
            got: dict[str, int] = {}
            for e in finished(consumer, 90).events_of("recv"):
                got[e["key"]] = got.get(e["key"], 0) + 1
            for name, keys in acked.items():
                lost = sorted(set(keys) - set(got))
                dups = sum(got.get(k, 0) - 1 for k in keys if got.get(k, 0) > 1)
                print(f"{cname} consumer: {name}'s {len(keys)} acknowledged keys: {len(lost)} not consumed, "
                      f"{dups} delivered twice")
                if cname == "cpp1":
                    report(fault=f"kill-{name}", summary=True, acked=len(keys), lost=len(lost),
                           duplicates=sum(counts.get(k, 0) - 1 for k in keys if counts.get(k, 0) > 1))
                if lost:
                    failures.append(f"{cname} consumed none of {len(lost)} keys {name} saw acknowledged: {lost[:5]}")
        print(f"stored on the new master: {stored['stored']} keys, {stored['duplicates']} duplicates")
        assert not failures, failures
        assert not stored["lost"], stored["lost"][:5]
    finally:
        group.stop()


CPP_CONSUMER = r'''
from rocketmq.client import PushConsumer
A = _json.loads(_os.environ['SCENARIO_ARGS'])
c = PushConsumer(A['group'])
c.set_namesrv_addr(NAMESRV)
want = set(A['expect'])
seen = set()

def on_message(msg):
    key = (msg.keys or b'').decode()
    emit(op='recv', key=key, queue_id=msg.queue_id, offset=msg.queue_offset)
    seen.add(key)
    return True

subscribe_raw(c, A['topic'], '*', on_message)
c.start()
wait_until(lambda: want <= seen, A['timeout'])
emit(op='done', n=len(seen), missing=len(want - seen))
c.shutdown()
'''
