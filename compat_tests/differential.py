"""Differential probes: the same raw remoting requests to rmqd and to the Java 4.9.8 broker, answers
normalised so that only what must match is compared.

A :class:`Probe` is one request (code, header, body; or a whole hand-made frame for malformed input).
:func:`ask` sends it and returns an :class:`Outcome`: the response code, the remark with volatile parts
masked (addresses, timestamps, offsets), the header's field names with the kind of each value (and the
values of the fields the probe names as stable), and the body's *shape*: JSON bodies become their
structure with scalars replaced by type names and data-keyed maps (topic tables, MessageQueue keys...)
folded into one ``<map>`` entry; ``key=value`` bodies become their sorted keys. A connection the server
closed without answering is the outcome ``closed``.

:func:`prepare` puts both servers into the same state first (a topic with messages, a group with an
offset, an online consumer), using only requests both understand.
"""
from __future__ import annotations

import re
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import RemotingCommand, new_request
from rmqd.remoting.fastjson import MessageQueue, loads_lenient

TOPIC, GROUP, ONLINE_GROUP, CLIENT_ID = "DiffTopic", "DiffGroup", "DiffOnlineGroup", "127.0.0.1@diff-probe"
DELAY_TOPIC = "DiffDelayTopic"
UNKNOWN_TOPIC, UNKNOWN_GROUP = "DiffNoSuchTopic", "DiffNoSuchGroup"

# JSON fields whose keys are data (topic names, group names, broker ids, client ids ...), not a schema.
MAP_FIELDS = frozenset({
    "topicConfigTable", "subscriptionGroupTable", "brokerAddrTable", "clusterAddrTable", "brokerAddrs",
    "filterServerTable", "offsetTable", "topicQueueTable", "data", "subscriptionTable", "mqTable",
    "statusTable", "consumeStatsList", "configTable", "topicFilterTable", "consumerTable", "properties",
    "messageRequestModeMap", "topicMeta", "groupMeta",
})
# data-keyed maps whose values are data-keyed maps too (messageRequestModeMap: topic -> group -> mode)
NESTED_MAP_FIELDS = frozenset({"messageRequestModeMap"})
_NESTED = "<nested map>"


@dataclass(frozen=True)
class Probe:
    """One request. ``target`` is ``broker`` or ``namesrv``; ``frame`` replaces the encoded request (bad
    framing); ``stable`` names header fields whose values must be equal too; ``table`` compares a KVTable
    body's keys (GET_BROKER_RUNTIME_INFO)."""
    name: str
    code: int = 0
    ext: dict | None = None
    body: bytes | None = None
    target: str = "broker"
    frame: bytes | None = None
    stable: tuple[str, ...] = ()
    serialize_type: int = 0
    timeout: float = 5.0


@dataclass
class Outcome:
    code: int | str
    remark: str | None = None
    ext: dict = field(default_factory=dict)
    body: Any = None

    def as_dict(self) -> dict:
        return {"code": self.code, "remark": self.remark, "ext": self.ext, "body": self.body}


# ---------------------------------------------------------------------------------------------- remark classes
# What a 5.x comparison holds equal: the class of a remark that quotes an exception, not its text. Java 5.x
# answers a missing header field or body with the JVM's NullPointerException text at whatever line first uses
# it, a bad body with fastjson2's parser message; rmqd names the field, or its own parser's message.
_REMARK_CLASSES = [
    (re.compile(r"NullPointerException|the custom field <[^>]*> is null"), "<missing field>"),
    (re.compile(r"NumberFormatException"), "<bad number>"),
    (re.compile(r"JSONException|fastjson|[Bb]ad [\w ]*body|body is invalid|JSONDecodeError"), "<bad body>"),
    (re.compile(r"IllegalArgumentException"), "<illegal argument>"),
]


def remark_class(remark: str | None) -> str | None:
    """The class of a remark (see above), else the remark itself (masked)."""
    if remark is None:
        return None
    for rx, name in _REMARK_CLASSES:
        if rx.search(remark):
            return name
    return mask(remark)


def classified(outcome: dict) -> dict:
    """An outcome (``Outcome.as_dict``) with its remark replaced by its class."""
    return dict(outcome, remark=remark_class(outcome.get("remark")))


