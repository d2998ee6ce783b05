"""``rmqd admin`` lite sub-commands: the 5.5 mqadmin ``getBrokerLiteInfo``, ``getParentTopicInfo``,
``getLiteTopicInfo``, ``getLiteClientInfo``, ``getLiteGroupInfo`` and ``triggerLiteDispatch`` (remoting codes
200074…200079), and ``getPriorityBacklog`` (rmqd's own: a PRIORITY topic's backlog per priority level)."""
from __future__ import annotations

import argparse
import json
import re

from rmqd.admin.client import AdminClient, ExtFields
from rmqd.admin.options import BROKER as _B, CLUSTER as _C, SpecTable
from rmqd.grpc.json_fields import integer, obj
from rmqd.lite import remoting as lr

_QUEUE_ID = re.compile(r"queue_?[iI]d\W+(\d+)")


def _each(c: AdminClient, a: argparse.Namespace, code: int, ext: ExtFields) -> None:
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        print(f"#Broker {addr}")
        print(json.dumps(c.call_json(addr, code, ext), indent=2, sort_keys=True))


def broker_lite_info(c: AdminClient, a: argparse.Namespace) -> None:
    _each(c, a, lr.GET_BROKER_LITE_INFO, {})


def parent_topic_info(c: AdminClient, a: argparse.Namespace) -> None:
    _each(c, a, lr.GET_PARENT_TOPIC_INFO, {"topic": a.parentTopic})


def lite_topic_info(c: AdminClient, a: argparse.Namespace) -> None:
    _each(c, a, lr.GET_LITE_TOPIC_INFO, {"parentTopic": a.parentTopic, "liteTopic": a.liteTopic})


def lite_client_info(c: AdminClient, a: argparse.Namespace) -> None:
    _each(c, a, lr.GET_LITE_CLIENT_INFO, {"parentTopic": a.parentTopic, "group": a.group, "clientId": a.clientId})


def lite_group_info(c: AdminClient, a: argparse.Namespace) -> None:
    _each(c, a, lr.GET_LITE_GROUP_INFO, {"group": a.group, "liteTopic": a.liteTopic, "topK": a.topK})


def trigger_dispatch(c: AdminClient, a: argparse.Namespace) -> None:
    _each(c, a, lr.TRIGGER_LITE_DISPATCH, {"group": a.group, "clientId": a.clientId})


def priority_backlog(c: AdminClient, a: argparse.Namespace) -> None:
    """Per broker and priority level (queue id): messages not yet consumed by the group."""
    from rmqd.remoting.codes import RequestCode
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        stats = obj(c.call_json(addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": a.group, "topic": a.topic}))
        levels: dict[int, int] = {}
        for key, st in obj(stats.get("offsetTable")).items():
            found = _QUEUE_ID.search(str(key))          # a MessageQueue key, or its text
            qid = int(found.group(1)) if found else 0
            w = obj(st)
            levels[qid] = levels.get(qid, 0) + max(0, integer(w.get("brokerOffset", 0)) -
                                                   integer(w.get("consumerOffset", 0)))
        print(f"#Broker {addr} topic {a.topic} group {a.group}")
        print("%-8s %s" % ("#Level", "#Backlog"))
        for qid in sorted(levels, reverse=True):
            print("%-8d %d" % (qid, levels[qid]))


SPEC: SpecTable = {
    "getBrokerLiteInfo": (broker_lite_info, "Lite Mode state of brokers (lite topics, subscriptions, events)", [
        (_B, {}), (_C, {})]),
    "getParentTopicInfo": (parent_topic_info, "A LITE parent topic: expiration, bound groups, lite topic count", [
        (_B, {}), (_C, {}), (("-p", "--parentTopic"), {"required": True})]),
    "getLiteTopicInfo": (lite_topic_info, "A lite topic: offsets and subscribers", [
        (_B, {}), (_C, {}), (("-p", "--parentTopic"), {"required": True}), (("-l", "--liteTopic"), {"required": True})]),
    "getLiteClientInfo": (lite_client_info, "A lite consumer: its lite topics and pending events", [
        (_B, {}), (_C, {}), (("-p", "--parentTopic"), {}), (("-g", "--group"), {}),
        (("-i", "--clientId"), {"required": True})]),
    "getLiteGroupInfo": (lite_group_info, "A lite group: backlog in all and the top lite topics by backlog", [
        (_B, {}), (_C, {}), (("-g", "--group"), {"required": True}), (("-l", "--liteTopic"), {}),
        (("-k", "--topK"), {"type": int, "default": 20})]),
    "triggerLiteDispatch": (trigger_dispatch, "Offer every subscribed lite topic with messages again", [
        (_B, {}), (_C, {}), (("-g", "--group"), {"required": True}), (("-i", "--clientId"), {})]),
    "getPriorityBacklog": (priority_backlog, "A PRIORITY topic's backlog per priority level for a group", [
        (_B, {}), (_C, {}), (("-t", "--topic"), {"required": True}), (("-g", "--group"), {"required": True})]),
}
