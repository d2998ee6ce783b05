"""JSON bodies compared byte for byte with what the Java broker / name server (fastjson) write.

Expected texts are written by hand from the 4.9.8 beans: fastjson sorts bean fields, writes
MessageQueue map keys as JSON objects, integer map keys unquoted, doubles as ``0.0``.
"""
from __future__ import annotations

import orjson
import pytest

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request

from tests.admin.conftest import commit_offset, heartbeat_consumer


def _body(addr: str, code: int, ext: dict, version: int | None = None) -> bytes:
    c = BlockingClient(addr)
    try:
        req = new_request(code, ext)
        if version is not None:
            req.version = version
        r = c.invoke(req)
        assert r.code == 0, r.remark
        return bytes(r.body_bytes())
    finally:
        c.close()


def _create(admin, server, topic: str, queues: int) -> None:
    admin("updateTopic", "-b", server.broker_addr, "-t", topic, "-r", str(queues), "-w", str(queues))


def test_topic_stats_info_golden(server, admin):
    _create(admin, server, "GoldT1", 2)
    expected = ('{"offsetTable":{'
                '{"brokerName":"broker-a","queueId":0,"topic":"GoldT1"}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0},'
                '{"brokerName":"broker-a","queueId":1,"topic":"GoldT1"}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}}}')
    assert _body(server.broker_addr, 202, {"topic": "GoldT1"}).decode() == expected


def test_consume_stats_golden(server, admin, broker_client):
    _create(admin, server, "GoldT2", 1)
    commit_offset(broker_client, "GoldG2", "GoldT2", 0, 0)
    expected = ('{"consumeTps":0.0,"offsetTable":{'
                '{"brokerName":"broker-a","queueId":0,"topic":"GoldT2"}:{"brokerOffset":0,"consumerOffset":0,"lastTimestamp":0}}}')
    assert _body(server.broker_addr, 208, {"consumerGroup": "GoldG2", "topic": "GoldT2"}).decode() == expected


def test_cluster_info_golden(server):
    expected = ('{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"%s"},"brokerName":"broker-a",'
                '"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}' % server.broker_addr)
    assert _body(server.namesrv_addr, 106, {}).decode() == expected


def test_route_golden_old_and_new_clients(server, admin):
    _create(admin, server, "GoldT3", 4)
    old = ('{"brokerDatas":[{"brokerAddrs":{0:"%s"},"brokerName":"broker-a","cluster":"DefaultCluster"}],'
           '"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
           '"topicSysFlag":0,"writeQueueNums":4}]}' % server.broker_addr)
    assert _body(server.namesrv_addr, 105, {"topic": "GoldT3"}, version=373).decode() == old
    assert _body(server.namesrv_addr, 105, {"topic": "GoldT3"}, version=409).decode() == old.replace('{0:', '{"0":')


def test_consumer_connection_golden(server, admin):
    _create(admin, server, "GoldT4", 1)
    c = BlockingClient(server.broker_addr)
    try:
        heartbeat_consumer(c, "GoldG4", "GoldT4", "10.0.0.9@gold")
        local = "%s:%d" % c.sock.getsockname()
        expected = ('{"connectionSet":[{"clientAddr":"%s","clientId":"10.0.0.9@gold","language":"JAVA","version":409}],'
                    '"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",'
                    '"messageModel":"CLUSTERING","subscriptionTable":{"GoldT4":{"classFilterMode":false,"codeSet":[],'
                    '"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"GoldT4"}}}' % local)
        assert _body(server.broker_addr, 203, {"consumerGroup": "GoldG4"}).decode() == expected
    finally:
        c.close()


