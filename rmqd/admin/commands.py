"""The sub-commands: each ``fn(client, args)`` talks to the servers and prints like mqadmin."""
from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any, Callable, Optional

from rmqd.admin.client import ORDER_TOPIC_CONFIG, AdminClient, AdminError, broker_addr_of
from rmqd.config import parse_properties
from rmqd.common.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from rmqd.remoting import fastjson
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.store.message import decode_messages, decode_offset_msg_id
from rmqd.store import topic_attributes

RETRY = RETRY_GROUP_TOPIC_PREFIX


def _true(v: Any) -> bool:
    return str(v).strip().lower() == "true"


def _ts(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3] if ms > 0 else "N/A"


def _parse_time(s: Optional[str]) -> Optional[int]:
    """mqadmin time formats: millis, ``now``, ``yyyy-MM-dd#HH:mm:ss:SSS``."""
    if s is None:
        return None
    if s == "now":
        return int(time.time() * 1000)
    if s.lstrip("-").isdigit():
        return int(s)
    return int(datetime.strptime(s, "%Y-%m-%d#%H:%M:%S:%f").timestamp() * 1000)


def _topic_config_text(tc: dict) -> str:
    return ("TopicConfig [topicName={topicName}, readQueueNums={readQueueNums}, writeQueueNums={writeQueueNums}, "
            "perm={perm}, topicFilterType={topicFilterType}, topicSysFlag={topicSysFlag}, order={order}, "
            "attributes={attributes}]").format(**tc)


def _perm_text(perm: int) -> str:
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


# ====================================================================== topics
def update_topic(c: AdminClient, a: Any) -> None:
    ext = {"topic": a.topic, "defaultTopic": "TBW102", "readQueueNums": a.readQueueNums,
           "writeQueueNums": a.writeQueueNums, "perm": a.perm, "topicFilterType": "SINGLE_TAG",
           "topicSysFlag": (1 if _true(a.unit) else 0) | (2 if _true(a.hasUnitSub) else 0),
           "order": _true(a.order), "attributes": a.attributes}
    tc = {"topicName": a.topic, "readQueueNums": a.readQueueNums, "writeQueueNums": a.writeQueueNums,
          "perm": a.perm, "topicFilterType": "SINGLE_TAG", "topicSysFlag": ext["topicSysFlag"],
          "order": _true(a.order), "attributes": a.attributes or "{}"}
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
    if _true(a.order):
        conf = ";".join(f"{name}:{a.writeQueueNums}" for name in c.broker_names(a.clusterName))
        c.namesrv(RequestCode.PUT_KV_CONFIG, {"namespace": ORDER_TOPIC_CONFIG, "key": a.topic, "value": conf})
        print(f"set cluster orderConf. isOrder={a.order}, orderConf=[{conf}]")
    print(_topic_config_text(tc))


def delete_topic(c: AdminClient, a: Any) -> None:
    for addr in c.master_addrs(a.clusterName):
        c.call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": a.topic})
    print(f"delete topic [{a.topic}] from cluster [{a.clusterName}] success.")
    for ns in c.namesrv_addrs:
        c.call(ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": a.topic})
    print(f"delete topic [{a.topic}] from NameServer success.")


def topic_list(c: AdminClient, a: Any) -> None:
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
            groups: list = []
            for addr in c.route_masters(t).values():
                groups += c.call_json(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": t})["groupList"]
        except AdminError:
            groups = []
        for g in sorted(set(groups)) or [""]:
            print("%-20s  %-48s  %-48s" % (cluster, t, g))


def topic_route(c: AdminClient, a: Any) -> None:
    print(json.dumps(c.route(a.topic), indent=2, sort_keys=True, default=str))


def topic_status(c: AdminClient, a: Any) -> None:
    attrs = {}
    for table in _topic_configs(c, a.topic).values():
        attrs.update((table.get(a.topic) or {}).get("attributes") or {})
    if attrs:
        print(f"#Attributes: {_attrs_text(attrs)}")
    print("%-32s  %-4s  %-20s  %-20s    %s" % ("#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"))
    rows = []
    for name, addr in sorted(c.route_masters(a.topic).items()):
        table = c.call_json(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": a.topic})["offsetTable"]
        rows += [(mq.brokerName, mq.queueId, v) for mq, v in table.items()]
    for name, qid, v in sorted(rows, key=lambda r: (r[0], r[1])):
        print("%-32s  %-4d  %-20d  %-20d    %s" % (name, qid, v["minOffset"], v["maxOffset"],
                                                  _ts(v["lastUpdateTimestamp"])))


def topic_cluster_list(c: AdminClient, a: Any) -> None:
    names = {bd["brokerName"] for bd in c.route(a.topic).get("brokerDatas", [])}
    for cl, brokers in sorted(c.cluster_info().get("clusterAddrTable", {}).items()):
        if names & set(brokers):
            print(cl)


def update_topic_perm(c: AdminClient, a: Any) -> None:
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


def update_order_conf(c: AdminClient, a: Any) -> None:
    ext = {"namespace": ORDER_TOPIC_CONFIG, "key": a.topic}
    if a.method == "get":
        resp = c.namesrv(RequestCode.GET_KV_CONFIG, ext)
        print(f"get orderConf success. topic={a.topic}, orderConf={resp.ext_fields.get('value')}")
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


def allocate_mq(c: AdminClient, a: Any) -> None:
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


# ====================================================================== groups
def update_sub_group(c: AdminClient, a: Any) -> None:
    cfg = {"brokerId": a.brokerId, "consumeBroadcastEnable": _true(a.consumeBroadcastEnable),
           "consumeEnable": _true(a.consumeEnable), "consumeFromMinEnable": _true(a.consumeFromMinEnable),
           "groupName": a.consumerGroup, "notifyConsumerIdsChangedEnable": _true(a.notifyConsumerIdsChanged),
           "retryMaxTimes": a.retryMaxTimes, "retryQueueNums": a.retryQueueNums,
           "whichBrokerWhenConsumeSlowly": a.whichBrokerWhenConsumeSlowly}
    if _true(getattr(a, "consumeMessageOrderly", "false")):      # 5.x: a FIFO group
        cfg["consumeMessageOrderly"] = True
    if getattr(a, "attributes", None):                            # 5.x: "+lite.bind.topic=P,+priority.factor=50"
        cfg["attributes"] = topic_attributes.parse(a.attributes)
    body = fastjson.dumps(cfg)
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        c.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)
        print(f"create subscription group to {addr} success.")
    print("SubscriptionGroupConfig " + json.dumps(cfg, sort_keys=True))


def set_consume_mode(c: AdminClient, a: Any) -> None:
    """5.x mqadmin setConsumeMode: SET_MESSAGE_REQUEST_MODE (401), how QUERY_ASSIGNMENT serves the group."""
    body = {"topic": a.topicName, "consumerGroup": a.consumerGroup, "mode": a.mode,
            "popShareQueueNum": a.popShareQueueNum}
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        c.call(addr, 401, None, fastjson.dumps(body))
        print(f"set consume mode to {addr} success.")
    print(f"topic[{a.topicName}] group[{a.consumerGroup}] consume mode[{a.mode}] "
          f"popShareQueueNum[{a.popShareQueueNum}]")


def delete_sub_group(c: AdminClient, a: Any) -> None:
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        c.call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
               {"groupName": a.consumerGroup, "removeOffset": _true(a.removeOffset),
                "cleanOffset": _true(a.removeOffset)})
        print(f"delete subscription group [{a.consumerGroup}] from broker [{addr}] in cluster "
              f"[{a.clusterName or ''}] success.")


def _consume_stats(c: AdminClient, group: str, topic: Optional[str] = None) -> tuple[dict, float]:
    table: dict = {}
    tps = 0.0
    for addr in c.route_masters(RETRY + group).values():
        body = c.call_json(addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic})
        table.update(body.get("offsetTable", {}))
        tps += float(body.get("consumeTps", 0.0))
    return table, tps


