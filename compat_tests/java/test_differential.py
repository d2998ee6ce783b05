"""Differential tests: the same requests to rmqd and to the real Java 4.9.8 broker (the session's
``reference_broker``: the kit's cluster, or the official image where Docker answers), normalised
answers compared (differential.py): raw remoting (diff_probes.py: ordinary requests on the same state
and bad input of every kind) and mqadmin output with volatile fields masked.

Every difference is either fixed in rmqd or listed in KNOWN with its reason; the documentation's
compatibility page (docs/compatibility.md) has the same table (test_every_known_difference_is_in_the_readme). An unlisted difference fails,
and so does a listed one that went away (the table must stay true).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import diff_probes
from differential import (GROUP, ONLINE_GROUP, TOPIC, addr_of, ask, config_values, diff_dicts, key_mask,
                          masked_json, parse_config_listing, prepare, wait_delay_delivered)
from javakit import REFERENCE_BROKER_PROPERTIES, SETUP_BUDGET

from rmqd.testing import EmbeddedServer

# ~120 probes of at most 5 s (20 s for the oversize ones) to each broker, then ~30 mqadmin runs in the shared JVM
pytestmark = pytest.mark.timeout(SETUP_BUDGET + 300)

README = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"     # the compatibility page

# Topics only rmqd has: the 5.x timer's wheel topic (TIMER_DELIVER_MS / TIMER_DELAY_SEC messages).
RMQD_OWN_TOPICS = {"rmq_sys_wheel_timer"}

# Property names only rmqd has (GET_BROKER_CONFIG 26, GET_NAMESRV_CONFIG 319): its own settings
# (busy polling, frame limit, 5.x compaction, tiered store and metrics, name-server broker expiry). Java's
# are all there.
RMQD_OWN_PROPERTIES = {
    "busyPollMicros", "serverMaxFrameLength", "compactionCqMappedFileSize", "compactionMappedFileSize",
    "compactionScheduleInternal", "compactionThreadNum", "enableCompaction", "maxOffsetMapSize",
    "metricsExporterType", "metricsLabel", "metricsPromExporterHost", "metricsPromExporterPort",
    "brokerExpiredMillis", "scanNotActiveBrokerInterval",
    # POP and the gRPC endpoint for 5.x clients (the 5.x broker's and proxy's names; popExecutorCapacity is rmqd's)
    "reviveQueueNum", "defaultMessageRequestMode", "popExecutorCapacity", "grpcServerPort",
    "minInvisibleTimeMillsForRecv", "grpcClientConsumerMaxLongPollingTimeoutMillis", "grpcClientIdleTimeMills",
    # the 5.x proxy's gRPC request limits (rmqd.grpc.validate, rmqd.grpc.message_types); 5.x recall
    "grpcClientConsumerMinLongPollingTimeoutMillis", "maxInvisibleTimeMills", "enableTopicMessageTypeCheck",
    "enableMessageBodyEmptyCheck", "maxUserPropertySize", "userPropertyMaxNum", "maxMessageGroupSize",
    "maxDelayTimeMills", "maxTransactionRecoverySecond", "recallMessageEnable", "allowRecallWhenBrokerNotWriteable",
    # RocketMQ 5 controller mode, the broker side (5.x BrokerConfig / MessageStoreConfig names)
    "enableControllerMode", "controllerAddr", "controllerHeartBeatTimeoutMills", "brokerHeartbeatInterval",
    "syncBrokerMetadataPeriod", "checkSyncStateSetPeriod", "syncControllerMetadataPeriod", "brokerElectionPriority",
    "haMaxTimeSlaveNotCatchup", "allAckInSyncStateSet", "inSyncReplicas", "minInSyncReplicas", "storePathEpochFile",
    "storePathBrokerIdentity", "asyncLearner", "syncFromLastFile", "readUnCommitted",
    # the 5.x tiered store's keys (Java 5.x's tieredstore MessageStoreConfig names)
    "commitLogRollingInterval",
    "commitLogRollingMinimumSize",
    "objectStoreAccessKey",
    "objectStoreBucket",
    "objectStoreEndpoint",
    "objectStoreRegion",
    "objectStoreSecretKey",
    "tieredBackendServiceProvider",
    "tieredStorageLevel",
    "tieredStoreCommitLogMaxSize",
    "tieredStoreConsumeQueueMaxSize",
    "tieredStoreDeleteFileInterval",
    "tieredStoreDispatchInterval",
    "tieredStoreFilePath",
    "tieredStoreFileReservedTime",
    "tieredStoreGroupCommitCount",
    "tieredStoreGroupCommitSize",
    "tieredStoreGroupCommitTimeout",
    "tieredStoreIndexFileMaxHashSlotNum",
    "tieredStoreIndexFileMaxIndexNum",
    # 5.x NamesrvConfig: run a controller in the name server's process (docs/controller.md)
    "enableControllerInNamesrv",
    # 5.x NettyServerConfig: the address the name server (and a broker told so) binds
    "bindAddress",
    # 5.x BrokerConfig: recall, lite pull, server-side offset reset (docs/compatibility.md)
    "recallMessageEnable", "allowRecallWhenBrokerNotWriteable", "litePullMessageEnable", "useServerSideResetOffset",
    # the 5.x proxy's message-type check of gRPC sends
    "enableTopicMessageTypeCheck",
}

MISSING_FIELD = ("Java 4.9.8's header decoder swallows its own \"the custom field <x> is null\" and leaves the "
                 "field null: what follows depends on where the processor first uses it (the JVM's "
                 "NullPointerException text, another check failing first, or a success with a null value); "
                 "rmqd refuses the request with SYSTEM_ERROR and that message")
NUMBER_FORMAT = ("Java's fast-decoded headers (send, pull) fail with the NumberFormatException text, which rmqd "
                 "sends for every unparsable number; Java's other headers swallow the parse error, leave the "
                 "field null and answer the JVM's NullPointerException text")
FASTJSON = ("a body that is not the JSON expected: Java answers fastjson's parser exception text, rmqd a "
            "message of its own parser (same code)")

# probe name -> (the outcome fields that differ, the reason). Kept in step with docs/compatibility.md.
KNOWN: dict[str, tuple[set[str], str]] = {
    "name server: unknown request code": (
        {"code", "remark"}, "Java's name server leaves an unknown request unanswered (the client waits for its "
        "timeout); rmqd answers REQUEST_CODE_NOT_SUPPORTED as the Java broker does"),
    "send without a queue id": ({"remark"}, MISSING_FIELD),
    "pull without a queue offset": ({"code", "remark"}, MISSING_FIELD),
    "max offset without a queue id": ({"remark"}, MISSING_FIELD),
    "query offset without a group": ({"code", "remark", "ext"}, MISSING_FIELD),
    "kv put without a value": ({"code", "remark"}, MISSING_FIELD),
    "max offset with a non-numeric queue id": ({"remark"}, NUMBER_FORMAT),
    "query offset with an out-of-range queue id": ({"remark"}, NUMBER_FORMAT),
    "heartbeat with a body that is not JSON": ({"remark"}, FASTJSON),
    "create a group with a body of the wrong shape": ({"remark"}, FASTJSON),
    "lock batch with a body of the wrong shape": ({"remark"}, FASTJSON),
    "heartbeat": ({"ext"}, "rmqd answers as 5.x does: IS_SUPPORT_HEART_BEAT_V2 and IS_SUB_CHANGE (heartbeat v2), "
                  "which 4.x clients ignore"),
    "reset offset of an unknown topic": ({"code", "remark"}, "rmqd resets offsets on the broker as 5.x does "
                                         "(useServerSideResetOffset, on by default; off gives 4.9.8's answer)"),
}


def _own_properties_removed(outcome: dict) -> dict:
    body = outcome.get("body")
    if isinstance(body, dict) and "<properties>" in body:
        outcome = dict(outcome, body={"<properties>": [k for k in body["<properties>"]
                                                       if k not in RMQD_OWN_PROPERTIES]})
    return outcome


@pytest.fixture(scope="module")
def pair(reference_broker, tmp_path_factory):
    """(rmqd, reference) in the same state (differential.prepare), the online consumers kept open; rmqd
    runs with the reference's extra settings (javakit.REFERENCE_BROKER_PROPERTIES)."""
    ours = EmbeddedServer(store_dir=str(tmp_path_factory.mktemp("differential")),
                          broker_properties=REFERENCE_BROKER_PROPERTIES).start()
    online = [prepare(ours.broker_addr), prepare(reference_broker.broker_addr)]
    for server in (ours, reference_broker):
        wait_delay_delivered(server.broker_addr)
    try:
        yield ours, reference_broker
    finally:
        for c in online:
            c.close()
        ours.stop()


