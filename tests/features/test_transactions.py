"""Transactions (README §3.2 END_TRANSACTION / CHECK_TRANSACTION_STATE, §6.8, §6.9), protocol level:
half messages, commit / rollback / unknown, check-back with a fake producer connection, give-up after
transactionCheckMax, progress across a broker restart."""
from __future__ import annotations

import pytest

from rmqd.remoting.command import new_request
from rmqd.store.message import decode_message, decode_offset_msg_id
from rmqd.store.metadata import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from tests.features.msgfeat_helpers import (Broker, heartbeat_producer, no_server_request, now_ms, props, pull, send,
                                            wait_server_requests)
from tests.kit.waits import wait_until

pytestmark = pytest.mark.timeout(60)

PG = "PG_TXN"
TOPIC = "TxnTopic"
NEVER = 3_600_000       # check interval for tests that drive check rounds by hand


@pytest.fixture
def rb(tmp_path):
    b = Broker(str(tmp_path / "store"), transactionCheckInterval=NEVER, transactionTimeOut=100).start()
    yield b
    b.stop()


def send_half(client, uniq: str, queue_id: int = 1, born_ts: int | None = None, **extra):
    p = props(TAGS="TagT", KEYS="txkey", UNIQ_KEY=uniq, TRAN_MSG="true", PGROUP=PG, WAIT="true", **extra)
    r = send(client, TOPIC, b"tx-" + uniq.encode(), queue_id=queue_id, properties=p, group=PG, sys_flag=0x4,
             born_ts=born_ts if born_ts is not None else now_ms() - 10_000)
    assert r.code == 0, r.remark
    return r


def end_tx(client, r_or_header, kind: int, oneway: bool = False, group: str = PG, from_check: bool = False,
           uniq: str = "U"):
    """END_TRANSACTION built from a SEND response (msgId/queueOffset) or a CHECK request header."""
    ext = r_or_header
    if "msgId" in ext and "commitLogOffset" not in ext:
        cl_offset = decode_offset_msg_id(ext["msgId"])[2]
        state = ext["queueOffset"]
    else:
        cl_offset, state = int(ext["commitLogOffset"]), ext["tranStateTableOffset"]
    header = {"producerGroup": group, "tranStateTableOffset": str(state), "commitLogOffset": str(cl_offset),
              "commitOrRollback": str(kind), "fromTransactionCheck": "true" if from_check else "false",
              "msgId": uniq, "transactionId": uniq}
    req = new_request(37, header)
    if oneway:
        client.invoke_oneway(req)
        return None
    return client.invoke(req)


def half_messages(client):
    return pull(client, TRANS_HALF_TOPIC, 0)


def op_bodies(client):
    return [(m.body.decode(), m.tags) for m in pull(client, TRANS_OP_HALF_TOPIC, 0)]


# ---------------------------------------------------------------------------------------- send / end
def test_half_message_is_parked_and_response_points_at_it(rb):
    c = rb.client
    r = send_half(c, "UNIQ-A", queue_id=2)
    ext = r.ext_fields
    assert ext["queueId"] == "2" and ext["queueOffset"] == "0" and ext["transactionId"] == "UNIQ-A"
    phys = decode_offset_msg_id(ext["msgId"])[2]
    assert pull(c, TOPIC, 2) == []
    (h,) = half_messages(c)
    assert h.commit_log_offset == phys and h.queue_offset == 0 and h.queue_id == 0
    assert h.sys_flag & 0xC == 0
    assert h.properties["REAL_TOPIC"] == TOPIC and h.properties["REAL_QID"] == "2"
    assert h.properties["TRAN_MSG"] == "true" and h.properties["PGROUP"] == PG
    assert h.properties["CLUSTER"] == "DefaultCluster" and "WAIT" not in h.properties
    assert h.properties["__transactionId__"] == "UNIQ-A"     # 5.x's parseHalfMessageInner (4.9.8 adds none)
    # a normal send carries no transactionId
    assert "transactionId" not in send(c, TOPIC, properties=props(UNIQ_KEY="N1")).ext_fields