def consumer_progress(c: AdminClient, a: Any) -> None:
    if a.consumerGroup:
        table, tps = _consume_stats(c, a.consumerGroup)
        print("%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %s" % ("#Topic", "#Broker Name", "#QID", "#Broker Offset",
                                                              "#Consumer Offset", "#Diff", "#LastTime"))
        total = 0
        for mq in sorted(table, key=lambda m: (m.topic, m.brokerName, m.queueId)):
            w = table[mq]
            diff = w["brokerOffset"] - w["consumerOffset"]
            total += diff
            print("%-64s  %-32s  %-4d  %-20d  %-20d  %-20d %s" % (mq.topic, mq.brokerName, mq.queueId,
                                                                  w["brokerOffset"], w["consumerOffset"], diff,
                                                                  _ts(w.get("lastTimestamp", 0))))
        print(f"\nConsume TPS: {tps:.2f}\nDiff Total: {total}")
        return
    print("%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s" % ("#Group", "#Count", "#Version", "#Type", "#Model", "#TPS",
                                                       "#Diff Total"))
    for t in sorted(c.topic_list()):
        if not t.startswith(RETRY):
            continue
        group = t[len(RETRY):]
        try:
            table, tps = _consume_stats(c, group)
        except AdminError:
            continue
        diff = sum(w["brokerOffset"] - w["consumerOffset"] for w in table.values())
        count, ctype, model = 0, "", ""
        try:
            conn = _consumer_conn(c, group)
            count, ctype, model = len(conn["connectionSet"]), conn["consumeType"], conn["messageModel"]
        except AdminError:
            pass
        print("%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d" % (group, count, "OFFLINE" if not count else "",
                                                           "PUSH" if ctype == "CONSUME_PASSIVELY" else
                                                           ("PULL" if ctype else ""), model, int(tps), diff))


