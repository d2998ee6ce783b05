"""Request dispatch: request code -> (processor, pool), RocketMQ's processor table.

A processor is ``handler(conn, request) -> RemotingCommand | None | awaitable``.  Cheap
non-blocking processors run inline on the loop; anything that may block (disk, fsync, big scans)
is registered with a bounded ``ProcessorPool``.  A request that waited in a pool queue longer than
the pool's limit is answered SYSTEM_BUSY at once (RocketMQ's fast failure), as is a request that
finds the queue full.  Returning None means "no reply now" (oneway, or the processor replies later
through ``conn.reply``, e.g. a held long-poll pull).

A family may also register an ``inline_first`` handler: it runs on the loop and either answers
(the cheap common case, e.g. an ASYNC_FLUSH append of a small message to an existing topic) or
returns ``TO_POOL`` to have the full handler run in the family's pool.  Every hand-off between
the loop and a pool thread costs GIL transfers and context switches that dwarf a small append,
so the common case must not pay them.
"""
from __future__ import annotations

import asyncio
import collections
import enum
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Coroutine, Iterable, Optional, Protocol, Union

from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RPC_ONEWAY, MissingHeaderField, RemotingCommand, error_response
from rmqd.remoting.java_errors import BadBodyError, NullBodyError, NumberFormatError, number_format_remark

if TYPE_CHECKING:
    import concurrent.futures

    from rmqd.cython_ext.send_lane import SendLane
    from rmqd.remoting.connection import Connection

log = logging.getLogger(__name__)


class _ToPool(enum.Enum):
    TO_POOL = "TO_POOL"


TO_POOL = _ToPool.TO_POOL  # returned by an inline_first handler: "run me in the pool instead"

# What a processor returns: the response, None (no reply now: oneway, or it answers later through
# ``conn.reply``), an awaitable of either, or (an inline_first handler) TO_POOL.
AsyncResponse = Coroutine[None, None, Optional[RemotingCommand]]
HandlerResult = Union[RemotingCommand, None, AsyncResponse, _ToPool]
Handler = Callable[["Connection", RemotingCommand], HandlerResult]

# observer(request_code, response_code, elapsed_s, oneway): told of every answered request
# (rmqd.metrics' rpc latency); a request answered later (a held long-poll pull) is not reported.
Observer = Callable[[int, int, float, bool], None]


class RequestHook(Protocol):
    """A check run before every request (the broker's access control): None to go on, or the response to
    send instead of processing the request. The send fast lane also calls ``signed_send`` when the hook
    has one (see ``rmqd.cython_ext.send_lane``)."""

    def __call__(self, conn: "Connection", request: RemotingCommand) -> Optional[RemotingCommand]: ...


def run_handler(handler: Handler, conn: "Connection", request: RemotingCommand,
                observer: Observer | None = None, t0: float = 0.0) -> Optional[_ToPool]:
    """Run one processor and send what it returns; errors become SYSTEM_ERROR responses.

    Returns ``TO_POOL`` when the handler asked for it (nothing is sent then), else None.
    ``observer`` (with the request's arrival time ``t0``, time.monotonic) is told of the answer.
    """
    try:
        response = handler(conn, request)
    except MissingHeaderField as exc:
        response = error_response(ResponseCode.SYSTEM_ERROR, str(exc))
    except (NullBodyError, NumberFormatError, BadBodyError) as exc:
        log.info("request code %d from %s refused: %s", request.code, getattr(conn, "remote_address", "?"), exc)
        response = error_response(ResponseCode.SYSTEM_ERROR, str(exc))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        # Garbage from a client, not a bug of ours: one line, no traceback.
        log.warning("request code %d from %s: undecodable body: %s", request.code,
                    getattr(conn, "remote_address", "?"), exc)
        response = error_response(ResponseCode.SYSTEM_ERROR, f"bad request body: {exc}")
    except Exception as exc:  # a processor bug must not kill the connection
        remark = number_format_remark(exc) if isinstance(exc, ValueError) else None
        if remark is not None:       # a header number Java's parser refuses too: Java's words
            log.info("request code %d from %s refused: %s", request.code, getattr(conn, "remote_address", "?"), exc)
            response = error_response(ResponseCode.SYSTEM_ERROR, remark)
        else:
            log.exception("processor for code %d failed (peer %s)", request.code,
                          getattr(conn, "remote_address", "?"))
            response = error_response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
    if response is None:
        if observer is not None and request.flag & RPC_ONEWAY:
            observer(request.code, 0, time.monotonic() - t0, True)
        return None
    if response is TO_POOL:
        return TO_POOL
    if not isinstance(response, RemotingCommand):
        _finish_async(response, conn, request, observer, t0)
        return None
    conn.reply(request, response)
    if observer is not None:
        observer(request.code, response.code, time.monotonic() - t0, bool(request.flag & RPC_ONEWAY))
    return None


