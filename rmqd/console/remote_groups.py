"""RemoteGroups: the console's consumer group pages over the remoting admin codes: the list with each group's lag,
consume TPS and online consumers, a group (its queues, connections and subscriptions), a consumer's running info,
create or update, and an offset reset by time.
"""
from __future__ import annotations

from typing import Mapping, Optional

from rmqd.admin.client import AdminError
from rmqd.console.admin_bodies import ConsumeStatsBody, ConsumerConnectionBody, SubscriptionGroupsBody
from rmqd.console.remote_cluster import RemoteCluster
from rmqd.console.view_base import (GroupPage, GroupRow, GroupSummary, JsonObject, LagRow, Page, ViewError, jsonable,
                                   page_of)
from rmqd.remoting import fastjson
from rmqd.remoting.codes import RequestCode


class RemoteGroups(RemoteCluster):
    """The consumer group pages."""

    def group_names(self) -> dict[str, Mapping[str, object]]:
        """Group name -> subscription group config, over every master."""
        out: dict[str, Mapping[str, object]] = {}
        for addr in self.masters().values():
            body = self._answer(SubscriptionGroupsBody, addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            for name, cfg in (body.get("subscriptionGroupTable") or {}).items():
                out.setdefault(name, cfg)
        return out

    def groups(self, q: str = "", page: int = 1, size: int = 20, system: bool = False) -> Page[GroupRow]:
        from rmqd.store.metadata import SYSTEM_GROUPS
        ql = q.lower()
        names = sorted(g for g in self.group_names()
                       if (not ql or ql in g.lower()) and (system or g not in SYSTEM_GROUPS))
        out = page_of(names, page, size)
        return {**out, "items": [{"group": g, **self.group_summary(g)} for g in out["items"]]}

    def group_summary(self, group: str) -> GroupSummary:
        lag, tps = 0, 0.0
        try:
            for addr in self.masters().values():
                body = self._answer(ConsumeStatsBody, addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": group})
                tps += float(body.get("consumeTps", 0.0))
                for w in (body.get("offsetTable") or {}).values():
                    lag += max(0, w["brokerOffset"] - w["consumerOffset"])
        except AdminError:
            pass
        conn = self._connections(group)
        return {"lag": lag, "consumeTps": round(tps, 2), "online": len(conn.get("connectionSet", [])),
                "consumeType": conn.get("consumeType", ""), "messageModel": conn.get("messageModel", "")}

    def _connections(self, group: str) -> ConsumerConnectionBody:
        for addr in self.masters().values():
            try:
                return self._answer(ConsumerConnectionBody, addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                    {"consumerGroup": group})
            except AdminError:
                continue
        return {}

    def group(self, group: str) -> GroupPage:
        configs = self.group_names()
        queues: list[LagRow] = []
        for name, addr in sorted(self.masters().items()):
            try:
                body = self._answer(ConsumeStatsBody, addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": group})
            except AdminError:
                continue
            for mq, w in (body.get("offsetTable") or {}).items():
                queues.append({"topic": mq.topic, "broker": mq.brokerName, "queueId": mq.queueId,
                               "brokerOffset": w["brokerOffset"], "consumerOffset": w["consumerOffset"],
                               "lag": max(0, w["brokerOffset"] - w["consumerOffset"]),
                               "lastTimestamp": w.get("lastTimestamp", 0)})
        if group not in configs and not queues:
            raise ViewError(f"consumer group {group} not found", 404)
        queues.sort(key=lambda r: (r["topic"], r["broker"], r["queueId"]))
        conn = self._connections(group)
        subs: dict[str, object] = {t: sd.get("subString") for t, sd in (conn.get("subscriptionTable") or {}).items()}
        return {"group": group, "config": configs.get(group, {}), "queues": queues,
                "lag": sum(q["lag"] for q in queues), "connections": conn.get("connectionSet", []),
                "subscriptions": subs, "consumeType": conn.get("consumeType", ""),
                "messageModel": conn.get("messageModel", ""), "consumeFromWhere": conn.get("consumeFromWhere", "")}

    def running_info(self, group: str, client_id: str) -> JsonObject:
        masters = list(self.masters().values())
        if not masters:
            raise ViewError("no broker")
        last: Optional[Exception] = None
        for addr in masters:
            try:
                resp = self.call(lambda a: a.call(addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                                                  {"consumerGroup": group, "clientId": client_id,
                                                   "jstackEnable": False}))
                raw = resp.body_bytes() if resp.body is not None else b""
                try:
                    return {"clientId": client_id, "info": jsonable(fastjson.loads_lenient(raw))}
                except ValueError:                       # not JSON: show the text as the client sent it
                    return {"clientId": client_id, "text": raw.decode("utf-8", "replace")}
            except AdminError as exc:
                last = exc
        raise ViewError(f"running info of {client_id}: {last}", 502)

    def upsert_group(self, group: str, retry_max_times: int = 16, consume_broadcast: bool = True) -> JsonObject:
        body: dict[str, str | bool | int] = {"groupName": group, "consumeEnable": True, "consumeFromMinEnable": True,
                "consumeBroadcastEnable": bool(consume_broadcast), "retryQueueNums": 1,
                "retryMaxTimes": int(retry_max_times), "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                "notifyConsumerIdsChangedEnable": True}
        raw = fastjson.dumps(body)
        for addr in self.masters().values():
            self.call(lambda a: a.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, raw))
        return {"group": group}

    def reset_offset(self, group: str, topic: str, timestamp: int) -> JsonObject:
        """Reset ``group`` on ``topic`` to the first message stored at/after ``timestamp`` (-1 = skip
        the backlog); online consumers are told by the broker, offline groups get their offsets written."""
        from rmqd.admin.offset_commands import reset_offsets
        self.route_masters(topic)
        out = self.call(lambda a: reset_offsets(a, group, topic, int(timestamp), True))
        return {"group": group, "topic": topic, "timestamp": timestamp,
                "offsets": sorted(({"broker": mq.brokerName, "queueId": mq.queueId, "offset": off}
                                   for mq, off in out.items()), key=lambda r: (r["broker"], r["queueId"]))}
