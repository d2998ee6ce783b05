"""The connector's side of the remoting protocol: routes, offsets, pulls, offset commits and batch sends,
with rmqd's own blocking client (works against any RocketMQ-compatible broker, the Java one too)."""
from __future__ import annotations

import logging
import re
import struct
import time
import zlib
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from rmqd.grpc.json_fields import array, integer, obj
from rmqd.remoting import fastjson
from rmqd.spark.errors import ConnectorError  # noqa: F401  (re-exported)
from rmqd.remoting.client import BlockingClient, BlockingClientPool
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, new_request

log = logging.getLogger(__name__)

FLAG_SUBSCRIPTION = 0x4
COMPRESSED_FLAG = 0x1
PULL_BATCH = 32
_BATCH_HDR = struct.Struct(">iiiii")


@dataclass(frozen=True)
class QueueRef:
    topic: str
    broker: str
    queue_id: int


class Clients:
    """The connections a task or the driver keeps (one per address, :class:`BlockingClientPool`), and its
    requests."""

    def __init__(self, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self._pool = BlockingClientPool(timeout)

    def get(self, addr: str) -> BlockingClient:
        return self._pool.get(addr)

    def connected(self, addr: str) -> Optional[BlockingClient]:
        """The open connection to ``addr``, if there is one (no connecting)."""
        return self._pool.connected(addr)

    def drop(self, addr: str) -> None:
        """Close and forget the connection to ``addr``; the next call reconnects."""
        self._pool.drop(addr)

    def invoke(self, addr: str, code: int, ext: Optional[Mapping[str, object]] = None,
               body: Optional[bytes] = None) -> RemotingCommand:
        """One request. A kept connection found closed is replaced before the request is written (the Java
        broker closes connections idle for 120 s, e.g. a stream's driver between slow triggers); one that
        fails on the way (closed between that check and the write) is replaced once."""
        fields = {k: str(v) for k, v in (ext or {}).items() if v is not None}
        while True:
            reused = self._pool.connected(addr) is not None
            try:
                return self.get(addr).invoke(new_request(code, fields, body), self.timeout)
            except OSError as exc:
                self.drop(addr)
                if not reused or isinstance(exc, TimeoutError):
                    raise
                log.info("connection to %s was closed (%s); reconnecting", addr, exc)

    def close(self) -> None:
        self._pool.close()


class Cluster:
    """Name-server views and broker queries the driver needs."""

    def __init__(self, namesrv: str, clients: Optional[Clients] = None) -> None:
        self.namesrv_addrs = [a.strip() for a in namesrv.split(";") if a.strip()]
        if not self.namesrv_addrs:
            raise ConnectorError("option 'nameServer' is required (host:port[;host:port])")
        self.clients = clients or Clients()

    def _namesrv(self, code: int, ext: Optional[Mapping[str, object]] = None) -> RemotingCommand:
        errors: list[str] = []
        for addr in self.namesrv_addrs:
            try:
                return self.clients.invoke(addr, code, ext)
            except (OSError, TimeoutError) as exc:
                errors.append(f"{addr}: {exc}")
        raise ConnectorError(f"option 'nameServer': cannot reach the name server ({'; '.join(errors)})")

    def topics(self) -> list[str]:
        r = self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        if not r.body:
            return []
        return [str(t) for t in array(obj(fastjson.loads_lenient(r.body_bytes())).get("topicList"))]

    def resolve_topics(self, topic: Optional[str], pattern: Optional[str]) -> list[str]:
        if bool(topic) == bool(pattern):
            raise ConnectorError("set exactly one of the options 'topic' (comma list) and 'topicPattern'")
        if topic:
            return [t.strip() for t in topic.split(",") if t.strip()]
        assert pattern is not None          # exactly one of the two is set (checked above)
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            raise ConnectorError(f"option 'topicPattern': bad regular expression: {exc}") from None
        found = sorted(t for t in self.topics() if rx.fullmatch(t) and not t.startswith(("%RETRY%", "%DLQ%")))
        if not found:
            raise ConnectorError(f"option 'topicPattern': no topic matches {pattern!r}")
        return found

    def route(self, topic: str) -> tuple[dict[str, str], dict[str, int]]:
        """(brokerName -> master address, brokerName -> readQueueNums) of ``topic``."""
        r = self._namesrv(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if r.code == ResponseCode.TOPIC_NOT_EXIST:
            raise ConnectorError(f"option 'topic': topic {topic!r} does not exist (name server "
                                 f"{';'.join(self.namesrv_addrs)})")
        if r.code != ResponseCode.SUCCESS:
            raise ConnectorError(f"option 'topic': route of {topic!r} failed: {r.code} {r.remark}")
        data = obj(fastjson.loads_lenient(r.body_bytes()))
        masters: dict[str, str] = {}
        for bd in array(data.get("brokerDatas")):
            broker = obj(bd)
            addrs = {integer(k): str(v) for k, v in obj(broker.get("brokerAddrs")).items()}
            if 0 in addrs:
                masters[str(broker["brokerName"])] = addrs[0]
        queues: dict[str, int] = {}
        for qd in array(data.get("queueDatas")):
            queue = obj(qd)
            if str(queue["brokerName"]) in masters:
                queues[str(queue["brokerName"])] = integer(queue["readQueueNums"])
        return masters, queues

    def queues(self, topics: Iterable[str]) -> tuple[list[QueueRef], dict[str, str]]:
        refs: list[QueueRef] = []
        addrs: dict[str, str] = {}
        for t in topics:
            masters, nums = self.route(t)
            addrs.update(masters)
            refs += [QueueRef(t, b, q) for b in sorted(nums) for q in range(nums[b])]
        return refs, addrs

    def _offset(self, code: int, addr: str, ref: QueueRef, extra: Optional[Mapping[str, object]] = None) -> int:
        r = self.clients.invoke(addr, code, {"topic": ref.topic, "queueId": ref.queue_id, **(extra or {})})
        if r.code != ResponseCode.SUCCESS:
            raise ConnectorError(f"offset query {code} for {ref} failed: {r.code} {r.remark}")
        return int((r.ext_fields or {})["offset"])

    def min_offset(self, addr: str, ref: QueueRef) -> int:
        return self._offset(RequestCode.GET_MIN_OFFSET, addr, ref)

    def max_offset(self, addr: str, ref: QueueRef) -> int:
        return self._offset(RequestCode.GET_MAX_OFFSET, addr, ref)

    def offset_by_time(self, addr: str, ref: QueueRef, ts_ms: int) -> int:
        return self._offset(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, addr, ref, {"timestamp": ts_ms})

    def commit(self, addr: str, group: str, ref: QueueRef, offset: int) -> None:
        r = self.clients.invoke(addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                                {"consumerGroup": group, "topic": ref.topic, "queueId": ref.queue_id,
                                 "commitOffset": offset})
        if r.code != ResponseCode.SUCCESS:
            raise ConnectorError(f"option 'group': committing {group} offset {offset} of {ref} failed: "
                                 f"{r.code} {r.remark}")


def pull(clients: Clients, addr: str, group: str, ref: QueueRef, offset: int, expr_type: str,
         expression: str) -> tuple[int, int, int, bytes]:
    """One PULL_MESSAGE without suspension: (code, nextBeginOffset, maxOffset, body)."""
    r = clients.invoke(addr, RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": ref.topic, "queueId": ref.queue_id, "queueOffset": offset,
        "maxMsgNums": PULL_BATCH, "sysFlag": FLAG_SUBSCRIPTION, "commitOffset": 0, "suspendTimeoutMillis": 0,
        "subscription": expression, "subVersion": int(time.time() * 1000), "expressionType": expr_type})
    ext = r.ext_fields or {}
    if r.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
                      ResponseCode.PULL_OFFSET_MOVED):
        raise ConnectorError(f"pull of {ref} at {offset} from {addr} failed: {r.code} {r.remark}")
    body = r.body_bytes() if r.body is not None else b""
    return r.code, int(ext.get("nextBeginOffset", offset)), int(ext.get("maxOffset", 0)), body


