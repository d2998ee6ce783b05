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
