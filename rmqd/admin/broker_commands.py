"""``rmqd admin`` sub-commands of brokers, clusters and name servers: cluster list, runtime status, configs, write
permission, store clean-up, stats, KV config.

Each ``fn(client, args)`` talks to the servers and prints like mqadmin; ``SPEC`` is their part of the
command table (:mod:`rmqd.admin.main`)."""
from __future__ import annotations

import argparse
import time
from typing import Optional

from rmqd.admin.bodies import BrokerStatsData, ConsumeStats, ConsumeStatsList, GroupList, RuntimeInfo
from rmqd.admin.client import AdminClient, AdminError
from rmqd.admin.ha_status import ha_status
from rmqd.admin.options import BROKER, CLUSTER, SpecTable, TOPIC, human_time, is_true
from rmqd.common.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX as RETRY
from rmqd.config import parse_properties
from rmqd.remoting.codes import RequestCode


def _runtime(c: AdminClient, addr: str) -> dict[str, str]:
    return c.answer(RuntimeInfo, addr, RequestCode.GET_BROKER_RUNTIME_INFO)["table"]


def cluster_list(c: AdminClient, a: argparse.Namespace) -> None:
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


def broker_status(c: AdminClient, a: argparse.Namespace) -> None:
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        for k, v in sorted(_runtime(c, addr).items()):
            print("%-32s: %s" % (k, v) if a.brokerAddr else "%-24s %-32s: %s" % (addr, k, v))


def get_broker_config(c: AdminClient, a: argparse.Namespace) -> None:
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        resp = c.call(addr, RequestCode.GET_BROKER_CONFIG)
        print(f"============{addr}============")
        for k, v in sorted(parse_properties((resp.body_bytes() or b"").decode("utf-8")).items()):
            print("%-50s=  %s" % (k, v))


def update_broker_config(c: AdminClient, a: argparse.Namespace) -> None:
    body = f"{a.key}={a.value}\n".encode("utf-8")
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        c.call(addr, RequestCode.UPDATE_BROKER_CONFIG, None, body)
        print(f"update broker config success, {addr}")


def get_namesrv_config(c: AdminClient, a: argparse.Namespace) -> None:
    for ns in c.namesrv_addrs:
        resp = c.call(ns, RequestCode.GET_NAMESRV_CONFIG)
        print(f"============{ns}============")
        for k, v in sorted(parse_properties((resp.body_bytes() or b"").decode("utf-8")).items()):
            print("%-50s=  %s" % (k, v))


def update_namesrv_config(c: AdminClient, a: argparse.Namespace) -> None:
    for ns in c.namesrv_addrs:
        c.call(ns, RequestCode.UPDATE_NAMESRV_CONFIG, None, f"{a.key}={a.value}\n".encode("utf-8"))
    print(f"update name server config success!{c.namesrv_addrs}\n{a.key} : {a.value}")


