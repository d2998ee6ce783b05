"""Compaction topics through the broker: attribute rules with the Java texts, keyless sends, the
offset codes from the compaction store, admin commands, and a restart."""
from __future__ import annotations

import contextlib
import io
import time

import orjson
import pytest

from rmqd.admin.main import main as admin_cli
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.store.message import decode_messages
from rmqd.testing import EmbeddedServer

PROPS = dict(mapedFileSizeCommitLog=1 << 20, compactionMappedFileSize=32 * 1024,
             compactionScheduleInternal=3_600_000)


def admin(server, *argv, rc=0) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        got = admin_cli([*argv, "-n", server.namesrv_addr])
    assert got == rc, (argv, got, out.getvalue(), err.getvalue())
    return out.getvalue() if rc == 0 else err.getvalue()


def create(c, topic, attributes=None, queues=1):
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
           "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0",
           "order": "false"}
    if attributes is not None:
        ext["attributes"] = attributes
    return c.invoke(new_request(17, ext))


def send(c, topic, key, body, qid=0):
    props = (f"KEYS\x01{key}\x02" if key is not None else "") + "TAGS\x01T\x02"
    return c.invoke(new_request(310, {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": str(qid), "f": "0",
                                      "g": str(int(time.time() * 1000)), "h": "0", "i": props}, body))


@pytest.fixture
def server(tmp_path):
    s = EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties=PROPS).start()
    yield s
    s.stop()


def test_attribute_rules_with_java_texts(server):
    with BlockingClient(server.broker_addr) as c:
        r = create(c, "BadKey", "+foo=bar")
        assert (r.code, r.remark) == (1, "unsupported key: foo")
        r = create(c, "BadValue", "+cleanup.policy=SOMETIMES")
        assert (r.code, r.remark) == (1, "value is not in set: [DELETE, COMPACTION]")
        r = create(c, "BadOp", "-cleanup.policy")
        assert (r.code, r.remark) == (1, "only add attribute is supported while creating topic. key: cleanup.policy")
        assert create(c, "Table", "+cleanup.policy=COMPACTION").code == 0
        r = create(c, "Table", "+cleanup.policy=DELETE")
        assert (r.code, r.remark) == (1, "attempt to update an unchangeable attribute. key: cleanup.policy")
        assert create(c, "Table").code == 0                      # 4.9 mqadmin: no attributes, kept
        assert create(c, "Table", "+message.type=NORMAL").code == 0   # changeable sibling
    tc = server.broker.topic_config_manager.get("Table")
    assert tc.attributes == {"cleanup.policy": "COMPACTION", "message.type": "NORMAL"}
    assert "Table  {cleanup.policy=COMPACTION, message.type=NORMAL}" in admin(server, "topicList")
    assert "#Attributes: {cleanup.policy=COMPACTION" in admin(server, "topicStatus", "-t", "Table")
    assert "attributes={cleanup.policy=COMPACTION" in admin(server, "getTopicConfig", "-t", "Table")


def _pulled(server, topic: str, upto: int) -> list[tuple[int, str, int]]:
    """(offset, key, record size) of every record a consumer pulls from the queue's min offset up to ``upto``
    (included)."""
    store = server.broker.store
    out, off = [], store.get_min_offset(topic, 0)
    while off <= upto:
        r = store.get_messages(topic, 0, off, 32)
        if r.status.name != "FOUND":
            break
        out += [(m.queue_offset, m.properties.get("KEYS"), len(buf))
                for buf in r.buffers for m in decode_messages(bytes(buf))]
        off = r.next_begin_offset
    return [x for x in out if x[0] <= upto]