def _finish_async(awaitable: AsyncResponse, conn: "Connection", request: RemotingCommand,
                  observer: Observer | None = None, t0: float = 0.0) -> None:
    loop = conn.loop
    assert loop is not None, "a connection dispatches once it is made (it has its loop)"
    future: "asyncio.Future[Optional[RemotingCommand]] | concurrent.futures.Future[Optional[RemotingCommand]]"
    if threading.get_ident() == getattr(conn, "_loop_thread", None):
        future = asyncio.ensure_future(awaitable, loop=loop)
    else:
        future = asyncio.run_coroutine_threadsafe(awaitable, loop)

    def done(fut: "asyncio.Future[Optional[RemotingCommand]] | concurrent.futures.Future[Optional[RemotingCommand]]") -> None:
        try:
            response = fut.result()
        except MissingHeaderField as exc:
            response = error_response(ResponseCode.SYSTEM_ERROR, str(exc))
        except (NullBodyError, NumberFormatError, BadBodyError) as exc:
            log.info("request code %d from %s refused: %s", request.code, conn.remote_address, exc)
            response = error_response(ResponseCode.SYSTEM_ERROR, str(exc))
        except Exception as exc:
            log.exception("async processor for code %d failed (peer %s)", request.code, conn.remote_address)
            response = error_response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if response is not None:
            conn.reply(request, response)
            if observer is not None:
                observer(request.code, response.code, time.monotonic() - t0, bool(request.flag & RPC_ONEWAY))

    future.add_done_callback(done)


