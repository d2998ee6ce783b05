"""Lite delivery (Java ``LiteEventDispatcher``, ``PopLiteMessageProcessor``, ``PopLiteLongPollingService``): a
message applied to the lite index is an event for one client per subscribed group (random start, skipping
blacklisted clients); the client's long poll wakes; its pop takes the lite topics with events and pops each as an
orderly queue. Acks, due batches, a periodic scan of blocked and full clients offer lite topics again (see
:mod:`rmqd.lite.subscriptions`)."""
from __future__ import annotations

import asyncio
import heapq
import logging
import random
from typing import Optional

from rmqd.lite.model import BLACKLIST_MS, BLOCKED_NO_POLL_MS, BLOCKED_PENDING_MS, LiteClient, LiteState
from rmqd.pop.checkpoint import now_ms
from rmqd.pop.results import PopResult
from rmqd.store.lite.names import lmq_name, parse_lmq

log = logging.getLogger(__name__)


class LiteDelivery(LiteState):
    # ------------------------------------------------------------------ events
    def on_arrival(self, parent: str, lite: str) -> None:
        """Index callback (any thread): new messages on ``lite``: one client per subscribed group."""
        key = lmq_name(parent, lite)
        by_group = self.subscribers.get(key)
        if not by_group:
            return
        for group in list(by_group):
            self._dispatch(group, parent, lite)

    def _dispatch(self, group: str, parent: str, lite: str, exclude: str = "") -> bool:
        with self._lock:
            ids = list(self.subscribers.get(lmq_name(parent, lite), {}).get(group, ()))
            if not ids:
                return False
            now = self.clock()
            start = random.randrange(len(ids))
            order = ids[start:] + ids[:start]
            chosen = None
            for cid in order:
                c = self.clients.get(cid)
                if c is not None and cid != exclude and c.blacklisted_until <= now:
                    chosen = c
                    break
            if chosen is None:                 # nobody else qualifies: the excluded or blacklisted ones
                chosen = next((self.clients[cid] for cid in order if cid in self.clients), None)
            if chosen is None:
                return False
            if lite not in chosen.events:
                if len(chosen.events) >= chosen.capacity:
                    chosen.full = True
                    return False
                if not chosen.events:
                    chosen.events_since = now
                chosen.events[lite] = None
        self._wake(chosen)
        return True

    def _offer_if_backlog(self, group: str, parent: str, lite: str) -> None:
        if self.has_work(group, parent, lite):
            self._dispatch(group, parent, lite)

    def has_work(self, group: str, parent: str, lite: str) -> bool:
        """Whether a pop of the lite topic for ``group`` could hand something out now."""
        key = lmq_name(parent, lite)
        q = self.index.queue(parent, lite)
        if q is None:
            return False
        if self.pop_service.queue_locked(key, group, 0):
            return False
        off = self.offsets.query_offset(group, key, 0)
        return (off < 0 and q.max_offset > q.min_offset) or off < q.max_offset or \
            bool(self.pop_service.open_orderly_count(key, group, 0))

    def on_ack(self, group: str, lmq: str) -> None:
        """An ack may have unblocked the lite topic: offer it again if it has more."""
        pl = parse_lmq(lmq)
        if pl is not None:
            self._offer_if_backlog(group, pl[0], pl[1])

    def _on_orderly(self, topic: str, group: str, qid: int, deadline: Optional[int]) -> None:
        """PopService: a lite topic's batch was handed out (watch its deadline) or is all acked (offer it)."""
        if topic[:1] != "%" or parse_lmq(topic) is None:
            return
        if deadline is None:
            self.on_ack(group, topic)
        else:
            self.watch_deadline(group, topic, deadline)

    def watch_deadline(self, group: str, lmq: str, deadline_ms: int) -> None:
        """Offer the lite topic again once its in-flight batch is due (not acked in time)."""
        with self._lock:
            heapq.heappush(self._deadlines, (deadline_ms, next(self._seq), group, lmq))

    def _wake(self, c: LiteClient) -> None:
        fut, loop = c.waiter, c.loop
        if fut is None or loop is None:
            return

        def done() -> None:
            if not fut.done():
                fut.set_result(True)
        try:
            loop.call_soon_threadsafe(done)
        except RuntimeError:           # loop closed at shutdown
            pass

    async def wait(self, client_id: str, timeout_s: float) -> bool:
        """Park until the client has events (True) or ``timeout_s`` passes (False)."""
        c = self.clients.get(client_id)
        if c is None or timeout_s <= 0:
            if timeout_s > 0:
                await asyncio.sleep(min(timeout_s, 0.2))
            return False
        if c.events:
            return True
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        c.waiter, c.loop = fut, loop
        try:
            if c.events:
                return True
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            if c.waiter is fut:
                c.waiter = None

    # ------------------------------------------------------------------ pop (POP executor threads)
    def pop(self, client_id: str, max_nums: int, invisible_ms: int, client_host: str = "") -> PopResult:
        """Messages of the client's lite topics with events (all its lite topics with event mode off)."""
        with self._lock:
            c = self.clients.get(client_id)
            if c is None:
                return PopResult(now_ms(), int(invisible_ms), 0)
            c.last_poll = self.clock()
            if self.config.enableLiteEventMode:
                names = [n for n in c.events if n in c.topics]
                c.events.clear()
                c.events_since = 0.0
            else:
                names = list(c.topics)
            group, parent = c.group, c.parent
        queues = [(lmq_name(parent, n), 0) for n in names]
        result = self.pop_service.pop_queues(group, queues, max_nums, invisible_ms, client_host)
        leftover: list[str] = []
        if len(result.messages) >= max_nums:
            # lite topics the batch limit left unread keep their event (not checked one by one: a stale event
            # costs one empty read); the last one read may have more than the batch took
            leftover = names[result.visited:]
            if result.visited and self.has_work(group, parent, names[result.visited - 1]):
                leftover.append(names[result.visited - 1])
        if leftover:
            with self._lock:
                for n in leftover:
                    if n in c.topics and len(c.events) < c.capacity:
                        c.events[n] = None
        c.delivered += len(result.messages)
        return result

    def subscribed(self, client_id: str, lmq: str) -> bool:
        c = self.clients.get(client_id)
        pl = parse_lmq(lmq)
        return c is not None and pl is not None and pl[0] == c.parent and pl[1] in c.topics

    # ------------------------------------------------------------------ periodic work
    def run_due(self, now: Optional[int] = None) -> int:
        """Offer lite topics whose in-flight batch is due (not acked within its invisible time)."""
        now = self.wall_ms() if now is None else now
        due = []
        with self._lock:
            while self._deadlines and self._deadlines[0][0] <= now:
                _, _, group, lmq = heapq.heappop(self._deadlines)
                due.append((group, lmq))
        for group, lmq in dict.fromkeys(due):
            self.on_ack(group, lmq)
        return len(due)

    def check_events(self) -> None:
        """Re-dispatch the events of blocked clients; re-offer the lite topics of clients whose set was full."""
        now = self.clock()
        blocked, refill = [], []
        with self._lock:
            for c in list(self.clients.values()):
                no_poll_ms = (now - (c.last_poll or c.last_sync)) * 1000
                pending_ms = (now - c.events_since) * 1000 if c.events and c.events_since else 0
                if c.events and (no_poll_ms > BLOCKED_NO_POLL_MS or
                                 (pending_ms > BLOCKED_PENDING_MS and no_poll_ms > BLOCKED_PENDING_MS)):
                    blocked.append((c, list(c.events)))
                    c.events.clear()
                    c.events_since = 0.0
                    c.blacklisted_until = now + BLACKLIST_MS / 1000
                elif c.full and len(c.events) < c.capacity // 5 + 1:
                    c.full = False
                    refill.append(c)
        for c, names in blocked:
            log.info("lite: client %s of %s looks blocked; %d events re-dispatched", c.client_id, c.group, len(names))
            for n in names:
                if self.has_work(c.group, c.parent, n):
                    self._dispatch(c.group, c.parent, n, exclude=c.client_id)
        for c in refill:
            for n in list(c.topics):
                if self.has_work(c.group, c.parent, n):
                    self._dispatch(c.group, c.parent, n)

    def full_dispatch(self, group: str, client_id: Optional[str] = None) -> int:
        """Offer every subscribed lite topic with work (admin TRIGGER_LITE_DISPATCH); returns how many."""
        n = 0
        with self._lock:
            pairs = [(c.parent, name) for c in self.clients.values() if c.group == group and
                     (client_id is None or c.client_id == client_id) for name in c.topics]
        for parent, name in dict.fromkeys(pairs):
            if self.has_work(group, parent, name):
                n += self._dispatch(group, parent, name)
        return n
