"""RemoteMessages: the console's message pages over the remoting protocol: messages by time or key (bounded),
one message by its ids, resending it to a consumer, the DLQ and putting a message back on its retry topic, the
live tail and the scan a background job walks.
"""
from __future__ import annotations

import logging
import time
from typing import Iterator

from rmqd.admin.client import TOOLS_CONSUMER, AdminError
from rmqd.console.remote_cluster import RemoteCluster
from rmqd.console.view_base import DLQ, MAX_MESSAGES, RETRY, JsonObject, MessageRow, ViewError, jsonable, message_json
from rmqd.remoting import fastjson
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.store.message import StoredMessage, decode_messages, decode_offset_msg_id, encode_properties

log = logging.getLogger(__name__)


class RemoteMessages(RemoteCluster):
    """The message pages."""

    def queues_of(self, topic: str) -> list[tuple[str, str, int]]:
        """(brokerName, master addr, queueId) for every readable queue of ``topic``."""
        route = self.route(topic)
        masters = self._route_masters(route)
        out = []
        for qd in route.get("queueDatas") or []:
            addr = masters.get(qd["brokerName"])
            if addr:
                out += [(qd["brokerName"], addr, q) for q in range(int(qd.get("readQueueNums", 0)))]
        return sorted(out)

    def _pull(self, addr: str, topic: str, qid: int, offset: int, n: int = 32) -> tuple[int, list[StoredMessage]]:
        code, nxt, msgs = self.call(lambda a: a.pull(addr, topic, qid, offset, n, TOOLS_CONSUMER))
        return nxt, msgs

    def queue_range(self, addr: str, topic: str, qid: int, begin: int, end: int) -> tuple[int, int]:
        lo = self.call(lambda a: a.search_offset(addr, topic, qid, begin)) if begin > 0 \
            else self.call(lambda a: a.min_offset(addr, topic, qid))
        hi = self.call(lambda a: a.max_offset(addr, topic, qid))
        if end and end < int(time.time() * 1000):
            hi = min(hi, self.call(lambda a: a.search_offset(addr, topic, qid, end)) + 1)
        return lo, hi

    def messages_by_time(self, topic: str, begin: int, end: int, limit: int = 200) -> JsonObject:
        """Newest first, at most ``limit`` (<= 2000), each message once."""
        limit = max(1, min(MAX_MESSAGES, int(limit)))
        end = end or int(time.time() * 1000) + 1000
        seen: dict[str, MessageRow] = {}
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

    def messages_by_key(self, topic: str, key: str) -> JsonObject:
        from rmqd.admin.message_commands import query_messages
        msgs = self.call(lambda a: query_messages(a, topic, key, False, 64))
        names = {addr: name for name, addr in self.route_masters(topic).items()}
        seen: dict[str, MessageRow] = {}
        for m in msgs:
            if key in (m.properties.get("KEYS") or "").split(" "):
                seen.setdefault(m.msg_id, message_json(m, names.get("%s:%d" % tuple(m.store_host), "")))
        rows = sorted(seen.values(), key=lambda r: -r["storeTimestamp"])
        return {"topic": topic, "key": key, "messages": rows, "truncated": False}

    def message(self, msg_id: str, topic: str = "") -> MessageRow:
        """A message by offset msgId (VIEW_MESSAGE_BY_ID) or by unique key within ``topic``."""
        m, broker = self._find(msg_id, topic)
        return message_json(m, broker, body=True)

    def message_raw(self, msg_id: str, topic: str = "") -> bytes:
        return bytes(self._find(msg_id, topic)[0].body)

    def _find(self, msg_id: str, topic: str) -> tuple[StoredMessage, str]:
        msg_id = msg_id.strip()
        by_addr = {b["addr"]: b["brokerName"] for b in self.brokers()}
        if topic:
            from rmqd.admin.message_commands import query_messages
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

    def resend(self, msg_id: str, group: str, client_id: str = "", topic: str = "") -> JsonObject:
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
        result: object = raw.decode("utf-8", "replace")
        try:
            result = jsonable(fastjson.loads_lenient(raw)) if raw else None
        except ValueError:
            pass
        if resp.code != ResponseCode.SUCCESS:
            raise ViewError(f"resend failed: {resp.remark}", 502)
        return {"msgId": offset_id, "group": group, "clientId": cid, "result": result}

    def dlq(self, group: str, begin: int = 0, end: int = 0, limit: int = 200) -> JsonObject:
        try:
            return self.messages_by_time(DLQ + group, begin, end, limit)
        except (ViewError, AdminError):
            return {"topic": DLQ + group, "begin": begin, "end": end, "messages": [], "truncated": False}

    def dlq_resend(self, group: str, msg_id: str) -> JsonObject:
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

    def tail_poll(self, topic: str, positions: dict[str, int], per_queue: int = 32) -> tuple[list[MessageRow],
                                                                                             dict[str, int]]:
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

    def scan(self, topic: str, begin: int, end: int,
             max_messages: int) -> Iterator[tuple[int, int, list[tuple[str, StoredMessage]]]]:
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