def test_raw_requests_are_answered_like_the_java_broker(pair):
    ours, theirs = pair
    unexplained, vanished = {}, []
    for probe in diff_probes.ALL:
        a = _own_properties_removed(ask(probe, addr_of(probe.target, ours.namesrv_addr, ours.broker_addr)).as_dict())
        b = ask(probe, addr_of(probe.target, theirs.namesrv_addr, theirs.broker_addr)).as_dict()
        differing = {k for k in a if a[k] != b[k]}
        expected = KNOWN.get(probe.name, (set(), ""))[0]
        if differing != expected:
            if differing:
                unexplained[probe.name] = diff_dicts(a, b)
            else:
                vanished.append(probe.name)
    assert not unexplained, "differences not in KNOWN:\n" + "\n".join(
        f"{name}:\n    " + "\n    ".join(lines) for name, lines in unexplained.items())
    assert not vanished, f"listed differences that are gone (update KNOWN and docs/compatibility.md): {vanished}"


def test_every_known_difference_is_in_the_readme():
    section = README.read_text()
    missing = [name for name in KNOWN if f"| {name} |" not in section]
    assert not missing, f"docs/compatibility.md's table lacks: {missing}"
    own = [p for p in sorted(RMQD_OWN_PROPERTIES | RMQD_OWN_TOPICS) if f"`{p}`" not in section]
    assert not own, f"docs/compatibility.md does not name rmqd's own properties: {own}"
    values = [p for p in sorted(KNOWN_CONFIG_VALUES) if f"`{p}`" not in section]
    assert not values, f"docs/compatibility.md's table lacks the property values that differ: {values}"
    compared = [c for c in mqadmin_sub_commands_compared() if f"`{c}`" not in section]
    assert not compared, f"docs/compatibility.md does not name the mqadmin sub-commands the differential compares: {compared}"


