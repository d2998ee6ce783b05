"""``rmqd admin`` sub-commands of subscription groups and the clients: groups, consume mode, consumer progress,
connections and status.

Each ``fn(client, args)`` talks to the servers and prints like mqadmin; ``SPEC`` is their part of the
command table (:mod:`rmqd.admin.main`)."""
from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Optional

from rmqd.admin.bodies import ConsumeStats, ConsumerConnection, OffsetWrapper, ProducerConnection
from rmqd.admin.client import AdminClient, AdminError
from rmqd.admin.options import BROKER, CLUSTER, GROUP, SpecTable, TOPIC, human_time, is_true
from rmqd.common.constants import RETRY_GROUP_TOPIC_PREFIX as RETRY
from rmqd.remoting import fastjson
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.store import topic_attributes

if TYPE_CHECKING:
    from rmqd.remoting.fastjson import MessageQueue


def update_sub_group(c: AdminClient, a: argparse.Namespace) -> None:
    cfg = {"brokerId": a.brokerId, "consumeBroadcastEnable": is_true(a.consumeBroadcastEnable),
           "consumeEnable": is_true(a.consumeEnable), "consumeFromMinEnable": is_true(a.consumeFromMinEnable),
           "groupName": a.consumerGroup, "notifyConsumerIdsChangedEnable": is_true(a.notifyConsumerIdsChanged),
           "retryMaxTimes": a.retryMaxTimes, "retryQueueNums": a.retryQueueNums,
           "whichBrokerWhenConsumeSlowly": a.whichBrokerWhenConsumeSlowly}
    if is_true(getattr(a, "consumeMessageOrderly", "false")):      # 5.x: a FIFO group
        cfg["consumeMessageOrderly"] = True
    if getattr(a, "attributes", None):                            # 5.x: "+lite.bind.topic=P,+priority.factor=50"
        cfg["attributes"] = topic_attributes.parse(a.attributes)
    body = fastjson.dumps(cfg)
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        c.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)
        print(f"create subscription group to {addr} success.")
    print("SubscriptionGroupConfig " + json.dumps(cfg, sort_keys=True))


def set_consume_mode(c: AdminClient, a: argparse.Namespace) -> None:
    """5.x mqadmin setConsumeMode: SET_MESSAGE_REQUEST_MODE (401), how QUERY_ASSIGNMENT serves the group."""
    body = {"topic": a.topicName, "consumerGroup": a.consumerGroup, "mode": a.mode,
            "popShareQueueNum": a.popShareQueueNum}
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        c.call(addr, 401, None, fastjson.dumps(body))
        print(f"set consume mode to {addr} success.")
    print(f"topic[{a.topicName}] group[{a.consumerGroup}] consume mode[{a.mode}] "
          f"popShareQueueNum[{a.popShareQueueNum}]")


def delete_sub_group(c: AdminClient, a: argparse.Namespace) -> None:
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        c.call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
               {"groupName": a.consumerGroup, "removeOffset": is_true(a.removeOffset),
                "cleanOffset": is_true(a.removeOffset)})
        print(f"delete subscription group [{a.consumerGroup}] from broker [{addr}] in cluster "
              f"[{a.clusterName or ''}] success.")


def _consume_stats(c: AdminClient, group: str,
                   topic: Optional[str] = None) -> tuple[dict[MessageQueue, OffsetWrapper], float]:
    table: dict[MessageQueue, OffsetWrapper] = {}
    tps = 0.0
    for addr in c.route_masters(RETRY + group).values():
        body = c.answer(ConsumeStats, addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic})
        table.update(body.get("offsetTable", {}))
        tps += float(body.get("consumeTps", 0.0))
    return table, tps


def consumer_progress(c: AdminClient, a: argparse.Namespace) -> None:
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
                                                                  human_time(w.get("lastTimestamp", 0))))
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


