"""AdminClient: blocking request/response to name servers and brokers (DefaultMQAdminExt's role)."""
from __future__ import annotations

import os
import random
import socket
import time
from typing import TYPE_CHECKING, Mapping, Optional, TypeVar, cast

from rmqd.remoting import fastjson
from rmqd.acl.signer import sign_request
from rmqd.remoting.client import BlockingClient, BlockingClientPool
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, new_request
from rmqd.store.message import decode_messages, encode_properties

if TYPE_CHECKING:
    from rmqd.admin.bodies import ClusterInfo, TopicList, TopicRoute
    from rmqd.remoting.fastjson import JsonValue
    from rmqd.store.message import StoredMessage

#: a request's extension fields (None: left out; booleans as ``true``/``false``, anything else as ``str()``)
ExtFields = Mapping[str, object]
_Body = TypeVar("_Body")

TOOLS_CONSUMER = "TOOLS_CONSUMER"
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class AdminError(Exception):
    """A non-SUCCESS answer: ``code`` and ``remark`` as the server sent them."""

    def __init__(self, code: int, remark: Optional[str], addr: str = "") -> None:
        super().__init__(f"CODE: {code}  DESC: {remark}" + (f"  ({addr})" if addr else ""))
        self.code = code
        self.remark = remark


def tools_credentials(home: Optional[str] = None) -> Optional[tuple[str, str]]:
    """(accessKey, secretKey) of ``$ROCKETMQ_HOME/conf/tools.yml``, where mqadmin reads the ACL
    credentials it signs with; None without such a file (or without both keys)."""
    home = home or os.environ.get("ROCKETMQ_HOME")
    if not home:
        return None
    path = os.path.join(home, "conf", "tools.yml")
    if not os.path.isfile(path):
        return None
    import yaml

    with open(path, encoding="utf-8") as f:
        data: object = yaml.safe_load(f) or {}
    if not isinstance(data, dict):
        return None
    ak, sk = data.get("accessKey"), data.get("secretKey")
    return (str(ak), str(sk)) if ak and sk else None