# ---------------------------------------------------------------------------------------------- mqadmin
_VOLATILE = [
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}:\d+\b"), "<addr>"),
    (re.compile(r"\b[0-9A-F]{32,}\b"), "<msgid>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d[ T#]\d\d:\d\d:\d\d(?:[.,:]\d+)?\b"), "<time>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
    (re.compile(r"[ \t]+"), " "),
]


def masked(text: str) -> list[str]:
    """mqadmin output with addresses, ids, times and every number masked, blanks squeezed."""
    out = []
    for line in text.replace("]MessageTrack [", "]\nMessageTrack [").splitlines():
        for rx, repl in _VOLATILE:
            line = rx.sub(repl, line)
        if line.strip():
            out.append(line.strip())
    return out


# Names the Java 4.9.8 broker creates itself (TopicConfigManager, the transaction bridge, trace).
JAVA_SYSTEM_TOPICS = {"SCHEDULE_TOPIC_XXXX", "TBW102", "BenchmarkTest", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
                      "DefaultCluster", "DefaultCluster_REPLY_TOPIC", "broker-a", "TRANS_CHECK_MAX_TIME_TOPIC"}
# Created by each broker's transaction checker in its first round (60 s after start): present or not by age.
AGE_DEPENDENT_TOPICS = {"RMQ_SYS_TRANS_HALF_TOPIC"}


