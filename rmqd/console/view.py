"""ClusterView: everything the console pages read and do, against a whole cluster.

``RemoteClusterView`` speaks the remoting protocol through ``rmqd.admin.client.AdminClient`` (one
client per executor thread), so it works with rmqd and the Java broker alike.  Every method is
blocking and bounded (page sizes, message limits, scan caps); the HTTP layer runs them in a small
executor, never on the event loop.  ``LocalClusterView`` overrides the table reads in-process.
"""
from __future__ import annotations

import base64
import logging
import threading
import time
from typing import Any, Callable, Iterator, Optional

from rmqd.admin.client import TOOLS_CONSUMER, AdminClient, AdminError, broker_addr_of, tools_credentials
from rmqd.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from rmqd.admin.ha_status import GET_BROKER_HA_STATUS
from rmqd.processors.admin_common import is_system_topic
from rmqd.processors.admin_tier import GET_TIER_STATUS
from rmqd.remoting import fastjson
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.store.message import StoredMessage, decode_messages, decode_offset_msg_id, encode_properties

log = logging.getLogger(__name__)

RETRY = RETRY_GROUP_TOPIC_PREFIX
DLQ = DLQ_GROUP_TOPIC_PREFIX
MAX_PAGE = 200
MAX_MESSAGES = 2000           # one message list (the dashboard's cap)
PREVIEW_CHARS = 160
TOPIC_KINDS = ("all", "normal", "retry", "dlq", "system")
CLUSTER_INFO_TTL_S = 2.0


class ViewError(Exception):
    """A request the view refuses or the cluster answered with an error (shown to the user)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def jsonable(obj: Any) -> Any:
    """fastjson bodies as plain JSON: a MessageQueue map key becomes "topic/brokerName/queueId"."""
    if isinstance(obj, dict):
        return {_key(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [jsonable(v) for v in obj]
    to = getattr(obj, "to_fastjson", None)
    return jsonable(to()) if to is not None else obj


def _key(k: Any) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, fastjson.MessageQueue):
        return f"{k.topic}/{k.brokerName}/{k.queueId}"
    return str(k)


def page_of(items: list, page: int, size: int) -> dict:
    size = max(1, min(MAX_PAGE, int(size)))
    total = len(items)
    pages = max(1, (total + size - 1) // size)
    page = max(1, min(int(page), pages))
    return {"total": total, "page": page, "pages": pages, "size": size,
            "items": items[(page - 1) * size: page * size]}


def topic_kind(topic: str, system: bool = False) -> str:
    """retry | dlq | system (TopicValidator's system topics, the cluster/broker-name topics, the
    reply topic) | normal."""
    if topic.startswith(RETRY):
        return "retry"
    if topic.startswith(DLQ):
        return "dlq"
    return "system" if system or is_system_topic(topic) or topic.endswith("_REPLY_TOPIC") else "normal"


def message_json(m: StoredMessage, broker: str = "", body: bool = False) -> dict:
    """A message as the pages show it; ``body`` adds the raw body (base64)."""
    raw = bytes(m.body)
    try:
        text = raw.decode("utf-8")
        binary = False
    except UnicodeDecodeError:
        text = raw[:PREVIEW_CHARS].decode("utf-8", "replace")
        binary = True
    out = {"msgId": m.msg_id, "uniqKey": m.properties.get("UNIQ_KEY") or "", "topic": m.topic,
           "broker": broker, "queueId": m.queue_id, "queueOffset": m.queue_offset,
           "commitLogOffset": m.commit_log_offset, "tags": m.properties.get("TAGS") or "",
           "keys": m.properties.get("KEYS") or "", "bornTimestamp": m.born_timestamp,
           "storeTimestamp": m.store_timestamp, "bornHost": "%s:%d" % tuple(m.born_host),
           "storeHost": "%s:%d" % tuple(m.store_host), "reconsumeTimes": m.reconsume_times,
           "sysFlag": m.sys_flag, "properties": dict(m.properties), "bodySize": len(raw),
           "binary": binary, "preview": text[:PREVIEW_CHARS]}
    if body:
        out["body"] = base64.b64encode(raw).decode("ascii")
    return out


class ClusterView:
    """The console's model of a cluster; subclasses decide where the data comes from."""

    read_only = False
    mode = "base"

    def close(self) -> None:
        pass


