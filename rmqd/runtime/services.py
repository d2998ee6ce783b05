"""Process runners: `rmqd serve` (name server + broker), `rmqd namesrv`, `rmqd broker`."""
from __future__ import annotations

import asyncio
import logging
import signal
import sys
from typing import Callable, Protocol, Sequence, Union

from rmqd.broker.controller import BrokerController
from rmqd.namesrv.server import NameServer

log = logging.getLogger(__name__)


def install_event_loop_policy() -> None:
    """Use uvloop where it is available (it is a dependency on Linux and macOS)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - non-POSIX platforms
        log.warning("uvloop not available; using the default asyncio loop")
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


class Component(Protocol):
    """One server this process runs: the name server, a broker, (next) the controller, the console, the
    metrics endpoint, gRPC...  ``Services`` starts its components in order and closes them in reverse.

    A component whose ``starts_early`` is true binds before the others and answers 503 until
    ``Services.ready()`` (``/healthz`` during a long store recovery).  ``ready_parts()`` (optional) gives the
    short form for the one "rmqd ready:" line; ``describe()`` the lines printed at start."""

    async def start(self, services: "Services") -> None: ...

    async def close(self) -> None: ...

    def describe(self) -> list[str]: ...


#: The servers beside the broker (gRPC, metrics, console) are components like any other.
Endpoint = Component


class NameServerComponent:
    """The name server as a component."""

    def __init__(self, namesrv: NameServer) -> None:
        self.namesrv = namesrv

    async def start(self, services: "Services") -> None:
        await self.namesrv.start()

    async def close(self) -> None:
        await self.namesrv.close()

    def describe(self) -> list[str]:
        return [f"rmqd name server listening on {self.namesrv.address}"]

    def ready_parts(self) -> list[str]:
        return [f"name server {self.namesrv.address}"]


class BrokerComponent:
    """A broker as a component; without a name server address it registers with the process's own."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def start(self, services: "Services") -> None:
        namesrv = services.namesrv
        if namesrv is not None and not self.broker.config.namesrvAddr:
            self.broker.config.namesrvAddr = namesrv.address
        await self.broker.start()

    async def close(self) -> None:
        await self.broker.close()

    def describe(self) -> list[str]:
        b, c = self.broker, self.broker.config
        return [f"rmqd broker {c.brokerName} ({c.brokerClusterName}) listening on {b.address} "
                f"(vip {b.vip_address}), name server {c.namesrvAddr or '-'}"]

    def ready_parts(self) -> list[str]:
        return [f"broker {self.broker.address} (vip {self.broker.vip_address})"]


#: What ``Services`` takes: a component, or a NameServer / BrokerController that it wraps.
Part = Union[NameServer, BrokerController, Component]


def as_component(part: Part) -> Component:
    """``part`` as a component (a NameServer or BrokerController is wrapped; anything else is one already)."""
    if isinstance(part, NameServer):
        return NameServerComponent(part)
    if isinstance(part, BrokerController):
        return BrokerComponent(part)
    return part


class Services:
    """What a process runs: an ordered list of components (``Services(namesrv, broker, *endpoints)``).

    Started in order (those that start early first) and closed in reverse, so a broker starts after the
    name server it registers with and the endpoints that read it start after it."""

    def __init__(self, *components: Part) -> None:
        self.components: list[Component] = []
        self.namesrv: NameServer | None = None          # the name server this process runs, if any
        self.broker: BrokerController | None = None     # the (first) broker this process runs, if any
        self.stopped = asyncio.Event()
        self.started = False
        for part in components:
            self.add(part)

    def add(self, part: Part) -> Component:
        """Append a component (a NameServer or BrokerController is wrapped)."""
        component = as_component(part)
        self.components.append(component)
        if isinstance(component, NameServerComponent) and self.namesrv is None:
            self.namesrv = component.namesrv
        elif isinstance(component, BrokerComponent) and self.broker is None:
            self.broker = component.broker
        return component

    async def start(self) -> None:
        early = [c for c in self.components if getattr(c, "starts_early", False)]
        order = early + [c for c in self.components if c not in early]
        started: list[Component] = []
        try:
            for component in order:
                await component.start(self)
                started.append(component)
        except BaseException:
            for component in reversed(started):
                try:
                    await component.close()
                except Exception:
                    log.exception("closing %s after a failed start failed", type(component).__name__)
            raise
        self.started = True

    def ready(self) -> bool:
        """Everything started and not closing (``/healthz``)."""
        return self.started and not self.stopped.is_set()

    async def close(self) -> None:
        self.started = False
        for component in reversed(self.components):
            try:
                await component.close()
            except Exception:
                log.exception("closing %s failed", type(component).__name__)
        self.stopped.set()

    def describe(self) -> list[str]:
        """The start-up block: one line per server and endpoint, then the store directory."""
        lines = []
        for component in self.components:
            lines.extend(component.describe())
        if self.broker is not None:
            lines.append(f"rmqd store: {self.broker.config.storePathRootDir}")
        return lines

    def ready_line(self) -> str:
        """One line with every endpoint this process serves."""
        parts: list[str] = []
        for component in self.components:
            ready_parts = getattr(component, "ready_parts", None)
            parts.extend(ready_parts() if ready_parts is not None else component.describe())
        return "rmqd ready: " + ", ".join(parts)


async def run_until_signalled(services: Services, footer: Sequence[str] = ()) -> int:
    """Start services, print their addresses (then ``footer``: where the logs go, how to stop), run until
    SIGINT/SIGTERM, shut down cleanly."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await services.start()
    for line in services.describe():
        print(line, flush=True)
    print(services.ready_line(), flush=True)
    for line in footer:
        print(line, flush=True)
    await stop.wait()
    print("rmqd shutting down", flush=True)
    await services.close()
    return 0


def run(services_factory: Callable[[], Services], footer: Sequence[str] = ()) -> int:
    install_event_loop_policy()

    async def main() -> int:
        return await run_until_signalled(services_factory(), footer)

    try:
        return asyncio.run(main())
    except OSError as exc:
        print(f"rmqd: {exc}", file=sys.stderr)
        return 1