RUNTIME_KEYS = {
    "brokerVersionDesc", "brokerVersion", "msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning",
    "msgPutTotalTodayNow", "msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning", "msgGetTotalTodayNow",
    "sendThreadPoolQueueSize", "sendThreadPoolQueueCapacity", "pullThreadPoolQueueSize", "pullThreadPoolQueueCapacity",
    "queryThreadPoolQueueSize", "queryThreadPoolQueueCapacity", "EndTransactionQueueSize",
    "EndTransactionThreadPoolQueueCapacity", "dispatchBehindBytes", "pageCacheLockTimeMills",
    "sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills",
    "queryThreadPoolQueueHeadWaitTimeMills", "earliestMessageTimeStamp", "startAcceptSendRequestTimeStamp",
    "remainTransientStoreBufferNumbs", "remainHowManyDataToFlush", "commitLogDirCapacity", "bootTimestamp", "runtime",
    "putMessageEntireTimeMax", "putMessageTimesTotal", "putMessageFailedTimes", "putMessageSizeTotal",
    "putMessageDistributeTime", "putMessageAverageSize", "dispatchMaxBuffer", "getMessageEntireTimeMax", "putTps",
    "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps", "putLatency99", "putLatency999",
    "commitLogDiskRatio", "consumeQueueDiskRatio", "commitLogMinOffset", "commitLogMaxOffset",
}


def test_runtime_info_shape(server, admin):
    import re
    raw = _body(server.broker_addr, 28, {})
    assert raw.startswith(b'{"table":{') and b" " not in raw.split(b'"commitLogDirCapacity"')[0][:10]
    table = orjson.loads(raw)["table"]
    assert RUNTIME_KEYS <= set(table)
    assert all(isinstance(v, str) for v in table.values())
    assert table["brokerVersionDesc"] == "V4_9_8" and table["brokerVersion"] == "409"
    for k in ("putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps"):
        assert re.fullmatch(r"\d+\.\d\d \d+\.\d\d \d+\.\d\d", table[k]), k
    assert re.fullmatch(r"Total : [\d.]+ [KMGTPE]iB, Free : [\d.]+ [KMGTPE]iB\.", table["commitLogDirCapacity"])
    assert re.fullmatch(r"\[ \d+ days, \d+ hours, \d+ minutes, \d+ seconds \]", table["runtime"])
    assert 0.0 <= float(table["commitLogDiskRatio"]) <= 1.0
    assert table["sendThreadPoolQueueCapacity"] == str(server.broker.config.sendThreadPoolQueueCapacity)
    for k in ("msgPutTotalTodayNow", "commitLogMaxOffset", "sendThreadPoolQueueSize", "pageCacheLockTimeMills",
              "earliestMessageTimeStamp", "pullThreadPoolQueueHeadWaitTimeMills"):
        int(table[k])


def test_runtime_info_put_distribution_and_latencies(server, admin):
    """The put-latency buckets count every put; percentiles and get latency are real numbers."""
    import re
    from rmqd.processors.admin_broker import latency_percentile
    before = orjson.loads(_body(server.broker_addr, 28, {}))["table"]
    with BlockingClient(server.broker_addr) as c:
        for i in range(25):
            r = c.invoke(new_request(310, {"a": "PG", "b": "TBW102", "c": "TBW102", "d": "4", "e": "0", "f": "0",
                                           "g": "1", "h": "0", "i": ""}, b"m%d" % i))
            assert r.code == 0, r.remark
    table = orjson.loads(_body(server.broker_addr, 28, {}))["table"]

    def counts(t):
        pairs = re.findall(r"\[([^\]]+)\]:(\d+) ", t["putMessageDistributeTime"])
        assert [name for name, _ in pairs] == ["<=0ms", "0~10ms", "10~50ms", "50~100ms", "100~200ms", "200~500ms",
                                               "500ms~1s", "1~2s", "2~3s", "3~4s", "4~5s", "5~10s", "10s~"]
        return [int(n) for _, n in pairs]

    assert sum(counts(table)) - sum(counts(before)) == 25       # one count per put request
    assert int(table["putMessageTimesTotal"]) - int(before["putMessageTimesTotal"]) == 25
    p99, p999 = float(table["putLatency99"]), float(table["putLatency999"])
    assert 0.0 < p99 <= p999 <= float(table["putMessageEntireTimeMax"]) + 1
    assert int(table["getMessageEntireTimeMax"]) >= 0
    # The percentile reads the buckets, interpolating inside one and capped by the largest put.
    assert latency_percentile([99] + [0] * 12, 0.99, 5.0) == pytest.approx(98 / 99)
    assert latency_percentile([990, 0, 10] + [0] * 10, 0.999, 48.0) == pytest.approx(10 + 40 * 9 / 10)
    assert latency_percentile([990, 0, 10] + [0] * 10, 0.999, 30.0) == 30.0
    assert latency_percentile([0] * 13, 0.99, 0.0) == 0.0
