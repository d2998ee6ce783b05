"""The tier in the broker: broker.conf keys (Java names and class names), ``rmqd serve --tier-dir``,
admin codes 9003/9004 and ``rmqd admin tierStatus/commitTier``, the runtime info and the console
page, and the answers without a tier."""
from __future__ import annotations

import contextlib
import io

import pytest

from rmqd.admin.main import main as admin_cli
from rmqd.runtime.cli import _broker_config, build_parser
from rmqd.config import BrokerConfig, broker_config_from, tier_config_from
from rmqd.store.tier.config import TieredStorageLevel
from rmqd.testing.embedded import EmbeddedServer
from tests.tier.helpers import put


def admin(ns: str, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = admin_cli([*args, "-n", ns])
    return rc, out.getvalue()


def test_broker_conf_keys(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("messageStorePlugIn=org.apache.rocketmq.tieredstore.TieredMessageStore\n"
                    "tieredBackendServiceProvider=org.apache.rocketmq.tieredstore.provider.PosixFileSegment\n"
                    f"tieredStoreFilePath={tmp_path}/tier\n"
                    "tieredStorageLevel=NOT_IN_MEM\ncommitLogRollingInterval=2\ncommitLogRollingMinimumSize=1024\n"
                    "tieredStoreFileReservedTime=24\ntieredStoreIndexFileMaxHashSlotNum=1000\n"
                    "tieredStoreIndexFileMaxIndexNum=4000\ntieredStoreGroupCommitCount=10\n"
                    "tieredStoreGroupCommitSize=2048\n")
    c = BrokerConfig()
    c.load_file(str(conf))
    assert not c.extra                                     # every key is known
    t = tier_config_from(c)
    assert t.enabled and t.provider == "posix" and t.file_path == f"{tmp_path}/tier"
    assert t.storage_level is TieredStorageLevel.NOT_IN_MEM
    assert (t.rolling_interval_hours, t.rolling_min_size, t.file_reserved_hours) == (2, 1024, 24)
    assert (t.index_slots, t.index_max_items, t.group_commit_count, t.group_commit_size) == (1000, 4000, 10, 2048)
    assert not tier_config_from(BrokerConfig()).enabled       # off by default
    with pytest.raises(ValueError, match="tieredStorageLevel"):
        tier_config_from(broker_config_from({"tieredStorageLevel": "SOMETIMES"}))


def test_tier_dir_flag(tmp_path):
    args = build_parser().parse_args(["serve", "--tier-dir", str(tmp_path / "t"), "--store-dir", str(tmp_path / "s")])
    t = tier_config_from(_broker_config(args))
    assert t.enabled and t.provider == "posix" and t.file_path == str(tmp_path / "t")


def test_admin_codes_runtime_info_and_console_page(tmp_path):
    props = {"messageStorePlugIn": "tiered", "tieredBackendServiceProvider": "memory",
             "tieredStoreIndexFileMaxHashSlotNum": 16, "tieredStoreIndexFileMaxIndexNum": 64,
             "tieredStoreGroupCommitTimeout": 0, "objectStoreSecretKey": "s3cr3t"}
    with EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties=props) as server:
        ns = server.namesrv_addr
        put(server.broker.store, "TierAdmin", 50)
        rc, out = admin(ns, "commitTier")
        assert rc == 0 and "copied 50 message(s)" in out
        rc, out = admin(ns, "tierStatus", "-t", "TierAdmin")
        assert rc == 0 and "memory" in out and "uploaded" in out
        assert "TierAdmin" in out and "25" in out
        info = server.broker.admin_broker_processor.runtime_info()
        assert info["tier_TierAdmin_0"].startswith("minOffset=0,maxOffset=25,")
        assert any(k.startswith("tierIndex_") and "state=uploaded" in v for k, v in info.items())
        rc, out = admin(ns, "getBrokerConfig", "-b", server.broker_addr)
        assert rc == 0 and "tieredStorageLevel" in out and "s3cr3t" not in out
        from rmqd.console.extensions import local_extensions
        from rmqd.console.feature_pages import register_builtin
        register_builtin()
        page = local_extensions(server.broker)["tier"]
        queues = page["tables"][0]
        assert queues["id"] == "tier-queues" and [r[1] for r in queues["rows"]] == ["TierAdmin", "TierAdmin"]
        assert page["tables"][1]["rows"] and page["summary"]["backend"] == "memory"


def test_without_a_tier_the_codes_say_so(tmp_path):
    with EmbeddedServer(store_dir=str(tmp_path / "store")) as server:
        rc, out = admin(server.namesrv_addr, "tierStatus")
        assert rc == 1 and "tiered storage is not enabled (messageStorePlugIn)" in out
        from rmqd.console.extensions import local_extensions
        from rmqd.console.feature_pages import register_builtin
        register_builtin()
        assert "tier" not in local_extensions(server.broker)