class AdminClient:
    def __init__(self, namesrv_addr: Optional[str] = None, timeout: float = 10.0,
                 credentials: Optional[tuple[str, str]] = None) -> None:
        addr = namesrv_addr or os.environ.get("NAMESRV_ADDR") or "127.0.0.1:9876"
        self.namesrv_addrs = [a.strip() for a in addr.split(";") if a.strip()]
        self.timeout = timeout
        self.credentials = credentials      # (accessKey, secretKey): every request is signed (ACL)
        self._pool = BlockingClientPool()       # the console calls from several threads, and closes meanwhile
        self.client_id = f"{socket.gethostname()}@{os.getpid()}#{int(time.time() * 1000)}"

    def close(self) -> None:
        self._pool.close()

    # ------------------------------------------------------------------ transport
    def _client(self, addr: str) -> BlockingClient:
        return self._pool.get(addr)

    def call(self, addr: str, code: int, ext: Optional[ExtFields] = None, body: Optional[bytes] = None,
             ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        """Invoke and return the response; raise :class:`AdminError` unless its code is in ``ok``."""
        fields = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (ext or {}).items()
                  if v is not None}
        if self.credentials is not None:
            sign_request(fields, body, *self.credentials)
        resp = self._client(addr).invoke(new_request(code, fields, body), self.timeout)
        if resp.code not in ok:
            raise AdminError(resp.code, resp.remark, addr)
        return resp

    def call_json(self, addr: str, code: int, ext: Optional[ExtFields] = None,
                  body: Optional[bytes] = None) -> JsonValue:
        resp = self.call(addr, code, ext, body)
        raw = resp.body_bytes() if resp.body is not None else b""
        return fastjson.loads_lenient(raw) if raw else None

    def answer(self, shape: type[_Body], addr: str, code: int, ext: Optional[ExtFields] = None,
               body: Optional[bytes] = None) -> _Body:
        """``call_json``'s answer ({} without a body) read as ``shape``, the body the code answers with
        (:mod:`rmqd.admin.bodies`)."""
        # the JSON decode boundary: the server's body is trusted to have its code's shape, as mqadmin does
        return cast(_Body, self.call_json(addr, code, ext, body) or {})

    def namesrv(self, code: int, ext: Optional[ExtFields] = None, body: Optional[bytes] = None,
                ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        last: Optional[Exception] = None
        for addr in self.namesrv_addrs:
            try:
                return self.call(addr, code, ext, body, ok)
            except (OSError, TimeoutError, ConnectionError) as exc:
                last = exc
        raise last or AdminError(-1, "no name server address")

    def namesrv_json(self, code: int, ext: Optional[ExtFields] = None) -> JsonValue:
        resp = self.namesrv(code, ext)
        raw = resp.body_bytes() if resp.body is not None else b""
        return fastjson.loads_lenient(raw) if raw else None

    # ------------------------------------------------------------------ name server views
    def cluster_info(self) -> ClusterInfo:
        # the JSON decode boundary: GET_BROKER_CLUSTER_INFO's body
        return cast("ClusterInfo", self.namesrv_json(RequestCode.GET_BROKER_CLUSTER_INFO) or {})

    def route(self, topic: str) -> TopicRoute:
        # the JSON decode boundary: GET_ROUTEINFO_BY_TOPIC's body
        return cast("TopicRoute", self.namesrv_json(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}) or {})

    def topic_list(self) -> list[str]:
        # the JSON decode boundary: GET_ALL_TOPIC_LIST_FROM_NAMESERVER's body
        body = cast("TopicList", self.namesrv_json(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) or {})
        return list(body.get("topicList", []))

    def master_addrs(self, cluster: str) -> list[str]:
        info = self.cluster_info()
        addrs: list[str] = []
        for name in sorted(info.get("clusterAddrTable", {}).get(cluster, [])):
            bd = info.get("brokerAddrTable", {}).get(name) or {}
            a = broker_addr_of(bd, 0)
            if a:
                addrs.append(a)
        return addrs

    def all_master_addrs(self) -> list[str]:
        """Every master of every cluster known to the name server."""
        info = self.cluster_info()
        return [a for _n, bd in sorted(info.get("brokerAddrTable", {}).items()) if (a := broker_addr_of(bd, 0))]

    def broker_names(self, cluster: str) -> list[str]:
        return sorted(self.cluster_info().get("clusterAddrTable", {}).get(cluster, []))

    def broker_addrs_of(self, broker: Optional[str], cluster: Optional[str]) -> list[str]:
        """``-b`` wins over ``-c`` (mqadmin's rule)."""
        if broker:
            return [broker]
        if cluster:
            return self.master_addrs(cluster)
        raise AdminError(-1, "please set -b or -c")

    def route_masters(self, topic: str) -> dict[str, str]:
        """brokerName → master address from the topic route."""
        out: dict[str, str] = {}
        for bd in self.route(topic).get("brokerDatas", []):
            a = broker_addr_of(bd, 0)
            if a:
                out[bd["brokerName"]] = a
        return out

    # ------------------------------------------------------------------ broker helpers
    def max_offset(self, addr: str, topic: str, qid: int) -> int:
        return _offset(self.call(addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": qid}))

    def min_offset(self, addr: str, topic: str, qid: int) -> int:
        return _offset(self.call(addr, RequestCode.GET_MIN_OFFSET, {"topic": topic, "queueId": qid}))

    def search_offset(self, addr: str, topic: str, qid: int, ts: int) -> int:
        return _offset(self.call(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                 {"topic": topic, "queueId": qid, "timestamp": ts}))

    def pull(self, addr: str, topic: str, qid: int, offset: int, max_nums: int = 32, group: str = TOOLS_CONSUMER,
             sub: str = "*") -> tuple[int, int, list[StoredMessage]]:
        """One PULL_MESSAGE (subscription in the request, no suspend): (code, nextBeginOffset, messages)."""
        resp = self.call(addr, RequestCode.PULL_MESSAGE, {
            "consumerGroup": group, "topic": topic, "queueId": qid, "queueOffset": offset,
            "maxMsgNums": max_nums, "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0,
            "subscription": sub, "subVersion": 0, "expressionType": "TAG"},
            ok=(ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
                ResponseCode.PULL_OFFSET_MOVED))
        msgs = decode_messages(resp.body_bytes()) if resp.code == ResponseCode.SUCCESS and resp.body is not None else []
        return resp.code, int((resp.ext_fields or {}).get("nextBeginOffset", offset)), msgs

    def send(self, addr: str, topic: str, queue_id: int, body: bytes, tags: Optional[str] = None,
             keys: Optional[str] = None, group: str = "SELF_TEST_P_GROUP") -> RemotingCommand:
        props = {"UNIQ_KEY": "%032X" % random.getrandbits(128), "WAIT": "true"}
        if tags:
            props["TAGS"] = tags
        if keys:
            props["KEYS"] = keys
        return self.call(addr, RequestCode.SEND_MESSAGE, {
            "producerGroup": group, "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
            "queueId": queue_id, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": 0,
            "properties": encode_properties(props), "reconsumeTimes": 0, "unitMode": False, "batch": False}, body)


def _offset(resp: RemotingCommand) -> int:
    """The ``offset`` extension field of an offset answer."""
    return int((resp.ext_fields or {})["offset"])


def broker_addr_of(broker_data: Mapping[str, object], bid: int) -> Optional[str]:
    """The address of broker ``bid`` in a BrokerData body (its ``brokerAddrs`` keys are numbers or strings)."""
    addrs = broker_data.get("brokerAddrs") or {}
    if not isinstance(addrs, dict):
        return None
    addr = addrs.get(bid) or addrs.get(str(bid))
    return addr if isinstance(addr, str) else None