def wipe_write_perm(c: AdminClient, a: argparse.Namespace) -> None:
    for ns in c.namesrv_addrs:
        resp = c.call(ns, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": a.brokerName})
        print(f"wipe write perm of broker[{a.brokerName}] in name server[{ns}] OK, "
              f"{(resp.ext_fields or {}).get('wipeTopicCount')}")


def add_write_perm(c: AdminClient, a: argparse.Namespace) -> None:
    for ns in c.namesrv_addrs:
        resp = c.call(ns, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": a.brokerName})
        print(f"add write perm of broker[{a.brokerName}] in name server[{ns}] OK, "
              f"{(resp.ext_fields or {}).get('addTopicCount')}")


def _broker_targets(c: AdminClient, a: argparse.Namespace) -> list[str]:
    """``-b`` if given, else the masters of ``-c``, else every master of every cluster."""
    if a.brokerAddr:
        return [a.brokerAddr]
    if a.clusterName:
        return c.master_addrs(a.clusterName)
    return [x for cl in c.cluster_info().get("clusterAddrTable", {}) for x in c.master_addrs(cl)]


def _call_each(c: AdminClient, a: argparse.Namespace, code: int) -> None:
    targets = _broker_targets(c, a)
    for addr in targets:
        c.call(addr, code)
    print(f"{'success' if targets else 'false'}")


def clean_expired_cq(c: AdminClient, a: argparse.Namespace) -> None:
    _call_each(c, a, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)


def clean_unused_topic(c: AdminClient, a: argparse.Namespace) -> None:
    _call_each(c, a, RequestCode.CLEAN_UNUSED_TOPIC)


def delete_expired_commit_log(c: AdminClient, a: argparse.Namespace) -> None:
    _call_each(c, a, RequestCode.DELETE_EXPIRED_COMMITLOG)


def _stats_data(c: AdminClient, addr: str, name: str, key: str) -> Optional[BrokerStatsData]:
    try:
        return c.answer(BrokerStatsData, addr, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
    except AdminError:
        return None


def stats_all(c: AdminClient, a: argparse.Namespace) -> None:
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
        groups: set[str] = set()
        for addr in masters.values():
            sd = _stats_data(c, addr, "TOPIC_PUT_NUMS", t)
            if sd:
                in_tps += sd["statsMinute"]["tps"]
                in_day += sd["statsDay"]["sum"]
            try:
                by_who = c.answer(GroupList, addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": t})
                groups |= set(by_who["groupList"])
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
                    st = c.answer(ConsumeStats, addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": g, "topic": t})
                    acc += sum(w["brokerOffset"] - w["consumerOffset"] for w in st["offsetTable"].values())
                except AdminError:
                    pass
            print("%-64s  %-64s %12d %11.2f %11.2f %14d %14d" % (t, g, acc, in_tps, out_tps, in_day, out_day))


def broker_consume_stats(c: AdminClient, a: argparse.Namespace) -> None:
    body = c.answer(ConsumeStatsList, a.brokerAddr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": is_true(a.order)})
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
                        human_time(w.get("lastTimestamp", 0))))
    print(f"\nDiff Total: {body.get('totalDiff', 0)}")


def update_kv_config(c: AdminClient, a: argparse.Namespace) -> None:
    c.namesrv(RequestCode.PUT_KV_CONFIG, {"namespace": a.namespace, "key": a.key, "value": a.value})
    print("update kv config in namespace success.")


def delete_kv_config(c: AdminClient, a: argparse.Namespace) -> None:
    c.namesrv(RequestCode.DELETE_KV_CONFIG, {"namespace": a.namespace, "key": a.key})
    print("delete kv config from namespace success.")


SPEC: SpecTable = {
    "clusterList": (cluster_list, "List all of clusters", [
        (("-m", "--moreStats"), {"action": "store_true"}), (CLUSTER, {}), (("-i", "--interval"), {"type": int})]),
    "brokerStatus": (broker_status, "Fetch broker runtime status data", [(BROKER, {}), (CLUSTER, {})]),
    "getBrokerConfig": (get_broker_config, "Get broker config by cluster or special broker", [
        (BROKER, {}), (CLUSTER, {})]),
    "updateBrokerConfig": (update_broker_config, "Update broker's config", [
        (BROKER, {}), (CLUSTER, {}), (("-k", "--key"), {"required": True}), (("-v", "--value"), {"required": True})]),
    "getNamesrvConfig": (get_namesrv_config, "Get configs of name server", []),
    "updateNamesrvConfig": (update_namesrv_config, "Update configs of name server", [
        (("-k", "--key"), {"required": True}), (("-v", "--value"), {"required": True})]),
    "wipeWritePerm": (wipe_write_perm, "Wipe write perm of broker in all name server", [
        (("-b", "--brokerName"), {"required": True})]),
    "addWritePerm": (add_write_perm, "Add write perm of broker in all name server", [
        (("-b", "--brokerName"), {"required": True})]),
    "cleanExpiredCQ": (clean_expired_cq, "Clean expired ConsumeQueue on broker", [(BROKER, {}), (CLUSTER, {})]),
    "cleanUnusedTopic": (clean_unused_topic, "Clean unused topic on broker", [(BROKER, {}), (CLUSTER, {})]),
    "deleteExpiredCommitLog": (delete_expired_commit_log, "Delete expired CommitLog files",
                               [(BROKER, {}), (CLUSTER, {})]),
    "statsAll": (stats_all, "Topic and Consumer tps stats", [
        (("-a", "--activeTopic"), {"action": "store_true"}), (TOPIC, {})]),
    "brokerConsumeStats": (broker_consume_stats, "Fetch broker consume stats data", [
        (("-b", "--brokerAddr"), {"required": True}), (("-t", "--timeoutMillis"), {"type": int}),
        (("-l", "--level"), {"type": int, "default": 0}), (("-o", "--order"), {"default": "false"})]),
    "updateKvConfig": (update_kv_config, "Create or update KV config", [
        (("-s", "--namespace"), {"required": True}), (("-k", "--key"), {"required": True}),
        (("-v", "--value"), {"required": True})]),
    "deleteKvConfig": (delete_kv_config, "Delete KV config", [
        (("-s", "--namespace"), {"required": True}), (("-k", "--key"), {"required": True})]),
    "haStatus": (ha_status, "Fetch ha runtime status data (masters' slaves with their lag in bytes and ms)", [
        (BROKER, {}), (CLUSTER, {})]),
}