def test_commit_makes_the_message_consumable(rb):
    c = rb.client
    r = send_half(c, "UNIQ-C")
    half_phys = decode_offset_msg_id(r.ext_fields["msgId"])[2]
    resp = end_tx(c, r.ext_fields, 8, uniq="UNIQ-C")
    assert resp.code == 0, resp.remark
    (m,) = pull(c, TOPIC, 1)
    assert m.body == b"tx-UNIQ-C" and m.topic == TOPIC and m.queue_id == 1 and m.queue_offset == 0
    assert m.sys_flag & 0xC == 0x8 and m.prepared_transaction_offset == half_phys
    for gone in ("REAL_TOPIC", "REAL_QID"):         # as 5.x; TRAN_MSG stays, as in 4.9.8 and 5.5
        assert gone not in m.properties
    assert m.properties["TRAN_MSG"] == "true"
    assert m.properties["UNIQ_KEY"] == "UNIQ-C" and m.properties["TAGS"] == "TagT"
    assert m.properties["__transactionId__"] == "UNIQ-C"     # the half message's, kept (5.5)
    assert op_bodies(c) == [("0", "d")]


@pytest.mark.slow
def test_commit_oneway_like_the_clients(rb):
    c = rb.client
    r = send_half(c, "UNIQ-O")
    assert end_tx(c, r.ext_fields, 8, oneway=True) is None
    wait_until(lambda: pull(c, TOPIC, 1), 5.0, what="committed message")


def test_rollback_writes_only_the_op_record(rb):
    c = rb.client
    r = send_half(c, "UNIQ-R")
    assert end_tx(c, r.ext_fields, 12).code == 0
    assert op_bodies(c) == [("0", "d")]
    assert pull(c, TOPIC, 1) == []


def test_unknown_state_does_nothing(rb):
    c = rb.client
    r = send_half(c, "UNIQ-U")
    assert end_tx(c, r.ext_fields, 0).code == 0
    assert pull(c, TOPIC, 1) == [] and op_bodies(c) == []


def test_end_transaction_verification_errors(rb):
    c = rb.client
    send_half(c, "UNIQ-X0")
    r = send_half(c, "UNIQ-X1")
    ext = dict(r.ext_fields)
    wrong = end_tx(c, ext, 8, group="OTHER_PG")
    assert (wrong.code, wrong.remark) == (1, "The producer group wrong")
    wrong = end_tx(c, dict(ext, queueOffset="0"), 8)
    assert (wrong.code, wrong.remark) == (1, "The transaction state table offset wrong")
    bad = dict(ext, msgId=ext["msgId"][:-4] + "FFFF")
    wrong = end_tx(c, bad, 12)
    assert (wrong.code, wrong.remark) == (1, "Find prepared transaction message failed")
    # a committed (non-half) record is not a prepared message either
    n = send(c, TOPIC, properties=props(PGROUP=PG))
    wrong = end_tx(c, n.ext_fields, 8)
    assert (wrong.code, wrong.remark) == (1, "Find prepared transaction message failed")
    missing = c.invoke(new_request(37, {"producerGroup": PG, "tranStateTableOffset": "0", "commitOrRollback": "8"}))
    assert missing.code == 1 and "commitLogOffset" in missing.remark
    assert pull(c, TOPIC, 1) == [] and op_bodies(c) == []


def test_reject_transaction_message(tmp_path):
    b = Broker(str(tmp_path / "s"), rejectTransactionMessage=True).start()
    try:
        p = props(UNIQ_KEY="R1", TRAN_MSG="true", PGROUP=PG)
        r = send(b.client, TOPIC, properties=p, group=PG, sys_flag=4)
        assert r.code == 16 and "sending transaction message is forbidden" in r.remark
    finally:
        b.stop()


# ---------------------------------------------------------------------------------------- check-back
def producer(rb, client_id: str = "127.0.0.1@txn-producer"):
    p = rb.new_client()
    assert heartbeat_producer(p, client_id, PG).code == 0
    return p


