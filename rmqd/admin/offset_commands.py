"""``rmqd admin`` sub-commands of consumer offsets: clone a group's offsets, reset them by time, skip the backlog.

Each ``fn(client, args)`` talks to the servers and prints like mqadmin; ``SPEC`` is their part of the
command table (:mod:`rmqd.admin.main`)."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rmqd.admin.client import AdminClient, AdminError
from rmqd.admin.options import GROUP, SpecTable, TOPIC, is_true, parse_time
from rmqd.remoting import fastjson
from rmqd.admin.bodies import ConsumeStats, ResetOffsetBody
from rmqd.remoting.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from rmqd.remoting.fastjson import MessageQueue


def clone_group_offset(c: AdminClient, a: argparse.Namespace) -> None:
    for addr in c.route_masters(a.topic).values():
        c.call(addr, RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": a.srcGroup, "destGroup": a.destGroup,
                                                      "topic": a.topic, "offline": is_true(a.offline)})
    print(f"clone group offset success. srcGroup[{a.srcGroup}], destGroup={a.destGroup}, topic[{a.topic}]")


def reset_offsets(c: AdminClient, group: str, topic: str, ts: int, force: bool,
                  cplus: bool = False) -> dict[MessageQueue, int]:
    """222 on every master; on CONSUMER_NOT_ONLINE the offline path (208 + 29 + 15)."""
    out: dict[MessageQueue, int] = {}
    for name, addr in sorted(c.route_masters(topic).items()):
        try:
            body = c.answer(ResetOffsetBody, addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                            {"topic": topic, "group": group, "timestamp": ts, "isForce": force})
            table = body.get("offsetTable", {})
            if isinstance(table, list):
                out.update({fastjson.MessageQueue(x["topic"], x["brokerName"], x["queueId"]): x["offset"]
                            for x in table})
            else:
                out.update(table)
        except AdminError as exc:
            if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            stats = c.answer(ConsumeStats, addr, RequestCode.GET_CONSUME_STATS,
                             {"consumerGroup": group, "topic": topic})
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


def _print_reset(out: dict[MessageQueue, int]) -> None:
    print("%-40s  %-40s  %-40s" % ("#brokerName", "#queueId", "#offset"))
    for mq in sorted(out, key=lambda m: (m.brokerName, m.queueId)):
        print("%-40s  %-40d  %-40d" % (mq.brokerName, mq.queueId, out[mq]))


def reset_offset_by_time(c: AdminClient, a: argparse.Namespace) -> None:
    ts = parse_time(a.timestamp)
    force = is_true(a.force)
    out = reset_offsets(c, a.consumerGroup, a.topic, ts, force, a.cplus)
    print(f"rollback consumer offset by specified group[{a.consumerGroup}], topic[{a.topic}], force[{force}], "
          f"timestamp(string)[{a.timestamp}], timestamp(long)[{ts}]")
    _print_reset(out)


def skip_accumulated(c: AdminClient, a: argparse.Namespace) -> None:
    _print_reset(reset_offsets(c, a.consumerGroup, a.topic, -1, is_true(a.force)))


SPEC: SpecTable = {
    "cloneGroupOffset": (clone_group_offset, "clone offset from other group", [
        (("-s", "--srcGroup"), {"required": True}), (("-d", "--destGroup"), {"required": True}),
        (TOPIC, {"required": True}), (("-o", "--offline"), {"default": "false"})]),
    "resetOffsetByTime": (reset_offset_by_time, "Reset consumer offset by timestamp", [
        (GROUP, {"required": True}), (TOPIC, {"required": True}), (("-s", "--timestamp"), {"required": True}),
        (("-f", "--force"), {"default": "true"}), (("-c", "--cplus"), {"action": "store_true"})]),
    "skipAccumulatedMessage": (skip_accumulated, "Skip all messages that are accumulated (not consumed)", [
        (GROUP, {"required": True}), (TOPIC, {"required": True}), (("-f", "--force"), {"default": "true"})]),
}