# ---------------------------------------------------------------------------------------------- masking
_MASKS = [
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}:\d+\b"), "<addr>"),
    (re.compile(r"\b1[6-9]\d{11}\b"), "<ts>"),                       # epoch milliseconds
    (re.compile(r"\b\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\b"), "<time>"),
    (re.compile(r"\b[0-9A-F]{32}\b"), "<msgid>"),
    (re.compile(r"\b[0-9A-F]{24,}\b"), "<hex>"),
]


def mask(text: str | None) -> str | None:
    """The text with addresses, timestamps and message ids replaced by placeholders."""
    if text is None:
        return None
    for rx, repl in _MASKS:
        text = rx.sub(repl, text)
    return text


# GET_BROKER_CONFIG values that depend on the machine or the run, not on how the broker behaves: the
# defaults Java computes from the CPU count (rmqd.config.java_defaults._cpu_derived; rmqd's own pool sizes
# for the pools it has), the ports, paths and addresses of this run.
CPU_DERIVED_PROPERTIES = frozenset({
    "sendMessageThreadPoolNums", "putMessageFutureThreadPoolNums", "pullMessageThreadPoolNums",
    "processReplyMessageThreadPoolNums", "queryMessageThreadPoolNums", "heartbeatThreadPoolNums",
    "endTransactionThreadPoolNums", "clientCallbackExecutorThreads"})
PORT_PROPERTIES = frozenset({"listenPort", "haListenPort"})
_IP = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")


def config_value(key: str, value: str) -> str:
    """A broker property's value with what depends on the machine or the run masked (see above)."""
    if key in CPU_DERIVED_PROPERTIES:
        return "<cpus>"
    if key in PORT_PROPERTIES:
        return "<port>"
    if value.startswith("/"):
        return "<path>"
    return _IP.sub("<ip>", mask(value) or "")


def config_values(props: dict[str, str]) -> dict[str, str]:
    return {k: config_value(k, v) for k, v in props.items()}


def parse_config_listing(text: str) -> dict[str, str]:
    """mqadmin getBrokerConfig / getNamesrvConfig output (``key   =  value`` lines) as a dict."""
    out = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("="):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def masked_json(value: Any) -> Any:
    """A decoded JSON file (mqadmin exportMetrics) with every number masked, other strings masked as remarks
    are, lists as the sorted set of their masked elements (lengths follow the state of the broker)."""
    if isinstance(value, dict):
        return {str(k): masked_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted({orjson.dumps(masked_json(v), option=orjson.OPT_SORT_KEYS).decode() for v in value})
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)) or re.fullmatch(r"-?\d+(?:\.\d+)?(?:E-?\d+)?", str(value)):
        return "<n>"
    return mask(str(value))


def key_mask(key: str) -> str:
    """Keys that carry data (GET_BROKER_RUNTIME_INFO's ``commitLogDiskRatio_<store path>`` and
    ``scheduleMessageOffset_<delay level>``: other tests may have used other levels on the shared broker)."""
    if key.startswith("commitLogDiskRatio_"):
        return "commitLogDiskRatio_<path>"
    if key.startswith("scheduleMessageOffset_"):
        return "scheduleMessageOffset_<level>"
    return key


def _kind(value: str) -> str:
    if re.fullmatch(r"-?\d+", value):
        return "int"
    if value in ("true", "false"):
        return "bool"
    return "str"


def _merge(a: Any, b: Any) -> Any:
    if a == b:
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _merge(a[k], b[k]) if k in a and k in b else a.get(k, b.get(k)) for k in sorted({*a, *b})}
    if isinstance(a, list) and isinstance(b, list):
        return [_merge(a[0], b[0])] if a and b else (a or b)
    parts = sorted({*str(a).split("|"), *str(b).split("|")}) if not isinstance(a, (dict, list)) \
        and not isinstance(b, (dict, list)) else [repr(a), repr(b)]
    return "|".join(parts)


