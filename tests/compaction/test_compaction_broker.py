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


def test_keyless_send_refused_offsets_from_the_compaction_store_and_restart(server, tmp_path):
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
    status = admin(server, "compactionStatus", "-t", "Table")
    assert "Table" in status
    info = server.broker.admin_broker_processor.runtime_info()
    assert "lastCompactedOffset=" in info["compaction_Table_0"]
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
