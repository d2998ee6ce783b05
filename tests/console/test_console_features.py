"""The console's built-in feature pages: compaction status, tiered storage and ACL accounts
(``/api/features``), in-process and over the admin codes (``rmqd console -n``)."""
from __future__ import annotations

import time

import pytest

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.store.message import MessageToStore

from tests.console.kit import ConsoleKit, Http

pytestmark = pytest.mark.timeout(60)

ACL_YAML = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: consoleAdmin01
    secretKey: topSecretAdmin01
    whiteRemoteAddress:
    admin: true
  - accessKey: consoleApp01
    secretKey: topSecretApp01
    whiteRemoteAddress: 192.168.1.*
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - orders=PUB|SUB
      - audit=PUB
    groupPerms:
      - billing=SUB
"""


def table(feature: dict, table_id: str) -> list[dict]:
    t = next(t for t in feature["tables"] if t["id"] == table_id)
    return [dict(zip(t["columns"], row)) for row in t["rows"]]


def test_compaction_page_shows_each_queue_after_a_run(tmp_path):
    kit = ConsoleKit(str(tmp_path / "store"), {"compactionMappedFileSize": 16 * 1024,
                                               "compactionScheduleInternal": 3_600_000}).start()
    try:
        web = kit.http()
        before = web.get_json("/api/features")["features"]["compaction"]
        assert before["summary"]["compaction topics"] == 0 and table(before, "compaction-queues") == []
        with BlockingClient(kit.broker_addr) as c:
            r = c.invoke(new_request(17, {"topic": "Prices", "readQueueNums": "1", "writeQueueNums": "1",
                                          "perm": "6", "attributes": "+cleanup.policy=COMPACTION"}))
            assert r.code == 0, r.remark
        store = kit.server.broker.store
        for i in range(600):                      # 20 keys x 30 versions: several sealed 16 KB files
            store.put_message(MessageToStore.create("Prices", 0, b"v%03d-" % i + b"x" * 64,
                                                    {"KEYS": f"sku-{i % 20}"}))
        results = store.compaction.compact("Prices", 0)
        assert results and results[0][1].records_out < results[0][1].records_in
        d = web.get_json("/api/features")["features"]["compaction"]
        assert d["summary"]["compaction topics"] == 1
        (row,) = table(d, "compaction-queues")
        assert (row["topic"], row["queue"], row["runs"], row["failures"]) == ("Prices", 0, 1, 0)
        assert row["compacted to"] > 0 and row["bytes after"] < row["bytes before"]
        assert row["last run"] != "never"
    finally:
        kit.stop()


def test_acl_page_lists_accounts_and_white_list_never_secrets(tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_YAML)
    kit = ConsoleKit(str(tmp_path / "store"), {"aclEnable": "true", "aclFile": str(acl)}).start()
    try:
        raw = kit.http().get("/api/features")[2].decode()
        assert "topSecret" not in raw                       # secret keys never leave the broker
        d = kit.http().get_json("/api/features")["features"]["acl"]
        assert d["summary"]["accounts"] == 2
        assert d["summary"]["global white addresses"] == "10.10.103.*, 192.168.0.*"
        rows = {r["accessKey"]: r for r in table(d, "acl-accounts")}
        app = rows["consoleApp01"]
        assert (app["admin"], app["whiteRemoteAddress"], app["defaultTopicPerm"], app["defaultGroupPerm"]) == (
            "no", "192.168.1.*", "DENY", "SUB")
        assert app["topicPerms"] == "audit=PUB, orders=PUB|SUB" and app["groupPerms"] == "billing=SUB"
        assert rows["consoleAdmin01"]["admin"] == "yes" and rows["consoleAdmin01"]["file"] == str(acl)
        # an edit to the file shows on the next load (the broker reloads it within a second)
        acl.write_text(ACL_YAML.replace("consoleApp01", "consoleApp02"))
        from tests.kit.waits import wait_until
        wait_until(lambda: "consoleApp02" in kit.http().get("/api/features")[2].decode(), timeout=10,
                   what="the edited ACL file on the page")
    finally:
        kit.stop()


TIER_PROPS = {"messageStorePlugIn": "tiered", "tieredBackendServiceProvider": "memory",
              "tieredStoreIndexFileMaxHashSlotNum": 16, "tieredStoreIndexFileMaxIndexNum": 256,
              "tieredStoreGroupCommitTimeout": 0}


def test_tier_page_per_queue_and_index_file_local_and_remote(tmp_path):
    kit = ConsoleKit(str(tmp_path / "store"), TIER_PROPS).start()
    try:
        kit.create_topic("TierPage", 2)
        t0 = int(time.time() * 1000)
        for i in range(9):
            kit.send("TierPage", b"tiered-%d" % i, queue_id=i % 2, keys=f"tier-key-{i}")
        result = kit.server.broker.store.tier.commit_now()            # copy, seal and upload the index now
        assert result["copied"] == 9
        d = kit.http().get_json("/api/features")["features"]["tier"]
        s = d["summary"]
        assert (s["backend"], s["storage level"], s["queues"], s["last error"]) == ("memory", "NOT_IN_DISK", 2, "none")
        assert s["index files"] >= 1 and s["uploaded index files"] >= 1 and s["messages copied since start"] == 9
        queues = {(r["topic"], r["queue"]): r for r in table(d, "tier-queues")}
        assert set(queues) == {("TierPage", 0), ("TierPage", 1)}
        for (topic, qid), r in queues.items():
            n = 5 - qid                                                 # 9 messages over 2 queues
            assert (r["broker"], r["min offset"], r["max offset"], r["committed to"]) == ("broker-a", 0, n, n)
            assert r["bytes"] == r["commit log bytes"] + r["consume queue bytes"] > 0 and r["segments"] >= 1
        files = table(d, "tier-index-files")
        up = [f for f in files if f["state"] == "uploaded"]
        assert up and sum(f["items"] for f in up) >= 9 and all(f["bytes"] > 0 for f in up)
        first = time.mktime(time.strptime(up[0]["first item"], "%Y-%m-%d %H:%M:%S"))
        assert t0 / 1000 - 2 <= first <= time.time() and up[0]["last item"] >= up[0]["first item"]
        # rmqd console -n: the same page from admin code 9003
        remote = Http(kit.remote_console().url).get_json("/api/features")["features"]["tier"]
        assert table(remote, "tier-queues") == table(d, "tier-queues")
        assert table(remote, "tier-index-files") == table(d, "tier-index-files")
        assert remote["summary"]["backend"] == "memory"
    finally:
        kit.stop()


def test_features_off_say_so(tmp_path):
    kit = ConsoleKit(str(tmp_path / "store")).start()
    try:
        d = kit.http().get_json("/api/features")
        assert "acl" not in d["features"] and "tier" not in d["features"] and "compaction" in d["features"]
        assert d["builtin"] == ["compaction", "tier", "acl"]
        remote = Http(kit.remote_console().url).get_json("/api/features")
        assert remote["features"] == {} and remote["builtin"] == ["compaction", "tier", "acl"]
    finally:
        kit.stop()