def shape(value: Any, name: str = "") -> Any:
    """The structure of a decoded JSON value: scalars become type names, lists the merged shape of their
    elements, data-keyed maps one ``<map>`` entry (the merged shape of their values)."""
    if isinstance(value, dict):
        data_keyed = name in MAP_FIELDS or name == _NESTED or any(not isinstance(k, str) for k in value)
        if data_keyed:
            merged: Any = None
            for v in value.values():
                s = shape(v, _NESTED if name in NESTED_MAP_FIELDS else "")
                merged = s if merged is None else _merge(merged, s)
            return {"<map>": merged} if value else {}
        return {key_mask(str(k)): shape(v, str(k)) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, MessageQueue):
        return "MessageQueue"
    if isinstance(value, (list, tuple, set, frozenset)):
        merged = None
        for v in value:
            s = shape(v, name if name in MAP_FIELDS else "")
            merged = s if merged is None else _merge(merged, s)
        return [merged] if merged is not None else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if value is None:
        return "null"
    return "str"


def body_shape(body: bytes | None) -> Any:
    """JSON → :func:`shape`; Java properties text → sorted keys; anything else → ``<N bytes>``."""
    if not body:
        return None
    try:
        return shape(loads_lenient(body))
    except (ValueError, TypeError, UnicodeDecodeError):
        pass
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "<binary>"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and all("=" in ln for ln in lines):
        return {"<properties>": sorted(ln.split("=", 1)[0] for ln in lines)}
    return "<text>"


# ---------------------------------------------------------------------------------------------- asking
def addr_of(target: str, namesrv_addr: str, broker_addr: str) -> str:
    return namesrv_addr if target == "namesrv" else broker_addr


def _outcome(resp: RemotingCommand, probe: Probe) -> Outcome:
    ext = dict(resp.ext_fields or {})
    ext_shape = {k: (mask(v) if k in probe.stable else _kind(v)) for k, v in sorted(ext.items())}
    raw = bytes(resp.body) if resp.body is not None else None
    return Outcome(resp.code, mask(resp.remark), ext_shape, body_shape(raw))


def _wait_closed(sock: socket.socket, timeout: float) -> str:
    """What the server did with a frame it cannot answer: ``closed`` or ``no answer`` (still open)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                return "closed"
            return f"answered {len(data)} bytes"
    except socket.timeout:
        return "no answer"
    except OSError:
        return "closed"
    return "no answer"


def ask(probe: Probe, addr: str) -> Outcome:
    """Send ``probe`` to ``addr`` on a fresh connection and normalise what comes back."""
    with BlockingClient(addr, timeout=probe.timeout) as c:
        if probe.frame is not None:
            try:
                c.send_raw(probe.frame)
            except OSError:
                return Outcome("closed")
            try:
                resp = None
                deadline = time.monotonic() + probe.timeout
                while resp is None and time.monotonic() < deadline:
                    c.read_some(deadline - time.monotonic())
                    resp = next(iter(c._responses.values()), None)
            except (ConnectionError, OSError):
                return Outcome("closed")
            except Exception as exc:                  # noqa: BLE001 - an unparsable answer is an outcome
                return Outcome(f"garbled answer: {type(exc).__name__}")
            if resp is None:
                return Outcome(_wait_closed(c.sock, 0.5))
            return _outcome(resp, probe)
        req = new_request(probe.code, probe.ext, probe.body)
        req.serialize_type = probe.serialize_type
        try:
            resp = c.invoke(req, timeout=probe.timeout)
        except TimeoutError:
            return Outcome("no answer")
        except (ConnectionError, OSError):
            return Outcome("closed")
        return _outcome(resp, probe)


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0, length: int | None = None) -> bytes:
    """A hand-made frame: ``length`` overrides the total length word (lying frames)."""
    total = 4 + len(header) + len(body) if length is None else length
    return struct.pack(">II", total, (serialize_type << 24) | len(header)) + header + body


def json_header(code: int, ext: dict | None = None, opaque: int = 1, **extra: Any) -> bytes:
    h = {"code": code, "flag": 0, "language": "JAVA", "opaque": opaque, "serializeTypeCurrentRPC": "JSON",
         "version": 409, **extra}
    if ext is not None:
        h["extFields"] = ext
    return orjson.dumps(h)


# ---------------------------------------------------------------------------------------------- state
SEND_HEADER = {"a": "DiffPG", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000",
               "h": "0", "i": "KEYS\u0001dk1\u0002TAGS\u0001TagD\u0002", "j": "0", "k": "false", "m": "false"}


def send_header(**changes: str | None) -> dict:
    """SEND_MESSAGE_V2's header for DiffTopic, with fields changed or (None) removed."""
    h = dict(SEND_HEADER)
    for k, v in changes.items():
        if v is None:
            h.pop(k, None)
        else:
            h[k] = v
    return h


