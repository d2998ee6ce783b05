"""RemoteTopics: the console's topic pages over the remoting admin codes: the list (by name and kind), a topic
(its queues, route and consumer groups), create, delete, a test message, and a topic's producers.
"""
from __future__ import annotations

from typing import cast

from rmqd.admin.client import AdminError
from rmqd.console.admin_bodies import GroupListBody, ProducerConnectionBody, TopicListBody, TopicStatsBody
from rmqd.console.remote_cluster import RemoteCluster
from rmqd.console.view_base import JsonObject, Page, QueueRow, TopicRow, ViewError, page_of, topic_kind
from rmqd.remoting.codes import RequestCode


class RemoteTopics(RemoteCluster):
    """The topic pages."""

    def topic_names(self) -> list[str]:
        return self.call(lambda a: a.topic_list())

    def system_topics(self) -> set[str]:
        try:
            # the JSON decode boundary (AdminClient.namesrv_json): the name server's topic list body
            body = cast(TopicListBody, self.call(lambda a: a.namesrv_json(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS))
                        or {})
            return set(body.get("topicList", []))
        except AdminError:
            return set()

    def topics(self, q: str = "", kind: str = "all", page: int = 1, size: int = 20) -> Page[TopicRow]:
        system = self.system_topics()
        names = sorted(self.topic_names())
        rows: list[TopicRow] = []
        ql = q.lower()
        for t in names:
            k = topic_kind(t, t in system)
            if ql and ql not in t.lower():
                continue
            if kind not in ("", "all") and k != kind:
                continue
            rows.append({"topic": t, "kind": k})
        out = page_of(rows, page, size)
        for row in out["items"]:
            self._fill_topic_row(row)
        return out

    def _fill_topic_row(self, row: TopicRow) -> None:
        try:
            route = self.route(row["topic"])
        except AdminError:
            return
        qd = route.get("queueDatas") or []
        row["brokers"] = sorted(q["brokerName"] for q in qd)
        row["readQueueNums"] = sum(int(q.get("readQueueNums", 0)) for q in qd)
        row["writeQueueNums"] = sum(int(q.get("writeQueueNums", 0)) for q in qd)
        row["perm"] = qd[0].get("perm", 0) if qd else 0

    def topic(self, topic: str) -> JsonObject:
        try:
            route = self.route(topic)
        except AdminError as exc:
            raise ViewError(f"topic {topic} not found: {exc.remark}", 404)
        masters = self._route_masters(route)
        queues: list[QueueRow] = []
        groups: set[str] = set()
        for name, addr in sorted(masters.items()):
            table = self._answer(TopicStatsBody, addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}).get(
                "offsetTable", {})
            for mq, v in table.items():
                queues.append({"broker": mq.brokerName, "queueId": mq.queueId, "minOffset": v["minOffset"],
                               "maxOffset": v["maxOffset"], "lastUpdateTimestamp": v.get("lastUpdateTimestamp", 0)})
            try:
                groups.update(self._answer(GroupListBody, addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                           {"topic": topic}).get("groupList", []))
            except AdminError:
                pass
        queues.sort(key=lambda r: (r["broker"], r["queueId"]))
        qd = route.get("queueDatas") or []
        return {"topic": topic, "route": route, "queues": queues, "groups": sorted(groups),
                "perm": qd[0].get("perm", 6) if qd else 6,
                "readQueueNums": qd[0].get("readQueueNums", 0) if qd else 0,
                "writeQueueNums": qd[0].get("writeQueueNums", 0) if qd else 0,
                "messages": sum(max(0, q["maxOffset"] - q["minOffset"]) for q in queues)}

    def upsert_topic(self, topic: str, read_queues: int = 4, write_queues: int = 4, perm: int = 6,
                     order: bool = False, cluster: str = "", broker: str = "") -> JsonObject:
        from rmqd.store.metadata import is_valid_topic_name
        if not is_valid_topic_name(topic):
            raise ViewError("topic names are 1-127 characters of letters, digits, %, |, _ and -")
        targets = [broker] if broker else [b["addr"] for b in self.brokers()
                                           if b["brokerId"] == 0 and (not cluster or b["cluster"] == cluster)]
        if not targets:
            raise ViewError("no master broker to create the topic on")
        ext: JsonObject = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": int(read_queues),
               "writeQueueNums": int(write_queues), "perm": int(perm), "topicFilterType": "SINGLE_TAG",
               "topicSysFlag": 0, "order": bool(order)}
        for addr in targets:
            self.call(lambda a: a.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext))
        return {"topic": topic, "brokers": targets}

    def delete_topic(self, topic: str) -> JsonObject:
        masters = self.route_masters(topic)
        for addr in masters.values():
            self.call(lambda a: a.call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}))
        for ns in self.admin.namesrv_addrs:
            self.call(lambda a: a.call(ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic}))
        return {"topic": topic, "deleted": sorted(masters)}

    def send_test(self, topic: str, body: str, tags: str = "", keys: str = "") -> JsonObject:
        masters = self.route_masters(topic)
        if not masters:
            raise ViewError(f"topic {topic} has no master broker", 404)
        name, addr = sorted(masters.items())[0]
        resp = self.call(lambda a: a.send(addr, topic, -1, body.encode("utf-8"), tags or None, keys or None,
                                          group="RMQD_CONSOLE_PRODUCER"))
        ext = resp.ext_fields or {}
        return {"broker": name, "msgId": ext.get("msgId"), "queueId": int(ext.get("queueId", -1)),
                "queueOffset": int(ext.get("queueOffset", -1)), "status": "SEND_OK"}

    # ------------------------------------------------------------------ producers
    def producers(self, topic: str, group: str) -> JsonObject:
        masters = self.route_masters(topic)
        conns = []
        for name, addr in sorted(masters.items()):
            body = self._answer(ProducerConnectionBody, addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                {"producerGroup": group})
            for c in body.get("connectionSet", []):
                conns.append(dict(c, broker=name))
        return {"topic": topic, "group": group, "connections": conns}