def check_round(rb) -> int:
    return rb.broker.transaction_check_service.check_once()


def test_check_then_commit_from_the_check(rb):
    c = rb.client
    r = send_half(c, "UNIQ-K1")
    p = producer(rb)
    assert check_round(rb) == 1
    (chk,) = wait_server_requests(p, 39)
    h = chk.ext_fields
    assert h["msgId"] == "UNIQ-K1" and h["transactionId"] == "UNIQ-K1"
    assert h["tranStateTableOffset"] == "1"                          # the re-appended copy
    assert int(h["commitLogOffset"]) > decode_offset_msg_id(r.ext_fields["msgId"])[2]
    assert decode_offset_msg_id(h["offsetMsgId"])[2] == int(h["commitLogOffset"])
    assert chk.flag & 2                                               # oneway
    m = decode_message(chk.body_bytes())
    assert m.topic == TOPIC and m.queue_id == 1 and m.body == b"tx-UNIQ-K1"
    assert m.queue_offset == 1 and m.commit_log_offset == int(h["commitLogOffset"])
    assert m.properties["TRANSACTION_CHECK_TIMES"] == "1" and m.properties["PGROUP"] == PG
    # the producer answers oneway, as the Java/C++ clients do
    end_tx(p, h, 8, oneway=True, from_check=True, uniq="UNIQ-K1")
    (msg,) = wait_until(lambda: pull(c, TOPIC, 1), 5.0, what="committed message")
    assert msg.body == b"tx-UNIQ-K1" and msg.prepared_transaction_offset == int(h["commitLogOffset"])
    assert wait_until(lambda: op_bodies(c), 5.0, what="op record") == [("1", "d")]   # the op names the copy
    # resolved: later rounds neither check nor re-append, and the progress moves past everything
    assert check_round(rb) == 0 and no_server_request(p, 39)
    broker = rb.broker
    assert broker.consumer_offset_manager.query_offset("CID_RMQ_SYS_TRANS", TRANS_HALF_TOPIC, 0) == 2
    assert broker.consumer_offset_manager.query_offset("CID_RMQ_SYS_TRANS", TRANS_OP_HALF_TOPIC, 0) == 1


def test_rollback_from_check_never_consumable(rb):
    c = rb.client
    send_half(c, "UNIQ-K2")
    p = producer(rb)
    check_round(rb)
    (chk,) = wait_server_requests(p, 39)
    assert end_tx(p, chk.ext_fields, 12, from_check=True).code == 0
    assert check_round(rb) == 0
    assert pull(c, TOPIC, 1) == []


def test_unknown_is_checked_again_then_given_up(rb):
    rb.broker.config.transactionCheckMax = 3
    c = rb.client
    send_half(c, "UNIQ-K3")
    p = producer(rb)
    for times in (1, 2, 3):
        assert check_round(rb) == 1
        (chk,) = wait_server_requests(p, 39)
        assert decode_message(chk.body_bytes()).properties["TRANSACTION_CHECK_TIMES"] == str(times)
        assert end_tx(p, chk.ext_fields, 0, from_check=True).code == 0
    assert check_round(rb) == 0                         # 4th round: discarded
    (d,) = pull(c, TRANS_CHECK_MAX_TIME_TOPIC, 0)
    assert d.body == b"tx-UNIQ-K3" and d.properties["TRANSACTION_CHECK_TIMES"] == "3"
    assert rb.broker.transaction_check_service.discarded == 1
    assert check_round(rb) == 0 and no_server_request(p, 39)
    assert pull(c, TOPIC, 1) == []


def test_young_half_message_is_not_checked_yet(rb):
    rb.broker.config.transactionTimeOut = 60_000
    send_half(rb.client, "UNIQ-Y", born_ts=now_ms())
    p = producer(rb)
    assert check_round(rb) == 0 and no_server_request(p, 39, 0.1)
    assert len(half_messages(rb.client)) == 1


