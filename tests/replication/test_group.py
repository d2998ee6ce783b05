"""A master and a slave BrokerController with a name server, in this process: what clients and tools see."""
from __future__ import annotations

import time

import orjson

from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import new_request
from rmqd.remoting.client import BlockingClient
from rmqd.replicas.wiring import GET_BROKER_HA_STATUS
from rmqd.store.metadata import loads_lenient
from tests.replication.harness import commitlog_files_equal, send, wait_until

SERVICE_NOT_AVAILABLE_REMARK = "service not available now. It may be caused by one of the following reasons"


def _pull(client: BlockingClient, topic: str, group: str, queue_id: int, offset: int, max_nums: int = 32):
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
           "maxMsgNums": str(max_nums), "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
           "subVersion": "0", "subscription": "*", "expressionType": "TAG"}
    return client.invoke(new_request(RequestCode.PULL_MESSAGE, ext), 10)


def _route(addr: str, topic: str) -> dict:
    c = BlockingClient(addr, timeout=5)
    try:
        r = c.invoke(new_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
        return loads_lenient(r.body_bytes().decode())
    finally:
        c.close()


def test_group_replicates_registers_and_serves_reads_from_the_slave(group_factory):
    g = group_factory(master_conf={"brokerRole": "SYNC_MASTER"}, slave_conf={"slaveReadEnable": "true"})
    m, s = g.master, g.slave
    wait_until(lambda: s.role_manager.master_addr == m.address, 10, what="slave learned its master from the name server")
    assert s.role_manager.master_ha_addr == f"127.0.0.1:{m.config.haListenPort}"
    wait_until(lambda: m.replication.ha.connection_count() == 1, 10, what="slave connected to the HA port")
    c = g.client(m)
    acked = []
    for i in range(400):                                      # 1 KB each: several 256 KiB files
        r = send(c, "GroupTopic", bytes([i % 251]) * 1000, f"key{i}", queue_id=i % 4)
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        acked.append(r.ext_fields["msgId"])
    g.wait_caught_up()
    names = commitlog_files_equal(m.config.storePathRootDir, s.config.storePathRootDir)
    assert len(names) >= 2
    route = _route(g.namesrv.address, "GroupTopic")
    assert {int(k): v for k, v in route["brokerDatas"][0]["brokerAddrs"].items()} == {0: m.address, 1: s.address}
    sc = g.client(s)
    got = 0
    for q in range(4):
        r = _pull(sc, "GroupTopic", "GroupCG", q, 0, 200)
        assert r.code == ResponseCode.SUCCESS and r.remark == "FOUND"
        assert r.ext_fields["suggestWhichBrokerId"] == "0"       # the group's brokerId (slaveReadEnable)
        assert r.ext_fields["maxOffset"] == "100"
        offset = 0
        while offset < 100:
            r = _pull(sc, "GroupTopic", "GroupCG", q, offset)
            offset = int(r.ext_fields["nextBeginOffset"])
        got += offset
    assert got == 400
    info = orjson.loads(c.invoke(new_request(GET_BROKER_HA_STATUS), 5).body_bytes())
    assert info["master"] is True and info["inSyncSlaveNums"] == 1
    assert info["haConnectionInfo"][0]["diff"] == 0
    info = orjson.loads(sc.invoke(new_request(GET_BROKER_HA_STATUS), 5).body_bytes())
    assert info["master"] is False and info["haClientRuntimeInfo"]["masterAddr"] == s.role_manager.master_ha_addr


def test_slave_refuses_sends_and_master_only_services_wait(group_factory):
    g = group_factory()
    m, s = g.master, g.slave
    sc = g.client(s)
    r = send(sc, "AnyTopic", b"x", "k")
    assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE and r.remark.startswith(SERVICE_NOT_AVAILABLE_REMARK)
    assert s.store.commitlog_max_offset() == 0
    r = sc.invoke(new_request(RequestCode.END_TRANSACTION, {"producerGroup": "PG", "tranStateTableOffset": "0",
                                                            "commitLogOffset": "0", "commitOrRollback": "8",
                                                            "fromTransactionCheck": "false", "msgId": "X"}), 5)
    assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
    running = {type(svc).__name__ for svc in s.replication.services_to_shut_down()}
    assert "ScheduleMessageService" not in running and "TransactionalMessageCheckService" not in running
    assert "ScheduleMessageService" in {type(svc).__name__ for svc in m.replication.services_to_shut_down()}


def test_suggest_broker_when_consuming_slowly(group_factory):
    """slaveReadEnable + a backlog beyond accessMessageInMemoryMaxRatio of RAM (0 %: any) sends the consumer to the
    group's whichBrokerWhenConsumeSlowly (1); without slaveReadEnable, always to the master."""
    g = group_factory(master_conf={"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": "0"})
    m = g.master
    c = g.client(m)
    for i in range(5):
        assert send(c, "SlowTopic", b"y" * 100, f"k{i}").code == ResponseCode.SUCCESS
    r = _pull(c, "SlowTopic", "SlowCG", 0, 0, 2)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["suggestWhichBrokerId"] == "1"
    m.config.slaveReadEnable = False
    r = _pull(c, "SlowTopic", "SlowCG", 0, 0, 2)
    assert r.ext_fields["suggestWhichBrokerId"] == "0"


def test_metadata_follows_the_master(group_factory):
    g = group_factory()
    m, s = g.master, g.slave
    c = g.client(m)
    wait_until(lambda: s.replication.slave_sync.rounds >= 1, 10, what="the slave synced once")
    t0 = time.monotonic()
    r = c.invoke(new_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": "NewOnMaster", "defaultTopic": "TBW102", "readQueueNums": "3", "writeQueueNums": "3", "perm": "6",
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}), 5)
    assert r.code == ResponseCode.SUCCESS
    wait_until(lambda: s.topic_config_manager.get("NewOnMaster") is not None, 5, what="topic copied to the slave")
    assert time.monotonic() - t0 < 2.0                      # pushed, not the 10 s round
    assert s.topic_config_manager.get("NewOnMaster").read_queue_nums == 3
    m.consumer_offset_manager.commit_offset("test", "OffsetCG", "NewOnMaster", 1, 42)
    m.subscription_group_manager.find("OffsetCG")
    m.delay_offset_manager.update(3, 7)
    wait_until(lambda: s.consumer_offset_manager.query_offset("OffsetCG", "NewOnMaster", 1) == 42, 10,
               what="consumer offset copied")
    wait_until(lambda: s.subscription_group_manager.table.get("OffsetCG") is not None, 10, what="group copied")
    wait_until(lambda: s.delay_offset_manager.get(3) == 7, 10, what="delay offset copied")