def check_status_figures(server, tmp_path, topic: str, sent: int, t0_ms: int) -> dict:
    """The per-queue figures of compactionStatus (admin), GET_COMPACTION_STATUS and the runtime info after one
    run over queue 0, each against what the store and a consumer see."""
    (row,) = server.broker.store.compaction.status(topic)
    checkpoint = orjson.loads((tmp_path / "store" / "compaction" / "position-checkpoint").read_bytes())
    assert row["last_compacted_offset"] == checkpoint["queueOffsetMap"][f"{topic}_0"] < sent
    compacted = _pulled(server, topic, row["last_compacted_offset"])
    keys = [k for _o, k, _n in compacted]
    assert len(keys) == len(set(keys)) == row["liveKeys"] > 0       # each key once in the compacted part
    everything = _pulled(server, topic, sent)
    assert row["records"] == row["last_records_after"] == len(everything) < sent
    assert row["last_records_before"] == sent and row["copiedOffset"] == sent
    assert row["minOffset"] == everything[0][0] == server.broker.store.get_min_offset(topic, 0)
    log_dir = tmp_path / "store" / "compaction" / "compactionLog" / topic / "0"
    files = sorted(p for p in log_dir.iterdir() if p.is_file())
    assert row["files"] == len(files) >= 2
    assert row["bytes"] == row["last_bytes_after"] == sum(n for _o, _k, n in everything)
    assert row["last_bytes_before"] > row["last_bytes_after"]
    assert (row["runs"], row["failures"], row["last_error"]) == (1, 0, "")
    assert t0_ms <= row["last_run_ms"] <= time.time() * 1000 and row["last_duration_ms"] > 0
    # rmqd admin compactionStatus prints the same figures
    out = admin(server, "compactionStatus", "-t", topic)
    printed = next(ln.split() for ln in out.splitlines() if ln.startswith(topic))
    assert [int(x) for x in printed[1:11]] == [0, row["minOffset"], row["last_compacted_offset"], row["files"],
                                               row["records"], row["liveKeys"], row["bytes"],
                                               row["last_bytes_before"], row["last_bytes_after"], row["runs"]]
    # and so does the broker's runtime info (brokerStatus)
    info = dict(kv.split("=", 1) for kv in
                server.broker.admin_broker_processor.runtime_info()[f"compaction_{topic}_0"].split(","))
    assert {k: int(float(v)) for k, v in info.items()} == {
        "lastCompactedOffset": row["last_compacted_offset"], "files": row["files"], "records": row["records"],
        "liveKeys": row["liveKeys"], "bytes": row["bytes"], "bytesBefore": row["last_bytes_before"],
        "bytesAfter": row["last_bytes_after"], "lastRunMs": row["last_run_ms"],
        "lastDurationMs": int(row["last_duration_ms"])}
    return row


def test_keyless_send_refused_offsets_from_the_compaction_store_and_restart(server, tmp_path):
    t0_ms = int(time.time() * 1000)
    with BlockingClient(server.broker_addr) as c:
        assert create(c, "Table", "+cleanup.policy=COMPACTION").code == 0
        r = send(c, "Table", None, b"v")
        assert (r.code, r.remark) == (13, "Required message key is missing")
        r = send(c, "Table", "   ", b"v")
        assert r.code == 13
        for v in range(20):
            for k in range(5):
                assert send(c, "Table", f"k{k}", b"v%d" % v + b"." * 300).code == 0
        for f in range(150):
            assert send(c, "Table", f"f{f}", b"." * 300).code == 0
    out = admin(server, "compactTopic", "-t", "Table")
    import re
    m = re.search(r"queue 0: (\d+) -> (\d+) records", out)
    assert m and int(m.group(2)) < int(m.group(1)), out
    store = server.broker.store
    mn = store.compaction.logs[("Table", 0)].min_offset()
    assert mn > 0          # the first key's old versions are gone
    with BlockingClient(server.broker_addr) as c:
        r = c.invoke(new_request(31, {"topic": "Table", "queueId": "0"}))           # GET_MIN_OFFSET
        assert int(r.ext_fields["offset"]) == mn
        r = c.invoke(new_request(30, {"topic": "Table", "queueId": "0"}))           # GET_MAX_OFFSET
        assert int(r.ext_fields["offset"]) == 250
    check_status_figures(server, tmp_path, "Table", sent=250, t0_ms=t0_ms)
    log_file = sorted((tmp_path / "store" / "compaction" / "compactionLog" / "Table" / "0").glob("0*"))[0]
    dump = admin(server, "dumpCompactionLog", "-f", str(log_file))
    assert "keys=k" in dump and f"queueOffset={mn} " in dump
    server.restart()
    with BlockingClient(server.broker_addr) as c:
        r = send(c, "Table", None, b"v")
        assert r.code == 13                                   # still a compaction topic after restart
        r = c.invoke(new_request(31, {"topic": "Table", "queueId": "0"}))
        assert int(r.ext_fields["offset"]) == mn
        assert send(c, "Table", "k1", b"after").code == 0


def _fill_table(c, topic: str, versions: int = 20, keys: int = 5, fillers: int = 150) -> int:
    for v in range(versions):
        for k in range(keys):
            assert send(c, topic, f"k{k}", b"v%d" % v + b"." * 300).code == 0
    for f in range(fillers):
        assert send(c, topic, f"f{f}", b"." * 300).code == 0
    return versions * keys + fillers