def _consumer_conn(c: AdminClient, group: str) -> dict:
    last: Optional[AdminError] = None
    for addr in c.route_masters(RETRY + group).values():
        try:
            return c.call_json(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
        except AdminError as exc:
            last = exc
    raise last or AdminError(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")


def consumer_connection(c: AdminClient, a: Any) -> None:
    cc = _consumer_conn(c, a.consumerGroup)
    print("%-36s %-22s %-10s %s" % ("#ClientId", "#ClientAddr", "#Language", "#Version"))
    for i, conn in enumerate(sorted(cc["connectionSet"], key=lambda x: x["clientId"]), 1):
        print("%03d  %-36s %-22s %-10s %s" % (i, conn["clientId"], conn["clientAddr"], conn["language"],
                                             conn["version"]))
    print("\nBelow is subscription:")
    for i, (topic, sd) in enumerate(sorted(cc["subscriptionTable"].items()), 1):
        print("%03d  Topic: %-40s SubExpression: %s" % (i, topic, sd.get("subString")))
    print(f"\nConsumeType: {cc['consumeType']}\nMessageModel: {cc['messageModel']}\n"
          f"ConsumeFromWhere: {cc['consumeFromWhere']}")


def consumer_status(c: AdminClient, a: Any) -> None:
    cc = _consumer_conn(c, a.consumerGroup)
    masters = list(c.route_masters(RETRY + a.consumerGroup).values())
    for i, conn in enumerate(sorted(cc["connectionSet"], key=lambda x: x["clientId"]), 1):
        print("%03d  %-40s %-20s %s" % (i, conn["clientId"], conn["language"], conn["version"]))
    targets = [x["clientId"] for x in cc["connectionSet"] if not a.clientId or x["clientId"] == a.clientId]
    for cid in targets:
        try:
            resp = c.call(masters[0], RequestCode.GET_CONSUMER_RUNNING_INFO,
                          {"consumerGroup": a.consumerGroup, "clientId": cid, "jstackEnable": _true(a.jstack)})
            print(f"\n{cid}\n{(resp.body_bytes() or b'').decode('utf-8', 'replace')}")
        except AdminError as exc:
            print(f"\n{cid}: {exc}")


def producer_connection(c: AdminClient, a: Any) -> None:
    for addr in c.route_masters(a.topic).values():
        body = c.call_json(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": a.producerGroup})
        for i, conn in enumerate(sorted(body["connectionSet"], key=lambda x: x["clientId"]), 1):
            print("%04d  %-32s %-22s %-8s %s" % (i, conn["clientId"], conn["clientAddr"], conn["language"],
                                                conn["version"]))
        return


def clone_group_offset(c: AdminClient, a: Any) -> None:
    for addr in c.route_masters(a.topic).values():
        c.call(addr, RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": a.srcGroup, "destGroup": a.destGroup,
                                                      "topic": a.topic, "offline": _true(a.offline)})
    print(f"clone group offset success. srcGroup[{a.srcGroup}], destGroup={a.destGroup}, topic[{a.topic}]")


def reset_offsets(c: AdminClient, group: str, topic: str, ts: int, force: bool, cplus: bool = False) -> dict:
    """222 on every master; on CONSUMER_NOT_ONLINE the offline path (208 + 29 + 15)."""
    out: dict = {}
    for name, addr in sorted(c.route_masters(topic).items()):
        try:
            body = c.call_json(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                               {"topic": topic, "group": group, "timestamp": ts, "isForce": force})
            table = body.get("offsetTable", {})
            if isinstance(table, list):
                table = {fastjson.MessageQueue(x["topic"], x["brokerName"], x["queueId"]): x["offset"] for x in table}
            out.update(table)
        except AdminError as exc:
            if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            stats = c.call_json(addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic})
            for mq, w in stats.get("offsetTable", {}).items():
                target = (c.max_offset(addr, topic, mq.queueId) if ts == -1
                          else c.search_offset(addr, topic, mq.queueId, ts))
                if force or target < w["consumerOffset"]:
                    c.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic,
                                                                      "queueId": mq.queueId, "commitOffset": target})
                    out[mq] = target
                else:
                    out[mq] = w["consumerOffset"]
    return out


def _print_reset(out: dict) -> None:
    print("%-40s  %-40s  %-40s" % ("#brokerName", "#queueId", "#offset"))
    for mq in sorted(out, key=lambda m: (m.brokerName, m.queueId)):
        print("%-40s  %-40d  %-40d" % (mq.brokerName, mq.queueId, out[mq]))


def reset_offset_by_time(c: AdminClient, a: Any) -> None:
    ts = _parse_time(a.timestamp)
    force = _true(a.force)
    out = reset_offsets(c, a.consumerGroup, a.topic, ts, force, a.cplus)
    print(f"rollback consumer offset by specified group[{a.consumerGroup}], topic[{a.topic}], force[{force}], "
          f"timestamp(string)[{a.timestamp}], timestamp(long)[{ts}]")
    _print_reset(out)


def skip_accumulated(c: AdminClient, a: Any) -> None:
    _print_reset(reset_offsets(c, a.consumerGroup, a.topic, -1, _true(a.force)))


# ====================================================================== broker / cluster
def _runtime(c: AdminClient, addr: str) -> dict:
    return c.call_json(addr, RequestCode.GET_BROKER_RUNTIME_INFO)["table"]


def cluster_list(c: AdminClient, a: Any) -> None:
    info = c.cluster_info()
    clusters = sorted(info.get("clusterAddrTable", {}).items())
    if a.clusterName:
        clusters = [(k, v) for k, v in clusters if k == a.clusterName]
    if a.moreStats:
        print("%-16s  %-32s %14s %14s %14s %14s" % ("#Cluster Name", "#Broker Name", "#InTotalYest",
                                                   "#OutTotalYest", "#InTotalToday", "#OutTotalToday"))
    else:
        print("%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s" % (
            "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)",
            "#PCWait(ms)", "#Hour", "#SPACE"))
    for cluster, names in clusters:
        for name in sorted(names):
            bd = info["brokerAddrTable"].get(name) or {}
            for bid, addr in sorted(((int(k), v) for k, v in (bd.get("brokerAddrs") or {}).items())):
                try:
                    kv = _runtime(c, addr)
                except (AdminError, OSError) as exc:
                    print(f"{cluster} {name} {addr}: {exc}")
                    continue
                if a.moreStats:
                    yest_in = int(kv["msgPutTotalTodayMorning"]) - int(kv["msgPutTotalYesterdayMorning"])
                    yest_out = int(kv["msgGetTotalTodayMorning"]) - int(kv["msgGetTotalYesterdayMorning"])
                    today_in = int(kv["msgPutTotalTodayNow"]) - int(kv["msgPutTotalTodayMorning"])
                    today_out = int(kv["msgGetTotalTodayNow"]) - int(kv["msgGetTotalTodayMorning"])
                    print("%-16s  %-32s %14d %14d %14d %14d" % (cluster, name, yest_in, yest_out, today_in, today_out))
                    continue
                in_tps = float(kv["putTps"].split()[0])
                out_tps = float(kv["getTransferedTps"].split()[0])
                earliest = int(kv.get("earliestMessageTimeStamp", "0"))
                hour = (time.time() * 1000 - earliest) / 3600000 if earliest > 0 else 0.0
                space = float(kv.get("commitLogDiskRatio", "0"))
                print("%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s" % (
                    cluster, name, bid, addr, kv["brokerVersionDesc"],
                    "%9.2f(%s,%sms)" % (in_tps, kv["sendThreadPoolQueueSize"],
                                        kv["sendThreadPoolQueueHeadWaitTimeMills"]),
                    "%9.2f(%s,%sms)" % (out_tps, kv["pullThreadPoolQueueSize"],
                                        kv["pullThreadPoolQueueHeadWaitTimeMills"]),
                    kv["pageCacheLockTimeMills"], "%2.2f" % hour, "%.4f" % space))