class RemoteClusterView(ClusterView):
    """A cluster seen through its name servers and brokers' remoting admin codes."""

    mode = "remote"

    def __init__(self, namesrv_addr: str, timeout: float = 5.0,
                 credentials: Optional[tuple[str, str]] = None) -> None:
        """``credentials``: (accessKey, secretKey) every request is signed with (brokers with access control on);
        by default ``$ROCKETMQ_HOME/conf/tools.yml``'s, as ``rmqd admin`` signs."""
        self.namesrv_addr = namesrv_addr
        self.timeout = timeout
        self.credentials = credentials if credentials is not None else tools_credentials()
        self._local = threading.local()
        self._clients: list[AdminClient] = []
        self._lock = threading.Lock()
        self._cluster_info: Optional[tuple[float, dict]] = None

    # ------------------------------------------------------------------ transport
    @property
    def admin(self) -> AdminClient:
        c = getattr(self._local, "client", None)
        if c is None:
            c = self._local.client = AdminClient(self.namesrv_addr, self.timeout, credentials=self.credentials)
            with self._lock:
                self._clients.append(c)
        return c

    def _reset_client(self) -> None:
        c = getattr(self._local, "client", None)
        if c is not None:
            c.close()
            self._local.client = None

    def call(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """Run ``fn(admin, ...)``; a broken connection is dropped and the call retried once."""
        try:
            return fn(self.admin, *args, **kw)
        except TimeoutError:                          # the peer is slow, not gone: do not ask twice
            self._reset_client()
            raise
        except (OSError, ConnectionError) as exc:
            log.info("console: reconnecting after %s", exc)
            self._reset_client()
            return fn(self.admin, *args, **kw)

    def close(self) -> None:
        with self._lock:
            for c in self._clients:
                c.close()
            self._clients.clear()

    def _json(self, addr: str, code: int, ext: Optional[dict] = None, body: Any = None) -> Any:
        return self.call(lambda a: a.call_json(addr, code, ext, body))

    # ------------------------------------------------------------------ cluster
    def cluster_info(self) -> dict:
        """GET_BROKER_CLUSTER_INFO, reused for CLUSTER_INFO_TTL_S (a page asks for it per row)."""
        now = time.monotonic()
        cached = self._cluster_info
        if cached is not None and now - cached[0] < CLUSTER_INFO_TTL_S:
            return cached[1]
        info = self.call(lambda a: a.cluster_info())
        self._cluster_info = (now, info)
        return info

    def brokers(self) -> list[dict]:
        """Every broker (masters and slaves) with cluster, name, id and address."""
        info = self.cluster_info()
        clusters = {name: cl for cl, names in (info.get("clusterAddrTable") or {}).items() for name in names}
        out = []
        for name, bd in sorted((info.get("brokerAddrTable") or {}).items()):
            for bid, addr in sorted((bd.get("brokerAddrs") or {}).items(), key=lambda kv: int(kv[0])):
                out.append({"cluster": clusters.get(name, bd.get("cluster", "")), "brokerName": name,
                            "brokerId": int(bid), "addr": addr})
        return out

    def masters(self) -> dict[str, str]:
        return {b["brokerName"]: b["addr"] for b in self.brokers() if b["brokerId"] == 0}

    def broker_runtime(self, addr: str) -> dict:
        return (self._json(addr, RequestCode.GET_BROKER_RUNTIME_INFO) or {}).get("table", {})

    def overview(self) -> dict:
        brokers = self.brokers()
        for b in brokers:
            try:
                rt = self.broker_runtime(b["addr"])
            except (AdminError, OSError) as exc:
                b["error"] = str(exc)
                continue
            b["version"] = rt.get("brokerVersionDesc", "")
            b["putTps"] = rt.get("putTps", "")
            b["getTransferredTps"] = rt.get("getTransferedTps", rt.get("getTransferredTps", ""))
            b["msgPutTotalTodayNow"] = rt.get("msgPutTotalTodayNow", "")
            b["msgGetTotalTodayNow"] = rt.get("msgGetTotalTodayNow", "")
            b["commitLogDiskRatio"] = rt.get("commitLogDiskRatio", "")
            b["bootTimestamp"] = rt.get("bootTimestamp", "")
            b["commitLogMaxOffset"] = int(rt.get("commitLogMaxOffset", 0) or 0)
        self._replication(brokers)
        return {"namesrv": self.namesrv_addr, "mode": self.mode, "brokers": brokers,
                "clusters": sorted({b["cluster"] for b in brokers})}

    def _replication(self, brokers: list[dict]) -> None:
        """Each slave's lag behind its master: bytes from the CommitLog max offsets, milliseconds from the
        master's GET_BROKER_HA_STATUS (rmqd; a Java 4.9.8 master has none), slaves and connections paired in
        offset order; each master's count of slaves in sync."""
        groups: dict[str, list[dict]] = {}
        for b in brokers:
            if "error" not in b:
                groups.setdefault(b["brokerName"], []).append(b)
        for members in groups.values():
            master = next((b for b in members if b["brokerId"] == 0), None)
            slaves = sorted((b for b in members if b["brokerId"] != 0), key=lambda b: b["commitLogMaxOffset"])
            if master is None or not slaves:
                continue
            for b in slaves:
                b["lagBytes"] = max(0, master["commitLogMaxOffset"] - b["commitLogMaxOffset"])
            try:
                ha = self._json(master["addr"], GET_BROKER_HA_STATUS) or {}
            except AdminError:
                continue                  # a broker without the code (Java 4.9.8): bytes only
            conns = sorted(ha.get("haConnectionInfo") or [], key=lambda c: c.get("slaveAckOffset", 0))
            master["inSyncSlaves"] = ha.get("inSyncSlaveNums", 0)
            if len(conns) == len(slaves):
                for b, c in zip(slaves, conns):
                    b["lagMillis"] = c.get("lagMillis", 0)

    def broker(self, addr: str) -> dict:
        known = {b["addr"] for b in self.brokers()}
        if addr not in known:
            raise ViewError(f"no broker at {addr}", 404)
        resp = self.call(lambda a: a.call(addr, RequestCode.GET_BROKER_CONFIG))
        text = resp.body_bytes().decode("utf-8", "replace") if resp.body is not None else ""
        from rmqd.config import parse_properties
        return {"addr": addr, "runtime": self.broker_runtime(addr), "config": parse_properties(text)}

    # ------------------------------------------------------------------ topics
    def topic_names(self) -> list[str]:
        return self.call(lambda a: a.topic_list())

    def system_topics(self) -> set[str]:
        try:
            return set((self.call(lambda a: a.namesrv_json(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS))
                        or {}).get("topicList", []))
        except AdminError:
            return set()

    def topics(self, q: str = "", kind: str = "all", page: int = 1, size: int = 20) -> dict:
        system = self.system_topics()
        names = sorted(self.topic_names())
        rows = []
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

    def _fill_topic_row(self, row: dict) -> None:
        try:
            route = self.call(lambda a: a.route(row["topic"]))
        except AdminError:
            return
        qd = route.get("queueDatas") or []
        row["brokers"] = sorted(q["brokerName"] for q in qd)
        row["readQueueNums"] = sum(int(q.get("readQueueNums", 0)) for q in qd)
        row["writeQueueNums"] = sum(int(q.get("writeQueueNums", 0)) for q in qd)
        row["perm"] = qd[0].get("perm", 0) if qd else 0

    def topic(self, topic: str) -> dict:
        try:
            route = self.call(lambda a: a.route(topic))
        except AdminError as exc:
            raise ViewError(f"topic {topic} not found: {exc.remark}", 404)
        masters = self._route_masters(route)
        queues = []
        groups: set[str] = set()
        for name, addr in sorted(masters.items()):
            table = (self._json(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}) or {}).get("offsetTable", {})
            for mq, v in table.items():
                queues.append({"broker": mq.brokerName, "queueId": mq.queueId, "minOffset": v["minOffset"],
                               "maxOffset": v["maxOffset"], "lastUpdateTimestamp": v.get("lastUpdateTimestamp", 0)})
            try:
                groups.update((self._json(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
                               or {}).get("groupList", []))
            except AdminError:
                pass
        queues.sort(key=lambda r: (r["broker"], r["queueId"]))
        qd = route.get("queueDatas") or []
        return {"topic": topic, "route": route, "queues": queues, "groups": sorted(groups),
                "perm": qd[0].get("perm", 6) if qd else 6,
                "readQueueNums": qd[0].get("readQueueNums", 0) if qd else 0,
                "writeQueueNums": qd[0].get("writeQueueNums", 0) if qd else 0,
                "messages": sum(max(0, q["maxOffset"] - q["minOffset"]) for q in queues)}

    @staticmethod
    def _route_masters(route: dict) -> dict[str, str]:
        out = {}
        for bd in route.get("brokerDatas") or []:
            a = broker_addr_of(bd, 0)
            if a:
                out[bd["brokerName"]] = a
        return out

    def route_masters(self, topic: str) -> dict[str, str]:
        try:
            return self._route_masters(self.call(lambda a: a.route(topic)))
        except AdminError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                raise ViewError(f"topic {topic} not found", 404)
            raise

    def upsert_topic(self, topic: str, read_queues: int = 4, write_queues: int = 4, perm: int = 6,
                     order: bool = False, cluster: str = "", broker: str = "") -> dict:
        from rmqd.store.metadata import is_valid_topic_name
        if not is_valid_topic_name(topic):
            raise ViewError("topic names are 1-127 characters of letters, digits, %, |, _ and -")
        targets = [broker] if broker else [b["addr"] for b in self.brokers()
                                           if b["brokerId"] == 0 and (not cluster or b["cluster"] == cluster)]
        if not targets:
            raise ViewError("no master broker to create the topic on")
        ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": int(read_queues),
               "writeQueueNums": int(write_queues), "perm": int(perm), "topicFilterType": "SINGLE_TAG",
               "topicSysFlag": 0, "order": bool(order)}
        for addr in targets:
            self.call(lambda a: a.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext))
        return {"topic": topic, "brokers": targets}

    def delete_topic(self, topic: str) -> dict:
        masters = self.route_masters(topic)
        for addr in masters.values():
            self.call(lambda a: a.call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}))
        for ns in self.admin.namesrv_addrs:
            self.call(lambda a: a.call(ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic}))
        return {"topic": topic, "deleted": sorted(masters)}

    def send_test(self, topic: str, body: str, tags: str = "", keys: str = "") -> dict:
        masters = self.route_masters(topic)
        if not masters:
            raise ViewError(f"topic {topic} has no master broker", 404)
        name, addr = sorted(masters.items())[0]
        resp = self.call(lambda a: a.send(addr, topic, -1, body.encode("utf-8"), tags or None, keys or None,
                                          group="RMQD_CONSOLE_PRODUCER"))
        ext = resp.ext_fields or {}
        return {"broker": name, "msgId": ext.get("msgId"), "queueId": int(ext.get("queueId", -1)),
                "queueOffset": int(ext.get("queueOffset", -1)), "status": "SEND_OK"}

    # ------------------------------------------------------------------ consumer groups
    def group_names(self) -> dict[str, dict]:
        """Group name -> subscription group config, over every master."""
        out: dict[str, dict] = {}
        for addr in self.masters().values():
            body = self._json(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG) or {}
            for name, cfg in (body.get("subscriptionGroupTable") or {}).items():
                out.setdefault(name, cfg)
        return out

    def groups(self, q: str = "", page: int = 1, size: int = 20, system: bool = False) -> dict:
        from rmqd.store.metadata import SYSTEM_GROUPS
        ql = q.lower()
        names = sorted(g for g in self.group_names()
                       if (not ql or ql in g.lower()) and (system or g not in SYSTEM_GROUPS))
        out = page_of([{"group": g} for g in names], page, size)
        for row in out["items"]:
            row.update(self.group_summary(row["group"]))
        return out

    def group_summary(self, group: str) -> dict:
        lag, tps = 0, 0.0
        try:
            for addr in self.masters().values():
                body = self._json(addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": group}) or {}
                tps += float(body.get("consumeTps", 0.0))
                for w in (body.get("offsetTable") or {}).values():
                    lag += max(0, w["brokerOffset"] - w["consumerOffset"])
        except AdminError:
            pass
        conn = self._connections(group)
        return {"lag": lag, "consumeTps": round(tps, 2), "online": len(conn.get("connectionSet", [])),
                "consumeType": conn.get("consumeType", ""), "messageModel": conn.get("messageModel", "")}

    def _connections(self, group: str) -> dict:
        for addr in self.masters().values():
            try:
                return self._json(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}) or {}
            except AdminError:
                continue
        return {}

    def group(self, group: str) -> dict:
        configs = self.group_names()
        queues = []
        for name, addr in sorted(self.masters().items()):
            try:
                body = self._json(addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": group}) or {}
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
        subs = {t: sd.get("subString") for t, sd in (conn.get("subscriptionTable") or {}).items()}
        return {"group": group, "config": configs.get(group, {}), "queues": queues,
                "lag": sum(q["lag"] for q in queues), "connections": conn.get("connectionSet", []),
                "subscriptions": subs, "consumeType": conn.get("consumeType", ""),
                "messageModel": conn.get("messageModel", ""), "consumeFromWhere": conn.get("consumeFromWhere", "")}

    def running_info(self, group: str, client_id: str) -> dict:
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

    def upsert_group(self, group: str, retry_max_times: int = 16, consume_broadcast: bool = True) -> dict:
        body = {"groupName": group, "consumeEnable": True, "consumeFromMinEnable": True,
                "consumeBroadcastEnable": bool(consume_broadcast), "retryQueueNums": 1,
                "retryMaxTimes": int(retry_max_times), "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                "notifyConsumerIdsChangedEnable": True}
        raw = fastjson.dumps(body)
        for addr in self.masters().values():
            self.call(lambda a: a.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, raw))
        return {"group": group}

    def reset_offset(self, group: str, topic: str, timestamp: int) -> dict:
        """Reset ``group`` on ``topic`` to the first message stored at/after ``timestamp`` (-1 = skip
        the backlog); online consumers are told by the broker, offline groups get their offsets written."""
        from rmqd.admin.commands import reset_offsets
        self.route_masters(topic)
        out = self.call(lambda a: reset_offsets(a, group, topic, int(timestamp), True))
        return {"group": group, "topic": topic, "timestamp": timestamp,
                "offsets": sorted(({"broker": mq.brokerName, "queueId": mq.queueId, "offset": off}
                                   for mq, off in out.items()), key=lambda r: (r["broker"], r["queueId"]))}

    # ------------------------------------------------------------------ producers
    def producers(self, topic: str, group: str) -> dict:
        masters = self.route_masters(topic)
        conns = []
        for name, addr in sorted(masters.items()):
            body = self._json(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group}) or {}
            for c in body.get("connectionSet", []):
                conns.append(dict(c, broker=name))
        return {"topic": topic, "group": group, "connections": conns}

    # ------------------------------------------------------------------ messages
    def queues_of(self, topic: str) -> list[tuple[str, str, int]]:
        """(brokerName, master addr, queueId) for every readable queue of ``topic``."""
        route = self.call(lambda a: a.route(topic))
        masters = self._route_masters(route)
        out = []
        for qd in route.get("queueDatas") or []:
            addr = masters.get(qd["brokerName"])
            if addr:
                out += [(qd["brokerName"], addr, q) for q in range(int(qd.get("readQueueNums", 0)))]
        return sorted(out)

    def _pull(self, addr: str, topic: str, qid: int, offset: int, n: int = 32) -> tuple[int, list]:
        code, nxt, msgs = self.call(lambda a: a.pull(addr, topic, qid, offset, n, TOOLS_CONSUMER))
        return nxt, msgs

    def queue_range(self, addr: str, topic: str, qid: int, begin: int, end: int) -> tuple[int, int]:
        lo = self.call(lambda a: a.search_offset(addr, topic, qid, begin)) if begin > 0 \
            else self.call(lambda a: a.min_offset(addr, topic, qid))
        hi = self.call(lambda a: a.max_offset(addr, topic, qid))
        if end and end < int(time.time() * 1000):
            hi = min(hi, self.call(lambda a: a.search_offset(addr, topic, qid, end)) + 1)
        return lo, hi

    def messages_by_time(self, topic: str, begin: int, end: int, limit: int = 200) -> dict:
        """Newest first, at most ``limit`` (<= 2000), each message once."""
        limit = max(1, min(MAX_MESSAGES, int(limit)))
        end = end or int(time.time() * 1000) + 1000
        seen: dict[str, dict] = {}
        truncated = False
        try:
            queues = self.queues_of(topic)
        except AdminError:
            raise ViewError(f"topic {topic} not found", 404)
        for name, addr, qid in queues:
            lo, hi = self.queue_range(addr, topic, qid, begin, end)
            start = max(lo, hi - limit)
            if start > lo:
                truncated = True
            off = start
            while off < hi:
                nxt, msgs = self._pull(addr, topic, qid, off, min(32, hi - off))
                if not msgs or nxt <= off:
                    break
                for m in msgs:
                    if m.queue_offset < hi and begin <= m.store_timestamp <= end:
                        seen.setdefault(m.msg_id, message_json(m, name))
                off = nxt
        rows = sorted(seen.values(), key=lambda r: (-r["storeTimestamp"], r["broker"], r["queueId"],
                                                    -r["queueOffset"]))
        if len(rows) > limit:
            truncated = True
            rows = rows[:limit]
        return {"topic": topic, "begin": begin, "end": end, "messages": rows, "truncated": truncated}

    def messages_by_key(self, topic: str, key: str) -> dict:
        from rmqd.admin.commands import query_messages
        msgs = self.call(lambda a: query_messages(a, topic, key, False, 64))
        names = {addr: name for name, addr in self.route_masters(topic).items()}
        seen: dict[str, dict] = {}
        for m in msgs:
            if key in (m.properties.get("KEYS") or "").split(" "):
                seen.setdefault(m.msg_id, message_json(m, names.get("%s:%d" % tuple(m.store_host), "")))
        rows = sorted(seen.values(), key=lambda r: -r["storeTimestamp"])
        return {"topic": topic, "key": key, "messages": rows, "truncated": False}

    def message(self, msg_id: str, topic: str = "") -> dict:
        """A message by offset msgId (VIEW_MESSAGE_BY_ID) or by unique key within ``topic``."""
        m, broker = self._find(msg_id, topic)
        return message_json(m, broker, body=True)

    def message_raw(self, msg_id: str, topic: str = "") -> bytes:
        return bytes(self._find(msg_id, topic)[0].body)

    def _find(self, msg_id: str, topic: str) -> tuple[StoredMessage, str]:
        msg_id = msg_id.strip()
        by_addr = {b["addr"]: b["brokerName"] for b in self.brokers()}
        if topic:
            from rmqd.admin.commands import query_messages
            try:
                for m in self.call(lambda a: query_messages(a, topic, msg_id, True, 32)):
                    if m.properties.get("UNIQ_KEY") == msg_id:
                        return m, by_addr.get("%s:%d" % tuple(m.store_host), "")
            except AdminError as exc:                # not a unique key of this topic: try it as an offset id
                log.debug("unique-key lookup of %s in %s: %s", msg_id, topic, exc)
        try:
            ip, port, offset = decode_offset_msg_id(msg_id)
        except ValueError:
            raise ViewError(f"message {msg_id} not found", 404)
        addr = f"{ip}:{port}"
        if addr not in by_addr:
            raise ViewError(f"message {msg_id} not found (no broker at {addr})", 404)
        try:
            resp = self.call(lambda a: a.call(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset}))
        except AdminError:
            raise ViewError(f"message {msg_id} not found", 404)
        msgs = decode_messages(resp.body_bytes()) if resp.body is not None else []
        if not msgs:
            raise ViewError(f"message {msg_id} not found", 404)
        return msgs[0], by_addr[addr]

    def resend(self, msg_id: str, group: str, client_id: str = "", topic: str = "") -> dict:
        """CONSUME_MESSAGE_DIRECTLY: one online consumer of ``group`` consumes the message again."""
        m, broker = self._find(msg_id, topic)
        detail = self.group(group)
        clients = [c["clientId"] for c in detail["connections"]]
        if not clients:
            raise ViewError(f"consumer group {group} has no online consumer", 409)
        cid = client_id or clients[0]
        addr = self.masters().get(broker) or next(iter(self.masters().values()))
        offset_id = m.msg_id
        resp = self.call(lambda a: a.call(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY,
                                          {"consumerGroup": group, "clientId": cid, "msgId": offset_id,
                                           "topic": m.topic}, ok=tuple(range(-1, 300))))
        raw = resp.body_bytes() if resp.body is not None else b""
        result: Any = raw.decode("utf-8", "replace")
        try:
            result = jsonable(fastjson.loads_lenient(raw)) if raw else None
        except ValueError:
            pass
        if resp.code != ResponseCode.SUCCESS:
            raise ViewError(f"resend failed: {resp.remark}", 502)
        return {"msgId": offset_id, "group": group, "clientId": cid, "result": result}

    def dlq(self, group: str, begin: int = 0, end: int = 0, limit: int = 200) -> dict:
        try:
            return self.messages_by_time(DLQ + group, begin, end, limit)
        except (ViewError, AdminError):
            return {"topic": DLQ + group, "begin": begin, "end": end, "messages": [], "truncated": False}

    def dlq_resend(self, group: str, msg_id: str) -> dict:
        """Put a dead-lettered message back on ``%RETRY%group`` so the group consumes it again."""
        m, broker = self._find(msg_id, DLQ + group)
        if m.topic != DLQ + group:
            raise ViewError(f"message {msg_id} is not in the DLQ of {group}")
        masters = self.route_masters(RETRY + group)
        if not masters:
            raise ViewError(f"group {group} has no retry topic", 404)
        addr = masters.get(broker) or next(iter(masters.values()))
        props = {k: v for k, v in m.properties.items() if k not in ("WAIT", "DELAY", "CLUSTER", "MIN_OFFSET",
                                                                      "MAX_OFFSET")}
        props.setdefault("RETRY_TOPIC", m.properties.get("RETRY_TOPIC") or "")
        props["ORIGIN_MESSAGE_ID"] = props.get("ORIGIN_MESSAGE_ID") or m.msg_id
        resp = self.call(lambda a: a.call(addr, RequestCode.SEND_MESSAGE, {
            "producerGroup": "RMQD_CONSOLE_PRODUCER", "topic": RETRY + group, "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4, "queueId": 0, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000),
            "flag": 0, "properties": encode_properties(props), "reconsumeTimes": 0, "unitMode": False,
            "batch": False, "maxReconsumeTimes": 10 ** 6}, bytes(m.body)))
        return {"msgId": (resp.ext_fields or {}).get("msgId"), "from": msg_id, "topic": RETRY + group}

    # ------------------------------------------------------------------ live tail
    def tail_start(self, topic: str) -> dict[str, int]:
        """Current end of every queue: ``{"broker/qid": offset}``."""
        return {f"{name}/{qid}": self.call(lambda a: a.max_offset(addr, topic, qid))
                for name, addr, qid in self.queues_of(topic)}

    def tail_poll(self, topic: str, positions: dict[str, int], per_queue: int = 32) -> tuple[list, dict]:
        """Messages past ``positions`` (at most ``per_queue`` per queue) and the new positions."""
        out = []
        new = dict(positions)
        for name, addr, qid in self.queues_of(topic):
            key = f"{name}/{qid}"
            off = new.get(key)
            if off is None:
                new[key] = self.call(lambda a: a.max_offset(addr, topic, qid))
                continue
            nxt, msgs = self._pull(addr, topic, qid, off, per_queue)
            for m in msgs:
                out.append(message_json(m, name))
            if nxt > off:
                new[key] = nxt
        out.sort(key=lambda r: r["storeTimestamp"])
        return out, new

    def scan(self, topic: str, begin: int, end: int, max_messages: int) -> Iterator[tuple[int, int, list]]:
        """Walk ``topic`` oldest first in [begin, end]: yields (scanned, total, messages) per batch."""
        ranges = []
        for name, addr, qid in self.queues_of(topic):
            lo, hi = self.queue_range(addr, topic, qid, begin, end)
            if hi > lo:
                ranges.append((name, addr, qid, lo, hi))
        total = min(max_messages, sum(hi - lo for *_, lo, hi in ranges))
        scanned = 0
        for name, addr, qid, lo, hi in ranges:
            off = lo
            while off < hi and scanned < total:
                nxt, msgs = self._pull(addr, topic, qid, off, min(32, hi - off))
                if not msgs or nxt <= off:
                    break
                batch = [(name, m) for m in msgs if m.queue_offset < hi]
                scanned += len(batch)
                yield scanned, total, batch
                off = nxt

    # ------------------------------------------------------------------ extension points
    def extensions(self) -> dict:
        """Feature pages (name -> status dict, absent when no broker runs the feature). Over the
        remoting codes: the tier page, from rmqd's admin code 9003 on every master (a broker without
        a tier, or one that does not know the code, such as the Java broker, is left out)."""
        from rmqd.console.feature_pages import tier_page_of
        statuses = []
        for name, addr in sorted(self.masters().items()):
            try:
                st = self._json(addr, GET_TIER_STATUS)
            except AdminError as exc:
                log.debug("console: no tier status from %s (%s): %s", name, addr, exc)
                continue
            except (OSError, TimeoutError) as exc:
                log.warning("console: tier status of %s (%s) unavailable: %s", name, addr, exc)
                continue
            if isinstance(st, dict):
                statuses.append((name, st))
        page = tier_page_of(statuses)
        out = {"tier": page} if page is not None else {}
        return self._with_failover(out)

    def _with_failover(self, pages: dict) -> dict:
        """Add the controller-mode page (rmqd.console.failover_page) when a broker runs in controller mode."""
        from rmqd.console.failover_page import failover_page
        try:
            page = failover_page(self)
        except (AdminError, OSError, TimeoutError) as exc:
            log.warning("console: the failover page is unavailable: %s", exc)
            page = {"error": f"status unavailable: {exc}"}
        if page is not None:
            pages["failover"] = page
        return pages