def _consumer_conn(c: AdminClient, group: str) -> ConsumerConnection:
    last: Optional[AdminError] = None
    for addr in c.route_masters(RETRY + group).values():
        try:
            return c.answer(ConsumerConnection, addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                            {"consumerGroup": group})
        except AdminError as exc:
            last = exc
    raise last or AdminError(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")


def consumer_connection(c: AdminClient, a: argparse.Namespace) -> None:
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


def consumer_status(c: AdminClient, a: argparse.Namespace) -> None:
    cc = _consumer_conn(c, a.consumerGroup)
    masters = list(c.route_masters(RETRY + a.consumerGroup).values())
    for i, conn in enumerate(sorted(cc["connectionSet"], key=lambda x: x["clientId"]), 1):
        print("%03d  %-40s %-20s %s" % (i, conn["clientId"], conn["language"], conn["version"]))
    targets = [x["clientId"] for x in cc["connectionSet"] if not a.clientId or x["clientId"] == a.clientId]
    for cid in targets:
        try:
            resp = c.call(masters[0], RequestCode.GET_CONSUMER_RUNNING_INFO,
                          {"consumerGroup": a.consumerGroup, "clientId": cid, "jstackEnable": is_true(a.jstack)})
            print(f"\n{cid}\n{(resp.body_bytes() or b'').decode('utf-8', 'replace')}")
        except AdminError as exc:
            print(f"\n{cid}: {exc}")


def producer_connection(c: AdminClient, a: argparse.Namespace) -> None:
    for addr in c.route_masters(a.topic).values():
        body = c.answer(ProducerConnection, addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                        {"producerGroup": a.producerGroup})
        for i, conn in enumerate(sorted(body["connectionSet"], key=lambda x: x["clientId"]), 1):
            print("%04d  %-32s %-22s %-8s %s" % (i, conn["clientId"], conn["clientAddr"], conn["language"],
                                                conn["version"]))
        return


SPEC: SpecTable = {
    "updateSubGroup": (update_sub_group, "Update or create subscription group", [
        (BROKER, {}), (CLUSTER, {}), (GROUP, {"required": True}), (("-s", "--consumeEnable"), {"default": "true"}),
        (("-m", "--consumeFromMinEnable"), {"default": "false"}),
        (("-d", "--consumeBroadcastEnable"), {"default": "false"}),
        (("-q", "--retryQueueNums"), {"type": int, "default": 1}),
        (("-r", "--retryMaxTimes"), {"type": int, "default": 16}), (("-i", "--brokerId"), {"type": int, "default": 0}),
        (("-w", "--whichBrokerWhenConsumeSlowly"), {"type": int, "default": 1}),
        (("-a", "--notifyConsumerIdsChanged"), {"default": "true"}),
        (("-o", "--consumeMessageOrderly"), {"default": "false"}), (("--attributes",), {})]),
    "setConsumeMode": (set_consume_mode, "set consume mode (PULL or POP) of a group on a topic", [
        (BROKER, {}), (CLUSTER, {}), (("-t", "--topicName"), {"required": True}), (GROUP, {"required": True}),
        (("-m", "--mode"), {"required": True, "choices": ["PULL", "POP"]}),
        (("-q", "--popShareQueueNum"), {"type": int, "default": 0})]),
    "deleteSubGroup": (delete_sub_group, "Delete subscription group from broker", [
        (BROKER, {}), (CLUSTER, {}), (GROUP, {"required": True}), (("-r", "--removeOffset"), {"default": "false"})]),
    "consumerProgress": (consumer_progress, "Query consumers's progress, speed", [
        (GROUP, {}), (("-s", "--showClientIP"), {"default": "false"})]),
    "consumerStatus": (consumer_status, "Query consumer's internal data structure", [
        (GROUP, {"required": True}), (("-i", "--clientId"), {}), (("-s", "--jstack"), {"default": "false"})]),
    "consumerConnection": (consumer_connection, "Query consumer's socket connection", [
        (GROUP, {"required": True})]),
    "producerConnection": (producer_connection, "Query producer's socket connection", [
        (("-g", "--producerGroup"), {"required": True}), (TOPIC, {"required": True})]),
}
