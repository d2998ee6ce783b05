"""Bounded server-side message search with progress (body, keys, tags and properties).

A search walks a topic's queues over a time range in a thread of its own small pool
(``SEARCH_WORKERS``; the console's page pool never runs one, so searches cannot hold up pages), at
most ``max_messages`` messages, and keeps at most ``MAX_MATCHES`` matches.  The page polls
``progress()`` (``state``: queued, running, done); a search nobody polled for ``IDLE_CANCEL_S`` is
cancelled, and at most ``MAX_JOBS`` are kept.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import TYPE_CHECKING, Optional

from rmqd.console.view import ViewError, message_json

if TYPE_CHECKING:
    from rmqd.console.view import RemoteClusterView
    from rmqd.console.view_base import JsonObject, MessageRow
    from rmqd.store.message import StoredMessage

log = logging.getLogger(__name__)

MAX_SCAN = 200_000
MAX_MATCHES = 500
MAX_JOBS = 16
SEARCH_WORKERS = 2
IDLE_CANCEL_S = 60.0
FIELDS = ("all", "body", "keys", "tags", "properties")


def matches(m: "StoredMessage", needle: str, field: str, mode: str = "contains") -> bool:
    """Does message ``m`` match (``contains`` or ``not_contains``) in ``field``?"""
    nb = needle.encode("utf-8")
    hit = False
    props = m.properties
    if field in ("all", "body"):
        hit = nb in bytes(m.body)
    if not hit and field in ("all", "keys"):
        hit = needle in (props.get("KEYS") or "")
    if not hit and field in ("all", "tags"):
        hit = needle in (props.get("TAGS") or "")
    if not hit and field in ("all", "properties"):
        hit = any(needle in k or needle in v for k, v in props.items())
    return hit if mode != "not_contains" else not hit


class SearchJob:
    def __init__(self, job_id: str, topic: str, needle: str, field: str, mode: str, begin: int, end: int,
                 max_messages: int) -> None:
        self.id = job_id
        self.topic, self.needle, self.field, self.mode = topic, needle, field, mode
        self.begin, self.end, self.max_messages = begin, end, max_messages
        self.scanned = 0
        self.total = 0
        self.found: list[MessageRow] = []
        self.done = False
        self.error: Optional[str] = None
        self.cancelled = False
        self.started = time.time()
        self.running = False
        self.run_started = 0.0
        self.finished = 0.0
        self.last_poll = time.monotonic()

    @property
    def state(self) -> str:
        return "done" if self.done else "running" if self.running else "queued"

    def run(self, view: "RemoteClusterView") -> None:
        self.run_started = time.time()
        self.running = True
        try:
            if self.cancelled:
                return
            for scanned, total, batch in view.scan(self.topic, self.begin, self.end, self.max_messages):
                self.scanned, self.total = scanned, total
                for broker, m in batch:
                    if len(self.found) < MAX_MATCHES and matches(m, self.needle, self.field, self.mode):
                        self.found.append(message_json(m, broker))
                if self.cancelled or time.monotonic() - self.last_poll > IDLE_CANCEL_S:
                    self.cancelled = True
                    break
        except ViewError as exc:
            self.error = str(exc)
        except Exception as exc:
            log.exception("console search %s on %s failed", self.id, self.topic)
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.done = True
            self.finished = time.time()

    def progress(self) -> "JsonObject":
        self.last_poll = time.monotonic()
        return {"id": self.id, "topic": self.topic, "q": self.needle, "field": self.field, "mode": self.mode,
                "state": self.state, "scanned": self.scanned, "total": self.total, "done": self.done,
                "cancelled": self.cancelled,
                "error": self.error, "matches": list(self.found), "capped": len(self.found) >= MAX_MATCHES,
                "elapsedMs": int(((self.finished or time.time()) - self.started) * 1000)}


class SearchJobs:
    def __init__(self) -> None:
        self._jobs: dict[str, SearchJob] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def create(self, topic: str, needle: str, field: str = "all", mode: str = "contains", begin: int = 0,
               end: int = 0, max_messages: int = 10_000) -> SearchJob:
        if not needle:
            raise ViewError("search text is empty")
        if field not in FIELDS:
            raise ViewError(f"field must be one of {', '.join(FIELDS)}")
        job = SearchJob(f"s{next(self._ids)}", topic, needle, field, mode, begin,
                        end or int(time.time() * 1000) + 1000, max(1, min(MAX_SCAN, int(max_messages))))
        with self._lock:
            if len(self._jobs) >= MAX_JOBS:
                for old in sorted(self._jobs.values(), key=lambda j: j.started):
                    if old.done:
                        del self._jobs[old.id]
                        break
                else:
                    raise ViewError("too many searches running; try again shortly", 429)
            self._jobs[job.id] = job
        return job

    def get(self, job_id: str) -> SearchJob:
        job = self._jobs.get(job_id)
        if job is None:
            raise ViewError(f"no search {job_id}", 404)
        return job

    def cancel_all(self) -> None:
        for job in list(self._jobs.values()):
            job.cancelled = True