def broker_status(c: AdminClient, a: Any) -> None:
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        for k, v in sorted(_runtime(c, addr).items()):
            print("%-32s: %s" % (k, v) if a.brokerAddr else "%-24s %-32s: %s" % (addr, k, v))


def get_broker_config(c: AdminClient, a: Any) -> None:
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        resp = c.call(addr, RequestCode.GET_BROKER_CONFIG)
        print(f"============{addr}============")
        for k, v in sorted(parse_properties((resp.body_bytes() or b"").decode("utf-8")).items()):
            print("%-50s=  %s" % (k, v))


def update_broker_config(c: AdminClient, a: Any) -> None:
    body = f"{a.key}={a.value}\n".encode("utf-8")
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        c.call(addr, RequestCode.UPDATE_BROKER_CONFIG, None, body)
        print(f"update broker config success, {addr}")


def get_namesrv_config(c: AdminClient, a: Any) -> None:
    for ns in c.namesrv_addrs:
        resp = c.call(ns, RequestCode.GET_NAMESRV_CONFIG)
        print(f"============{ns}============")
        for k, v in sorted(parse_properties((resp.body_bytes() or b"").decode("utf-8")).items()):
            print("%-50s=  %s" % (k, v))


def update_namesrv_config(c: AdminClient, a: Any) -> None:
    for ns in c.namesrv_addrs:
        c.call(ns, RequestCode.UPDATE_NAMESRV_CONFIG, None, f"{a.key}={a.value}\n".encode("utf-8"))
    print(f"update name server config success!{c.namesrv_addrs}\n{a.key} : {a.value}")