def test_check_immunity_defers_and_commit_of_original_resolves(rb):
    c = rb.client
    r = send_half(c, "UNIQ-I", CHECK_IMMUNITY_TIME_IN_SECONDS="60")
    p = producer(rb)
    assert check_round(rb) == 0                        # immune: re-appended, not checked
    halves = half_messages(c)
    assert len(halves) == 2 and halves[1].properties["TRAN_PREPARED_QUEUE_OFFSET"] == "0"
    assert end_tx(c, r.ext_fields, 8).code == 0         # commit with the original offsets
    assert check_round(rb) == 0 and no_server_request(p, 39, 0.1)
    assert len(half_messages(c)) == 2                  # the copy was recognised as resolved
    assert len(pull(c, TOPIC, 1)) == 1


def test_no_producer_online_still_advances(rb):
    send_half(rb.client, "UNIQ-N")
    assert check_round(rb) == 0                        # re-appended, nobody to ask
    p = producer(rb)
    assert check_round(rb) == 1
    (chk,) = wait_server_requests(p, 39)
    assert decode_message(chk.body_bytes()).properties["TRANSACTION_CHECK_TIMES"] == "2"


def test_many_half_messages_mixed_resolution(rb):
    c = rb.client
    rs = [send_half(c, f"UNIQ-M{i}") for i in range(6)]
    for i, r in enumerate(rs):
        if i % 3 == 0:
            end_tx(c, r.ext_fields, 8)
        elif i % 3 == 1:
            end_tx(c, r.ext_fields, 12)
    p = producer(rb)
    assert check_round(rb) == 2
    checks = wait_server_requests(p, 39, 2)
    assert sorted(ch.ext_fields["msgId"] for ch in checks) == ["UNIQ-M2", "UNIQ-M5"]
    for ch in checks:
        end_tx(p, ch.ext_fields, 8, from_check=True)
    assert sorted(m.body for m in pull(c, TOPIC, 1)) == sorted(b"tx-UNIQ-M%d" % i for i in (0, 2, 3, 5))
    assert check_round(rb) == 0


@pytest.mark.slow
def test_check_service_runs_on_its_interval(tmp_path):
    b = Broker(str(tmp_path / "s"), transactionCheckInterval=150, transactionTimeOut=50).start()
    try:
        send_half(b.client, "UNIQ-T")
        p = producer(b)
        (chk,) = wait_server_requests(p, 39, timeout=5)
        end_tx(p, chk.ext_fields, 8, oneway=True, from_check=True)
        wait_until(lambda: pull(b.client, TOPIC, 1), 5.0, what="committed message")
    finally:
        b.stop()


def test_half_message_survives_restart_and_commits_after_it(rb):
    send_half(rb.client, "UNIQ-S1")
    r2 = send_half(rb.client, "UNIQ-S2")
    p = producer(rb)
    assert check_round(rb) == 2                        # both checked once before the restart
    wait_server_requests(p, 39, 2)
    rb.restart()
    c = rb.client
    p = producer(rb)
    # progress persisted: only the two copies (offsets 2, 3) are checked, not the originals again
    assert check_round(rb) == 2
    checks = {ch.ext_fields["msgId"]: ch for ch in wait_server_requests(p, 39, 2)}
    assert {k: v.ext_fields["tranStateTableOffset"] for k, v in checks.items()} == {"UNIQ-S1": "4",
                                                                                    "UNIQ-S2": "5"}
    for ch in checks.values():
        assert decode_message(ch.body_bytes()).properties["TRANSACTION_CHECK_TIMES"] == "2"
    assert end_tx(p, checks["UNIQ-S1"].ext_fields, 8, from_check=True).code == 0
    assert end_tx(p, checks["UNIQ-S2"].ext_fields, 12, from_check=True).code == 0
    # a half message sent before the restart can still be committed with its original offsets
    assert end_tx(c, r2.ext_fields, 8).code == 0
    assert sorted(m.body for m in pull(c, TOPIC, 1)) == [b"tx-UNIQ-S1", b"tx-UNIQ-S2"]
    assert check_round(rb) == 0 and no_server_request(p, 39, 0.1)
