import json
import os
import threading

import pytest

from rmqd.store.metadata import (PERM_INHERIT, PERM_READ, PERM_WRITE, TBW102, ConsumerOffsetManager,
                                 DelayOffsetManager, SubscriptionGroupManager, TopicConfig,
                                 TopicConfigManager, atomic_write, load_json_file, loads_lenient)


def test_atomic_write_keeps_bak_and_falls_back(tmp_path):
    p = str(tmp_path / "cfg" / "x.json")
    atomic_write(p, '{"v":1}')
    assert not os.path.exists(p + ".bak")
    atomic_write(p, '{"v":2}')
    assert json.load(open(p)) == {"v": 2} and json.load(open(p + ".bak")) == {"v": 1}
    assert not os.path.exists(p + ".tmp")
    open(p, "w").write('{"v": 3, broken')
    assert load_json_file(p) == {"v": 1}
    os.unlink(p)
    assert load_json_file(p) == {"v": 1}
    os.unlink(p + ".bak")
    assert load_json_file(p) is None


def test_lenient_unquoted_integer_keys():
    """The files are read in fastjson's dialect (rmqd.remoting.fastjson.loads_lenient): a bare integer key is an int."""
    text = '{"offsetTable":{"TopicTest@G":{0:123,1 : 45},"%RETRY%G@G":{-1:7}},"s":"{0:1}"}'
    d = loads_lenient(text)
    assert d == {"offsetTable": {"TopicTest@G": {0: 123, 1: 45}, "%RETRY%G@G": {-1: 7}},
                 "s": "{0:1}"}


def test_consumer_offset_manager(tmp_path):
    d = str(tmp_path)
    open(os.path.join(d, "consumerOffset.json"), "w").write(
        '{\n\t"offsetTable":{\n\t\t"TopicTest@G":{0:123,1:45}\n\t}\n}')
    m = ConsumerOffsetManager(d)
    assert m.load()
    assert m.query_offset("G", "TopicTest", 0) == 123 and m.query_offset("G", "TopicTest", 9) == -1
    assert not m.persist_if_dirty()
    m.commit_offset("1.2.3.4", "G", "TopicTest", 1, 50)
    m.commit_offset("1.2.3.4", "G2", "Other", 0, 5)
    m.clone_offset("G", "G3", "TopicTest")
    assert m.which_topic_by_consumer("G") == {"TopicTest"}
    assert m.which_group_by_topic("TopicTest") == {"G", "G3"}
    assert m.persist_if_dirty()
    raw = json.load(open(os.path.join(d, "consumerOffset.json")))
    assert raw["offsetTable"]["TopicTest@G"] == {"0": 123, "1": 50}
    assert m.remove_offset("G2") == 1
    m.shutdown()
    m2 = ConsumerOffsetManager(d)
    m2.load()
    assert m2.query_offsets("G3", "TopicTest") == {0: 123, 1: 50}
    assert m2.query_offset("G2", "Other", 0) == -1


def test_delay_offset_manager(tmp_path):
    m = DelayOffsetManager(str(tmp_path))
    m.update(1, 17)
    m.update(3, 2)
    m.shutdown()
    assert json.load(open(tmp_path / "delayOffset.json")) == {"offsetTable": {"1": 17, "3": 2}}
    (tmp_path / "delayOffset.json").write_text('{"offsetTable":{1:5,2:9}}')
    m2 = DelayOffsetManager(str(tmp_path))
    m2.load()
    assert m2.get(1) == 5 and m2.get(2) == 9 and m2.get(18) == 0


