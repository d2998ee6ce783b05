"""Differential helpers for the 5.x gRPC clients: the same scenario against the Java 5.x proxy and against rmqd,
outcomes normalised so that only what must match is compared.

- :class:`Target`: one side (a name, its gRPC endpoint, its name server) with :meth:`Target.create` making topics
  and groups with the 5.x ``mqadmin`` as an operator does (nothing else is pre-created).
- Raw gRPC (rmqd's generated stubs): :func:`call` one RPC, :func:`call_raw` hand-made bytes through grpcio's
  generic channel, :class:`Session` a client with its Telemetry stream open (the proxy answers consumer RPCs only
  for a client whose Settings it knows).
- Normalising: :func:`outcome` turns a response or an RpcError into a plain dict; :func:`message_view` a received
  ``Message`` with ids, times, hosts, offsets and handles masked; :func:`mask` (compat_tests/differential.py) masks
  the volatile parts of status messages.
- Comparing: :func:`differences` lists what differs, :func:`assert_same` fails naming each difference.
"""
from __future__ import annotations

import queue
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import grpc
from google.protobuf import json_format

from differential import diff_dicts, mask
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.grpc.pb import service_pb2_grpc as sg

SERVICE = "/apache.rocketmq.v2.MessagingService/"
STREAMING = {"ReceiveMessage": "unary_stream", "PullMessage": "unary_stream", "Telemetry": "stream_stream"}
METHODS = ("QueryRoute", "Heartbeat", "SendMessage", "QueryAssignment", "ReceiveMessage", "AckMessage",
           "ForwardMessageToDeadLetterQueue", "PullMessage", "UpdateOffset", "GetOffset", "QueryOffset",
           "EndTransaction", "Telemetry", "NotifyClientTermination", "ChangeInvisibleDuration", "RecallMessage",
           "SyncLiteSubscription")
REQUEST_TYPES = {m: getattr(s, ("TelemetryCommand" if m == "Telemetry" else m + "Request")) for m in METHODS}
CLIENT_VERSION = "5.2.0"


# ---------------------------------------------------------------------------------------------- sides
@dataclass
class Target:
    """One side of a differential run."""

    name: str
    grpc_addr: str
    namesrv_addr: str
    broker_addr: str
    lite_grpc_addr: str = ""        # where Lite Mode is served (Java 5.5.0: a cluster-mode proxy, java5kit.Proxy5)

    @property
    def lite_addr(self) -> str:
        return self.lite_grpc_addr or self.grpc_addr

    def create(self, mqadmin5: Any, *commands: Sequence[str]) -> None:
        """Run mqadmin sub-commands against this side's broker (``("updateTopic", "-t", "T", ...)``), each
        with ``-n <namesrv> -b <broker>``; fails naming the command when it does not report success."""
        for cmd in commands:
            res = mqadmin5.run(cmd[0], "-n", self.namesrv_addr, "-b", self.broker_addr, *cmd[1:])
            assert "success" in res.stdout or "SubscriptionGroupConfig" in res.stdout, (self.name, cmd,
                                                                                      res.stdout[-1500:])


def sides_of(reference5: Any, grpc_server: Any, proxy5: Any = None) -> dict[str, Target]:
    """The two sides of the session: the Java 5.x reference (its lite calls to ``proxy5`` when given) and rmqd."""
    return {"java": Target("java", reference5.grpc_addr, reference5.namesrv_addr, reference5.broker_addr,
                           proxy5.grpc_addr if proxy5 is not None else ""),
            "rmqd": Target("rmqd", grpc_server.grpc_addr, grpc_server.server.namesrv_addr,
                           grpc_server.server.broker_addr)}