def test_offset_codes_come_from_the_compaction_store_after_retention(tmp_path):
    """GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32) and pulls of a
    compaction topic whose CommitLog files retention removed (DELETE_EXPIRED_COMMITLOG over the wire) answer
    from the compaction store: the table is still there (apache/rocketmq#7540 loses it)."""
    props = dict(PROPS, mapedFileSizeCommitLog=64 * 1024, fileReservedTime=0, deleteWhen="99")
    with EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties=props) as server, \
            BlockingClient(server.broker_addr) as c:
        assert create(c, "Table", "+cleanup.policy=COMPACTION").code == 0
        sent = _fill_table(c, "Table")
        for i in range(250):                                 # another topic rolls the CommitLog further
            assert send(c, "Plain", f"p{i}", b"p" * 1000).code == 0
        admin(server, "compactTopic", "-t", "Table")
        store = server.broker.store
        (row,) = store.compaction.status("Table")
        first = row["minOffset"]
        assert 0 < first < sent
        first_ts = store.compaction.logs[("Table", 0)].store_time_at(first)
        assert c.invoke(new_request(329)).code == 0                                  # DELETE_EXPIRED_COMMITLOG
        assert store.local_queue("Table", 0).store_time(sent - 1) == -1          # the CommitLog has none of it left
        r = c.invoke(new_request(31, {"topic": "Table", "queueId": "0"}))            # GET_MIN_OFFSET
        assert (r.code, int(r.ext_fields["offset"])) == (0, first)
        r = c.invoke(new_request(30, {"topic": "Table", "queueId": "0"}))            # GET_MAX_OFFSET
        assert int(r.ext_fields["offset"]) == sent
        r = c.invoke(new_request(32, {"topic": "Table", "queueId": "0"}))            # GET_EARLIEST_MSG_STORETIME
        assert (r.code, int(r.ext_fields["timestamp"])) == (0, first_ts) and first_ts > 0
        for ts in (0, first_ts):                                                     # SEARCH_OFFSET_BY_TIMESTAMP
            r = c.invoke(new_request(29, {"topic": "Table", "queueId": "0", "timestamp": str(ts)}))
            assert (r.code, int(r.ext_fields["offset"])) == (0, first), ts
        r = c.invoke(new_request(11, {"consumerGroup": "G", "topic": "Table", "queueId": "0", "queueOffset": "0",
                                      "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0",
                                      "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
                                      "expressionType": "TAG"}))                     # sysFlag 4: subscription
        assert r.code == 0, r.remark                        # FOUND: the table survived retention
        got = decode_messages(bytes(r.body))
        assert got[0].queue_offset == first and got[0].store_timestamp == first_ts


@pytest.mark.slow
def test_scheduled_runs_compact_without_a_command(tmp_path):
    """compactionScheduleInternal: the background schedule compacts (and counts its runs) by itself."""
    props = dict(PROPS, compactionScheduleInternal=200)
    with EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties=props) as server, \
            BlockingClient(server.broker_addr) as c:
        assert create(c, "Table", "+cleanup.policy=COMPACTION").code == 0
        sent = _fill_table(c, "Table")
        comp = server.broker.store.compaction

        def runs() -> int:
            rows = comp.status("Table")
            return rows[0]["runs"] if rows else 0
        deadline = time.monotonic() + 20
        while runs() < 2:                   # a first run, and the schedule comes round again
            assert time.monotonic() < deadline, comp.status("Table")
            time.sleep(0.2)
        (row,) = comp.status("Table")
        assert row["records"] < sent and row["liveKeys"] >= 5           # compacted by the schedule alone
        assert row["last_records_before"] == row["last_records_after"] == row["records"]   # then stable
        assert row["failures"] == 0 and row["last_compacted_offset"] > 0


@pytest.mark.slow
def test_broker_conf_compaction_settings(tmp_path):
    """enableCompaction, maxOffsetMapSize and compactionThreadNum read from a broker.conf (the Java names)."""
    from rmqd.config import compaction_config_from
    from rmqd.config import BrokerConfig, parse_properties

    conf = tmp_path / "broker.conf"
    conf.write_text("enableCompaction=false\nmaxOffsetMapSize=3072\ncompactionThreadNum=1\n"
                    "compactionScheduleInternal=200\ncompactionMappedFileSize=32768\n")
    cfg = BrokerConfig()
    cfg.load_file(str(conf))
    cc = compaction_config_from(cfg)
    assert (cc.enabled, cc.max_offset_map_size, cc.thread_num, cc.threads) == (False, 3072, 1, 1)
    assert cc.schedule_interval_ms == 200 and cc.log_file_size == 32768
    props = parse_properties(conf.read_text())
    with EmbeddedServer(store_dir=str(tmp_path / "off"), broker_properties=props) as server, \
            BlockingClient(server.broker_addr) as c:
        comp = server.broker.store.compaction
        assert comp.compaction_config.enabled is False and comp.compaction_config.max_offset_map_size == 3072
        assert create(c, "Table", "+cleanup.policy=COMPACTION").code == 0
        sent = _fill_table(c, "Table")
        time.sleep(2.5)                     # > the schedule period and the copier's 1 s tick
        assert comp.status("Table") == []   # enableCompaction=false: no copying, no scheduled run
        assert len(_pulled(server, "Table", sent)) == sent          # every version is still read
        # an explicit compactTopic still works, with the small map (96 keys) in several rounds
        (_, res), = comp.compact("Table", 0)
        assert res.rounds >= 2 and res.records_out < res.records_in, res
        assert len(_pulled(server, "Table", sent)) < sent