def heartbeat_body(group: str = ONLINE_GROUP, client_id: str = CLIENT_ID, topic: str = TOPIC) -> bytes:
    return orjson.dumps({
        "clientID": client_id,
        "consumerDataSet": [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
            "subscriptionDataSet": [{"topic": topic, "subString": "*", "tagsSet": [], "codeSet": [],
                                     "subVersion": 1, "classFilterMode": False, "expressionType": "TAG"}]}],
        "producerDataSet": [{"groupName": "DiffPG"}]})


def prepare(broker_addr: str) -> BlockingClient:
    """The same state on a fresh broker: DiffTopic (4 queues) with 3 messages in queue 0, DiffGroup with
    offset 1 there, one delayed message (level 1, DiffDelayTopic) and an online consumer of DiffOnlineGroup
    (the returned connection: keep it open)."""
    with BlockingClient(broker_addr) as c:
        for topic in (TOPIC, DELAY_TOPIC):
            r = c.invoke(new_request(17, {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4",
                                          "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
                                          "topicSysFlag": "0", "order": "false"}))
            assert r.code == 0, r.remark
        r = c.invoke(new_request(310, send_header(b=DELAY_TOPIC, i="DELAY\u00011\u0002"), b"later"))
        assert r.code == 0, r.remark
        r = c.invoke(new_request(200, None, orjson.dumps({"groupName": GROUP, "consumeEnable": True,
                                                          "consumeBroadcastEnable": True,
                                                          "retryQueueNums": 1, "retryMaxTimes": 16,
                                                          "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                                                          "notifyConsumerIdsChangedEnable": True})))
        assert r.code == 0, r.remark
        for i in range(3):
            r = c.invoke(new_request(310, send_header(i=f"KEYS\u0001dk{i}\u0002TAGS\u0001TagD\u0002"),
                                     f"diff-{i}".encode()))
            assert r.code == 0, r.remark
        r = c.invoke(new_request(15, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": "1"}))
        assert r.code == 0, r.remark
    online = BlockingClient(broker_addr)
    r = online.invoke(new_request(34, None, heartbeat_body()))
    assert r.code == 0, r.remark
    return online


def wait_delay_delivered(broker_addr: str, timeout: float = 20.0) -> None:
    """Wait until ``prepare``'s delayed message (level 1) was delivered: from then on the broker's delay
    offset table and its runtime info's ``scheduleMessageOffset_1`` exist on either broker (the session's
    reference broker may list more levels, used by other tests: keys and map entries are folded)."""
    deadline = time.monotonic() + timeout
    while True:
        with BlockingClient(broker_addr) as c:
            r = c.invoke(new_request(45))                      # GET_ALL_DELAY_OFFSET
        table = (loads_lenient(bytes(r.body)) if r.code == 0 and r.body else {}).get("offsetTable") or {}
        if table:
            return
        assert time.monotonic() < deadline, f"{broker_addr}: the delayed message of prepare() was not delivered"
        time.sleep(0.2)


def compare(probes: list[Probe], ours: tuple[str, str], theirs: tuple[str, str]) -> dict[str, tuple]:
    """``{probe name: (rmqd outcome, Java outcome)}`` for every probe whose outcomes differ."""
    diffs = {}
    for p in probes:
        a = ask(p, addr_of(p.target, *ours)).as_dict()
        b = ask(p, addr_of(p.target, *theirs)).as_dict()
        if a != b:
            diffs[p.name] = (a, b)
    return diffs


def diff_dicts(a: Any, b: Any, path: str = "") -> list[str]:
    """Human-readable differences between two outcomes (for failure messages and the README table)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted({*a, *b}, key=str):
            p = f"{path}.{k}" if path else str(k)
            if k not in a:
                out.append(f"{p}: only Java")
            elif k not in b:
                out.append(f"{p}: only rmqd")
            else:
                out += diff_dicts(a[k], b[k], p)
        return out
    if a != b:
        return [f"{path}: rmqd {a!r} / Java {b!r}"]
    return []
