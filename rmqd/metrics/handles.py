"""What a scrape reads, as narrow interfaces: the broker's context plus the few named handles outside it (the
processor pools' queue sizes, the send lane's own counters, lite lag, POP's in-flight table and revive backlog,
the timer's state), and the parts of a controller node its metrics read.

``BrokerController`` and ``ControllerServer`` satisfy these structurally; the collectors never see either class.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional, Protocol

from rmqd.common.endpoint_services import EndpointServices

if TYPE_CHECKING:
    from rmqd.broker.context import BrokerContext
    from rmqd.broker.timer import TimerState as TimerSnapshot
    from rmqd.controller.config import ControllerConfig
    from rmqd.controller.controller import Controller
    from rmqd.controller.heartbeat import BrokerHeartbeatManager
    from rmqd.controller.request_meter import OperationMeter
    from rmqd.cython_ext.send_lane import LaneMetrics


class QueuedPool(Protocol):
    """A processor pool, as its ``rocketmq_processor_watermark`` reads it."""

    @property
    def queue_size(self) -> int: ...


class SendLaneHolder(Protocol):
    """The send processor, as far as its C fast lane's counters go."""

    @property
    def lane(self) -> "LaneCounters": ...


class LaneCounters(Protocol):
    @property
    def metrics(self) -> Optional["LaneMetrics"]: ...


class LiteLag(Protocol):
    def lag(self) -> Mapping[tuple[str, str], tuple[int, int]]:
        """(parent topic, group) -> (messages behind, store time of the oldest unconsumed one)."""
        ...


class LiteHandle(Protocol):
    @property
    def manager(self) -> Optional[LiteLag]: ...


class PopBacklog(Protocol):
    def inflight(self) -> Mapping[tuple[str, str, int], int]: ...

    def revive_backlog(self, now: Optional[int] = None) -> list[tuple[int, int, int]]: ...


class TimerService(Protocol):
    @property
    def enabled(self) -> bool: ...

    def metrics_state(self, now: int, bounds_s: tuple[int, ...]) -> "TimerSnapshot": ...


class ScrapedBroker(Protocol):
    """The broker one scrape reads: its context and the named handles outside it."""

    @property
    def ctx(self) -> "BrokerContext": ...

    @property
    def pools(self) -> Mapping[str, QueuedPool]: ...

    @property
    def send_processor(self) -> SendLaneHolder: ...

    @property
    def lite_priority(self) -> LiteHandle: ...

    @property
    def pop_service(self) -> PopBacklog: ...

    @property
    def timer_message_service(self) -> TimerService: ...


#: The process the metrics endpoint joins: its broker, if any.
MetricsServices = EndpointServices[ScrapedBroker]


class PeerId(Protocol):
    @property
    def id(self) -> str: ...


class ControllerNode(Protocol):
    """A controller node as its metrics read it (``rmqd.controller.server.ControllerServer``)."""

    @property
    def config(self) -> "ControllerConfig":
        """Its settings: the metrics read the exporter's keys, the label, the store path and the group."""

    @property
    def address(self) -> str: ...

    @property
    def started(self) -> bool: ...

    @property
    def peer(self) -> PeerId: ...

    @property
    def heartbeat(self) -> "BrokerHeartbeatManager": ...

    @property
    def controller(self) -> "Controller": ...

    @property
    def request_meter(self) -> "OperationMeter": ...

    @property
    def append_meter(self) -> "OperationMeter": ...
