"""LOCK_BATCH_MQ (41) / UNLOCK_BATCH_MQ (42): queue locks for orderly consumers (README §3.4, §6.10).

Java: ``broker/client/rebalance/RebalanceLockManager`` and ``AdminBrokerProcessor.lockBatchMQ``.
The lock table is group → MessageQueue → (clientId, lastUpdate); a lock lives
``max_live_time_ms`` (JVM property ``rocketmq.broker.rebalance.lockMaxLiveTime``, 60 s) after its
last renewal.  Everything is in memory and quick, so the handlers run inline on the loop.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Callable, Iterable, Optional, Union

import orjson

from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_response
from rmqd.remoting.dispatch import Dispatcher
from rmqd.remoting.fastjson import loads_lenient
from rmqd.common.json_values import json_int
from rmqd.remoting.java_errors import NullBodyError
from rmqd.store.config import wall_clock_ms

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer

log = logging.getLogger(__name__)

DEFAULT_LOCK_MAX_LIVE_TIME_MS = int(os.environ.get("ROCKETMQ_BROKER_REBALANCE_LOCKMAXLIVETIME", "60000"))

MQKey = tuple[str, str, int]  # (topic, brokerName, queueId)


class LockEntry:
    __slots__ = ("client_id", "last_update")

    def __init__(self, client_id: str, last_update: int) -> None:
        self.client_id = client_id
        self.last_update = last_update


class RebalanceLockManager:
    """group → {(topic, brokerName, queueId): LockEntry}."""

    def __init__(self, max_live_time_ms: int = DEFAULT_LOCK_MAX_LIVE_TIME_MS,
                 clock: Callable[[], int] = wall_clock_ms) -> None:
        self.max_live_time_ms = max_live_time_ms
        self.clock = clock
        self._table: dict[str, dict[MQKey, LockEntry]] = {}
        self._lock = threading.Lock()

    def _expired(self, entry: LockEntry, now: int) -> bool:
        return now - entry.last_update > self.max_live_time_ms

    def try_lock_batch(self, group: str, mqs: Iterable[MQKey], client_id: str) -> list[MQKey]:
        """Grant every queue that is free, expired or already held by ``client_id``; returns them."""
        now = self.clock()
        granted: list[MQKey] = []
        with self._lock:
            table = self._table.setdefault(group, {})
            for mq in mqs:
                entry = table.get(mq)
                if entry is None:
                    table[mq] = LockEntry(client_id, now)
                    log.info("lock queue %s of group %s by %s", mq, group, client_id)
                elif entry.client_id == client_id:
                    entry.last_update = now
                elif self._expired(entry, now):
                    log.warning("lock queue %s of group %s: expired lock of %s taken over by %s", mq, group,
                                entry.client_id, client_id)
                    entry.client_id = client_id
                    entry.last_update = now
                else:
                    log.debug("lock queue %s of group %s by %s refused: held by %s", mq, group, client_id,
                              entry.client_id)
                    continue
                granted.append(mq)
        return granted

    def unlock_batch(self, group: str, mqs: Iterable[MQKey], client_id: str) -> int:
        """Release the queues of ``mqs`` held by ``client_id``; returns how many were released."""
        released = 0
        with self._lock:
            table = self._table.get(group)
            if not table:
                return 0
            for mq in mqs:
                entry = table.get(mq)
                if entry is not None and entry.client_id == client_id:
                    del table[mq]
                    released += 1
                elif entry is not None:
                    log.warning("unlock queue %s of group %s by %s refused: held by %s", mq, group,
                                client_id, entry.client_id)
            if not table:
                del self._table[group]
        return released

    def is_locked(self, group: str, mq: MQKey, client_id: str) -> bool:
        entry = self._table.get(group, {}).get(mq)
        return entry is not None and entry.client_id == client_id and not self._expired(entry, self.clock())

    def owner(self, group: str, mq: MQKey) -> Optional[str]:
        """Client id holding an unexpired lock on ``mq`` (None if free)."""
        entry = self._table.get(group, {}).get(mq)
        if entry is None or self._expired(entry, self.clock()):
            return None
        return entry.client_id


def _mq_key(mq: object) -> MQKey:
    """A MessageQueue JSON object's key; TypeError/KeyError for anything else."""
    if not isinstance(mq, dict):
        raise TypeError(f"a MessageQueue is a JSON object, not {type(mq).__name__}")
    return (str(mq["topic"]), str(mq["brokerName"]), json_int(mq["queueId"]))


def _mq_json(key: MQKey) -> dict[str, Union[str, int]]:
    return {"brokerName": key[1], "queueId": key[2], "topic": key[0]}


def parse_batch_body(request: RemotingCommand) -> tuple[str, str, list[MQKey]]:
    """LockBatchRequestBody / UnlockBatchRequestBody → (consumerGroup, clientId, queues)."""
    raw = request.body_bytes() if request.body is not None else b""
    if not raw:
        raise NullBodyError()
    raw = bytes(raw).strip()
    data = loads_lenient(raw)                  # fastjson's dialect (standard JSON first)
    if not isinstance(data, dict):
        raise ValueError("request body is not a JSON object")
    mq_set = data.get("mqSet") or []
    if not isinstance(mq_set, list):
        raise TypeError(f"mqSet is a JSON array, not {type(mq_set).__name__}")
    mqs = [_mq_key(mq) for mq in mq_set]
    return str(data.get("consumerGroup") or ""), str(data.get("clientId") or ""), mqs


class QueueLockProcessor:
    def __init__(self, manager: RebalanceLockManager) -> None:
        self.manager = manager

    def register(self, dispatcher: Dispatcher) -> None:
        """Codes 41/42, answered on the loop (memory only)."""
        dispatcher.register(RequestCode.LOCK_BATCH_MQ, self.lock_batch_mq)
        dispatcher.register(RequestCode.UNLOCK_BATCH_MQ, self.unlock_batch_mq)

    def lock_batch_mq(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        batch = _batch_or_refusal(conn, request, "LOCK_BATCH_MQ", "LockBatchRequestBody")
        if isinstance(batch, RemotingCommand):
            return batch
        group, client_id, mqs = batch
        granted = self.manager.try_lock_batch(group, mqs, client_id)
        body = orjson.dumps({"lockOKMQSet": [_mq_json(k) for k in granted]})
        return new_response(body=body)

    def unlock_batch_mq(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        batch = _batch_or_refusal(conn, request, "UNLOCK_BATCH_MQ", "UnlockBatchRequestBody")
        if isinstance(batch, RemotingCommand):
            return batch
        group, client_id, mqs = batch
        self.manager.unlock_batch(group, mqs, client_id)
        return new_response()


def _batch_or_refusal(conn: RequestPeer, request: RemotingCommand, code: str,
                      body_class: str) -> "tuple[str, str, list[MQKey]] | RemotingCommand":
    """The batch body of a (UN)LOCK_BATCH_MQ, or the SYSTEM_ERROR answer to a bad one (a missing body raises
    NullBodyError, answered as Java's decode answers it)."""
    try:
        return parse_batch_body(request)
    except NullBodyError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("bad %s body from %s: %s", code, conn.remote_address, exc)
        return error_response(ResponseCode.SYSTEM_ERROR, f"bad {body_class}: {exc}")