def _ours(name: str) -> bool:
    """A topic or group of this module's state, or one the broker made itself (not another test's)."""
    return ("Diff" in name or name in JAVA_SYSTEM_TOPICS or name.startswith(("RMQ_SYS_", "rmq_sys_"))) \
        and name not in AGE_DEPENDENT_TOPICS


def scoped(args: tuple, text: str, rmqd: bool) -> str:
    """The lines of a listing that belong to this module's state: the reference broker is shared with the
    session's other Java tests, which leave their own topics and groups (rmqd's own topics are dropped too)."""
    if args[0] == "topicList":
        col = 1 if "-c" in args else 0
        keep = [ln for ln in text.splitlines() if ln.startswith("#") or (len(ln.split()) > col and _ours(
            ln.split()[col]) and not (rmqd and ln.split()[col] in RMQD_OWN_TOPICS))]
        return "\n".join(keep)
    if args[0] == "brokerConsumeStats":
        return "\n".join(ln for ln in text.splitlines() if ln.startswith(("#", "Diff Total")) or "Diff" in ln.split()[:2])
    return text


def _keys(text: str) -> set[str]:
    """The names of "key : value" lines, data in names masked (differential.key_mask)."""
    return {key_mask(ln.split(":", 1)[0].strip()) for ln in text.splitlines() if ":" in ln}


# GET_BROKER_CONFIG / GET_NAMESRV_CONFIG values that differ from Java's after masking (differential.config_value):
# property -> reason. Kept in step with docs/compatibility.md.
POOL_SIZE = ("rmqd's own executor size (Python threads: more do not add throughput under the GIL); a broker.conf "
             "value is honoured")
KNOWN_CONFIG_VALUES: dict[str, str] = {
    "adminBrokerThreadPoolNums": POOL_SIZE,
    "clientManageThreadPoolNums": POOL_SIZE,
    "consumerManageThreadPoolNums": POOL_SIZE,
    "rocketmqHome": "rmqd has no installation directory: it reports $ROCKETMQ_HOME (empty when unset); Java its own",
}


def _config(text: str) -> dict[str, str]:
    props = parse_config_listing(text)
    return config_values({k: v for k, v in props.items() if k not in RMQD_OWN_PROPERTIES})


def _exported(name: str, path: Path) -> object:
    """An exported JSON file, normalised: configs.json's broker properties masked as GET_BROKER_CONFIG's
    values are, everything else (and metrics.json) with numbers masked (differential.masked_json)."""
    data = json.loads(path.read_text())
    if name == "configs.json":
        brokers = {b: config_values(props) for b, props in data.pop("brokerConfigs").items()}
        return {"brokerConfigs": brokers, **masked_json(data)}
    return masked_json(data)


