"""5.x store and timer admin codes on an embedded broker: CHECK_ROCKSDB_CQ_WRITE_PROGRESS (354),
SET_COMMITLOG_READ_MODE (2004), SWITCH_TIMER_ENGINE (5001) with Java 5.5's answers to valid and bad input, and
GET_BROKER_RUNTIME_INFO (28) in the asking client's generation. The Java side of each is compared in
compat_tests/java5 (test_differential5, test_mqadmin5_sweep)."""
from __future__ import annotations

import mmap

import orjson
import pytest

from rmqd.metrics.recorders import SecondsWindow
from rmqd.processors.admin_timer import TimerAdminProcessor
from rmqd.remoting.codes import Version
from rmqd.remoting.command import new_request
from rmqd.store.mapped_file import MappedFile

NOT_SET = "not set any response code"


def test_rocksdb_cq_check_answers_in_progress(broker_client):
    r = broker_client.invoke(new_request(354, {"topic": "AnyTopic", "checkStoreTime": "0"}))
    assert (r.code, r.remark, orjson.loads(r.body)) == (0, NOT_SET, {"checkStatus": 2})
    r = broker_client.invoke(new_request(354))
    assert (r.code, orjson.loads(r.body)) == (0, {"checkStatus": 2})


def _read_mode(client, value: str | None, **fields: str) -> tuple[int, str]:
    ext = {"READ_AHEAD_MODE": value, **fields} if value is not None or fields else None
    r = client.invoke(new_request(2004, ext))
    return r.code, r.remark


def test_commitlog_read_mode_is_advised_to_every_segment(server, broker_client, monkeypatch):
    commitlog = server.broker.store.commitlog
    advised: list[int] = []
    real = MappedFile.advise
    monkeypatch.setattr(MappedFile, "advise", lambda self, advice: advised.append(advice) or real(self, advice))
    broker_client.invoke(new_request(10, {"producerGroup": "PG", "topic": "ReadModeTopic", "defaultTopic": "TBW102",
                                          "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
                                          "bornTimestamp": "0", "flag": "0", "reconsumeTimes": "0",
                                          "unitMode": "false"}, b"x"))
    assert commitlog.mfq.files, "the send left no CommitLog segment"
    try:
        assert _read_mode(broker_client, "1") == (0, "set commitlog readahead mode success, mode: 1")
        assert commitlog.read_ahead is False and advised == [mmap.MADV_RANDOM] * len(commitlog.mfq.files)
        # a segment made from now on gets the same advice
        advised.clear()
        commitlog._new_segment(commitlog.mfq.files[-1])
        assert advised == [mmap.MADV_RANDOM]
    finally:
        assert _read_mode(broker_client, "0") == (0, "set commitlog readahead mode success, mode: 0")
    assert commitlog.read_ahead is True and advised[-1] == mmap.MADV_NORMAL
    advised.clear()
    commitlog._new_segment(commitlog.mfq.files[-1])
    assert advised == []                                    # read-ahead on: the kernel's default, no call


@pytest.mark.parametrize("mode, fields, answer", [
    ("3", {}, (29, "set commitlog readahead mode param value error")),
    ("-1", {}, (29, "set commitlog readahead mode param value error")),
    ("+1", {}, (0, "set commitlog readahead mode success, mode: 1")),        # Integer.parseInt takes a sign
    ("fast", {}, (1, "set commitlog readahead mode failed")),
    ("99999999999", {}, (1, "set commitlog readahead mode failed")),         # beyond an int
    (None, {"mode": "0"}, (1, "set commitlog readahead mode failed")),        # parseInt(null)
    (None, {}, (1, "set commitlog readahead mode param error")),              # no extFields at all
])
def test_commitlog_read_mode_bad_input_gets_javas_answers(broker_client, mode, fields, answer):
    try:
        assert _read_mode(broker_client, mode, **fields) == answer
    finally:
        assert _read_mode(broker_client, "0")[0] == 0


@pytest.mark.parametrize("ext, answer", [
    ({"E_T": "F"}, (0, "switch timer engine success")),
    ({"E_T": "R"}, (29, "timerRocksDBEnable must be configured true when broker start")),
    ({"E_T": "X"}, (29, "param error")),
    ({"E_T": ""}, (29, "param error")),
    ({"engineType": "R"}, (29, "param error")),
    (None, (29, "param error, extFields is null")),
])
def test_switch_timer_engine_answers_as_java(broker_client, ext, answer):
    r = broker_client.invoke(new_request(5001, ext))
    assert (r.code, r.remark) == answer


