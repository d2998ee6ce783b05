"""The narrow interfaces replication takes from the broker that wires it (what it uses, not who provides it).

* :class:`BrokerService`: a broker service replication starts and stops with the role (the master-only ones);
* :class:`HeldPulls` / :class:`HeldPops`: the parked pulls and POPs looked at again when the confirmOffset moves;
* :class:`RunBlocking`: runs a blocking call off the event loop (SlaveSynchronize's file writes).
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, Mapping, Optional, Protocol, TypeVar, TypeVarTuple

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class BrokerService(Protocol):
    """A service of the broker; one whose class says ``master_only = True`` runs on a master only."""

    def start(self) -> None: ...

    def shutdown(self) -> None: ...


class HeldPulls(Protocol):
    """The pulls parked by long polling (``rmqd.broker.long_polling.PullRequestHoldService``)."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def watched_queues(self) -> Mapping[tuple[str, int], object]:
        """``(topic, queue id)`` of the queues with a parked pull."""

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: Optional[int],
                                tags_code: Optional[int], properties: Optional[str]) -> None:
        """Re-run the parked pulls of the queue that the queue's state now satisfies (on the loop)."""


class HeldPops(Protocol):
    """The POPs parked by long polling (``rmqd.pop.long_polling.PopLongPolling``)."""

    @property
    def watched(self) -> Mapping[tuple[str, int], int]:
        """``(topic, queue id)`` -> parked POPs on it."""

    def notify(self, topic: str) -> None: ...


class RunBlocking(Protocol):
    """Runs ``fn(*args)`` off the loop (in an executor) and gives its result."""

    def __call__(self, fn: Callable[[*Ts], T], /, *args: *Ts) -> Awaitable[T]: ...
