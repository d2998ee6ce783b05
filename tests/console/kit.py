"""Console test kit: an embedded rmqd with console endpoints, an HTTP client with the CSRF cookie."""
from __future__ import annotations

import http.cookiejar
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Optional

from rmqd.admin.client import AdminClient
from rmqd.console.endpoint import ConsoleEndpoint
from rmqd.metrics.endpoint import MetricsEndpoint
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode
from rmqd.remoting.command import new_request
from rmqd.store.message import encode_properties
from rmqd.testing import EmbeddedServer


class Http:
    """urllib with a cookie jar: ``get``/``post`` return (status, headers, body bytes)."""

    def __init__(self, base: str, token: Optional[str] = None) -> None:
        self.base = base.rstrip("/")
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.token = token

    def request(self, method: str, path: str, body: Any = None, headers: Optional[dict] = None,
                timeout: float = 15.0) -> tuple[int, dict, bytes]:
        data = json.dumps(body).encode() if body is not None else (b"{}" if method == "POST" else None)
        h = {"Content-Type": "application/json"} if data is not None else {}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        h.update(headers or {})
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=h)
        try:
            with self.opener.open(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def csrf(self) -> str:
        """This console's CSRF cookie (``rmqd_csrf_<port>``), after a page load if there is none yet."""
        name = f"rmqd_csrf_{urllib.parse.urlsplit(self.base).port}"
        for c in self.jar:
            if c.name == name:
                return c.value
        self.request("GET", "/")
        return next(c.value for c in self.jar if c.name == name)

    def get(self, path: str, **kw: Any) -> tuple[int, dict, bytes]:
        return self.request("GET", path, **kw)

    def get_json(self, path: str, status: int = 200) -> Any:
        code, _, body = self.get(path)
        assert code == status, f"GET {path}: {code} {body[:300]!r}"
        return json.loads(body)

    def post(self, path: str, body: Any = None, csrf: bool = True, headers: Optional[dict] = None,
             **kw: Any) -> tuple[int, dict, bytes]:
        h = dict(headers or {})
        if csrf:
            h["X-CSRF-Token"] = self.csrf()
        return self.request("POST", path, body, h, **kw)

    def post_json(self, path: str, body: Any = None, status: int = 200) -> Any:
        code, _, raw = self.post(path, body)
        assert code == status, f"POST {path}: {code} {raw[:300]!r}"
        return json.loads(raw)


class ConsoleKit:
    """rmqd (name server + broker) with a read/write console, a read-only one and a token one."""

    def __init__(self, store_dir: str, broker_properties: Optional[dict] = None, lag_interval_s: float = 0.3):
        self.eps: dict[str, Any] = {}

        def endpoints() -> list:
            self.eps = {"rw": ConsoleEndpoint("127.0.0.1", 0, lag_interval_s=lag_interval_s),
                        "ro": ConsoleEndpoint("127.0.0.1", 0, read_only=True, lag_interval_s=60),
                        "token": ConsoleEndpoint("127.0.0.1", 0, token="s3cret-token", require_token=True,
                                                 lag_interval_s=60),
                        "metrics": MetricsEndpoint("127.0.0.1", 0)}
            return list(self.eps.values())

        self.server = EmbeddedServer(store_dir=store_dir, broker_properties=broker_properties or {},
                                     endpoints=endpoints)

    def start(self) -> "ConsoleKit":
        self.server.start()
        self.admin = AdminClient(self.server.namesrv_addr)
        return self

    def stop(self) -> None:
        self.admin.close()
        for ep in getattr(self, "extra", []):
            self.server.call(ep.close())
        self.server.stop()

    def remote_console(self) -> ConsoleEndpoint:
        """A console over the remoting admin codes (what `rmqd console -n` runs) on the same loop."""
        ep = ConsoleEndpoint("127.0.0.1", 0, namesrv_addr=self.server.namesrv_addr, lag_interval_s=60)
        self.server.call(ep.start(self.server.services))
        self.extra = getattr(self, "extra", []) + [ep]
        return ep

    def url(self, name: str = "rw") -> str:
        return self.eps[name].url

    def http(self, name: str = "rw", token: Optional[str] = None) -> Http:
        return Http(self.url(name), token)

    # ---------------------------------------------------------------- traffic helpers
    @property
    def broker_addr(self) -> str:
        return self.server.broker_addr

    def create_topic(self, topic: str, queues: int = 4) -> None:
        self.admin.call(self.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC,
                        {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6})

    def send(self, topic: str, body: bytes, queue_id: int = 0, tags: Optional[str] = None,
             keys: Optional[str] = None) -> str:
        resp = self.admin.send(self.broker_addr, topic, queue_id, body, tags, keys)
        return resp.ext_fields["msgId"]

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.admin.call(self.broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                        {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset})

    def create_group(self, group: str) -> None:
        body = json.dumps({"groupName": group, "consumeEnable": True, "retryQueueNums": 1,
                           "retryMaxTimes": 16}).encode()
        self.admin.call(self.broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)

    def to_dlq(self, group: str, topic: str, msg: Any) -> None:
        self.admin.call(self.broker_addr, RequestCode.CONSUMER_SEND_MSG_BACK,
                        {"offset": msg.commit_log_offset, "group": group, "delayLevel": -1,
                         "originMsgId": msg.msg_id, "originTopic": topic, "maxReconsumeTimes": 16})

    def producer_heartbeat(self, group: str) -> BlockingClient:
        """A producer connection (kept open by the returned client)."""
        c = BlockingClient(self.broker_addr)
        req = new_request(RequestCode.HEART_BEAT, None, json.dumps(
            {"clientID": f"console-test-{group}", "producerDataSet": [{"groupName": group}],
             "consumerDataSet": []}).encode())
        req.language = "JAVA"
        req.version = 409
        assert c.invoke(req, 5).code == 0
        return c


def props(**kv: str) -> str:
    return encode_properties(kv)