def test_switch_timer_engine_with_the_timer_off():
    class Off:
        enabled = False
    proc = TimerAdminProcessor(Off())
    r = proc.switch_timer_engine(None, new_request(5001, {"E_T": "F"}))
    assert (r.code, r.remark) == (29, "broker timerWheelEnable is false")


def _runtime(client, version: int) -> dict[str, str]:
    req = new_request(28)
    req.version = version
    r = client.invoke(req)
    assert r.code == 0, r.remark
    return orjson.loads(r.body)["table"]


def test_runtime_info_in_the_asking_clients_generation(broker_client):
    old = _runtime(broker_client, Version.V4_9_8)
    new = _runtime(broker_client, Version.V5_0_0_SNAPSHOT)
    five_only = {"getTransferredTps", "brokerActive", "litePullThreadPoolQueueSize",
                 "litePullThreadPoolQueueCapacity", "litePullThreadPoolQueueHeadWaitTimeMills",
                 "ackThreadPoolQueueSize", "ackThreadPoolQueueCapacity", "ackThreadPoolQueueHeadWaitTimeMills",
                 "timerReadBehind", "timerOffsetBehind", "timerCongestNum", "timerEnqueueTps", "timerDequeueTps"}
    assert five_only <= set(new) and not five_only & set(old)
    assert {"getTransferedTps", "brokerVersion"} <= set(old) and not {"getTransferedTps", "brokerVersion"} & set(new)
    assert new["brokerActive"] == "true" and new["timerReadBehind"] == "0"
    assert float(new["timerEnqueueTps"]) >= 0 and new["ackThreadPoolQueueCapacity"] == "100000"
    assert set(new) - five_only == set(old) - {"getTransferedTps", "brokerVersion"}


def test_seconds_window_is_the_rate_of_the_last_whole_seconds():
    w = SecondsWindow(seconds=4)
    for s, n in ((100, 2), (101, 4), (103, 2), (104, 9)):
        w.add(s, n)
    assert w.tps(104) == (2 + 4 + 2) / 4          # 100..103; 104 is the current, partial second
    assert w.tps(105) == (4 + 2 + 9) / 4          # 101..104
    w.add(109, 1)                                 # the slot of 104 is reused for 109: its old count is gone
    assert w.tps(110) == 1 / 4
    assert w.tps(200) == 0.0


def test_broker_config_of_a_5x_client_leaves_out_what_5x_removed(broker_client):
    def keys(version: int) -> set[str]:
        req = new_request(26)
        req.version = version
        r = broker_client.invoke(req)
        assert r.code == 0, r.remark
        return {ln.split("=", 1)[0] for ln in bytes(r.body).decode().splitlines() if "=" in ln}
    old, new = keys(Version.V4_9_8), keys(Version.V5_0_0_SNAPSHOT)
    assert "filterServerNums" in old and old - new == {"filterServerNums"} and new <= old


def test_topic_list_is_routed_whole(server, broker_client):
    """UPDATE_AND_CREATE_TOPIC_LIST registers every topic of the list with the name server (one registration
    under the list's data version; one per topic registered only the first)."""
    names = ("CodesListA", "CodesListB", "CodesListC")
    body = orjson.dumps({"topicConfigList": [
        {"topicName": n, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "topicFilterType": "SINGLE_TAG",
         "topicSysFlag": 0, "order": False, "attributes": {}} for n in names]})
    assert broker_client.invoke(new_request(18, None, body)).code == 0
    from rmqd.remoting.client import BlockingClient
    with BlockingClient(server.namesrv_addr) as ns:
        for n in names:
            r = ns.invoke(new_request(105, {"topic": n}))
            assert r.code == 0, (n, r.remark)


def test_producer_info_names_the_remote_address_as_java(broker_client):
    """GET_ALL_PRODUCER_INFO (mqadmin producer): remoteIP is Java's ``channel.remoteAddress().toString()``."""
    hb = orjson.dumps({"clientID": "127.0.0.1@codes5", "producerDataSet": [{"groupName": "Codes5PG"}],
                       "consumerDataSet": []})
    assert broker_client.invoke(new_request(34, {}, hb)).code == 0
    r = broker_client.invoke(new_request(328))
    (info,) = orjson.loads(r.body)["data"]["Codes5PG"]
    assert info["remoteIP"].startswith("/127.0.0.1:"), info
