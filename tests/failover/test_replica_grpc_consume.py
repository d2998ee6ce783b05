"""A 5.x consumer whose channel is on a replica's gRPC endpoint (the route lists a group's master endpoint followed
by its replicas', and gRPC's pick_first may connect to any of them): its receives, invisible-time changes, acks and
DLQ forwards are served by the group's master, as through any 5.x proxy of a cluster. The receipt handles are the
master's, so a message received through one endpoint of the group is acked through another; a transaction whose
half message the master stored is ended through a replica's endpoint."""
from __future__ import annotations

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.grpc.pb import service_pb2_grpc as sg
from rmqd.remoting.codes import ResponseCode
from tests.failover.kit import FailoverGroup, call, wait_until

TOPIC = "ReplicaRecvTopic"
GROUP = "ReplicaRecvGroup"          # not created beforehand: a 5.x application does not create it
MD = [("x-mq-client-id", "replica-consumer"), ("x-mq-language", "PYTHON")]
GET_TOPIC_CONFIG = 351
UPDATE_AND_CREATE_TOPIC = 17
TX_TOPIC = "ReplicaRecvTxTopic"
TX_TOPIC_EXT = {"topic": TX_TOPIC, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
                "attributes": "+message.type=TRANSACTION"}


def receive(stub, invisible_ms: int, poll_s: int, topic: str = TOPIC) -> tuple[int, str, list]:
    req = s.ReceiveMessageRequest(group=d.Resource(name=GROUP), message_queue=d.MessageQueue(
        topic=d.Resource(name=topic), id=-1), filter_expression=d.FilterExpression(type=d.TAG, expression="*"),
        batch_size=32, long_polling_timeout=Duration(seconds=poll_s))
    req.invisible_duration.FromMilliseconds(invisible_ms)
    out = list(stub.ReceiveMessage(req, metadata=MD, timeout=poll_s + 10))
    head = out[0].status
    return head.code, head.message, [r.message for r in out if r.HasField("message")]


def receive_all(stub, want: int, invisible_ms: int, topic: str = TOPIC) -> dict:
    """Receives until ``want`` messages came (bounded): body -> message."""
    got: dict = {}

    def more() -> bool:
        code, text, msgs = receive(stub, invisible_ms, 2, topic)
        assert code in (d.OK, d.MESSAGE_NOT_FOUND), (code, text)
        got.update((m.body, m) for m in msgs)
        return len(got) >= want
    wait_until(more, 30, interval=0.1, what=f"{want} messages received")
    return got


