"""Disk usage as the Java broker measures it (UtilAll.getDiskPartitionSpaceUsedPercent)."""
from __future__ import annotations

import os

import pytest

from rmqd.common import fileutil
from rmqd.store.config import resolve_disk_ratios
from rmqd.store.message_store import MessageStore, StoreConfig


class FakeStatvfs:
    def __init__(self, blocks: int, bfree: int, bavail: int, frsize: int = 4096) -> None:
        self.f_blocks, self.f_bfree, self.f_bavail, self.f_frsize = blocks, bfree, bavail, frsize


@pytest.mark.parametrize("blocks,bfree,bavail,expected", [
    (1000, 880, 580, 0.18),   # used 120, usable 580 (300 reserved): 120/700 = 17.1 % -> 18 %
    (1000, 700, 700, 0.30),   # no reserve: 300 / 1000
    (1000, 700, 200, 0.60),   # used 300, usable 200 -> 300/500
    (3, 2, 2, 0.34),          # 1/3 = 33.33 % rounds UP to 34 %, like Java's roundNum
    (1000, 1000, 1000, 0.0),
    (1000, 0, 0, 1.0),
])
def test_java_formula(monkeypatch, blocks, bfree, bavail, expected):
    monkeypatch.setattr(fileutil.os, "statvfs", lambda p: FakeStatvfs(blocks, bfree, bavail))
    assert fileutil.disk_partition_space_used_percent("/x") == expected


def test_reserved_blocks_do_not_count_as_used(monkeypatch):
    """The issue's disk: df says 30 %; (total - available) / total would say 72 %."""
    monkeypatch.setattr(fileutil.os, "statvfs", lambda p: FakeStatvfs(10000, 6050, 2773))
    assert fileutil.disk_partition_space_used_percent("/x") == 0.59   # 3950 / (3950 + 2773)
    monkeypatch.setattr(fileutil.os, "statvfs", lambda p: FakeStatvfs(10000, 7228, 6700))
    # used 2772, usable 6700: 29.3 % -> 0.30 (old formula: (10000 - 6700) / 10000 = 33 %)
    assert fileutil.disk_partition_space_used_percent("/x") == 0.30


def test_unreadable_path_is_minus_one(tmp_path):
    assert fileutil.disk_partition_space_used_percent(str(tmp_path / "missing")) == -1.0


def test_store_retention_and_stats_use_the_java_figure(tmp_path, monkeypatch):
    monkeypatch.setattr(fileutil.os, "statvfs", lambda p: FakeStatvfs(10000, 7228, 6700))
    store = MessageStore(StoreConfig(store_root_dir=str(tmp_path / "s"), mapped_file_size_commitlog=1 << 20,
                                     warm_mapped_pages=False))
    store.start()
    try:
        assert store.retention.check_disk() == 30                   # percent, below diskMaxUsedSpaceRatio 75
        assert store.stats.commitlog_disk_ratio == 30 and store.stats.consume_queue_disk_ratio == 30
        assert not store.put_engine.disk_full
    finally:
        store.shutdown()
    assert os.path.isdir(tmp_path / "s")


def test_capacity_is_total_and_usable_space_like_javas_runtime_info(monkeypatch):
    """commitLogDirCapacity: 4.9.8 prints File.getTotalSpace() and File.getUsableSpace() (f_bavail), so the
    blocks reserved for root are not "Free" (javap of AdminBrokerProcessor.prepareRuntimeInfo)."""
    from rmqd.processors.admin_broker import human_bytes

    monkeypatch.setattr(fileutil.os, "statvfs", lambda p: FakeStatvfs(10000, 7228, 2773, frsize=1 << 20))
    total, usable = fileutil.disk_capacity("/x")
    assert (total, usable) == (10000 << 20, 2773 << 20)
    assert (human_bytes(total), human_bytes(usable)) == ("9.8 GiB", "2.7 GiB")


def test_capacity_of_an_unreadable_path_is_none(tmp_path):
    assert fileutil.disk_capacity(str(tmp_path / "missing")) is None


@pytest.mark.parametrize("raw,expected,logged", [
    ("", 90, False), ("0.95", 95, False), ("95", 95, False), ("0.955", 95.5, False), ("1", 100, False),
    ("x", 90, True), ("0", 90, True), ("-0.5", 90, True), ("150", 90, True),
])
def test_warning_level_ratio_comes_from_javas_system_property_name(monkeypatch, caplog, raw, expected, logged):
    """Java 4.9.8 reads -Drocketmq.broker.diskSpaceWarningLevelRatio=0.90; rmqd the same name from the
    environment, as a fraction or a percent; a bad value is logged and Java's default used."""
    monkeypatch.setenv("ROCKETMQ_BROKER_DISKSPACEWARNINGLEVELRATIO", raw)
    cfg = StoreConfig(store_root_dir="/unused")
    assert cfg.disk_space_warning_level_ratio is None          # constructing the config reads no environment
    assert resolve_disk_ratios(cfg).disk_space_warning_level_ratio == pytest.approx(expected)
    assert ("ROCKETMQ_BROKER_DISKSPACEWARNINGLEVELRATIO" in caplog.text) == logged


def test_writes_are_refused_only_above_the_configured_ratio(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCKETMQ_BROKER_DISKSPACEWARNINGLEVELRATIO", "0.97")
    monkeypatch.setenv("ROCKETMQ_BROKER_DISKSPACECLEANFORCIBLYRATIO", "96")
    usage = [93.0]
    store = MessageStore(StoreConfig(store_root_dir=str(tmp_path / "s"), mapped_file_size_commitlog=1 << 20,
                                     warm_mapped_pages=False, disk_usage=lambda p: usage[0]))
    store.start()
    try:
        assert store.config.disk_space_clean_forcibly_ratio == 96
        store.retention.check_disk()
        assert not store.put_engine.disk_full                        # 93 % > Java's 90 %, but below 97 %
        usage[0] = 98.0
        store.retention.check_disk()
        assert store.put_engine.disk_full
    finally:
        store.shutdown()