def test_topic_config_manager(tmp_path):
    changes = []
    m = TopicConfigManager(str(tmp_path), "DefaultCluster", "broker-a", on_change=changes.append)
    tbw = m.get(TBW102)
    assert (tbw.perm, tbw.read_queue_nums, tbw.write_queue_nums) == (7, 8, 8)
    assert m.get("SCHEDULE_TOPIC_XXXX").read_queue_nums == 18
    for t in ("SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "DefaultCluster", "broker-a", "DefaultCluster_REPLY_TOPIC"):
        assert m.get(t) is not None and m.is_system_topic(t)
    for t in ("RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC"):
        assert m.get(t) is None and m.is_system_topic(t)     # created when first used, as in Java
    assert m.get("broker-a").perm & PERM_INHERIT
    v0 = m.data_version.counter
    tc = m.create_topic_in_send_message_method("NewT", TBW102, "1.2.3.4:5", 4)
    assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (4, 4, PERM_READ | PERM_WRITE)
    assert changes[-1] is tc and m.data_version.counter == v0 + 1
    assert m.create_topic_in_send_message_method("NewT2", "NoSuch", "x", 4) is None
    assert m.create_topic_in_send_message_method("NewT3", "NewT", "x", 4) is None   # no inherit
    m.update(TopicConfig("Comp", 2, 2, attributes={"cleanup.policy": "COMPACTION"}))
    m.create_retry_topic("G1")
    m.create_dlq_topic("G1")
    assert m.get("%RETRY%G1").read_queue_nums == 1 and m.get("%DLQ%G1") is not None
    m.delete("NewT")
    raw = json.load(open(tmp_path / "topics.json"))
    assert raw["topicConfigTable"]["Comp"]["attributes"] == {"cleanup.policy": "COMPACTION"}
    assert set(raw["dataVersion"]) == {"counter", "timestamp"}
    assert raw["topicConfigTable"]["%RETRY%G1"] == {
        "order": False, "perm": 6, "readQueueNums": 1, "topicFilterType": "SINGLE_TAG",
        "topicName": "%RETRY%G1", "topicSysFlag": 0, "writeQueueNums": 1}
    m2 = TopicConfigManager(str(tmp_path), "DefaultCluster", "broker-a", auto_create_topic_enable=False)
    m2.load()
    assert m2.get("NewT") is None and m2.get("Comp").attributes == {"cleanup.policy": "COMPACTION"}
    assert m2.get(TBW102).perm == PERM_READ | PERM_WRITE
    assert m2.create_topic_in_send_message_method("X", TBW102, "x", 4) is None
    assert m2.data_version.counter == m.data_version.counter


def test_subscription_group_manager(tmp_path):
    m = SubscriptionGroupManager(str(tmp_path))
    g = m.find("CG")
    assert g.retry_max_times == 16 and g.consume_enable
    raw = json.load(open(tmp_path / "subscriptionGroup.json"))
    assert raw["subscriptionGroupTable"]["CG"] == {
        "brokerId": 0, "consumeBroadcastEnable": True, "consumeEnable": True,
        "consumeFromMinEnable": True, "groupName": "CG", "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": 16, "retryQueueNums": 1, "whichBrokerWhenConsumeSlowly": 1}
    m.delete("CG")
    m2 = SubscriptionGroupManager(str(tmp_path), auto_create_subscription_group=False)
    m2.load()
    assert m2.find("CG") is None and m2.find("TOOLS_CONSUMER") is not None


def test_controller_mode_creates_the_transaction_topics_at_start_as_5x(tmp_path):
    """4.x creates the half and op-half topics when first used; 5.x (and rmqd in controller mode) at start, so that
    a slave copying the master's topic table has them (a Java 5.5.0 slave creating the half topic while demoted
    stalls for 90 s)."""
    trans = {"RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"}
    lazy = TopicConfigManager(str(tmp_path / "4x"), "DefaultCluster", "broker-a")
    assert not trans & set(lazy.table) and all(lazy.is_system_topic(t) for t in trans)
    eager = TopicConfigManager(str(tmp_path / "5x"), "DefaultCluster", "broker-a", transaction_topics_at_start=True)
    for t in trans:
        tc = eager.table[t]
        assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (1, 1, PERM_READ | PERM_WRITE)
        assert eager.is_system_topic(t)


@pytest.mark.parametrize("change", ["update", "back_method", "send_method", "delete"])
def test_the_change_callback_runs_with_the_table_unlocked(tmp_path, change):
    # The broker's callback builds a registration body (its own lock, then this table's). Called under the table's
    # lock, it deadlocked for good with a body built at the same moment on another thread (the transaction checker
    # creating the half topic, seen twice in full runs). Another thread must be able to read the table meanwhile.
    read_in_callback = []

    def on_change(_tc):
        t = threading.Thread(target=lambda: read_in_callback.append(tcm.wrapper()), daemon=True)
        t.start()
        t.join(5)
        read_in_callback.append(not t.is_alive())

    tcm = TopicConfigManager(str(tmp_path), on_change=on_change)
    tcm.update(TopicConfig("Existing", 1, 1))
    read_in_callback.clear()
    {"update": lambda: tcm.update(TopicConfig("T1", 1, 1)),
     "back_method": lambda: tcm.create_topic_in_send_message_back_method("%RETRY%g", 1),
     "send_method": lambda: tcm.create_topic_in_send_message_method("T2", "TBW102", "127.0.0.1:1", 4),
     "delete": lambda: tcm.delete("Existing")}[change]()
    assert read_in_callback and read_in_callback[-1] is True, "the table was locked while the callback ran"
