"""The kit's mqadmin against rmqd, sub-command by sub-command, each with its effect checked (issue 12).

One embedded rmqd for the module; the sub-commands run in the session's mqadmin JVM (``mqadmin_shell``:
mqadmin's own entry point, one JVM for all). Sub-commands also run elsewhere: the ACL ones in test_acl.py;
queryCq, exportConfigs, exportMetrics and deleteExpiredCommitLog (compared with the Java broker too) in
test_mqadmin_parity.py. ``test_every_sub_command_is_swept`` reads which sub-commands those modules run from
their sources and checks the list against mqadmin's own.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from differential import heartbeat_body
from javakit import SETUP_BUDGET, JavaProcess, require_kit, work_dir
from scenarios import wait_for

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.store.message import MessageToStore
from rmqd.testing import EmbeddedServer

T, T2, G, G2 = "SweepTopic", "SweepGone", "SweepGroup", "SweepClone"
HERE = Path(__file__).resolve().parent
# Modules that run mqadmin sub-commands: calls adm("x", ...), mqadmin("x", ...), <shell>.run("x", ...), and
# test_differential's MQADMIN_CASES.
SWEEPING_MODULES = ("test_mqadmin_sweep.py", "test_mqadmin_parity.py", "test_acl.py", "test_differential.py",
                    "test_consumer_lifecycle.py", "test_java_kit.py")

# each sub-command waits at most 60 s (+30 s for the shell); the online-clients test waits up to 90 s for its JVM
pytestmark = pytest.mark.timeout(SETUP_BUDGET + 300)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_kit()
    s = EmbeddedServer(store_dir=str(tmp_path_factory.mktemp("sweep"))).start()
    yield s
    s.stop()


def make_adm(server, mqadmin_shell):
    def run(*args: str, ok: bool = True, endless: bool = False) -> str:
        """``endless``: a sub-command that repeats until killed (clusterRT): stopped after 8 s (its output then
        ends with the InterruptedException of that stop)."""
        res = mqadmin_shell.run(*args, "-n", server.namesrv_addr, timeout=8 if endless else 60)
        assert endless or not res.timed_out, args
        if ok and not endless:
            assert "Exception" not in res.stdout, res.stdout[-3000:]
        return res.stdout
    return run


@pytest.fixture(scope="module")
def adm(server, mqadmin_shell):
    return make_adm(server, mqadmin_shell)


def _offsets(server, group: str, topic: str) -> dict[int, int]:
    out = {}
    with BlockingClient(server.broker_addr) as c:
        for q in range(4):
            r = c.invoke(new_request(14, {"consumerGroup": group, "topic": topic, "queueId": str(q)}))
            out[q] = int(r.ext_fields["offset"]) if r.code == 0 else -1
    return out


def _rows(text: str, first: str) -> list[list[str]]:
    return [ln.split() for ln in text.splitlines() if ln.startswith(first)]


def test_topics_and_routes(server, adm):
    adm("updateTopic", "-c", "DefaultCluster", "-t", T, "-r", "4", "-w", "4")
    adm("updateTopic", "-b", server.broker_addr, "-t", T2, "-r", "2", "-w", "2")
    assert server.broker.topic_config_manager.get(T2).read_queue_nums == 2
    assert T in adm("topicList").split()
    route = adm("topicRoute", "-t", T).replace(" ", "")
    assert '"readQueueNums":4' in route and '"brokerName":"broker-a"' in route
    assert len(_rows(adm("topicStatus", "-t", T), "broker-a")) == 4
    assert _rows(adm("topicClusterList", "-t", T), "DefaultCluster") == [["DefaultCluster"]]
    adm("updateTopicPerm", "-c", "DefaultCluster", "-t", T, "-p", "4")
    assert server.broker.topic_config_manager.get(T).perm == 4
    assert '"perm":4' in adm("topicRoute", "-t", T).replace(" ", "")
    adm("updateTopicPerm", "-c", "DefaultCluster", "-t", T, "-p", "6")
    assert '"perm":6' in adm("topicRoute", "-t", T).replace(" ", "")
    adm("deleteTopic", "-c", "DefaultCluster", "-t", T2)
    assert T2 not in adm("topicList").split() and server.broker.topic_config_manager.get(T2) is None
    adm("updateOrderConf", "-t", T, "-v", "broker-a:4", "-m", "put")
    assert "broker-a:4" in adm("updateOrderConf", "-t", T, "-m", "get")
    adm("updateOrderConf", "-t", T, "-m", "delete")
    assert "broker-a:4" not in adm("updateOrderConf", "-t", T, "-m", "get", ok=False)
    alloc = adm("allocateMQ", "-t", T, "-i", "127.0.0.1,127.0.0.2").replace(" ", "")
    assert alloc.count('"queueId"') == 4 and '"127.0.0.1"' in alloc and '"127.0.0.2"' in alloc


def test_messages_sent_queried_and_printed(server, adm):
    out = adm("sendMessage", "-t", T, "-p", "hello-sweep", "-k", "sweep-key", "-c", "TagS", "-b", "broker-a",
              "-i", "1")
    assert "SEND_OK" in out
    (uniq,) = re.findall(r"\b[0-9A-F]{32,}\b", out)      # 56 digits when the client's address is IPv6
    for i in range(5):
        assert "SEND_OK" in adm("sendMessage", "-t", T, "-p", f"more-{i}", "-k", f"k{i}", "-b", "broker-a",
                                "-i", str(i % 4))
    assert uniq in wait_for(lambda: (o if uniq in (o := adm("queryMsgByKey", "-t", T, "-k", "sweep-key")) else None),
                            20, interval=0.5, what="queryMsgByKey finds the message")
    by_unique = adm("queryMsgByUniqueKey", "-t", T, "-i", uniq)
    assert "sweep-key" in by_unique and "TagS" in by_unique
    assert "hello-sweep" in by_unique or "Message Body Path" in by_unique
    by_offset = adm("queryMsgByOffset", "-t", T, "-b", "broker-a", "-i", "1", "-o", "0")
    assert "sweep-key" in by_offset
    host, port = re.search(r"Store Host:\s*([\d.]+):(\d+)", by_unique).groups()
    phys = int(re.search(r"CommitLog Offset:\s*(\d+)", by_unique).group(1))
    offset_id = "".join("%02X" % int(b) for b in host.split(".")) + "%08X%016X" % (int(port), phys)
    assert "sweep-key" in adm("queryMsgById", "-i", offset_id)
    printed = adm("printMsg", "-t", T, "-d", "true")
    assert "hello-sweep" in printed and "more-4" in printed
    by_queue = adm("printMsgByQueue", "-t", T, "-a", "broker-a", "-i", "1", "-p", "true", "-d", "true")
    assert "hello-sweep" in by_queue and "more-1" in by_queue and "more-2" not in by_queue
    consumed = adm("consumeMessage", "-t", T, "-b", "broker-a", "-i", "1", "-o", "0", "-c", "2")
    assert "BODY: hello-sweep" in consumed and "BODY: more-1" in consumed and "Consume ok" in consumed
    rt = adm("checkMsgSendRT", "-t", T, "-a", "5", "-s", "64")
    assert len([r for r in _rows(rt, "broker-a") if "true" in r]) == 5, rt
    status = adm("sendMsgStatus", "-b", "broker-a", "-c", "3", "-s", "64")
    assert status.count("SEND_OK") == 3, status
    # statsAll: #InMsg24Hour (TOPIC_PUT_NUMS of the day) counts every message stored in the topic
    stored = sum(server.broker.store.get_max_offset(T, q) for q in range(4))
    assert stored >= 11
    rows = _rows(adm("statsAll", "-t", T), T)
    assert rows and all(int(r[-2]) == stored for r in rows), (stored, rows)


def test_groups_and_offsets(server, adm):
    adm("updateSubGroup", "-c", "DefaultCluster", "-g", G, "-r", "3")
    assert server.broker.subscription_group_manager.table[G].retry_max_times == 3
    adm("updateSubGroup", "-b", server.broker_addr, "-g", "SweepDoomed")
    config = adm("getConsumerConfig", "-g", G)
    assert G in config and re.search(r"retryMaxTimes\s+=\s+3\b", config), config
    adm("deleteSubGroup", "-c", "DefaultCluster", "-g", "SweepDoomed")
    assert "SweepDoomed" not in server.broker.subscription_group_manager.table
    with BlockingClient(server.broker_addr) as c:          # the group has consumed one message of each queue
        for q in range(4):
            assert c.invoke(new_request(15, {"consumerGroup": G, "topic": T, "queueId": str(q),
                                             "commitOffset": "1"})).code == 0
    # a group that never had a consumer has no %RETRY% topic: Java's mqadmin fails the same way on either broker
    progress = adm("consumerProgress", "-g", G, ok=False)
    assert f"No topic route info in name server for the topic: %RETRY%{G}" in progress
    with BlockingClient(server.broker_addr) as c:      # a consumer of the group came online once
        assert c.invoke(new_request(34, None, heartbeat_body(G, "127.0.0.1@sweep", T))).code == 0
    assert T in adm("consumerProgress", "-g", G)
    adm("cloneGroupOffset", "-s", G, "-d", G2, "-t", T, "-o", "true")
    assert _offsets(server, G2, T)[1] == 1
    adm("resetOffsetByTime", "-g", G, "-t", T, "-s", "now", "-f", "true")
    maxes = {q: server.broker.store.get_max_offset(T, q) for q in range(4)}
    assert _offsets(server, G, T) == maxes
    with BlockingClient(server.broker_addr) as c:
        assert c.invoke(new_request(15, {"consumerGroup": G2, "topic": T, "queueId": "0",
                                         "commitOffset": "0"})).code == 0
    # offsets are reset on the broker, as 5.x does (useServerSideResetOffset): a group it does not know is refused
    # (cloneGroupOffset made offsets, not the group), where a 4.9.8 broker let mqadmin set the offsets itself
    refused = adm("skipAccumulatedMessage", "-g", G2, "-t", T, "-f", "true", ok=False)
    assert f"CODE: 26  DESC: Group {G2} does not exist" in refused, refused[-2000:]
    adm("updateSubGroup", "-b", server.broker_addr, "-g", G2)
    adm("skipAccumulatedMessage", "-g", G2, "-t", T, "-f", "true")
    assert _offsets(server, G2, T) == maxes
    rows = _rows(adm("brokerConsumeStats", "-b", server.broker_addr), T)
    assert {(r[1], int(r[3])) for r in rows} >= {(G, q) for q in range(4)}


def test_online_clients_trace_and_monitoring(server, adm):
    """consumerConnection / consumerStatus / producerConnection / producer / consumerProgress see live Java
    clients; queryMsgTraceById finds the traced send; startMonitoring brings its monitor consumer online."""
    with JavaProcess("OnlineClients", server.namesrv_addr, T, "SweepOnlineCG", "SweepOnlinePG", "120") as clients:
        ready = clients.wait_for(lambda ev: [e for e in ev if e.get("op") == "ready"], 90, "online clients")[0]
        conn = adm("consumerConnection", "-g", "SweepOnlineCG")
        assert "JAVA" in conn and "CONSUME_PASSIVELY" in conn and T in conn and "CLUSTERING" in conn
        status = adm("consumerStatus", "-g", "SweepOnlineCG")
        assert "V4_9_8" in status and "Same subscription in the same group of consumer" in status, status
        (info_file,) = re.findall(r"\s(\d{13}/\S+)\s*$", status, re.M)      # written into the working dir
        assert T in (Path(work_dir()) / info_file).read_text()
        pconn = adm("producerConnection", "-g", "SweepOnlinePG", "-t", T)
        assert "JAVA" in pconn and "V4_9_8" in pconn
        def progress_of_4_queues():
            out = adm("consumerProgress", "-g", "SweepOnlineCG", ok=False)   # offsets appear once committed
            return out if out.count("broker-a") >= 4 else None
        progress = wait_for(progress_of_4_queues, 30, interval=1.0, what="consumerProgress lists the 4 queues")
        assert T in progress
        assert "SweepOnlinePG" in adm("producer", "-b", server.broker_addr)
        msg_id = ready["tracedMsgId"]
        trace = wait_for(lambda: (o if "Pub" in (o := adm("queryMsgTraceById", "-i", msg_id)) else None),
                         30, interval=1.0, what="the send's trace")
        assert "SweepOnlinePG" in trace
    adm("startMonitoring")
    wait_for(lambda: server.broker.consumer_manager.get("__MONITOR_CONSUMER") is not None, 30, interval=0.5,
             what="startMonitoring's consumer online")


def test_broker_namesrv_and_cluster_commands(server, adm, tmp_path):
    rows = _rows(adm("clusterList"), "DefaultCluster")
    assert rows and rows[0][1] == "broker-a" and rows[0][3] == server.broker_addr
    assert "broker-a" in adm("clusterList", "-m")
    assert "SEND_OK" in adm("sendMessage", "-t", T, "-p", "status-probe", "-b", "broker-a", "-i", "0")
    store = server.broker.store
    status = dict((k.strip(), v.strip()) for k, v in (ln.split(":", 1) for ln in
                                                     adm("brokerStatus", "-b", server.broker_addr).splitlines()
                                                     if ":" in ln))
    assert int(status["pageCacheLockTimeMills"]) >= 0 and status["remainTransientStoreBufferNumbs"] == str(2**31 - 1)
    # computed figures, not placeholders
    assert int(status["commitLogMaxOffset"]) == store.commitlog_max_offset() > 0
    assert int(status["commitLogMinOffset"]) == store.commitlog_min_offset() == 0
    puts = int(status["putMessageTimesTotal"])
    assert puts >= 1 and int(status["msgPutTotalTodayNow"]) == puts
    assert int(status["putMessageSizeTotal"]) > 0 and float(status["putMessageAverageSize"]) > 0
    assert 0 < float(status["commitLogDiskRatio"]) < 1
    assert int(status["earliestMessageTimeStamp"]) > 1_600_000_000_000
    assert int(status["startAcceptSendRequestTimeStamp"]) > 1_600_000_000_000
    assert re.fullmatch(r"\[ \d+ days, \d+ hours, \d+ minutes, \d+ seconds \]", status["runtime"])
    assert re.fullmatch(r"Total : [\d.]+ [KMGTPE]iB, Free : [\d.]+ [KMGTPE]iB\.", status["commitLogDirCapacity"])
    adm("updateBrokerConfig", "-b", server.broker_addr, "-k", "maxMessageSize", "-v", "4194305")
    assert re.search(r"maxMessageSize\s*=\s*4194305", adm("getBrokerConfig", "-b", server.broker_addr))
    assert server.broker.config.maxMessageSize == 4194305

    def kv() -> tuple:
        with BlockingClient(server.namesrv_addr) as c:
            r = c.invoke(new_request(101, {"namespace": "SweepNs", "key": "k1"}))      # GET_KV_CONFIG
            return r.code, (r.ext_fields or {}).get("value")
    adm("updateKvConfig", "-s", "SweepNs", "-k", "k1", "-v", "v1")
    assert kv() == (0, "v1")
    adm("deleteKvConfig", "-s", "SweepNs", "-k", "k1")
    assert kv()[0] == 22
    adm("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert re.search(r"orderMessageEnable\s*=\s*true", adm("getNamesrvConfig"))
    adm("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false")
    stats = adm("statsAll", "-t", T)
    assert stats.startswith("#Topic") and T in stats
    adm("wipeWritePerm", "-b", "broker-a")
    assert '"perm":4' in adm("topicRoute", "-t", T).replace(" ", "")
    adm("addWritePerm", "-b", "broker-a")
    assert '"perm":6' in adm("topicRoute", "-t", T).replace(" ", "")
    out = tmp_path / "meta"
    adm("exportMetadata", "-c", "DefaultCluster", "-f", str(out))
    exported = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert T in exported and G in exported
    rt = adm("clusterRT", "-a", "3", "-s", "64", "-c", "DefaultCluster", "-p", "false", "-i", "1", endless=True)
    row = _rows(rt, "DefaultCluster")
    assert row and row[0][1] == "broker-a", rt


def test_expired_and_unused_consume_queues_are_cleaned(mqadmin_shell, tmp_path):
    """deleteExpiredCommitLog, then cleanExpiredCQ drops the queues whose messages retention removed, and
    cleanUnusedTopic the queues of a topic that is not configured (a broker of its own with 64 KiB
    CommitLog files and no retention time)."""
    with EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties=dict(
            mapedFileSizeCommitLog=64 * 1024, fileReservedTime=0, deleteWhen="99")) as small:
        adm = make_adm(small, mqadmin_shell)
        store = small.broker.store
        adm("updateTopic", "-b", small.broker_addr, "-t", "SweepExpired", "-r", "2", "-w", "2")
        adm("updateTopic", "-b", small.broker_addr, "-t", "SweepFiller", "-r", "1", "-w", "1")
        for i in range(40):
            assert store.put_message(MessageToStore.create("SweepExpired", i % 2, b"e" * 1000)).ok
        for i in range(200):                                   # rolls the CommitLog past SweepExpired's files
            assert store.put_message(MessageToStore.create("SweepFiller", 0, b"f" * 1000)).ok
        assert store.put_message(MessageToStore.create("SweepOrphan", 0, b"o")).ok      # no topic config
        assert {"SweepExpired", "SweepFiller", "SweepOrphan"} <= store.topics()
        assert adm("deleteExpiredCommitLog", "-c", "DefaultCluster").strip() == "success"
        assert store.commitlog_min_offset() > 0
        assert "success" in adm("cleanExpiredCQ", "-c", "DefaultCluster")
        assert "SweepExpired" not in store.topics()                       # every message of it is gone
        assert {"SweepFiller", "SweepOrphan"} <= store.topics()           # live messages: kept
        status = _rows(adm("topicStatus", "-t", "SweepExpired"), "broker-a")
        assert [(r[1], r[2], r[3]) for r in status] == [("0", "0", "0"), ("1", "0", "0")], status
        assert "success" in adm("cleanUnusedTopic", "-c", "DefaultCluster")
        assert "SweepOrphan" not in store.topics() and "SweepFiller" in store.topics()
        cq_dir = Path(store.config.consume_queue_dir)
        assert not (cq_dir / "SweepOrphan").exists() and not (cq_dir / "SweepExpired").exists()


def _sub_commands_run_by(source: str) -> set[str]:
    """The first string argument of every adm(...) / mqadmin(...) / x.run(...) call, and the first element
    of each MQADMIN_CASES entry, in a module's source."""
    found = set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            f = node.func
            if (isinstance(f, ast.Name) and f.id in ("adm", "mqadmin")) or \
                    (isinstance(f, ast.Attribute) and f.attr == "run"):
                found.add(node.args[0].value)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "MQADMIN_CASES"
                                                for t in node.targets):
            for case in node.value.elts:
                found.add(case.elts[0].elts[0].value)
    return found


def test_every_sub_command_is_swept(mqadmin_shell):
    """The 4.9.8 mqadmin's own list of sub-commands, against what the Java test modules run (read from their
    sources, so the check does not depend on which tests ran before it)."""
    listed = set(re.findall(r"^\s{3}(\w+)\s", mqadmin_shell.run().stdout, re.M))
    assert len(listed) == 56, listed
    covered = set()
    for name in SWEEPING_MODULES:
        covered |= _sub_commands_run_by((HERE / name).read_text())
    assert listed - covered == set()
