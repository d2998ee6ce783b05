"""LocalClusterView: ``rmqd serve``'s console reads its own broker's tables in-process.

Lists, lag, queue status, connections and producers come straight from the topic, subscription,
offset and connection tables and the store (dict reads and a few mmap reads per row of the page
shown).  Writes, message reads and anything about other brokers go through ``RemoteClusterView``
(the admin codes over loopback), so the broker's own admin rules apply to them unchanged.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Mapping

from rmqd.console.view import RemoteClusterView, ViewError
from rmqd.console.view_base import BrokerRow, GroupPage, GroupSummary, JsonObject, LagRow, QueueRow, TopicRow

if TYPE_CHECKING:
    from rmqd.console.admin_bodies import ConsumerConnectionBody
    from rmqd.console.handles import ConsoleServices

class LocalClusterView(RemoteClusterView):
    """The cluster of an in-process broker (and name server, if this process runs one)."""

    mode = "local"

    def __init__(self, services: "ConsoleServices", timeout: float = 5.0) -> None:
        broker = services.broker
        if broker is None:
            raise ValueError("LocalClusterView needs a broker in this process")
        ns = services.namesrv.address if services.namesrv is not None else (broker.ctx.config.namesrvAddr or "")
        # signed as the broker's own inner user when access control 2.0 has one (else tools.yml's)
        super().__init__(ns, timeout, credentials=broker.auth.config.inner_credentials())
        self.services = services
        self.local_broker = broker
        self.ctx = broker.ctx
        self._offsets_by_group: tuple[float, int, dict[str, list[str]]] = (0.0, -1, {})

    # ------------------------------------------------------------------ helpers
    def _alone(self) -> bool:
        """True when this broker is the whole cluster (then every list is local)."""
        ns = self.services.namesrv
        if ns is None:
            return not self.ctx.config.namesrvAddr
        table = ns.route_info.brokerAddrTable
        return set(table) <= {self.ctx.config.brokerName}

    @property
    def name(self) -> str:
        return self.ctx.config.brokerName

    def _group_keys(self) -> dict[str, list[str]]:
        """group -> its "topic@group" offset keys (rebuilt at most once a second)."""
        built, size, index = self._offsets_by_group
        table = self.ctx.offsets.table
        now = time.monotonic()
        if now - built > 1.0 or size != len(table):
            index = {}
            for key in list(table):
                topic, _, group = key.partition("@")
                index.setdefault(group, []).append(key)
            self._offsets_by_group = (now, len(table), index)
        return index

    # ------------------------------------------------------------------ cluster
    def brokers(self) -> list[BrokerRow]:
        ns = self.services.namesrv
        if ns is not None and not self._alone():
            return super().brokers()
        c = self.ctx.config
        return [{"cluster": c.brokerClusterName, "brokerName": c.brokerName, "brokerId": int(c.brokerId),
                 "addr": self.local_broker.address}]

    # ------------------------------------------------------------------ topics
    def topic_names(self) -> list[str]:
        if not self._alone():
            return super().topic_names()
        return list(self.ctx.topics.table)

    def system_topics(self) -> set[str]:
        return set(self.ctx.topics.system_topics)

    def _fill_topic_row(self, row: TopicRow) -> None:
        tc = self.ctx.topics.get(row["topic"])
        if tc is None:
            return super()._fill_topic_row(row)
        row.update({"brokers": [self.name], "readQueueNums": tc.read_queue_nums,
                    "writeQueueNums": tc.write_queue_nums, "perm": tc.perm})

    def topic(self, topic: str) -> JsonObject:
        ctx = self.ctx
        tc = ctx.topics.get(topic)
        if tc is None or not self._alone():
            return super().topic(topic)
        store = ctx.store
        queues: list[QueueRow] = []
        for qid in range(tc.read_queue_nums):
            hi = store.get_max_offset(topic, qid)
            last = store.get_message_store_timestamp(topic, qid, hi - 1) if hi > 0 else 0
            queues.append({"broker": self.name, "queueId": qid, "minOffset": store.get_min_offset(topic, qid),
                           "maxOffset": hi, "lastUpdateTimestamp": max(0, last)})
        groups = sorted(ctx.offsets.which_group_by_topic(topic)
                        | {g for g, info in ctx.consumers.groups().items() if topic in info.subscriptions})
        ns = self.services.namesrv
        route = ns.route_info.pickup_topic_route_data(topic) if ns is not None else None
        return {"topic": topic, "route": route or {}, "queues": queues, "groups": groups, "perm": tc.perm,
                "readQueueNums": tc.read_queue_nums, "writeQueueNums": tc.write_queue_nums,
                "messages": sum(max(0, q["maxOffset"] - q["minOffset"]) for q in queues)}

    # ------------------------------------------------------------------ groups
    def group_names(self) -> dict[str, Mapping[str, object]]:
        if not self._alone():
            return super().group_names()
        return {name: sg.to_json() for name, sg in list(self.ctx.groups.table.items())}

    def _lag_rows(self, group: str) -> list[LagRow]:
        """Per queue of every topic the group has offsets on, by GET_CONSUME_STATS' rule (a queue
        without a committed offset counts from 0)."""
        from rmqd.processors.admin_common import offset_wrapper
        ctx = self.ctx
        rows: list[LagRow] = []
        for key in sorted(self._group_keys().get(group, [])):
            topic = key.partition("@")[0]
            tc = ctx.topics.get(topic)
            if tc is None:
                continue
            for qid in range(tc.read_queue_nums):
                w, lag = offset_wrapper(ctx.store, ctx.offsets, group, topic, qid)
                rows.append({"topic": topic, "broker": self.name, "queueId": qid, "brokerOffset": w["brokerOffset"],
                             "consumerOffset": w["consumerOffset"], "lag": max(0, lag),
                             "lastTimestamp": w["lastTimestamp"]})
        return rows

    def _conn_info(self, group: str) -> "ConsumerConnectionBody":
        info = self.ctx.consumers.get(group)
        if info is None:
            return {}
        return {"connectionSet": [c.to_connection_json() for c in list(info.channels.values())],
                "consumeType": info.consume_type, "messageModel": info.message_model,
                "consumeFromWhere": info.consume_from_where,
                "subscriptionTable": {t: e.data for t, e in list(info.subscriptions.items())}}

    def group_summary(self, group: str) -> GroupSummary:
        if not self._alone():
            return super().group_summary(group)
        rows = self._lag_rows(group)
        conn = self._conn_info(group)
        stats = self.ctx.stats
        tps = 0.0
        for topic in {r["topic"] for r in rows}:
            tps += stats.tps_group_get_nums(group, topic)
        return {"lag": sum(r["lag"] for r in rows), "consumeTps": round(tps, 2),
                "online": len(conn.get("connectionSet", [])), "consumeType": conn.get("consumeType", ""),
                "messageModel": conn.get("messageModel", "")}

    def group(self, group: str) -> GroupPage:
        if not self._alone():
            return super().group(group)
        sg = self.ctx.groups.table.get(group)
        rows = self._lag_rows(group)
        conn = self._conn_info(group)
        if sg is None and not rows and not conn:
            raise ViewError(f"consumer group {group} not found", 404)
        subs: dict[str, object] = {t: sd.get("subString") for t, sd in (conn.get("subscriptionTable") or {}).items()}
        return {"group": group, "config": sg.to_json() if sg is not None else {}, "queues": rows,
                "lag": sum(r["lag"] for r in rows), "connections": conn.get("connectionSet", []),
                "subscriptions": subs, "consumeType": conn.get("consumeType", ""),
                "messageModel": conn.get("messageModel", ""), "consumeFromWhere": conn.get("consumeFromWhere", "")}

    def group_lags(self) -> dict[str, int]:
        """Total lag of every group with offsets (the lag-trend sampler's one pass), by the same rule
        as the group page: every readable queue of each topic, a queue without an offset from 0."""
        ctx = self.ctx
        store = ctx.store
        out: dict[str, int] = {}
        for key, offsets in list(ctx.offsets.table.items()):
            topic, _, group = key.partition("@")
            tc = ctx.topics.get(topic)
            if tc is None:
                continue
            lag = 0
            for qid in range(tc.read_queue_nums):
                lag += max(0, store.get_max_offset(topic, qid) - max(0, offsets.get(qid, 0)))
            out[group] = out.get(group, 0) + lag
        return out

    # ------------------------------------------------------------------ producers
    def producers(self, topic: str, group: str) -> JsonObject:
        if not self._alone():
            return super().producers(topic, group)
        conns = [dict(c.to_connection_json(), broker=self.name)
                 for c in self.ctx.producers.get(group)]
        return {"topic": topic, "group": group, "connections": conns}

    def extensions(self) -> dict[str, JsonObject]:
        from rmqd.console.extensions import local_extensions
        from rmqd.console.feature_pages import register_builtin
        register_builtin()
        return self._with_failover(local_extensions(self.local_broker))
