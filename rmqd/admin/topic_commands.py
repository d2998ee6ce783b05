"""``rmqd admin`` sub-commands of topics: create, update, delete, list, route, status, permissions, order conf,
queue allocation and configs.

Each ``fn(client, args)`` talks to the servers and prints like mqadmin; ``SPEC`` is their part of the
command table (:mod:`rmqd.admin.main`)."""
from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Mapping, Optional

from rmqd.admin.bodies import GroupList, TopicConfigTable, TopicStats
from rmqd.admin.client import AdminClient, AdminError, ORDER_TOPIC_CONFIG, broker_addr_of
from rmqd.admin.options import BROKER, CLUSTER, SpecTable, TOPIC, human_time, is_true
from rmqd.common.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX as RETRY
from rmqd.remoting.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from rmqd.admin.bodies import TopicConfig, TopicOffset


def _topic_config_text(tc: Mapping[str, object]) -> str:
    return ("TopicConfig [topicName={topicName}, readQueueNums={readQueueNums}, writeQueueNums={writeQueueNums}, "
            "perm={perm}, topicFilterType={topicFilterType}, topicSysFlag={topicSysFlag}, order={order}, "
            "attributes={attributes}]").format(**tc)


def _perm_text(perm: int) -> str:
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


def update_topic(c: AdminClient, a: argparse.Namespace) -> None:
    ext = {"topic": a.topic, "defaultTopic": "TBW102", "readQueueNums": a.readQueueNums,
           "writeQueueNums": a.writeQueueNums, "perm": a.perm, "topicFilterType": "SINGLE_TAG",
           "topicSysFlag": (1 if is_true(a.unit) else 0) | (2 if is_true(a.hasUnitSub) else 0),
           "order": is_true(a.order), "attributes": a.attributes}
    tc = {"topicName": a.topic, "readQueueNums": a.readQueueNums, "writeQueueNums": a.writeQueueNums,
          "perm": a.perm, "topicFilterType": "SINGLE_TAG", "topicSysFlag": ext["topicSysFlag"],
          "order": is_true(a.order), "attributes": a.attributes or "{}"}
    if a.brokerAddr:
        c.call(a.brokerAddr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
        print(f"create topic to {a.brokerAddr} success.")
        print(_topic_config_text(tc))
        return
    if not a.clusterName:
        raise AdminError(-1, "please set -b or -c")
    for addr in c.master_addrs(a.clusterName):
        c.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
        print(f"create topic to {addr} success.")
    if is_true(a.order):
        conf = ";".join(f"{name}:{a.writeQueueNums}" for name in c.broker_names(a.clusterName))
        c.namesrv(RequestCode.PUT_KV_CONFIG, {"namespace": ORDER_TOPIC_CONFIG, "key": a.topic, "value": conf})
        print(f"set cluster orderConf. isOrder={a.order}, orderConf=[{conf}]")
    print(_topic_config_text(tc))


def delete_topic(c: AdminClient, a: argparse.Namespace) -> None:
    for addr in c.master_addrs(a.clusterName):
        c.call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": a.topic})
    print(f"delete topic [{a.topic}] from cluster [{a.clusterName}] success.")
    for ns in c.namesrv_addrs:
        c.call(ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": a.topic})
    print(f"delete topic [{a.topic}] from NameServer success.")


def topic_list(c: AdminClient, a: argparse.Namespace) -> None:
    topics = c.topic_list()
    if not a.clusterModel:
        attrs = {}
        for table in _topic_configs(c).values():
            for name, tc in table.items():
                if tc.get("attributes"):
                    attrs[name] = tc["attributes"]
        for t in topics:
            print(f"{t}  {_attrs_text(attrs[t])}" if t in attrs else t)
        return
    info = c.cluster_info()
    print("%-20s  %-48s  %-48s" % ("#Cluster Name", "#Topic", "#Consumer Group"))
    for t in topics:
        if t.startswith(RETRY) or t.startswith(DLQ_GROUP_TOPIC_PREFIX):
            continue
        cluster = ""
        try:
            route = c.route(t)
            names = {bd["brokerName"] for bd in route.get("brokerDatas", [])}
            for cl, brokers in info.get("clusterAddrTable", {}).items():
                if names & set(brokers):
                    cluster = cl
            groups: list[str] = []
            for addr in c.route_masters(t).values():
                groups += c.answer(GroupList, addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": t})["groupList"]
        except AdminError:
            groups = []
        for g in sorted(set(groups)) or [""]:
            print("%-20s  %-48s  %-48s" % (cluster, t, g))


def topic_route(c: AdminClient, a: argparse.Namespace) -> None:
    print(json.dumps(c.route(a.topic), indent=2, sort_keys=True, default=str))


def topic_status(c: AdminClient, a: argparse.Namespace) -> None:
    attrs: dict[str, str] = {}
    for table in _topic_configs(c, a.topic).values():
        attrs.update((table.get(a.topic) or {}).get("attributes") or {})
    if attrs:
        print(f"#Attributes: {_attrs_text(attrs)}")
    print("%-32s  %-4s  %-20s  %-20s    %s" % ("#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"))
    rows: list[tuple[str, int, TopicOffset]] = []
    for name, addr in sorted(c.route_masters(a.topic).items()):
        offsets = c.answer(TopicStats, addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": a.topic})["offsetTable"]
        rows += [(mq.brokerName, mq.queueId, v) for mq, v in offsets.items()]
    for name, qid, v in sorted(rows, key=lambda r: (r[0], r[1])):
        print("%-32s  %-4d  %-20d  %-20d    %s" % (name, qid, v["minOffset"], v["maxOffset"],
                                                  human_time(v["lastUpdateTimestamp"])))


def topic_cluster_list(c: AdminClient, a: argparse.Namespace) -> None:
    names = {bd["brokerName"] for bd in c.route(a.topic).get("brokerDatas", [])}
    for cl, brokers in sorted(c.cluster_info().get("clusterAddrTable", {}).items()):
        if names & set(brokers):
            print(cl)


def update_topic_perm(c: AdminClient, a: argparse.Namespace) -> None:
    route = c.route(a.topic)
    masters = {bd["brokerName"]: broker_addr_of(bd, 0) for bd in route.get("brokerDatas", [])}
    targets = [a.brokerAddr] if a.brokerAddr else (c.master_addrs(a.clusterName) if a.clusterName else [])
    if not targets:
        raise AdminError(-1, "please set -b or -c")
    for addr in targets:
        qd = next((q for q in route.get("queueDatas", []) if masters.get(q["brokerName"]) == addr), None)
        if qd is None:
            print(f"topic[{a.topic}] not exist in broker[{addr}]")
            continue
        if qd["perm"] == a.perm:
            print("new perm equals to the old one!")
            continue
        c.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": a.topic, "defaultTopic": "TBW102", "readQueueNums": qd["readQueueNums"],
            "writeQueueNums": qd["writeQueueNums"], "perm": a.perm, "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": qd.get("topicSysFlag", 0), "order": False})
        print(f"update topic perm from {qd['perm']} to {a.perm} in {addr} success.")


def update_order_conf(c: AdminClient, a: argparse.Namespace) -> None:
    ext = {"namespace": ORDER_TOPIC_CONFIG, "key": a.topic}
    if a.method == "get":
        resp = c.namesrv(RequestCode.GET_KV_CONFIG, ext)
        print(f"get orderConf success. topic={a.topic}, orderConf={(resp.ext_fields or {}).get('value')}")
    elif a.method == "put":
        if not a.orderConf:
            raise AdminError(-1, "please set orderConf with option -v.")
        c.namesrv(RequestCode.PUT_KV_CONFIG, dict(ext, value=a.orderConf))
        print(f"update orderConf success. topic={a.topic}, orderConf={a.orderConf}")
    elif a.method == "delete":
        c.namesrv(RequestCode.DELETE_KV_CONFIG, ext)
        print(f"delete orderConf success. topic={a.topic}")
    else:
        raise AdminError(-1, f"unknown method {a.method}")


def allocate_mq(c: AdminClient, a: argparse.Namespace) -> None:
    """AllocateMessageQueueAveragely over the topic's readable queues for each client ip."""
    route = c.route(a.topic)
    mqs = []
    for qd in sorted(route.get("queueDatas", []), key=lambda q: q["brokerName"]):
        mqs += [{"brokerName": qd["brokerName"], "queueId": i, "topic": a.topic} for i in range(qd["readQueueNums"])]
    ips = [i.strip() for i in a.ipList.split(",") if i.strip()]
    result = {}
    n = len(ips)
    for idx, ip in enumerate(ips):
        mod = len(mqs) % n
        size = (1 if len(mqs) <= n else (len(mqs) // n + 1 if mod > 0 and idx < mod else len(mqs) // n))
        start = idx * size if mod > 0 and idx < mod else idx * size + mod
        rng = min(size, len(mqs) - start)
        result[ip] = [mqs[(start + i) % len(mqs)] for i in range(max(0, rng))]
    print(json.dumps({"result": result}, indent=2))


def _attrs_text(attrs: Optional[Mapping[str, str]]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted((attrs or {}).items())) + "}"


def _topic_configs(c: AdminClient, topic: Optional[str] = None,
                   broker: Optional[str] = None) -> dict[str, dict[str, TopicConfig]]:
    """brokerAddr -> {topic: TopicConfig dict} from GET_ALL_TOPIC_CONFIG."""
    addrs = [broker] if broker else (list(c.route_masters(topic).values()) if topic else c.all_master_addrs())
    out: dict[str, dict[str, TopicConfig]] = {}
    for addr in addrs:
        try:
            body = c.answer(TopicConfigTable, addr, RequestCode.GET_ALL_TOPIC_CONFIG, {})
        except (AdminError, OSError, TimeoutError) as exc:
            print(f"# {addr}: topic configs unavailable ({exc})")
            continue
        out[addr] = body.get("topicConfigTable", {})
    return out


def get_topic_config(c: AdminClient, a: argparse.Namespace) -> None:
    """The topic's config on each broker, attributes included (5.x getTopicConfig)."""
    found = False
    for addr, table in sorted(_topic_configs(c, a.topic, a.brokerAddr).items()):
        tc = table.get(a.topic)
        if tc is None:
            continue
        found = True
        print(f"{addr}: " + _topic_config_text({**tc, "attributes": _attrs_text(tc.get("attributes"))}))
    if not found:
        raise AdminError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{a.topic}] not exist")


SPEC: SpecTable = {
    "updateTopic": (update_topic, "Update or create topic", [
        (BROKER, {}), (CLUSTER, {}), (TOPIC, {"required": True}), (("-r", "--readQueueNums"), {"type": int, "default": 8}),
        (("-w", "--writeQueueNums"), {"type": int, "default": 8}), (("-p", "--perm"), {"type": int, "default": 6}),
        (("-o", "--order"), {"default": "false"}), (("-u", "--unit"), {"default": "false"}),
        (("-s", "--hasUnitSub"), {"default": "false"}), (("-a", "--attributes"), {})]),
    "deleteTopic": (delete_topic, "Delete topic from broker and NameServer", [
        (TOPIC, {"required": True}), (CLUSTER, {"required": True})]),
    "topicList": (topic_list, "Fetch all topic list from name server", [
        (("-c", "--clusterModel"), {"action": "store_true"})]),
    "topicRoute": (topic_route, "Examine topic route info", [(TOPIC, {"required": True})]),
    "topicStatus": (topic_status, "Examine topic Status info", [(TOPIC, {"required": True})]),
    "topicClusterList": (topic_cluster_list, "get cluster info for topic", [(TOPIC, {"required": True})]),
    "updateTopicPerm": (update_topic_perm, "Update topic perm", [
        (BROKER, {}), (CLUSTER, {}), (TOPIC, {"required": True}), (("-p", "--perm"), {"type": int, "required": True})]),
    "updateOrderConf": (update_order_conf, "Create or update or delete order conf", [
        (TOPIC, {"required": True}), (("-v", "--orderConf"), {}), (("-m", "--method"), {"required": True})]),
    "allocateMQ": (allocate_mq, "Allocate MQ", [
        (TOPIC, {"required": True}), (("-i", "--ipList"), {"required": True})]),
    "getTopicConfig": (get_topic_config, "Get the topic's config, attributes included", [
        (TOPIC, {"required": True}), (BROKER, {})]),
}
