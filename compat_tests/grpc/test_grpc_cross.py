"""4.x <-> 5.x: what the C++ client (remoting) sends, the 5.x Python client (gRPC) receives, and
the other way round, with the same message ids, tags, keys and properties."""
from __future__ import annotations

import os
import sys
import textwrap

from clientrunner import run_client_script
from scenarios import PUSH_CONSUMER, produce, run

CPP = os.environ.get("RMQD_CPP1_PYTHON", sys.executable)

CONSUME5 = '''
import time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
c = SimpleConsumer(ClientConfiguration(_os.environ["ENDPOINT"], Credentials()), "X5Group",
                   {"X4to5": FilterExpression()}, await_duration=2)
c.startup()
got, end = [], time.time() + 20
while len(got) < 4 and time.time() < end:
    for m in c.receive(16, 10) or []:
        c.ack(m)
        got.append(m)
        emit(op="got", id=m.message_id, tag=m.tag, keys=sorted(m.keys), props=dict(m.properties),
             body=m.body.decode())
c.shutdown()
'''

PRODUCE5 = '''
from rocketmq import ClientConfiguration, Credentials, Message, Producer
p = Producer(ClientConfiguration(_os.environ["ENDPOINT"], Credentials()), ("X5to4",))
p.startup()
for i in range(4):
    m = Message(); m.topic = "X5to4"; m.body = f"five-{i}".encode(); m.tag = f"T{i % 2}"
    m.keys = f"key5-{i}"
    m.add_property("color", f"c{i}")
    emit(op="sent", i=i, id=p.send(m).message_id)
p.shutdown()
'''


def test_4x_sends_5x_receives(py5_python, grpc_server):
    grpc_server.create_topic("X4to5")
    sent = produce(CPP, grpc_server.server.namesrv_addr, "X4to5", 4, "sync", prefix="four", tag="Tag4")
    ids = {e["i"]: e["msg_id"] for e in sent.events_of("send")}
    res = run_client_script(py5_python, textwrap.dedent(CONSUME5), env={"ENDPOINT": grpc_server.grpc_addr},
                            timeout=60)
    assert res.returncode == 0, res.stderr[-3000:]
    got = {e["body"]: e for e in res.events_of("got")}
    assert set(got) == {f"four-{i}" for i in range(4)}
    for i in range(4):
        e = got[f"four-{i}"]
        assert e["id"] == ids[i]
        assert e["tag"] == "Tag4" and e["keys"] == [f"key-four-{i}"]
        assert e["props"] == {"seq": str(i), "origin": "compat"}


def test_5x_sends_4x_receives(py5_python, grpc_server):
    grpc_server.create_topic("X5to4")
    res = run_client_script(py5_python, textwrap.dedent(PRODUCE5), env={"ENDPOINT": grpc_server.grpc_addr},
                            timeout=60)
    assert res.returncode == 0, res.stderr[-3000:]
    ids = {e["i"]: e["id"] for e in res.events_of("sent")}
    con = run(CPP, PUSH_CONSUMER, grpc_server.server.namesrv_addr,
              dict(topic="X5to4", group="X4Group", expr="*", expect=4, timeout=25, props=["color"]), timeout=45)
    assert not con.timed_out, con.client_log[-2000:]
    got = {e["body"]: e for e in con.events_of("recv")}
    assert set(got) == {f"five-{i}" for i in range(4)}
    for i in range(4):
        e = got[f"five-{i}"]
        assert e["id"] == ids[i]
        assert e["tags"] == f"T{i % 2}" and e["keys"] == f"key5-{i}" and e["props"] == {"color": f"c{i}"}