def create_on(sides: Mapping[str, Target], shells: Sequence[Any], *commands: Sequence[str]) -> None:
    """The same mqadmin sub-commands on every side, each side on its own mqadmin shell, at once."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(len(sides)) as pool:
        for f in [pool.submit(side.create, shell, *commands) for side, shell in zip(sides.values(), shells)]:
            f.result()


def topic_cmd(topic: str, message_type: Optional[str] = None, queues: int = 4, *attrs: str) -> tuple:
    """``updateTopic`` with ``message.type`` (and more attributes, ``key=value``)."""
    extra = ([f"+message.type={message_type}"] if message_type else []) + [f"+{a}" for a in attrs]
    return ("updateTopic", "-t", topic, "-r", str(queues), "-w", str(queues),
            *(("-a", ",".join(extra)) if extra else ()))


def group_cmd(group: str, retry_max_times: Optional[int] = None, fifo: bool = False, *attrs: str) -> tuple:
    """``updateSubGroup`` with its retry count, orderly flag and attributes (``key=value``)."""
    args: list[str] = ["updateSubGroup", "-g", group]
    if retry_max_times is not None:
        args += ["-r", str(retry_max_times)]
    if fifo:
        args += ["-o", "true"]
    if attrs:
        args += ["--attributes", ",".join(f"+{a}" for a in attrs)]
    return tuple(args)


# ---------------------------------------------------------------------------------------------- raw gRPC
def metadata(client_id: Optional[str] = None, **extra: str) -> list[tuple[str, str]]:
    """The headers a 5.x Java client sends; ``client_id=""`` leaves ``x-mq-client-id`` out."""
    md = [("x-mq-language", "JAVA"), ("x-mq-protocol", "v2"), ("x-mq-client-version", CLIENT_VERSION),
          ("x-mq-date-time", time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())),
          ("x-mq-request-id", str(uuid.uuid4()))]
    if client_id != "":
        md.append(("x-mq-client-id", client_id or new_client_id()))
    md += [(k.replace("_", "-"), v) for k, v in extra.items()]
    return md


def new_client_id() -> str:
    return f"127.0.0.1@diff5-{uuid.uuid4().hex[:12]}"


def call(addr: str, method: str, request: Any, md: Optional[list] = None, timeout: float = 15.0) -> Any:
    """One RPC; a streaming answer as the list of its responses; an RpcError as ``("rpc-error", code, details)``."""
    channel = grpc.insecure_channel(addr)
    try:
        rpc = getattr(sg.MessagingServiceStub(channel), method)
        answer = rpc(request, metadata=md if md is not None else metadata(), timeout=timeout)
        return list(answer) if method in STREAMING else answer
    except grpc.RpcError as exc:
        return ("rpc-error", exc.code().name, exc.details() or "")
    finally:
        channel.close()


def call_raw(addr: str, method: str, body: bytes, md: Optional[list] = None, timeout: float = 10.0,
             channel: Optional[grpc.Channel] = None) -> tuple:
    """Hand-made request bytes through grpcio's generic channel (no serializer): ``("ok", response bytes or
    list of them)`` or ``("rpc-error", code name, details)``."""
    own = channel is None
    channel = channel or grpc.insecure_channel(addr)
    kind = STREAMING.get(method, "unary_unary")
    rpc = getattr(channel, kind)(SERVICE + method, request_serializer=None, response_deserializer=None)
    try:
        arg = iter([body]) if kind == "stream_stream" else body
        answer = rpc(arg, metadata=md if md is not None else metadata(), timeout=timeout)
        return ("ok", list(answer) if kind != "unary_unary" else answer)
    except grpc.RpcError as exc:
        return ("rpc-error", exc.code().name, exc.details() or "")
    finally:
        if own:
            channel.close()


class Session:
    """A gRPC client with its Telemetry stream open: ``settings`` is what the server answered the client's
    Settings with (``None`` when the stream ended first; then ``error`` holds the stream's status)."""

    def __init__(self, addr: str, settings: Any, client_id: Optional[str] = None, wait: float = 10.0,
                 headers: Optional[Callable[[str], list]] = None) -> None:
        self.addr = addr
        self.client_id = client_id or new_client_id()
        self.headers = headers or (lambda cid: metadata(cid))
        self.channel = grpc.insecure_channel(addr)
        self.stub = sg.MessagingServiceStub(self.channel)
        self.commands: list = []                   # every command the server sent, in order
        self.error: Optional[tuple] = None
        self._out: queue.Queue = queue.Queue()
        self._out.put(s.TelemetryCommand(settings=settings))
        self._got = threading.Event()
        self._stream = self.stub.Telemetry(self._requests(), metadata=self.headers(self.client_id))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._got.wait(wait)
        first = next((c for c in self.commands if c.HasField("settings")), None)
        self.settings = first.settings if first is not None else None
        self.settings_status = first.status if first is not None else None

    def _requests(self) -> Iterable[Any]:
        while True:
            cmd = self._out.get()
            if cmd is None:
                return
            yield cmd

    def _read(self) -> None:
        try:
            for cmd in self._stream:
                self.commands.append(cmd)
                self._got.set()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self.error = ("rpc-error", exc.code().name, exc.details() or "")
        finally:
            self._got.set()

    def call(self, method: str, request: Any, timeout: float = 15.0, **extra_md: str) -> Any:
        try:
            md = self.headers(self.client_id) + [(k.replace("_", "-"), v) for k, v in extra_md.items()]
            answer = getattr(self.stub, method)(request, metadata=md, timeout=timeout)
            return list(answer) if method in STREAMING else answer
        except grpc.RpcError as exc:
            return ("rpc-error", exc.code().name, exc.details() or "")

    def wait_for(self, pred: Callable[[list], bool], timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred(self.commands):
                return True
            time.sleep(0.05)
        return pred(self.commands)

    def close(self, group: Optional[str] = None) -> None:
        req = s.NotifyClientTerminationRequest()
        if group:
            req.group.name = group
        if self.error is None:
            self.call("NotifyClientTermination", req, timeout=5)
        self._out.put(None)
        self._stream.cancel()
        self._reader.join(5)
        self.channel.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------- requests
def endpoints_pb(addr: str) -> Any:
    host, _, port = addr.rpartition(":")
    return d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host=host, port=int(port))])


