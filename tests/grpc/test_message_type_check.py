"""The 5.x proxy's topic message-type check (``enableTopicMessageTypeCheck``, rmqd.broker.message_type): over gRPC
a NORMAL topic refuses FIFO, delay and transaction sends, a typed topic refuses other types, MIXED takes all; with
the check off everything goes; over remoting nothing is checked, as the 5.5 broker checks nothing."""
from __future__ import annotations

import time

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from rmqd.broker.message_type import message_type_of_properties, recall_conflict, send_conflict, type_conflict
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.store.metadata import TopicConfig

from tests.grpc.test_grpc_endpoint import Grpc
from tests.lite.test_lite_grpc import md, topic

C = d.Code


@pytest.fixture(scope="module")
def g():
    x = Grpc({"minInvisibleTimeMillsForRecv": "1000"})
    topic(x.server, "MtNormal", "NORMAL")
    topic(x.server, "MtFifo", "FIFO")
    topic(x.server, "MtDelay", "DELAY")
    topic(x.server, "MtTx", "TRANSACTION")
    topic(x.server, "MtMixed", "MIXED")
    yield x
    x.close()


def _msg(topic_name: str, mid: str, kind: str) -> d.Message:
    sp = d.SystemProperties(message_id=mid, message_type={"NORMAL": d.NORMAL, "FIFO": d.FIFO, "DELAY": d.DELAY,
                                                          "TRANSACTION": d.TRANSACTION}[kind])
    if kind == "FIFO":
        sp.message_group = "g1"
    if kind == "DELAY":
        sp.delivery_timestamp.CopyFrom(Timestamp(seconds=int(time.time()) + 60))
    return d.Message(topic=d.Resource(name=topic_name), body=b"b", system_properties=sp)


def _status(g, m: d.Message) -> tuple[int, str]:
    """A refused send fails the whole request: the status alone, no entries (as the 5.5.0 proxy answers,
    compat_tests/grpc/test_grpc5_probes.py)."""
    r = g.stub.SendMessage(s.SendMessageRequest(messages=[m]), metadata=md("mt-test"))
    st = r.entries[0].status if r.entries else r.status
    return st.code, st.message


KINDS = ("NORMAL", "FIFO", "DELAY", "TRANSACTION")


def test_each_topic_takes_its_own_type_only(g):
    n = 0
    for topic_name, own in (("MtNormal", "NORMAL"), ("MtFifo", "FIFO"), ("MtDelay", "DELAY"), ("MtTx", "TRANSACTION")):
        for kind in KINDS:
            n += 1
            code, text = _status(g, _msg(topic_name, f"mt{n}", kind))
            if kind == own:
                assert code == C.OK, (topic_name, kind, text)
            else:
                assert (code, text) == (C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                                        "org.apache.rocketmq.proxy.common.ProxyException: TopicMessageType validate "
                                        f"failed, the expected type is {own}, but actual type is {kind}"), \
                    (topic_name, kind)
    for kind in KINDS:
        n += 1
        assert _status(g, _msg("MtMixed", f"mt{n}", kind))[0] == C.OK


def test_the_check_can_be_turned_off(g):
    g.server.broker.config.apply_runtime({"enableTopicMessageTypeCheck": "false"})
    try:
        assert _status(g, _msg("MtNormal", "off1", "FIFO"))[0] == C.OK
    finally:
        g.server.broker.config.apply_runtime({"enableTopicMessageTypeCheck": "true"})
    assert _status(g, _msg("MtNormal", "off2", "FIFO"))[0] == C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_the_core_rules():
    assert message_type_of_properties({"TRAN_MSG": "true", "__SHARDINGKEY": "k"}) == "TRANSACTION"
    assert message_type_of_properties({"DELAY": "3", "__SHARDINGKEY": "k"}) == "DELAY"
    assert message_type_of_properties({"TIMER_DELAY_SEC": "3"}) == "DELAY"
    assert message_type_of_properties({"__SHARDINGKEY": "k"}) == "FIFO"
    assert message_type_of_properties({"TRAN_MSG": "false"}) == "NORMAL"
    assert type_conflict("MIXED", "FIFO") is None and type_conflict("FIFO", "FIFO") is None
    assert send_conflict(True, TopicConfig("%RETRY%g"), {"__SHARDINGKEY": "k"}) is None          # retry: not checked
    assert send_conflict(True, TopicConfig("t"), {"__SHARDINGKEY": "k", "TRANSFER_FLAG": "1"}) is None
    assert "expected type is UNSPECIFIED" in send_conflict(True, None, {})
    assert recall_conflict(True, TopicConfig("t", attributes={"message.type": "DELAY"})) is None
    assert "expected type is NORMAL, but actual type is DELAY" in recall_conflict(True, TopicConfig("t"))
    assert recall_conflict(False, TopicConfig("t")) is None