class ProcessorPool:
    """A bounded executor for one processor family with queue-age fast failure."""

    def __init__(self, name: str, threads: int, capacity: int = 10000,
                 max_wait_ms: int | None = None) -> None:
        self.name = name
        self.threads = threads
        self.capacity = capacity
        self.max_wait_ms = max_wait_ms
        self._queue: collections.deque[tuple[float, Handler, Connection, RemotingCommand]] = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._workers: list[threading.Thread] = []
        self._idle = 0               # workers waiting for a request
        self._started = False
        self._stopping = False
        self.rejected = 0
        self.expired = 0
        self.observer: Observer | None = None     # set by Dispatcher.set_observer

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Accept work. Workers start on demand, up to ``threads`` (an idle broker holds none)."""
        self._started = True

    def _spawn_locked(self) -> Optional[threading.Thread]:
        """A new worker when every running one is busy and the pool may grow (called under _cond)."""
        if self._idle > 0 or len(self._workers) >= self.threads or not self._started or self._stopping:
            return None
        t = threading.Thread(target=self._work, name=f"{self.name}-{len(self._workers)}", daemon=True)
        self._workers.append(t)
        return t

    def shutdown(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        deadline = time.monotonic() + timeout
        with self._cond:
            workers = list(self._workers)
        for t in workers:
            t.join(max(0.0, deadline - time.monotonic()))
        self._workers.clear()

    # -- queueing ----------------------------------------------------------------------------
    def submit(self, handler: Handler, conn: "Connection", request: RemotingCommand) -> None:
        with self._cond:
            if len(self._queue) < self.capacity and not self._stopping:
                self._queue.append((time.monotonic(), handler, conn, request))
                self._cond.notify()
                queued, spawn = True, self._spawn_locked()
            else:
                queued, spawn = False, None
        if queued:
            if spawn is not None:
                spawn.start()
            return
        self.rejected += 1
        conn.reply(request, error_response(
            ResponseCode.SYSTEM_BUSY,
            "[OVERLOAD]system busy, start flow control for a while"))

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    def head_wait_ms(self) -> int:
        """How long the oldest queued request has waited (0 when empty)."""
        try:
            enqueued = self._queue[0][0]
        except IndexError:
            return 0
        return int((time.monotonic() - enqueued) * 1000)

    def expire_aged(self) -> int:
        """Answer SYSTEM_BUSY to queued requests older than the limit; returns how many."""
        if self.max_wait_ms is None:
            return 0
        limit = self.max_wait_ms / 1000.0
        now = time.monotonic()
        expired = []
        with self._cond:
            queue = self._queue
            while queue and now - queue[0][0] > limit:
                expired.append(queue.popleft())
            size = len(queue)
        for enqueued, _handler, conn, request in expired:
            self._busy(conn, request, now - enqueued, size)
        return len(expired)

    def _busy(self, conn: "Connection", request: RemotingCommand, waited: float, size: int) -> None:
        self.expired += 1
        conn.reply(request, error_response(
            ResponseCode.SYSTEM_BUSY,
            f"[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
            f"period in queue: {int(waited * 1000)}ms, size of queue: {size}"))

    def _work(self) -> None:
        limit = None if self.max_wait_ms is None else self.max_wait_ms / 1000.0
        queue = self._queue
        cond = self._cond
        while True:
            with cond:
                while not queue and not self._stopping:
                    self._idle += 1
                    cond.wait()
                    self._idle -= 1
                if self._stopping and not queue:
                    return
                enqueued, handler, conn, request = queue.popleft()
            if limit is not None:
                waited = time.monotonic() - enqueued
                if waited > limit:
                    self._busy(conn, request, waited, len(queue))
                    continue
            run_handler(handler, conn, request, self.observer, enqueued)


class Dispatcher:
    """Maps request codes to processors and their pools."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._table: dict[int, tuple[Handler, ProcessorPool | None, Handler | None]] = {}
        self.pools: dict[str, ProcessorPool] = {}
        self._cleaner: asyncio.TimerHandle | None = None
        # Optional fast lane (send_lane.SendLane): the connection hands it each read
        # (``lane.serve_data``); what it does not serve it dispatches here.
        self.lane: SendLane | None = None
        self.observer: Observer | None = None
        # Optional check run before every request (the broker's ACL): ``hook(conn, request)`` returns
        # None to go on, or the response to send instead of processing the request.
        self.request_hook: RequestHook | None = None

    def set_observer(self, observer: Observer | None) -> None:
        """Report every answered request to ``observer`` (see ``Observer``), in every pool too."""
        self.observer = observer
        for pool in self.pools.values():
            pool.observer = observer

    def add_pool(self, pool: ProcessorPool) -> ProcessorPool:
        self.pools[pool.name] = pool
        pool.observer = self.observer
        return pool

    def register(self, codes: int | Iterable[int], handler: Handler, pool: ProcessorPool | None = None,
                 inline_first: Handler | None = None, replace: bool = False) -> None:
        """Route ``codes`` to ``handler`` (inline, or in ``pool``).

        With ``inline_first`` (requires a pool), that handler runs on the loop first and may
        return ``TO_POOL`` to hand the request to ``handler`` in the pool. A code that already has a
        handler raises ValueError unless ``replace`` (two features must not claim one code).
        """
        if isinstance(codes, int):
            codes = [codes]
        if inline_first is not None and pool is None:
            raise ValueError("inline_first needs a pool to fall back to")
        if pool is not None and pool.name not in self.pools:
            self.add_pool(pool)
        codes = [int(c) for c in codes]
        if not replace:
            taken = [c for c in codes if c in self._table]
            if taken:
                raise ValueError(f"{self.name}: request code(s) {taken} already have a handler")
        for code in codes:
            self._table[code] = (handler, pool, inline_first)

    def handles(self, code: int) -> bool:
        return code in self._table

    def dispatch(self, conn: "Connection", request: RemotingCommand) -> None:
        hook = self.request_hook
        if hook is not None:
            refusal = hook(conn, request)
            if refusal is not None:
                conn.reply(request, refusal)
                return
        self.dispatch_checked(conn, request)

    def dispatch_checked(self, conn: "Connection", request: RemotingCommand) -> None:
        """Dispatch a request that already passed the request hook."""
        entry = self._table.get(request.code)
        if entry is None:
            log.debug("%s: request code %d not supported (peer %s)", self.name, request.code, conn.remote_address)
            conn.reply(request, error_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"))
            return
        handler, pool, inline_first = entry
        observer = self.observer
        t0 = time.monotonic() if observer is not None else 0.0
        if pool is None:
            run_handler(handler, conn, request, observer, t0)
        elif inline_first is None or run_handler(inline_first, conn, request, observer, t0) is TO_POOL:
            pool.submit(handler, conn, request)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop, clean_interval: float = 0.01) -> None:
        for pool in self.pools.values():
            pool.start()
        limits = [p.max_wait_ms for p in self.pools.values() if p.max_wait_ms is not None]
        if limits:
            # All queues empty: look again later, but within half the smallest wait limit.
            idle_interval = max(clean_interval, min(clean_interval * 10, min(limits) / 2000.0))

            def clean() -> None:
                busy = False
                for pool in self.pools.values():
                    pool.expire_aged()
                    busy = busy or pool.queue_size > 0
                self._cleaner = loop.call_later(clean_interval if busy else idle_interval, clean)
            self._cleaner = loop.call_later(clean_interval, clean)

    def shutdown(self) -> None:
        if self._cleaner is not None:
            self._cleaner.cancel()
            self._cleaner = None
        for pool in self.pools.values():
            pool.shutdown()