def user_agent() -> Any:
    return d.UA(language=d.JAVA, version=CLIENT_VERSION, platform="Linux", hostname="diff5")


def producer_settings(addr: str, *topics: str) -> Any:
    return d.Settings(client_type=d.PRODUCER, access_point=endpoints_pb(addr), request_timeout={"seconds": 3},
                      publishing=d.Publishing(topics=[d.Resource(name=t) for t in topics]), user_agent=user_agent())


def consumer_settings(addr: str, group: str, topic: str, client_type: int = d.SIMPLE_CONSUMER,
                      expression: str = "*") -> Any:
    sub = d.Subscription(group=d.Resource(name=group), subscriptions=[d.SubscriptionEntry(
        topic=d.Resource(name=topic), expression=d.FilterExpression(type=d.TAG, expression=expression))])
    return d.Settings(client_type=client_type, access_point=endpoints_pb(addr), request_timeout={"seconds": 3},
                      subscription=sub, user_agent=user_agent())


def message_pb(topic: str, body: bytes, message_id: Optional[str] = None, **sysprops: Any) -> Any:
    """A 5.x ``Message`` as the Java client builds it (``born_host``, ``born_timestamp``, NORMAL unless said)."""
    sp = d.SystemProperties(message_id=message_id or new_message_id(), body_encoding=d.IDENTITY,
                            message_type=sysprops.pop("message_type", d.NORMAL), born_host="diff5-host")
    sp.born_timestamp.FromMilliseconds(int(time.time() * 1000))
    user = sysprops.pop("user_properties", {})
    for k, v in sysprops.items():
        if k == "delivery_timestamp":
            sp.delivery_timestamp.FromMilliseconds(int(v))
        elif k == "keys":
            sp.keys.extend(v)
        else:
            setattr(sp, k, v)
    return d.Message(topic=d.Resource(name=topic), body=body, user_properties=user, system_properties=sp)


def new_message_id() -> str:
    """A 5.x message id (version 01, 34 hex digits, unique)."""
    return "01" + uuid.uuid4().hex.upper()[:32]


# ---------------------------------------------------------------------------------------------- normalising
# Fields whose values depend on the run (times, hosts, ids the server or the client makes, handles).
VOLATILE = frozenset({"message_id", "receipt_handle", "born_timestamp", "store_timestamp", "born_host",
                      "store_host", "transaction_id", "recall_handle", "delivery_timestamp", "hostname",
                      "invisible_duration", "access_point", "x-mq-request-id"})


def to_dict(msg: Any) -> dict:
    return json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=False)