def ack(stub, m, topic: str = TOPIC) -> None:
    resp = stub.AckMessage(s.AckMessageRequest(group=d.Resource(name=GROUP), topic=d.Resource(name=topic), entries=[
        s.AckMessageEntry(message_id=m.system_properties.message_id,
                          receipt_handle=m.system_properties.receipt_handle)]), metadata=MD, timeout=10)
    assert resp.status.code == d.OK and resp.entries[0].status.code == d.OK, resp


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_replicas_grpc_endpoint_receives_and_acks_messages_stored_on_the_master(tmp_path):
    group = FailoverGroup(str(tmp_path / "group"), replicas=2, grpc=True, minInvisibleTimeMillsForRecv=1000)
    channels = []
    try:
        group.start_all()
        st = group.wait_group(TOPIC, 2)
        m_i = group.index_of(st["masterAddress"])
        r_i = 1 - m_i
        replica_addr = group.brokers[r_i].addr
        wait_until(lambda: call(replica_addr, GET_TOPIC_CONFIG, {"topic": TOPIC}).code == ResponseCode.SUCCESS,
                   20, interval=0.1, what="the replica has the topic's config from its master")
        channels = [grpc.insecure_channel(group.grpc_addrs[i]) for i in (m_i, r_i)]
        at_master, at_replica = (sg.MessagingServiceStub(ch) for ch in channels)
        bodies = [f"m{i}".encode() for i in range(6)]
        for i, body in enumerate(bodies):            # stored on the master (through its own endpoint)
            msg = d.Message(topic=d.Resource(name=TOPIC), body=body,
                            system_properties=d.SystemProperties(message_id=f"01REPLICARECV{i:04d}"))
            sent = at_master.SendMessage(s.SendMessageRequest(messages=[msg]), metadata=MD, timeout=10)
            assert sent.status.code == d.OK, sent.status

        got = receive_all(at_replica, len(bodies), 3000)
        assert sorted(got) == bodies
        assert all(m.system_properties.delivery_attempt == 1 for m in got.values())
        # acks through the replica's endpoint and through the master's: the handles are the master's
        for body in bodies[:2]:
            ack(at_replica, got[body])
        for body in bodies[2:4]:
            ack(at_master, got[body])
        # an invisible-time change through the replica: the new handle acks (through the master)
        changed = at_replica.ChangeInvisibleDuration(s.ChangeInvisibleDurationRequest(
            group=d.Resource(name=GROUP), topic=d.Resource(name=TOPIC),
            receipt_handle=got[bodies[4]].system_properties.receipt_handle,
            invisible_duration=Duration(seconds=20), message_id=got[bodies[4]].system_properties.message_id),
            metadata=MD, timeout=10)
        assert changed.status.code == d.OK, changed.status
        kept = d.Message()
        kept.CopyFrom(got[bodies[4]])
        kept.system_properties.receipt_handle = changed.receipt_handle
        ack(at_master, kept)
        # the one not acked comes back after its invisible time (attempt 2), through the replica again; no other
        back = receive_all(at_replica, 1, 10000)
        assert [(b, m.system_properties.delivery_attempt) for b, m in back.items()] == [(bodies[5], 2)]
        ack(at_replica, back[bodies[5]])
        # a DLQ forward through the replica: done by the master (and the message acked there)
        poison = d.Message(topic=d.Resource(name=TOPIC), body=b"poison",
                           system_properties=d.SystemProperties(message_id="01REPLICARECVDLQ"))
        assert at_replica.SendMessage(s.SendMessageRequest(messages=[poison]), metadata=MD,
                                      timeout=10).status.code == d.OK
        p = receive_all(at_replica, 1, 3000)[b"poison"]
        dlq = at_replica.ForwardMessageToDeadLetterQueue(s.ForwardMessageToDeadLetterQueueRequest(
            group=d.Resource(name=GROUP), topic=d.Resource(name=TOPIC), receipt_handle=p.system_properties.receipt_handle,
            message_id=p.system_properties.message_id, delivery_attempt=1, max_delivery_attempts=1),
            metadata=MD, timeout=10)
        assert dlq.status.code == d.OK, dlq.status
        code, _, late = receive(at_master, 1000, 4)
        assert code == d.MESSAGE_NOT_FOUND and late == []

        # a transaction whose half message the master stored (through its endpoint), committed through the replica
        master_addr = group.brokers[m_i].addr
        wait_until(lambda: call(master_addr, UPDATE_AND_CREATE_TOPIC, dict(TX_TOPIC_EXT)).code == ResponseCode.SUCCESS,
                   10, interval=0.2, what="the transaction topic created on the master")
        wait_until(lambda: call(replica_addr, GET_TOPIC_CONFIG, {"topic": TX_TOPIC}).code == ResponseCode.SUCCESS,
                   20, interval=0.1, what="the replica has the transaction topic's config")
        half = d.Message(topic=d.Resource(name=TX_TOPIC), body=b"tx", system_properties=d.SystemProperties(
            message_id="01REPLICARECVTX", message_type=d.TRANSACTION))
        sent = at_master.SendMessage(s.SendMessageRequest(messages=[half]), metadata=MD, timeout=10)
        assert sent.status.code == d.OK and sent.entries[0].transaction_id, sent
        end = at_replica.EndTransaction(s.EndTransactionRequest(
            topic=d.Resource(name=TX_TOPIC), message_id="01REPLICARECVTX", transaction_id=sent.entries[0].transaction_id,
            resolution=d.COMMIT, source=d.SOURCE_CLIENT), metadata=MD, timeout=10)
        assert end.status.code == d.OK, end.status
        committed = receive_all(at_replica, 1, 3000, TX_TOPIC)
        assert list(committed) == [b"tx"]
        ack(at_replica, committed[b"tx"], TX_TOPIC)
    finally:
        for ch in channels:
            ch.close()
        group.stop()