def wipe_write_perm(c: AdminClient, a: Any) -> None:
    for ns in c.namesrv_addrs:
        resp = c.call(ns, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": a.brokerName})
        print(f"wipe write perm of broker[{a.brokerName}] in name server[{ns}] OK, "
              f"{resp.ext_fields.get('wipeTopicCount')}")


def add_write_perm(c: AdminClient, a: Any) -> None:
    for ns in c.namesrv_addrs:
        resp = c.call(ns, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": a.brokerName})
        print(f"add write perm of broker[{a.brokerName}] in name server[{ns}] OK, "
              f"{resp.ext_fields.get('addTopicCount')}")


def _broker_targets(c: AdminClient, a: Any) -> list[str]:
    """``-b`` if given, else the masters of ``-c``, else every master of every cluster."""
    if a.brokerAddr:
        return [a.brokerAddr]
    if a.clusterName:
        return c.master_addrs(a.clusterName)
    return [x for cl in c.cluster_info().get("clusterAddrTable", {}) for x in c.master_addrs(cl)]


def _call_each(c: AdminClient, a: Any, code: int) -> None:
    targets = _broker_targets(c, a)
    for addr in targets:
        c.call(addr, code)
    print(f"{'success' if targets else 'false'}")


def clean_expired_cq(c: AdminClient, a: Any) -> None:
    _call_each(c, a, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)


def clean_unused_topic(c: AdminClient, a: Any) -> None:
    _call_each(c, a, RequestCode.CLEAN_UNUSED_TOPIC)


def delete_expired_commit_log(c: AdminClient, a: Any) -> None:
    _call_each(c, a, RequestCode.DELETE_EXPIRED_COMMITLOG)


def query_cq(c: AdminClient, a: Any) -> None:
    """mqadmin queryCq: the units of one ConsumeQueue (QUERY_CONSUME_QUEUE)."""
    addr = a.broker or next(iter(c.route_masters(a.topic).values()), None)
    if addr is None:
        raise AdminError(ResponseCode.TOPIC_NOT_EXIST, "No topic route data!")
    ext = {"topic": a.topic, "queueId": str(a.queue), "index": str(a.index), "count": str(a.count)}
    if a.consumer:
        ext["consumerGroup"] = a.consumer
    body = c.call_json(addr, RequestCode.QUERY_CONSUME_QUEUE, ext) or {}
    rule = "======================================"
    if body.get("subscriptionData") is not None:
        print(f"Subscription data: \n{json.dumps(body['subscriptionData'], indent=4)}\n{rule}")
    if body.get("filterData") is not None:
        print(f"Filter data: \n{body['filterData']}\n{rule}")
    print(f"Queue data: \nmax: {body.get('maxQueueIndex', 0)}, min: {body.get('minQueueIndex', 0)}\n{rule}")
    for i, u in enumerate(body.get("queueData") or [], start=a.index):
        print(f"idx: {i}\nConsumeQueueData{{physicOffset={u['physicOffset']}, physicSize={u['physicSize']}, "
              f"tagsCode={u['tagsCode']}, extendDataJson='{u.get('extendDataJson')}', bitMap='{u.get('bitMap')}', "
              f"eval={'true' if u.get('eval') else 'false'}, msg='{u.get('msg')}'}}\n{rule}".replace("'None'", "'null'"))


def _stats_data(c: AdminClient, addr: str, name: str, key: str) -> Optional[dict]:
    try:
        return c.call_json(addr, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
    except AdminError:
        return None


def stats_all(c: AdminClient, a: Any) -> None:
    print("%-64s  %-64s %12s %11s %11s %14s %14s" % ("#Topic", "#Consumer Group", "#Accumulation", "#InTPS",
                                                    "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"))
    topics = [a.topic] if a.topic else c.topic_list()
    for t in sorted(topics):
        if t.startswith(RETRY) or t.startswith(DLQ_GROUP_TOPIC_PREFIX):
            continue
        try:
            masters = c.route_masters(t)
        except AdminError:
            continue
        in_tps, in_day = 0.0, 0
        groups: set = set()
        for addr in masters.values():
            sd = _stats_data(c, addr, "TOPIC_PUT_NUMS", t)
            if sd:
                in_tps += sd["statsMinute"]["tps"]
                in_day += sd["statsDay"]["sum"]
            try:
                groups |= set(c.call_json(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": t})["groupList"])
            except AdminError:
                pass
        if a.activeTopic and in_day == 0:
            continue
        if not groups:
            print("%-64s  %-64s %12d %11.2f %11s %14d %14s" % (t, "", 0, in_tps, "", in_day, "NO_CONSUMER"))
        for g in sorted(groups):
            out_tps, out_day, acc = 0.0, 0, 0
            for addr in masters.values():
                sd = _stats_data(c, addr, "GROUP_GET_NUMS", f"{t}@{g}")
                if sd:
                    out_tps += sd["statsMinute"]["tps"]
                    out_day += sd["statsDay"]["sum"]
                try:
                    st = c.call_json(addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": g, "topic": t})
                    acc += sum(w["brokerOffset"] - w["consumerOffset"] for w in st["offsetTable"].values())
                except AdminError:
                    pass
            print("%-64s  %-64s %12d %11.2f %11.2f %14d %14d" % (t, g, acc, in_tps, out_tps, in_day, out_day))


def broker_consume_stats(c: AdminClient, a: Any) -> None:
    body = c.call_json(a.brokerAddr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": _true(a.order)})
    print("%-64s  %-64s  %-32s  %-4s  %-20s  %-20s  %-20s %s" % ("#Topic", "#Group", "#Broker Name", "#QID",
                                                               "#Broker Offset", "#Consumer Offset", "#Diff",
                                                               "#LastTime"))
    for entry in body.get("consumeStatsList", []):
        for group, stats_list in entry.items():
            for st in stats_list:
                for mq, w in sorted(st["offsetTable"].items(), key=lambda kv: (kv[0].topic, kv[0].queueId)):
                    diff = w["brokerOffset"] - w["consumerOffset"]
                    if diff < a.level:
                        continue
                    print("%-64s  %-64s  %-32s  %-4d  %-20d  %-20d  %-20d %s" % (
                        mq.topic, group, mq.brokerName, mq.queueId, w["brokerOffset"], w["consumerOffset"], diff,
                        _ts(w.get("lastTimestamp", 0))))
    print(f"\nDiff Total: {body.get('totalDiff', 0)}")


# ====================================================================== messages
def _print_detail(m: Any, body: bool = True) -> None:
    rows = [("Topic:", m.topic), ("Tags:", f"[{m.properties.get('TAGS')}]"), ("Keys:", f"[{m.properties.get('KEYS')}]"),
            ("Queue ID:", m.queue_id), ("Queue Offset:", m.queue_offset), ("CommitLog Offset:", m.commit_log_offset),
            ("Reconsume Times:", m.reconsume_times), ("Born Timestamp:", _ts(m.born_timestamp)),
            ("Store Timestamp:", _ts(m.store_timestamp)), ("Born Host:", "%s:%d" % tuple(m.born_host)),
            ("Store Host:", "%s:%d" % tuple(m.store_host)), ("System Flag:", m.sys_flag),
            ("Properties:", m.properties), ("Message Body Path:", "")]
    print(f"OffsetID: {m.msg_id}")
    for k, v in rows:
        print("%-20s %s" % (k, v))
    if body:
        print("%-20s %s" % ("Message Body:", m.body.decode("utf-8", "replace")))


def query_messages(c: AdminClient, topic: str, key: str, unique: bool, max_num: int = 64) -> list:
    found = []
    for addr in c.route_masters(topic).values():
        ext = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": 0,
               "endTimestamp": 2 ** 63 - 1}
        if unique:
            ext["_UNIQUE_KEY_QUERY"] = "true"
        resp = c.call(addr, RequestCode.QUERY_MESSAGE, ext, ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if resp.code == ResponseCode.SUCCESS and resp.body is not None:
            found += decode_messages(resp.body_bytes())
    return found


def query_msg_by_id(c: AdminClient, a: Any) -> None:
    for msg_id in a.msgId.split(","):
        msg_id = msg_id.strip()
        ip, port, offset = decode_offset_msg_id(msg_id)
        resp = c.call(f"{ip}:{port}", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
        for m in decode_messages(resp.body_bytes()):
            _print_detail(m)


def query_msg_by_key(c: AdminClient, a: Any) -> None:
    msgs = query_messages(c, a.topic, a.msgKey, False)
    print("%-50s %4s %40s" % ("#Message ID", "#QID", "#Offset"))
    for m in msgs:
        print("%-50s %4d %40d" % (m.properties.get("UNIQ_KEY", m.msg_id), m.queue_id, m.queue_offset))


def query_msg_by_unique_key(c: AdminClient, a: Any) -> None:
    msgs = [m for m in query_messages(c, a.topic, a.msgId, True) if m.properties.get("UNIQ_KEY") == a.msgId]
    if not msgs:
        raise AdminError(ResponseCode.QUERY_NOT_FOUND, f"query message by unique key {a.msgId} found nothing")
    for m in msgs:
        _print_detail(m)


def query_msg_by_offset(c: AdminClient, a: Any) -> None:
    addr = c.route_masters(a.topic).get(a.brokerName)
    if not addr:
        raise AdminError(-1, f"broker {a.brokerName} not in the route of {a.topic}")
    code, _, msgs = c.pull(addr, a.topic, a.queueId, a.offset, 1)
    if not msgs:
        raise AdminError(code, "no message at that offset")
    _print_detail(msgs[0])


def _scan_queue(c: AdminClient, addr: str, topic: str, qid: int, sub: str, begin: Optional[int],
                end: Optional[int], start: Optional[int] = None, limit: Optional[int] = None,
                group: str = "TOOLS_CONSUMER"):
    lo = c.min_offset(addr, topic, qid) if start is None else start
    if begin is not None:
        lo = max(lo, c.search_offset(addr, topic, qid, begin))
    hi = c.max_offset(addr, topic, qid)
    if end is not None:
        hi = min(hi, c.search_offset(addr, topic, qid, end))
    off, n = lo, 0
    while off < hi and (limit is None or n < limit):
        code, nxt, msgs = c.pull(addr, topic, qid, off, 32, group, sub)
        for m in msgs:
            if m.queue_offset >= hi or (limit is not None and n >= limit):
                return
            n += 1
            yield m
        if nxt <= off:
            return
        off = nxt


def print_msg(c: AdminClient, a: Any) -> None:
    body = _true(a.printBody)
    for name, addr in sorted(c.route_masters(a.topic).items()):
        qd = next(q for q in c.route(a.topic)["queueDatas"] if q["brokerName"] == name)
        for qid in range(qd["readQueueNums"]):
            lo, hi = c.min_offset(addr, a.topic, qid), c.max_offset(addr, a.topic, qid)
            print(f"minOffset={lo}, maxOffset={hi}, MessageQueue [topic={a.topic}, brokerName={name}, queueId={qid}]")
            for m in _scan_queue(c, addr, a.topic, qid, a.subExpression, _parse_time(a.beginTimestamp),
                                 _parse_time(a.endTimestamp)):
                print(f"MSGID: {m.properties.get('UNIQ_KEY', m.msg_id)} {m.topic} {m.queue_id} {m.queue_offset} "
                      f"BODY: {m.body.decode('utf-8', 'replace') if body else 'NOT PRINT BODY'}")


def print_msg_by_queue(c: AdminClient, a: Any) -> None:
    addr = c.route_masters(a.topic).get(a.brokerName)
    if not addr:
        raise AdminError(-1, f"broker {a.brokerName} not in the route of {a.topic}")
    tags: dict = {}
    for m in _scan_queue(c, addr, a.topic, a.queueId, a.subExpression, _parse_time(a.beginTimestamp),
                         _parse_time(a.endTimestamp)):
        tags[m.properties.get("TAGS", "")] = tags.get(m.properties.get("TAGS", ""), 0) + 1
        if _true(a.print):
            body = m.body.decode("utf-8", "replace") if _true(a.printBody) else "NOT PRINT BODY"
            print(f"MSGID: {m.properties.get('UNIQ_KEY', m.msg_id)} {m.topic} {m.queue_id} {m.queue_offset} "
                  f"BODY: {body}")
    if _true(a.calculate):
        for tag, n in sorted(tags.items(), key=lambda kv: -kv[1]):
            print("%-32s %d" % (tag, n))


def _pick_queue(c: AdminClient, topic: str, broker: Optional[str], qid: Optional[int]) -> tuple[str, str, int]:
    route = c.route(topic)
    masters = {bd["brokerName"]: broker_addr_of(bd, 0) for bd in route.get("brokerDatas", [])}
    qds = [q for q in route.get("queueDatas", []) if q["perm"] & 2 and (not broker or q["brokerName"] == broker)]
    if not qds:
        raise AdminError(ResponseCode.TOPIC_NOT_EXIST, f"no writable queue of {topic}")
    qd = sorted(qds, key=lambda q: q["brokerName"])[0]
    return qd["brokerName"], masters[qd["brokerName"]], (qid if qid is not None else
                                                         int(time.time() * 1000) % qd["writeQueueNums"])


def send_message(c: AdminClient, a: Any) -> None:
    name, addr, qid = _pick_queue(c, a.topic, a.broker, a.qid)
    resp = c.send(addr, a.topic, qid, a.body.encode("utf-8"), a.tags, a.key)
    print("%-32s  %-4s  %-20s    %s" % ("#Broker Name", "#QID", "#Send Result", "#MsgId"))
    print("%-32s  %-4s  %-20s    %s" % (name, resp.ext_fields.get("queueId"), "SEND_OK", resp.ext_fields.get("msgId")))


def consume_message(c: AdminClient, a: Any) -> None:
    group = a.consumerGroup or "TOOLS_CONSUMER"
    masters = c.route_masters(a.topic)
    route = c.route(a.topic)
    n = 0
    for qd in sorted(route.get("queueDatas", []), key=lambda q: q["brokerName"]):
        if a.brokerName and qd["brokerName"] != a.brokerName:
            continue
        addr = masters[qd["brokerName"]]
        qids = [a.queueId] if a.queueId is not None else range(qd["readQueueNums"])
        for qid in qids:
            for m in _scan_queue(c, addr, a.topic, qid, "*", _parse_time(a.beginTimestamp),
                                 _parse_time(a.endTimestamp), a.offset, a.MessageNumber - n, group):
                n += 1
                print(f"Consume ok\nMSGID: {m.properties.get('UNIQ_KEY', m.msg_id)} {m.topic} {m.queue_id} "
                      f"{m.queue_offset} BODY: {m.body.decode('utf-8', 'replace')}")
            if n >= a.MessageNumber:
                return


def check_msg_send_rt(c: AdminClient, a: Any) -> None:
    body = b"a" * a.size
    total = 0.0
    print("%-32s  %-4s  %-20s    %s" % ("#Broker Name", "#QID", "#Send Result", "#RT"))
    for i in range(a.amount):
        name, addr, qid = _pick_queue(c, a.topic, None, None)
        t0 = time.perf_counter()
        ok = True
        try:
            c.send(addr, a.topic, qid, body)
        except AdminError:
            ok = False
        rt = (time.perf_counter() - t0) * 1000
        if i > 0:
            total += rt
        print("%-32s  %-4s  %-20s    %.3f" % (name, qid, ok, rt))
    print("Avg RT: %.2f" % (total / max(1, a.amount - 1)))


# ====================================================================== kv
def update_kv_config(c: AdminClient, a: Any) -> None:
    c.namesrv(RequestCode.PUT_KV_CONFIG, {"namespace": a.namespace, "key": a.key, "value": a.value})
    print("update kv config in namespace success.")


def delete_kv_config(c: AdminClient, a: Any) -> None:
    c.namesrv(RequestCode.DELETE_KV_CONFIG, {"namespace": a.namespace, "key": a.key})
    print("delete kv config from namespace success.")


# ---------------------------------------------------------------------------------------------- ACL
def _acl_targets(c: AdminClient, a: Any) -> list[str]:
    if a.brokerAddr:
        return [a.brokerAddr]
    if a.clusterName:
        return c.master_addrs(a.clusterName)
    raise AdminError(ResponseCode.SYSTEM_ERROR, "one of -b (broker address) or -c (cluster name) is required")


def update_acl_config(c: AdminClient, a: Any) -> None:
    ext = {"accessKey": a.accessKey, "secretKey": a.secretKey, "whiteRemoteAddress": a.whiteRemoteAddress,
           "defaultTopicPerm": a.defaultTopicPerm, "defaultGroupPerm": a.defaultGroupPerm,
           "topicPerms": a.topicPerms, "groupPerms": a.groupPerms,
           "admin": None if a.admin is None else str(a.admin).strip().lower() == "true"}
    for addr in _acl_targets(c, a):
        c.call(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, ext)
        print(f"create or update plain access config to {addr} success.")
    print(f"PlainAccessConfig{{accessKey='{a.accessKey}', whiteRemoteAddress='{a.whiteRemoteAddress}', "
          f"admin={str(a.admin).lower() if a.admin is not None else 'false'}, "
          f"defaultTopicPerm='{a.defaultTopicPerm}', defaultGroupPerm='{a.defaultGroupPerm}', "
          f"topicPerms={a.topicPerms}, groupPerms={a.groupPerms}}}".replace("'None'", "'null'")
          .replace("=None", "=null"))


def delete_acl_config(c: AdminClient, a: Any) -> None:
    for addr in _acl_targets(c, a):
        c.call(addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": a.accessKey})
        print(f"delete plain access config account from {addr} success.")
    print(f"account's accesskey is:{a.accessKey}")


def update_global_white_addr(c: AdminClient, a: Any) -> None:
    ext = {"globalWhiteAddrs": a.globalWhiteRemoteAddresses, "aclFileFullPath": a.aclFileFullPath}
    for addr in _acl_targets(c, a):
        c.call(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, ext)
        print(f"update global white remote addresses to {addr} success.")


def cluster_acl_config_version(c: AdminClient, a: Any) -> None:
    fmt = "%-16s  %-22s  %-22s  %-20s  %-22s  %-22s"
    print(fmt % ("#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath", "#AclConfigVersionNum",
                 "#AclLastUpdateTime"))
    for addr in _acl_targets(c, a):
        resp = c.call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
        ext = resp.ext_fields or {}
        for path, version in json.loads(ext.get("allAclFileVersion") or "{}").items():
            print(fmt % (ext.get("clusterName"), ext.get("brokerName"), ext.get("brokerAddr"), path,
                         str(version.get("counter")),
                         datetime.fromtimestamp(int(version.get("timestamp", 0)) / 1000).strftime("%Y-%m-%d %H:%M:%S")))
    print("get cluster's plain access config version success.")


# ====================================================================== topic attributes, compaction
def _attrs_text(attrs: Optional[dict]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted((attrs or {}).items())) + "}"


def _topic_configs(c: AdminClient, topic: Optional[str] = None, broker: Optional[str] = None) -> dict:
    """brokerAddr -> {topic: TopicConfig dict} from GET_ALL_TOPIC_CONFIG."""
    addrs = [broker] if broker else (list(c.route_masters(topic).values()) if topic else c.all_master_addrs())
    out = {}
    for addr in addrs:
        try:
            body = c.call_json(addr, RequestCode.GET_ALL_TOPIC_CONFIG, {}) or {}
        except (AdminError, OSError, TimeoutError) as exc:
            print(f"# {addr}: topic configs unavailable ({exc})")
            continue
        out[addr] = body.get("topicConfigTable", {})
    return out


def get_topic_config(c: AdminClient, a: Any) -> None:
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


def _compaction_addrs(c: AdminClient, a: Any) -> list[str]:
    if getattr(a, "brokerAddr", None):
        return [a.brokerAddr]
    addrs = list(c.route_masters(a.topic).values()) if getattr(a, "topic", None) else c.all_master_addrs()
    if not addrs:
        raise AdminError(ResponseCode.TOPIC_NOT_EXIST, "No topic route data!")
    return addrs


def compact_topic(c: AdminClient, a: Any) -> None:
    """Copy and compact a COMPACTION topic now (rmqd admin code 9001)."""
    ext = {"topic": a.topic}
    if a.queueId is not None:
        ext["queueId"] = str(a.queueId)
    saved, c.timeout = c.timeout, max(c.timeout, 600.0)     # a big queue takes a while
    try:
        bodies = [(addr, c.call_json(addr, 9001, ext) or {}) for addr in _compaction_addrs(c, a)]
    finally:
        c.timeout = saved
    for addr, body in bodies:
        for r in body.get("runs", []):
            print(f"{addr} {a.topic} queue {r['queueId']}: {r['records_in']} -> {r['records_out']} records, "
                  f"{r['bytes_in']} -> {r['bytes_out']} bytes, {r['segments_rewritten']} file(s) rewritten, "
                  f"{r['rounds']} round(s), checkpoint {r['checkpoint']}, {r['duration_s'] * 1000:.1f} ms")


def compaction_status(c: AdminClient, a: Any) -> None:
    """Per queue: last compacted offset, files, records, live keys, bytes before/after, last run (code 9002)."""
    print("%-32s  %-4s  %-14s  %-14s  %-6s  %-10s  %-10s  %-12s  %-12s  %-12s  %-5s  %s" % (
        "#Topic", "#QID", "#MinOffset", "#Compacted", "#Files", "#Records", "#LiveKeys", "#Bytes", "#Before",
        "#After", "#Runs", "#LastRun (ms)"))
    ext = {"topic": a.topic} if a.topic else {}
    for addr in _compaction_addrs(c, a):
        for q in (c.call_json(addr, 9002, ext) or {}).get("queues", []):
            print("%-32s  %-4d  %-14d  %-14d  %-6d  %-10d  %-10d  %-12d  %-12d  %-12d  %-5d  %s (%s)" % (
                q["topic"], q["queueId"], q["minOffset"], q["last_compacted_offset"], q["files"], q["records"],
                q["liveKeys"], q["bytes"], q["last_bytes_before"], q["last_bytes_after"], q["runs"],
                _ts(q["last_run_ms"]), q["last_duration_ms"]))


def _long_calls(c: AdminClient, code: int, ext: dict, addrs: list[str]) -> list[tuple[str, dict]]:
    """(addr, JSON body) of ``code`` on each broker, allowing up to 10 minutes each (an adoption swaps files)."""
    saved, c.timeout = c.timeout, max(c.timeout, 600.0)
    try:
        return [(addr, c.call_json(addr, code, ext) or {}) for addr in addrs]
    finally:
        c.timeout = saved


def adopt_compaction(c: AdminClient, a: Any) -> None:
    """Adopt the output of `rmqd pipeline compact` now (rmqd admin code 9005)."""
    ext = {k: v for k, v in (("topic", a.topic), ("dir", a.dir)) if v}
    _print_adoptions(_long_calls(c, 9005, ext, _compaction_addrs(c, a)), "compaction output", "error", "output(s)",
                     lambda r: f"(job {r['job']}{', rolled forward' if r.get('resumed') else ''}): "
                               f"{r['segmentsReplaced']} segment(s) replaced, {r['segmentsDropped']} dropped, "
                               f"{r['recordsBefore']} -> {r['recordsAfter']} records")


def _print_adoptions(bodies: list, what: str, reason_key: str, counted: str, detail: Callable[[dict], str]) -> None:
    """Each broker's adoption results, one line each (``detail``: what an adopted one did); AdminError when
    any output was not adopted."""
    failed = []
    for addr, body in bodies:
        results = body.get("results", [])
        if not results:
            print(f"{addr}: no {what} to adopt")
        for r in results:
            if r.get("adopted"):
                print(f"{addr} adopted {r['output']} {detail(r)}")
            else:
                print(f"{addr} did not adopt {r['output']}: {r.get(reason_key)}")
                failed.append(r["output"])
    if failed:
        raise AdminError(1, f"{len(failed)} {counted} not adopted")


def dump_compaction_log(c: Optional[AdminClient], a: Any) -> None:
    """Decode one compaction log file (mqadmin dumpCompactionLog -f FILE)."""
    from rmqd.store.compaction.queue_log import decode_log_file
    for rec in decode_log_file(a.file):
        m = rec["message"]
        print(f"position={rec['position']} size={rec['size']} queueOffset={m.queue_offset} "
              f"physicalOffset={m.commit_log_offset} storeTimestamp={m.store_timestamp} "
              f"keys={m.properties.get('KEYS')} tags={m.properties.get('TAGS')} bodyLength={len(m.body)}")


# ====================================================================== tiered storage
def _tier_addrs(c: AdminClient, a: Any) -> list[str]:
    """-b, else every master of the cluster (the topic filters the answer, not the brokers)."""
    return [a.brokerAddr] if getattr(a, "brokerAddr", None) else c.all_master_addrs()


def tier_status(c: AdminClient, a: Any) -> None:
    """Per queue the tier's min/max offset and size; per index file its state, items and time
    range (rmqd admin code 9003)."""
    ext = {"topic": a.topic} if a.topic else {}
    for addr in _tier_addrs(c, a):
        st = c.call_json(addr, 9003, ext) or {}
        print(f"# {addr} backend {st.get('backend')} level {st.get('level')} copied {st.get('copied')}"
              + (f" lastError {st['lastError']}" if st.get("lastError") else ""))
        print("%-32s  %-4s  %-12s  %-12s  %-12s  %-14s  %s" % ("#Topic", "#QID", "#MinOffset", "#MaxOffset",
                                                             "#Committed", "#Bytes", "#Segments"))
        for q in st.get("queues", []):
            print("%-32s  %-4d  %-12d  %-12d  %-12d  %-14d  %d" % (q["topic"], q["queueId"], q["minOffset"],
                                                                  q["maxOffset"], q["committedOffset"], q["bytes"],
                                                                  q["segments"]))
        print("%-16s  %-10s  %-10s  %-25s  %-25s  %s" % ("#IndexFile", "#State", "#Items", "#BeginTime", "#EndTime",
                                                          "#Bytes"))
        for f in st.get("indexFiles", []):
            print("%-16d  %-10s  %-10d  %-25s  %-25s  %d" % (f["beginTs"], f["state"], f["items"],
                                                            _ts(f["beginTime"]) if f["beginTime"] > 0 else "-",
                                                            _ts(f["endTime"]) if f["endTime"] > 0 else "-",
                                                            f["bytes"]))


def adopt_tier_index(c: AdminClient, a: Any) -> None:
    """Adopt the index files of `rmqd pipeline index` now (rmqd admin code 9006)."""
    ext = {"dir": a.dir} if a.dir else {}
    _print_adoptions(_long_calls(c, 9006, ext, _tier_addrs(c, a)), "index output", "reason", "index output(s)",
                     lambda r: f"(job {r['job']}{', finished after a restart' if r.get('resumed') else ''}): "
                               f"{r['files']} index file(s), {r['items']} item(s)")


def commit_tier(c: AdminClient, a: Any) -> None:
    """Copy everything pending into the tier, seal the writable index file and upload the sealed
    ones now (rmqd admin code 9004)."""
    ext = {"upload": "false" if str(a.upload).lower() == "false" else "true"}
    saved, c.timeout = c.timeout, max(c.timeout, 600.0)
    try:
        for addr in _tier_addrs(c, a):
            body = c.call_json(addr, 9004, ext) or {}
            print(f"{addr}: copied {body.get('copied')} message(s), {body.get('indexSteps')} index step(s)")
    finally:
        c.timeout = saved
