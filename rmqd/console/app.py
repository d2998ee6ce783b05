"""The console's aiohttp application: JSON API under /api, SSE live tail, the single-page UI.

Security: no login on a loopback bind, but there every request must name the console by a loopback
Host (``127.0.0.1``, ``localhost``, ``[::1]`` with its port): a page of another site whose name
resolves to 127.0.0.1 (DNS rebinding) gets 403.  On any other address every request needs the
console token (``Authorization: Bearer``, the ``rmqd_token`` cookie, or ``?token=`` once, which sets
the cookie).  Browsers share cookies between the ports of one host, so the cookies of a console
started with ``cookie_suffix`` (the endpoint passes its port) are named ``rmqd_token_<port>`` and
``rmqd_csrf_<port>``; the page learns its CSRF cookie's name from a ``<meta name="rmqd-csrf-cookie">``.
Every POST needs the ``X-CSRF-Token`` header equal to the ``rmqd_csrf`` cookie the page gets
(double-submit) and, when the browser sends an Origin, a same-origin one.  ``read_only`` answers 403
to every request that is not GET/HEAD/OPTIONS.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import logging
import os
import secrets
import threading
import time
from typing import TYPE_CHECKING, Awaitable, Callable, Mapping, Optional, ParamSpec, TypeVar
from urllib.parse import urlparse

import orjson
from aiohttp import web

from rmqd.admin.client import AdminError
from rmqd.common.json_values import json_int
from rmqd.console import auth_view
from rmqd.console.jobs import SEARCH_WORKERS, SearchJobs
from rmqd.console.lag_history import LagHistory
from rmqd.console.view import ClusterView, ViewError
from rmqd.console.view_base import JsonObject

if TYPE_CHECKING:
    from rmqd.console.view import RemoteClusterView

    #: The view, or a factory of it called on first use.
    ViewOrFactory = RemoteClusterView | Callable[[], RemoteClusterView]

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
CSRF_COOKIE = "rmqd_csrf"
TOKEN_COOKIE = "rmqd_token"
MAX_TAILS = 32
TAIL_POLL_S = 0.2
TAIL_BATCH = 200

READY: web.AppKey[Callable[[], bool]] = web.AppKey("ready")
ALLOWED_HOSTS: web.AppKey[frozenset[str]] = web.AppKey("allowed_hosts")
LAG_INTERVAL = web.AppKey("lag_interval_s", float)
SAMPLER: web.AppKey[asyncio.Task[None]] = web.AppKey("sampler")


class ConsoleState:
    """What the handlers share: the view, its executors (pages; searches in a pool of their own),
    searches, lag history, the secrets."""

    def __init__(self, view: "ViewOrFactory", read_only: bool, token: Optional[str],
                 workers: int = 4, cookie_suffix: str = "") -> None:
        """``view``: the view, or a factory called on first use (once the services it reads are up)."""
        self._view: Optional[RemoteClusterView] = None
        self._make_view: Optional[Callable[[], RemoteClusterView]] = None
        if isinstance(view, ClusterView):
            self._view = view
        else:
            self._make_view = view
        self._view_lock = threading.Lock()
        self.read_only = read_only
        self.token = token
        self.csrf = secrets.token_urlsafe(24)
        tail = f"_{cookie_suffix}" if cookie_suffix else ""
        self.csrf_cookie, self.token_cookie = CSRF_COOKIE + tail, TOKEN_COOKIE + tail
        self.executor = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="rmqd-console")
        self.search_executor = concurrent.futures.ThreadPoolExecutor(SEARCH_WORKERS,
                                                                     thread_name_prefix="rmqd-console-search")
        self.searches = SearchJobs()
        self.lag = LagHistory()
        self.tails = 0
        self.closing = False

    @property
    def view(self) -> "RemoteClusterView":
        view = self._view
        if view is None:
            with self._view_lock:
                view = self._view
                if view is None and self._make_view is not None:
                    view = self._view = self._make_view()
        if view is None:
            raise RuntimeError("the console has neither a view nor a factory of it")
        return view

    def close_view(self) -> None:
        if self._view is not None:
            self._view.close()

    async def run(self, fn: Callable[P, T], *args: P.args, **kw: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, lambda: fn(*args, **kw))


STATE = web.AppKey("state", ConsoleState)


def _json(data: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS), status=status,
                        content_type="application/json")


def _error(message: str, status: int) -> web.Response:
    return _json({"error": message}, status)


def _int(request: web.Request, name: str, default: int = 0) -> int:
    v = request.query.get(name, "")
    try:
        return int(v) if v.strip() else default
    except ValueError:
        raise ViewError(f"{name} must be a number")


def _required(values: Mapping[str, object], name: str) -> str:
    """``values[name]`` (a JSON body's or the query's) as text; ViewError "<name> is required" when it is empty."""
    value = str(values.get(name) or "")
    if not value:
        raise ViewError(f"{name} is required")
    return value


async def _body(request: web.Request) -> JsonObject:
    if not request.can_read_body:
        return {}
    try:
        data = await request.json(loads=orjson.loads)
    except (ValueError, orjson.JSONDecodeError):
        raise ViewError("the request body is not JSON")
    if not isinstance(data, dict):
        raise ViewError("the request body must be a JSON object")
    return data


def _view_answer(answer: Callable[["RemoteClusterView", str], object],
                 key: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    """A handler answering ``answer(view, <the URL's {key}>)`` as JSON (run in the console's executor)."""
    async def handler(request: web.Request) -> web.Response:
        st: ConsoleState = request.app[STATE]
        return _json(await st.run(answer, st.view, request.match_info[key]))
    return handler


# ---------------------------------------------------------------------------------- middlewares
@web.middleware
async def security(request: web.Request,
                   handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    st: ConsoleState = request.app[STATE]
    path = request.path
    allowed = request.app.get(ALLOWED_HOSTS)
    if allowed and (request.headers.get("Host") or "").lower() not in allowed:
        log.warning("console: refused %s %s with Host %r (not a loopback name of this console)",
                    request.method, path, request.headers.get("Host"))
        return _error("this console answers only to 127.0.0.1, localhost or [::1] (DNS rebinding guard)", 403)
    if path == "/healthz":
        return await handler(request)
    ready = request.app.get(READY)
    if ready is not None and not ready():
        return _error("rmqd is starting (or stopping); try again shortly", 503)
    if st.token:
        given = ""
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            given = auth[7:].strip()
        given = given or request.cookies.get(st.token_cookie, "") or request.query.get("token", "")
        if not given or not hmac.compare_digest(given, st.token):
            if path.startswith("/api/") or request.method not in SAFE_METHODS:
                return _error("a console token is required (Authorization: Bearer <token>)", 401)
            return web.Response(status=401, content_type="text/html",
                                text="<!doctype html><title>rmqd console</title><p>This console needs its token: "
                                     "open it as <code>/?token=&lt;token&gt;</code> (printed by rmqd at start).")
    if request.method not in SAFE_METHODS:
        if st.read_only:
            return _error("the console is read-only", 403)
        sent = request.headers.get("X-CSRF-Token", "")
        if not sent or not hmac.compare_digest(sent, st.csrf) or \
                not hmac.compare_digest(request.cookies.get(st.csrf_cookie, ""), st.csrf):
            return _error("missing or wrong CSRF token", 403)
        origin = request.headers.get("Origin")
        if origin and origin != "null" and urlparse(origin).netloc != request.host:
            return _error("cross-origin request refused", 403)
    try:
        resp = await handler(request)
    except ViewError as exc:
        return _error(str(exc), exc.status)
    except AdminError as exc:
        return _error(f"the cluster answered: {exc}", 502)
    except (OSError, TimeoutError) as exc:
        return _error(f"cannot reach the cluster: {exc}", 502)
    if st.token and request.query.get("token") and isinstance(resp, web.Response):
        resp.set_cookie(st.token_cookie, st.token, httponly=True, samesite="Strict")
    return resp


# ---------------------------------------------------------------------------------- pages
_INDEX: dict[str, bytes] = {}


def index_page(csrf_cookie: str) -> bytes:
    """index.html naming the console's CSRF cookie in a meta tag (read once per name)."""
    page = _INDEX.get(csrf_cookie)
    if page is None:
        with open(os.path.join(STATIC_DIR, "index.html"), encoding="utf-8") as f:
            html = f.read()
        meta = f'<meta name="rmqd-csrf-cookie" content="{csrf_cookie}">\n'
        page = _INDEX[csrf_cookie] = html.replace("</head>", meta + "</head>", 1).encode()
    return page