def encode_batch(messages: list[tuple[bytes, str]]) -> bytes:
    """A SEND_BATCH_MESSAGE body: per message totalSize, magic, bodyCRC, flag, bodyLen, body, propsLen, props."""
    out = bytearray()
    for body, props in messages:
        p = props.encode("utf-8")
        total = 20 + len(body) + 2 + len(p)
        out += _BATCH_HDR.pack(total, 0, zlib.crc32(body) & 0x7FFFFFFF, 0, len(body))
        out += body
        out += struct.pack(">h", len(p))
        out += p
    return bytes(out)


def send_batch(clients: Clients, addr: str, group: str, topic: str, queue_id: int,
               messages: list[tuple[bytes, str]]) -> RemotingCommand:
    """SEND_BATCH_MESSAGE (320) with the V2 header; raises on anything but SUCCESS."""
    r = clients.invoke(addr, RequestCode.SEND_BATCH_MESSAGE, {
        "a": group, "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0,
        "g": int(time.time() * 1000), "h": 0, "i": "", "j": 0, "k": "false", "m": "true"},
        encode_batch(messages))
    if r.code != ResponseCode.SUCCESS:
        raise ConnectorError(f"send of {len(messages)} message(s) to {topic}@{addr} queue {queue_id} failed: "
                             f"{r.code} {r.remark}")
    return r
