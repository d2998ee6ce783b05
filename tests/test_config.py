"""broker.conf parsing with the Java broker's property names."""
from rmqd.config import BrokerConfig, NamesrvConfig, parse_properties


def test_parse_java_properties_forms():
    text = "\n".join([
        "# comment", "! also comment", "brokerName = broker-x", "brokerId:1", "listenPort 10920",
        "namesrvAddr=127.0.0.1:9876;127.0.0.1:9877", "multi=a\\", "   b", "esc=tab\\there\\u0041", "empty=",
    ])
    props = parse_properties(text)
    assert props == {"brokerName": "broker-x", "brokerId": "1", "listenPort": "10920",
                     "namesrvAddr": "127.0.0.1:9876;127.0.0.1:9877", "multi": "ab", "esc": "tab\thereA", "empty": ""}


def test_broker_config_types_aliases_and_unknown_keys(tmp_path, caplog):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=C1\nbrokerName=b1\nbrokerId=0\nflushDiskType=SYNC_FLUSH\n"
                    "autoCreateTopicEnable=false\nenablePropertyFilter=true\nmaxMessageSize=1024\n"
                    "mappedFileSizeCommitLog=4194304\nfileReservedTime=48\ndeleteWhen=03\n"
                    "messageDelayLevel=1s 2s\nbrokerIP1=10.1.2.3\nsomethingNew=42\n")
    with caplog.at_level("INFO"):
        config = BrokerConfig()
        config.load_file(str(conf))
    assert config.brokerClusterName == "C1" and config.brokerName == "b1"
    assert config.flushDiskType == "SYNC_FLUSH" and config.autoCreateTopicEnable is False
    assert config.maxMessageSize == 1024 and config.mapedFileSizeCommitLog == 4194304
    assert config.fileReservedTime == 48 and config.deleteWhen == "03" and config.messageDelayLevel == "1s 2s"
    assert config.brokerIP1 == "10.1.2.3" and config.broker_addr == "10.1.2.3:10911"
    assert config.extra == {"somethingNew": "42"}
    assert "somethingNew" in caplog.text
    assert "somethingNew=42\n" in config.to_properties_text()


def test_local_dev_defaults():
    c = BrokerConfig()
    assert c.brokerIP1 == "127.0.0.1" and c.enablePropertyFilter is True and c.listenPort == 10911
    assert c.vip_port == 10909 and c.flushDiskType == "ASYNC_FLUSH" and c.namesrv_addrs == []
    c.update({"namesrvAddr": "a:1; b:2"})
    assert c.namesrv_addrs == ["a:1", "b:2"]
    assert NamesrvConfig().listenPort == 9876


def test_role_is_typed_and_a_bad_role_is_refused():
    import pytest

    from rmqd.config import BrokerRole
    c = BrokerConfig(brokerRole="sync_master")
    assert c.role is BrokerRole.SYNC_MASTER and c.role.is_master
    c.update({"brokerRole": "SLAVE"})
    assert c.role is BrokerRole.SLAVE
    with pytest.raises(ValueError, match="brokerRole"):
        c.update({"brokerRole": "LEADER"})


def test_apply_runtime_validates_first_then_tells_subscribers_what_changed():
    import pytest
    c = BrokerConfig(brokerPermission=6, flushIntervalCommitLog=500)
    seen = []
    c.subscribe(lambda cfg, changed: seen.append(set(changed)))
    with pytest.raises(ValueError):
        c.apply_runtime({"brokerPermission": "4", "flushIntervalCommitLog": "soon"})   # nothing applied
    assert (c.brokerPermission, c.flushIntervalCommitLog, seen) == (6, 500, [])
    changed = c.apply_runtime({"brokerPermission": "4", "flushIntervalCommitLog": "500", "mappedFileSizeCommitLog": "1024"})
    assert changed == {"brokerPermission", "mapedFileSizeCommitLog"} and seen == [set(changed)]
    assert c.apply_runtime({"brokerPermission": "4"}) == frozenset() and len(seen) == 1     # no change: no call


def test_one_mapping_per_part_and_the_store_settings_a_running_store_takes():
    from rmqd.config import compaction_config_from, store_config_from, store_runtime_changes, tier_config_from
    c = BrokerConfig(storePathRootDir="/s", mapedFileSizeCommitLog=4096, fileReservedTime=48, flushDiskType="SYNC_FLUSH",
                     enableCompaction=False, messageStorePlugIn="tiered", tieredStoreFilePath="/t",
                     tieredStoreGroupCommitTimeout=0)
    sc = store_config_from(c)
    assert (sc.store_root_dir, sc.mapped_file_size_commitlog, sc.file_reserved_time_hours, sc.flush_disk_type) == \
        ("/s", 4096, 48.0, "SYNC_FLUSH")
    assert not compaction_config_from(c).enabled
    t = tier_config_from(c)
    assert t.enabled and t.file_path == "/t" and t.group_commit_timeout_ms == 0 and t.message_index_enable
    assert store_runtime_changes(c, {"fileReservedTime", "storePathRootDir", "brokerPermission"}) == \
        {"file_reserved_time_hours": 48.0}


def test_lite_and_priority_keys_are_kept_but_not_reported_unused(caplog):
    """5.4/5.5 keys live in their own settings class (rmqd.lite.config): kept, and not logged as
    unused; a key nothing reads still is."""
    import logging

    from rmqd.config import BrokerConfig
    c = BrokerConfig()
    with caplog.at_level(logging.INFO, logger="rmqd.config"):
        unknown = c.update({"minLiteTTl": "60000", "priorityOrderAsc": "false", "noSuchKey": "1"}, "broker.conf")
    assert sorted(unknown) == ["minLiteTTl", "noSuchKey", "priorityOrderAsc"]
    assert c.to_properties()["minLiteTTl"] == "60000"
    lines = [r.getMessage() for r in caplog.records if "unknown properties" in r.getMessage()]
    assert lines == ["broker.conf: keeping unknown properties (not used by rmqd): noSuchKey"]


def test_sockets_bind_bind_address_else_the_advertised_address():
    """5.x's bindAddress names where the broker listens; without it rmqd binds what it advertises (brokerIP1, and
    brokerIP2 for the HA port), so a broker on a host of its own is reachable at its address (it bound 127.0.0.1
    whatever brokerIP1 said) and a default one stays on loopback."""
    from rmqd.config import BrokerConfig, NamesrvConfig
    assert (BrokerConfig().bind_host, BrokerConfig().ha_bind_host) == ("127.0.0.1", "127.0.0.1")
    c = BrokerConfig(brokerIP1="198.18.7.11")
    assert (c.bind_host, c.ha_bind_host) == ("198.18.7.11", "198.18.7.11")
    c = BrokerConfig(brokerIP1="198.18.7.11", brokerIP2="198.18.8.11")
    assert (c.bind_host, c.ha_bind_host) == ("198.18.7.11", "198.18.8.11")
    c = BrokerConfig(brokerIP1="198.18.7.11", bindAddress="0.0.0.0")
    assert (c.bind_host, c.ha_bind_host) == ("0.0.0.0", "0.0.0.0")
    assert NamesrvConfig().bindAddress == "127.0.0.1"
    assert NamesrvConfig(bindAddress="198.18.7.10").bindAddress == "198.18.7.10"