def masked(value: Any, volatile: frozenset = VOLATILE, key: str = "") -> Any:
    """A decoded response with volatile fields replaced by ``<set>`` and status messages masked."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in volatile:
                out[k] = "<set>" if v not in ("", None, [], {}) else v
            elif k == "message" and isinstance(v, str):
                out[k] = mask(v)
            else:
                out[k] = masked(v, volatile, k)
        return out
    if isinstance(value, list):
        return [masked(v, volatile, key) for v in value]
    return value


def outcome(answer: Any, volatile: frozenset = VOLATILE) -> Any:
    """A response (or list of streamed responses, or an RpcError tuple) as a plain, masked value."""
    if isinstance(answer, tuple) and answer and answer[0] == "rpc-error":
        return {"rpc_error": answer[1], "details": mask(answer[2])}
    if isinstance(answer, list):
        return [outcome(a, volatile) for a in answer]
    if hasattr(answer, "DESCRIPTOR"):
        return masked(to_dict(answer), volatile)
    return answer


def status_of(answer: Any) -> tuple:
    """(code name, masked message) of a unary answer, or ("rpc-error:<code>", details)."""
    if isinstance(answer, tuple) and answer and answer[0] == "rpc-error":
        return (f"rpc-error:{answer[1]}", mask(answer[2]))
    st = answer.status
    return (d.Code.Name(st.code), mask(st.message))


def received(answers: list) -> tuple[Optional[tuple], list]:
    """A ReceiveMessage stream: (its status as :func:`status_of` gives it, the messages)."""
    if isinstance(answers, tuple):
        return status_of(answers), []
    head = next((a for a in answers if a.HasField("status")), None)
    msgs = [a.message for a in answers if a.HasField("message")]
    return ((d.Code.Name(head.status.code), mask(head.status.message)) if head is not None else None), msgs


def message_view(msg: Any, sent_ids: Mapping[str, str] | None = None) -> dict:
    """A received message with what varies masked; ``sent_ids`` (message id -> label) names the id instead."""
    view = masked(to_dict(msg))
    sp = view.get("system_properties", {})
    mid = msg.system_properties.message_id
    if sent_ids is not None:
        sp["message_id"] = sent_ids.get(mid, "<unknown id>")
    sp.pop("queue_offset", None)                 # where it landed depends on what else the broker holds
    sp.pop("queue_id", None)
    return view


# ---------------------------------------------------------------------------------------------- comparing
def differences(java: Any, rmqd: Any, path: str = "") -> list[str]:
    """Readable differences (``path: rmqd X / Java Y``); lists of equal length are compared element-wise."""
    if isinstance(java, list) and isinstance(rmqd, list) and len(java) == len(rmqd):
        out: list[str] = []
        for i, (j, r) in enumerate(zip(java, rmqd)):
            out += differences(j, r, f"{path}[{i}]")
        return out
    if isinstance(java, dict) and isinstance(rmqd, dict):
        out = []
        for k in sorted({*java, *rmqd}, key=str):
            p = f"{path}.{k}" if path else str(k)
            if k not in java:
                out.append(f"{p}: only rmqd {rmqd[k]!r}")
            elif k not in rmqd:
                out.append(f"{p}: only Java {java[k]!r}")
            else:
                out += differences(java[k], rmqd[k], p)
        return out
    return diff_dicts(rmqd, java, path)


def assert_same(java: Any, rmqd: Any, what: str = "", explained: Mapping[str, str] | None = None) -> None:
    """Fail naming every difference, except those under a path ``explained`` lists (path prefix -> reason, each
    one a row of docs/compatibility.md); an explained path that no longer differs fails too (stale entry)."""
    diffs = differences(java, rmqd)
    explained = explained or {}
    left = [x for x in diffs if not any(x.startswith(p + ".") or x.startswith(p + ":") or x.startswith(p + "[")
                                        for p in explained)]
    stale = [p for p in explained if not any(x.startswith(p) for x in diffs)]
    assert not left, f"{what}: rmqd differs from Java 5.x:\n  " + "\n  ".join(left[:40])
    assert not stale, f"{what}: explained differences no longer seen (update docs/compatibility.md): {stale}"
