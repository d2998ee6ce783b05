"""In-process broker: disk full refusal, SYSTEM_BUSY under send-pool overload, 10,000 topics."""
from __future__ import annotations

import threading
import time

import pytest

from rmqd.runtime.services import Services
from rmqd.broker.controller import BrokerController
from rmqd.config import BrokerConfig, NamesrvConfig
from rmqd.namesrv.server import NameServer
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import new_request
from rmqd.store.metadata import TopicConfig
from tests.faults.faultkit import pull_queue, send_v2
from tests.kit.loop import LoopThread

pytestmark = pytest.mark.timeout(180)


class Running:
    """namesrv + broker on a uvloop thread."""

    def __init__(self, store: str, **props) -> None:
        self.lt = LoopThread(call_timeout=60)
        cfg = BrokerConfig(listenPort=0, storePathRootDir=store, brokerIP1="127.0.0.1",
                           mapedFileSizeCommitLog=1 << 20, **props)
        self.services = Services(NameServer(NamesrvConfig(listenPort=0, kvConfigPath=store + "/kv.json")),
                                 BrokerController(cfg))
        self.call(self.services.start())
        self.broker = self.services.broker

    def call(self, coro, timeout=60):
        return self.lt.call(coro, timeout)

    def close(self) -> None:
        self.call(self.services.close())
        self.lt.stop(close=False)


def test_disk_full_refuses_writes_clearly_and_damages_nothing(tmp_path):
    usage = {"pct": 50.0}
    r = Running(str(tmp_path / "s"))
    r.broker.store.config.disk_usage = lambda path: usage["pct"]
    r.broker.store.config.disk_space_warning_level_ratio = 90   # Java's
    try:
        with BlockingClient(r.broker.address) as c:
            assert send_v2(c, "DiskT", b"before", 0).code == ResponseCode.SUCCESS
            usage["pct"] = 97.0
            r.broker.store.run_retention_once()
            resp = send_v2(c, "DiskT", b"refused", 0)
            assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE, resp
            assert "disk" in resp.remark.lower(), resp.remark
            assert [m.body for m in pull_queue(c, "DiskT", 0).values()] == [b"before"]
            usage["pct"] = 50.0
            r.broker.store.run_retention_once()
            assert send_v2(c, "DiskT", b"after", 0).code == ResponseCode.SUCCESS
            assert [m.body for m in pull_queue(c, "DiskT", 0).values()] == [b"before", b"after"]
    finally:
        r.close()


def test_send_pool_overload_answers_system_busy_quickly(tmp_path):
    r = Running(str(tmp_path / "s"), flushDiskType="SYNC_FLUSH", sendMessageThreadPoolNums=1,
                waitTimeMillsInSendQueue=200)
    gate = threading.Event()
    r.broker.send_processor.before_store.append(lambda ctx, msgs: gate.wait(10) and None)
    try:
        with BlockingClient(r.broker.address, 10) as c:
            # a delay level keeps every send off the loop's send lane: all of them queue for the pool
            ext = {"a": "PG", "b": "BusyT", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0",
                   "i": "DELAY\x011", "j": "0", "k": "false", "m": "false"}
            t0 = time.monotonic()
            opaques = []
            for _ in range(20):
                opaques.append(c.send(new_request(310, ext, b"x")))
            codes = {}
            for o in opaques[1:]:
                codes[o] = c.wait_response(o, 5).code
            waited = time.monotonic() - t0
            gate.set()
            first = c.wait_response(opaques[0], 10).code
        assert set(codes.values()) == {ResponseCode.SYSTEM_BUSY}, codes
        assert waited < 3.0, f"SYSTEM_BUSY took {waited:.1f}s"
        assert first == ResponseCode.SUCCESS
    finally:
        gate.set()
        r.close()


@pytest.mark.slow
def test_10000_topics_routed_and_persisted(tmp_path):
    """10,000 topics x 8 queues.  UPDATE_AND_CREATE_TOPIC (17) rewrites topics.json on every call
    (as Java does), so 10,000 of them take minutes; they are created through the TopicConfigManager
    in bulk with one persist and one full registration (what the periodic registration does), and
    code 17 (registered incrementally) is exercised on a few on top."""
    store = str(tmp_path / "s")
    r = Running(store)
    t0 = time.monotonic()
    try:
        mgr = r.broker.topic_config_manager
        with mgr._lock:
            for i in range(10000):
                mgr.table[f"Many{i:05d}"] = TopicConfig(f"Many{i:05d}", 8, 8, 6)
            mgr.data_version.next_version()
        mgr.persist()
        r.broker.register_broker_all_sync(timeout=30)
        with BlockingClient(r.broker.address, 30) as c:
            for i in range(3):
                resp = c.invoke(new_request(17, {"topic": f"Via17_{i}", "readQueueNums": "8", "writeQueueNums": "8",
                                                 "perm": "6", "topicFilterType": "SINGLE_TAG"}))
                assert resp.code == ResponseCode.SUCCESS, resp
        with BlockingClient(r.services.namesrv.address, 30) as n:
            for t in ("Many00000", "Many05000", "Many09999", "Via17_2"):
                resp = n.invoke(new_request(105, {"topic": t}))
                assert resp.code == ResponseCode.SUCCESS, (t, resp)
                assert b'"readQueueNums":8' in resp.body_bytes()
    finally:
        r.close()
    r = Running(store)
    try:
        mgr = r.broker.topic_config_manager
        assert sum(1 for t in mgr.topics() if t.startswith("Many")) == 10000
        assert mgr.get("Via17_2").write_queue_nums == 8
    finally:
        r.close()
    assert time.monotonic() - t0 < 60
