"""``rmqd admin`` lite sub-commands: the 5.5 mqadmin ``getBrokerLiteInfo``, ``getParentTopicInfo``,
``getLiteTopicInfo``, ``getLiteClientInfo``, ``getLiteGroupInfo`` and ``triggerLiteDispatch`` (remoting codes
200074…200079), and ``getPriorityBacklog`` (rmqd's own: a PRIORITY topic's backlog per priority level)."""
from __future__ import annotations

import json
import re
from typing import Any

from rmqd.admin.client import AdminClient
from rmqd.admin.options import BROKER as _B, CLUSTER as _C, SpecTable
from rmqd.lite import remoting as lr

_QUEUE_ID = re.compile(r"queue_?[iI]d\W+(\d+)")


def _each(c: AdminClient, a: Any, code: int, ext: dict) -> None:
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        print(f"#Broker {addr}")
        print(json.dumps(c.call_json(addr, code, ext), indent=2, sort_keys=True))


def broker_lite_info(c: AdminClient, a: Any) -> None:
    _each(c, a, lr.GET_BROKER_LITE_INFO, {})


def parent_topic_info(c: AdminClient, a: Any) -> None:
    _each(c, a, lr.GET_PARENT_TOPIC_INFO, {"topic": a.parentTopic})


def lite_topic_info(c: AdminClient, a: Any) -> None:
    _each(c, a, lr.GET_LITE_TOPIC_INFO, {"parentTopic": a.parentTopic, "liteTopic": a.liteTopic})


def lite_client_info(c: AdminClient, a: Any) -> None:
    _each(c, a, lr.GET_LITE_CLIENT_INFO, {"parentTopic": a.parentTopic, "group": a.group, "clientId": a.clientId})


def lite_group_info(c: AdminClient, a: Any) -> None:
    _each(c, a, lr.GET_LITE_GROUP_INFO, {"group": a.group, "liteTopic": a.liteTopic, "topK": a.topK})


def trigger_dispatch(c: AdminClient, a: Any) -> None:
    _each(c, a, lr.TRIGGER_LITE_DISPATCH, {"group": a.group, "clientId": a.clientId})


def priority_backlog(c: AdminClient, a: Any) -> None:
    """Per broker and priority level (queue id): messages not yet consumed by the group."""
    from rmqd.remoting.codes import RequestCode
    for addr in c.broker_addrs_of(a.brokerAddr, a.clusterName):
        stats = c.call_json(addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": a.group, "topic": a.topic}) or {}
        levels: dict[int, int] = {}
        for key, st in (stats.get("offsetTable") or {}).items():
            found = _QUEUE_ID.search(str(key))
            qid = int(key.get("queueId", 0)) if isinstance(key, dict) else int(found.group(1)) if found else 0
            levels[qid] = levels.get(qid, 0) + max(0, int(st.get("brokerOffset", 0)) - int(st.get("consumerOffset", 0)))
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