# sub-command -> how to compare: "lines" (masked output equal), "keys" (the "key : value" names equal),
# "set" (masked lines equal as sets: row order is the broker's hash order), "config" (``key = value`` listing:
# the same keys, values equal after masking but for KNOWN_CONFIG_VALUES), "file:<name>" (the sub-command writes
# <name> into {dir}: the same keys, masked values).
MQADMIN_CASES = [
    (("topicRoute", "-t", TOPIC), "lines"),
    (("topicStatus", "-t", TOPIC), "lines"),
    (("topicClusterList", "-t", TOPIC), "lines"),
    (("getConsumerConfig", "-g", GROUP), "lines"),
    (("consumerProgress", "-g", GROUP), "lines"),
    (("queryMsgByKey", "-t", TOPIC, "-k", "dk1"), "lines"),
    (("queryMsgByOffset", "-t", TOPIC, "-b", "broker-a", "-i", "0", "-o", "0"), "set"),
    (("printMsgByQueue", "-t", TOPIC, "-a", "broker-a", "-i", "0", "-p", "true"), "lines"),
    (("queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-c", "2"), "lines"),
    (("clusterList",), "lines"),
    (("brokerStatus", "-b", "{broker}"), "keys"),
    (("getBrokerConfig", "-b", "{broker}"), "config"),
    (("statsAll", "-t", TOPIC), "set"),
    (("topicRoute", "-t", "DiffNoSuchTopic"), "lines"),
    (("consumerConnection", "-g", "DiffNoSuchGroup"), "lines"),
    (("queryMsgByUniqueKey", "-t", TOPIC, "-i", "0A0B0C0D0E0F10111213141516171819"), "lines"),
    (("topicList",), "set"),
    (("topicList", "-c"), "set"),
    (("consumerConnection", "-g", ONLINE_GROUP), "lines"),
    (("consumerProgress", "-g", ONLINE_GROUP), "lines"),
    (("producerConnection", "-g", "DiffPG", "-t", TOPIC), "lines"),
    (("brokerConsumeStats", "-b", "{broker}"), "set"),
    (("getNamesrvConfig",), "keys"),
    (("allocateMQ", "-t", TOPIC, "-i", "10.0.0.1,10.0.0.2"), "lines"),
    (("getConsumerConfig", "-g", "DiffNoSuchGroup"), "lines"),
    (("queryMsgByKey", "-t", TOPIC, "-k", "nobody-sent-this"), "lines"),
    # issue 21
    (("deleteExpiredCommitLog", "-c", "DefaultCluster"), "lines"),      # 72 h retention on both: deletes nothing
    (("exportConfigs", "-c", "DefaultCluster", "-f", "{dir}"), "file:configs.json"),
    (("exportMetrics", "-c", "DefaultCluster", "-f", "{dir}"), "file:metrics.json"),
]


def mqadmin_sub_commands_compared() -> list[str]:
    """The sub-commands this module compares (named in docs/compatibility.md)."""
    return sorted({args[0] for args, _how in MQADMIN_CASES})


def test_mqadmin_prints_the_same_as_for_the_java_broker(pair, mqadmin_shell, tmp_path):
    ours, theirs = pair
    mismatches = {}
    for n, (args, how) in enumerate(MQADMIN_CASES):
        outs = []
        for server in (ours, theirs):
            out_dir = tmp_path / f"{n}-{'rmqd' if server is ours else 'java'}"
            argv = [a.replace("{broker}", server.broker_addr).replace("{dir}", str(out_dir)) for a in args]
            res = mqadmin_shell.run(*argv, "-n", server.namesrv_addr, timeout=60)
            assert not res.timed_out, argv
            if how.startswith("file:"):
                name = how.split(":", 1)[1]
                assert (out_dir / name).is_file(), (argv, res.stdout[-2000:])
                outs.append(_exported(name, out_dir / name))
            else:
                outs.append(scoped(args, res.stdout, rmqd=server is ours))
        if how == "config":
            a, b = _config(outs[0]), _config(outs[1])
            differing = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
            if differing != set(KNOWN_CONFIG_VALUES):
                mismatches[" ".join(args)] = ({k: a.get(k) for k in differing ^ set(KNOWN_CONFIG_VALUES)},
                                              {k: b.get(k) for k in differing ^ set(KNOWN_CONFIG_VALUES)})
            continue
        if how == "keys":
            a, b = _keys(outs[0]), _keys(outs[1])
            if args[0] == "getNamesrvConfig":
                a -= RMQD_OWN_PROPERTIES
        elif how == "set":
            a, b = set(masked(outs[0])), set(masked(outs[1]))
        elif how.startswith("file:"):
            a, b = outs
        else:
            a, b = masked(outs[0]), masked(outs[1])
        if a != b:
            mismatches[" ".join(args)] = (a, b)
    assert not mismatches, "\n".join(f"{k}:\n  rmqd {v[0]}\n  java {v[1]}" for k, v in mismatches.items())