async def index(request: web.Request) -> web.StreamResponse:
    st: ConsoleState = request.app[STATE]
    resp = web.Response(body=index_page(st.csrf_cookie), content_type="text/html", charset="utf-8",
                        headers={"Cache-Control": "no-store"})
    resp.set_cookie(st.csrf_cookie, st.csrf, samesite="Strict")
    if st.token and request.query.get("token"):
        resp.set_cookie(st.token_cookie, st.token, httponly=True, samesite="Strict")
    return resp


async def healthz(request: web.Request) -> web.Response:
    ready = request.app.get(READY)
    ok = ready() if ready is not None else True
    return _json({"status": "ok" if ok else "starting"}, 200 if ok else 503)


async def session(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    return _json({"readOnly": st.read_only, "mode": st.view.mode, "tokenRequired": bool(st.token)})


# ---------------------------------------------------------------------------------- cluster
async def overview(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    return _json(await st.run(st.view.overview))


broker = _view_answer(lambda view, addr: view.broker(addr), "addr")


async def features(request: web.Request) -> web.Response:
    from rmqd.console.extensions import BUILTIN
    st: ConsoleState = request.app[STATE]
    return _json({"features": await st.run(st.view.extensions), "builtin": list(BUILTIN)})


# ---------------------------------------------------------------------------------- topics
async def topics(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    q = request.query
    return _json(await st.run(st.view.topics, q.get("q", ""), q.get("kind", "all"), _int(request, "page", 1),
                              _int(request, "size", 20)))


topic = _view_answer(lambda view, name: view.topic(name), "topic")


async def upsert_topic(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    b = await _body(request)
    name = str(b.get("topic") or request.match_info.get("topic") or "").strip()
    try:
        read_queues, write_queues = json_int(b.get("readQueueNums", 4)), json_int(b.get("writeQueueNums", 4))
        perm, order = json_int(b.get("perm", 6)), bool(b.get("order", False))
    except (TypeError, ValueError):
        raise ViewError("queue numbers and perm must be numbers")
    if not (0 < read_queues <= 1024 and 0 < write_queues <= 1024):
        raise ViewError("queue numbers must be between 1 and 1024")
    return _json(await st.run(st.view.upsert_topic, name, read_queues=read_queues, write_queues=write_queues,
                              perm=perm, order=order))


delete_topic = _view_answer(lambda view, name: view.delete_topic(name), "topic")


async def send_test(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    b = await _body(request)
    return _json(await st.run(st.view.send_test, request.match_info["topic"], str(b.get("body", "")),
                              str(b.get("tags") or ""), str(b.get("keys") or "")))


async def tail(request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``message`` events (a JSON list of new messages) and ``pos`` events (the
    positions to resume from), polled every 200 ms; new messages reach the page within a second."""
    st: ConsoleState = request.app[STATE]
    topic_name = request.match_info["topic"]
    if st.tails >= MAX_TAILS:
        return _error("too many live tails open", 429)
    start = request.query.get("from")
    if start:
        try:
            positions = {str(k): int(v) for k, v in orjson.loads(start).items()}
        except (ValueError, AttributeError, TypeError):
            raise ViewError("from must be a JSON object of queue positions")
    else:
        positions = await st.run(st.view.tail_start, topic_name)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                       "X-Accel-Buffering": "no"})
    await resp.prepare(request)
    st.tails += 1
    last_beat = time.monotonic()
    try:
        await resp.write(b"event: pos\ndata: " + orjson.dumps(positions) + b"\n\n")
        while not st.closing:
            msgs, positions = await st.run(st.view.tail_poll, topic_name, positions)
            if msgs:
                for i in range(0, len(msgs), TAIL_BATCH):
                    await resp.write(b"event: message\ndata: " + orjson.dumps(msgs[i:i + TAIL_BATCH]) + b"\n\n")
                await resp.write(b"event: pos\ndata: " + orjson.dumps(positions) + b"\n\n")
                continue
            if time.monotonic() - last_beat > 10:
                await resp.write(b": keep-alive\n\n")
                last_beat = time.monotonic()
            await asyncio.sleep(TAIL_POLL_S)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    except (ViewError, AdminError, OSError) as exc:
        try:
            await resp.write(b"event: failure\ndata: " + orjson.dumps({"error": str(exc)}) + b"\n\n")
        except (ConnectionResetError, OSError):
            pass
    finally:
        st.tails -= 1
    return resp


# ---------------------------------------------------------------------------------- access control 2.0
async def auth_users(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    return _json(await st.run(auth_view.users, st.view, request.query.get("filter", "")))


async def auth_save_user(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    return _json(await st.run(auth_view.save_user, st.view, await _body(request)))


async def auth_delete_user(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    return _json(await st.run(auth_view.delete_user, st.view, request.match_info["name"]))


async def auth_acls(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    q = request.query
    return _json(await st.run(auth_view.acls, st.view, q.get("subject", ""), q.get("resource", "")))


async def auth_save_acl(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    return _json(await st.run(auth_view.save_acl, st.view, await _body(request)))


async def auth_delete_acl(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    return _json(await st.run(auth_view.delete_acl, st.view, await _body(request)))


# ---------------------------------------------------------------------------------- groups
async def groups(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    q = request.query
    return _json(await st.run(st.view.groups, q.get("q", ""), _int(request, "page", 1), _int(request, "size", 20),
                              q.get("system", "") == "true"))


group = _view_answer(lambda view, name: view.group(name), "group")


async def upsert_group(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    b = await _body(request)
    name = str(b.get("group") or "").strip()
    if not name:
        raise ViewError("group name is empty")
    return _json(await st.run(st.view.upsert_group, name, json_int(b.get("retryMaxTimes", 16))))


async def lag_history(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    g = request.match_info["group"]
    return _json({"group": g, "samples": [{"t": t, "lag": lag} for t, lag in st.lag.of(g)]})


async def running_info(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    return _json(await st.run(st.view.running_info, request.match_info["group"], request.match_info["client"]))


async def reset_offset(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    b = await _body(request)
    topic_name = _required(b, "topic")
    try:
        ts = json_int(b.get("timestamp"))
    except (TypeError, ValueError):
        raise ViewError("timestamp (ms) is required")
    return _json(await st.run(st.view.reset_offset, request.match_info["group"], topic_name, ts))


async def skip_backlog(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    topic_name = _required(await _body(request), "topic")
    return _json(await st.run(st.view.reset_offset, request.match_info["group"], topic_name, -1))


async def producers(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    t, g = request.query.get("topic", ""), request.query.get("group", "")
    if not t or not g:
        raise ViewError("topic and group are required")
    return _json(await st.run(st.view.producers, t, g))


# ---------------------------------------------------------------------------------- messages
async def messages(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    q = request.query
    t = _required(q, "topic")
    if q.get("key"):
        return _json(await st.run(st.view.messages_by_key, t, q["key"]))
    now = int(time.time() * 1000)
    begin = _int(request, "begin", now - 3600_000)
    end = _int(request, "end", now + 1000)
    if end < begin:
        raise ViewError("the end of the time range is before its beginning")
    return _json(await st.run(st.view.messages_by_time, t, begin, end, _int(request, "limit", 200)))


async def message(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    return _json(await st.run(st.view.message, request.match_info["id"], request.query.get("topic", "")))


async def message_raw(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    mid = request.match_info["id"]
    raw = await st.run(st.view.message_raw, mid, request.query.get("topic", ""))
    return web.Response(body=raw, content_type="application/octet-stream",
                        headers={"Content-Disposition": f'attachment; filename="{mid}.bin"'})


async def resend(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    b = await _body(request)
    g = _required(b, "group")
    return _json(await st.run(st.view.resend, request.match_info["id"], g, str(b.get("clientId") or ""),
                              str(b.get("topic") or "")))


async def dlq(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    now = int(time.time() * 1000)
    return _json(await st.run(st.view.dlq, request.match_info["group"], _int(request, "begin", 0),
                              _int(request, "end", now + 1000), _int(request, "limit", 200)))


async def dlq_resend(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    mid = _required(await _body(request), "msgId")
    return _json(await st.run(st.view.dlq_resend, request.match_info["group"], mid))


async def search_start(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    q = request.query
    t = _required(q, "topic")
    job = st.searches.create(t, q.get("q", ""), q.get("field", "all"), q.get("mode", "contains"),
                             _int(request, "begin", 0), _int(request, "end", 0), _int(request, "max", 10_000))
    st.search_executor.submit(job.run, st.view)
    return _json(job.progress())


async def search_progress(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    return _json(st.searches.get(request.match_info["id"]).progress())


async def search_cancel(request: web.Request) -> web.Response:
    st: ConsoleState = request.app[STATE]
    job = st.searches.get(request.match_info["id"])
    job.cancelled = True
    return _json(job.progress())


async def not_found(request: web.Request) -> web.Response:
    return _error(f"no such API: {request.path}", 404)


# ---------------------------------------------------------------------------------- app
def loopback_hosts(port: int, bind_host: str = "127.0.0.1") -> frozenset[str]:
    """The Host values a loopback-bound console on ``port`` answers to."""
    names = {"127.0.0.1", "localhost", "[::1]", f"[{bind_host}]" if ":" in bind_host else bind_host}
    hosts = {f"{n}:{port}" for n in names}
    if port == 80:
        hosts |= names
    return frozenset(h.lower() for h in hosts)


def build_app(view: "ViewOrFactory", read_only: bool = False, token: Optional[str] = None,
              ready: Optional[Callable[[], bool]] = None, lag_interval_s: float = 10.0,
              allowed_hosts: Optional[frozenset[str]] = None, cookie_suffix: str = "") -> web.Application:
    """``view``: the view or its factory (called on first use); ``ready``: until it is true every request
    but ``/healthz`` answers 503; ``allowed_hosts``: the only Host headers served (a loopback bind
    without a token), None = any; ``cookie_suffix``: appended to the cookies' names (the port)."""
    app = web.Application(middlewares=[security], client_max_size=8 * 1024 * 1024)
    st = ConsoleState(view, read_only, token, cookie_suffix=cookie_suffix)
    app[STATE] = st
    if allowed_hosts:
        app[ALLOWED_HOSTS] = allowed_hosts
    if ready is not None:
        app[READY] = ready
    app[LAG_INTERVAL] = lag_interval_s
    r = app.router
    r.add_get("/healthz", healthz)
    r.add_get("/api/session", session)
    r.add_get("/api/overview", overview)
    r.add_get("/api/brokers/{addr}", broker)
    r.add_get("/api/features", features)
    r.add_get("/api/topics", topics)
    r.add_post("/api/topics", upsert_topic)
    r.add_get("/api/topics/{topic}", topic)
    r.add_post("/api/topics/{topic}", upsert_topic)
    r.add_post("/api/topics/{topic}/delete", delete_topic)
    r.add_delete("/api/topics/{topic}", delete_topic)
    r.add_post("/api/topics/{topic}/send", send_test)
    r.add_get("/api/topics/{topic}/tail", tail)
    r.add_get("/api/groups", groups)
    r.add_post("/api/groups", upsert_group)
    r.add_get("/api/groups/{group}", group)
    r.add_get("/api/groups/{group}/lag-history", lag_history)
    r.add_get("/api/groups/{group}/clients/{client}/running-info", running_info)
    r.add_post("/api/groups/{group}/reset-offset", reset_offset)
    r.add_post("/api/groups/{group}/skip-backlog", skip_backlog)
    r.add_get("/api/producers", producers)
    r.add_get("/api/messages", messages)
    r.add_get("/api/messages/{id}", message)
    r.add_get("/api/messages/{id}/raw", message_raw)
    r.add_post("/api/messages/{id}/resend", resend)
    r.add_get("/api/dlq/{group}", dlq)
    r.add_post("/api/dlq/{group}/resend", dlq_resend)
    r.add_get("/api/search", search_start)
    r.add_get("/api/search/{id}", search_progress)
    r.add_post("/api/search/{id}/cancel", search_cancel)
    r.add_get("/api/auth/users", auth_users)
    r.add_post("/api/auth/users", auth_save_user)
    r.add_post("/api/auth/users/{name}/delete", auth_delete_user)
    r.add_get("/api/auth/acls", auth_acls)
    r.add_post("/api/auth/acls", auth_save_acl)
    r.add_post("/api/auth/acls/delete", auth_delete_acl)
    r.add_route("*", "/api/{tail:.*}", not_found)
    r.add_static("/static/", STATIC_DIR, append_version=False)
    r.add_get("/{path:.*}", index)       # every page URL is deep-linkable: the UI routes it
    app.on_startup.append(_start_sampler)
    app.on_shutdown.append(_stop)
    return app


async def _start_sampler(app: web.Application) -> None:
    st: ConsoleState = app[STATE]
    interval = float(app[LAG_INTERVAL])
    ready = app.get(READY)

    async def sample() -> None:
        while not st.closing:
            if ready is not None and not ready():
                await asyncio.sleep(min(interval, 0.5))
                continue
            try:
                await st.run(st.lag.sample, st.view)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("console lag sampling failed", exc_info=True)
            await asyncio.sleep(interval)

    app[SAMPLER] = asyncio.get_running_loop().create_task(sample(), name="rmqd-console-lag")


async def _stop(app: web.Application) -> None:
    st: ConsoleState = app[STATE]
    st.closing = True
    st.searches.cancel_all()
    task = app.get(SAMPLER)
    if task is not None:
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass
    st.executor.shutdown(wait=False, cancel_futures=True)
    st.search_executor.shutdown(wait=False, cancel_futures=True)
