"""The console's built-in feature pages: compaction status and ACL accounts (``/api/features``)."""
from __future__ import annotations

import pytest

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.store.message import MessageToStore

from tests.console.kit import ConsoleKit

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
        from tests.console.kit import wait_for
        wait_for(lambda: "consoleApp02" in kit.http().get("/api/features")[2].decode(), timeout=10,
                 what="the edited ACL file on the page")
    finally:
        kit.stop()


def test_features_off_say_so(tmp_path):
    kit = ConsoleKit(str(tmp_path / "store")).start()
    try:
        d = kit.http().get_json("/api/features")
        assert "acl" not in d["features"] and "compaction" in d["features"]
        assert d["planned"] == ["compaction", "tier", "acl"]
    finally:
        kit.stop()