def test_slave_down_and_back_then_master_down_and_back(group_factory):
    g = group_factory(master_conf={"brokerRole": "SYNC_MASTER", "slaveTimeout": "500"})
    c = g.client(g.master)
    for i in range(50):
        assert send(c, "UpDown", b"a" * 1000, f"a{i}").code == ResponseCode.SUCCESS
    g.wait_caught_up()
    g.stop_slave()
    for i in range(50):                                        # no slave: stored, answered SLAVE_NOT_AVAILABLE
        r = send(c, "UpDown", b"b" * 1000, f"b{i}")
        assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE and r.ext_fields["msgId"]
    g.start_slave()                                            # same store: resumes from its max offset
    g.wait_caught_up()
    assert g.slave.store.get_max_offset("UpDown", 0) == 100
    commitlog_files_equal(g.master.config.storePathRootDir, g.slave.config.storePathRootDir)
    g.stop_master()
    sc = g.client(g.slave)
    r = _pull(sc, "UpDown", "UpDownCG", 0, 90)                 # the slave serves reads on its own
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["maxOffset"] == "100"
    g.start_master()
    c = g.client(g.master)
    wait_until(lambda: g.master.replication.ha.connection_count() == 1, 15, what="slave reconnected")
    for i in range(10):
        assert send(c, "UpDown", b"c" * 1000, f"c{i}").code == ResponseCode.SUCCESS
    assert g.slave.store.get_max_offset("UpDown", 0) == 110


def test_lag_in_admin_console_and_metrics(group_factory, capsys):
    from rmqd.admin.main import main as admin_main
    from rmqd.console.view import RemoteClusterView
    from rmqd.metrics.collector import collect

    g = group_factory()
    m, s = g.master, g.slave
    c = g.client(m)
    for i in range(20):
        assert send(c, "LagTopic", b"l" * 500, f"l{i}").code == ResponseCode.SUCCESS
    g.wait_caught_up()
    wait_until(lambda: m.replication.ha.push2slave == m.store.commitlog_max_offset(), 10, what="slave acknowledged")
    assert admin_main(["haStatus", "-n", g.namesrv.address, "-c", "DefaultCluster"]) in (0, None)
    out = capsys.readouterr().out
    assert f"#MasterAddr\t{m.address}" in out and "#SlaveNum\t1" in out and "#InSyncSlaveNum\t1" in out
    row = next(line for line in out.splitlines() if line.startswith("127.0.0.1:") and "OK" in line)
    assert row.split()[2] == "0"                                  # #Diff: in sync
    assert admin_main(["haStatus", "-n", g.namesrv.address, "-b", s.address]) in (0, None)
    out = capsys.readouterr().out
    assert f"#MasterAddr\t{s.role_manager.master_ha_addr}" in out and "#CommitLogMaxOffset" in out
    view = RemoteClusterView(g.namesrv.address)
    try:
        rows = {b["brokerId"]: b for b in view.overview()["brokers"]}
    finally:
        view.close()
    assert rows[0]["inSyncSlaves"] == 1
    assert rows[1]["lagBytes"] == 0 and rows[1]["lagMillis"] == 0
    text = collect(m)
    assert "rmqd_ha_slave_lag_bytes{" in text and "rmqd_ha_in_sync_slaves{" in text
    assert "rmqd_ha_master_connected{" in collect(s)


def test_sync_master_answers_12_when_the_slave_does_not_acknowledge(group_factory):
    """The send lane's SYNC_MASTER answer: a slave connected and in sync that stops acknowledging gets the send
    answered FLUSH_SLAVE_TIMEOUT after slaveTimeout, with the stored message's id."""
    from tests.replication.ha_peers import FakeSlave

    g = group_factory(master_conf={"brokerRole": "SYNC_MASTER", "slaveTimeout": "300"}, start=False)
    m = g.start_master()
    fake = FakeSlave(m.config.haListenPort)
    try:
        fake.report(m.store.commitlog_max_offset())
        wait_until(lambda: m.replication.ha.connection_count() == 1, 5, what="fake slave connected")
        c = g.client(m)
        t0 = time.monotonic()
        r = send(c, "SilentSlave", b"s" * 100, "s1")
        assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT and r.ext_fields["msgId"]
        assert 0.25 < time.monotonic() - t0 < 5
        assert m.store.get_max_offset("SilentSlave", 0) == 1                    # stored all the same
    finally:
        fake.close()
