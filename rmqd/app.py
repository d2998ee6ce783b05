"""Process runners: `rmqd serve` (name server + broker), `rmqd namesrv`, `rmqd broker`."""
from __future__ import annotations

import asyncio
import logging
import signal
import sys
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from rmqd.broker_controller import BrokerController
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


class Endpoint(Protocol):
    """A server that runs beside the broker in the same process and loop (gRPC, metrics, console).

    Started after the name server and broker (so it can use them), closed before them; one whose
    ``starts_early`` is true binds first and answers 503 until ``Services.ready()`` (``/healthz``
    during a long store recovery)."""

    async def start(self, services: "Services") -> None: ...

    async def close(self) -> None: ...

    def describe(self) -> list[str]: ...


@dataclass
class Services:
    """What a process runs; any part may be absent."""

    namesrv: NameServer | None = None
    broker: BrokerController | None = None
    endpoints: list[Endpoint] = field(default_factory=list)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    started: bool = False

    async def start(self) -> None:
        early = [e for e in self.endpoints if getattr(e, "starts_early", False)]
        started: list[Endpoint] = []
        try:
            for endpoint in early:
                await endpoint.start(self)
                started.append(endpoint)
            if self.namesrv is not None:
                await self.namesrv.start()
                if self.broker is not None and not self.broker.config.namesrvAddr:
                    self.broker.config.namesrvAddr = self.namesrv.address
            if self.broker is not None:
                await self.broker.start()
            for endpoint in self.endpoints:
                if endpoint not in early:
                    await endpoint.start(self)
        except BaseException:
            for endpoint in reversed(started):
                try:
                    await endpoint.close()
                except Exception:
                    log.exception("closing %s after a failed start failed", type(endpoint).__name__)
            raise
        self.started = True

    def ready(self) -> bool:
        """Everything started and not closing (``/healthz``)."""
        return self.started and not self.stopped.is_set()

    async def close(self) -> None:
        self.started = False
        for endpoint in reversed(self.endpoints):
            try:
                await endpoint.close()
            except Exception:
                log.exception("closing %s failed", type(endpoint).__name__)
        if self.broker is not None:
            await self.broker.close()
        if self.namesrv is not None:
            await self.namesrv.close()
        self.stopped.set()

    def describe(self) -> list[str]:
        """The start-up block: one line per server and endpoint, then the store directory."""
        lines = []
        if self.namesrv is not None:
            lines.append(f"rmqd name server listening on {self.namesrv.address}")
        if self.broker is not None:
            c = self.broker.config
            lines.append(f"rmqd broker {c.brokerName} ({c.brokerClusterName}) listening on {self.broker.address} "
                         f"(vip {self.broker.vip_address}), name server {c.namesrvAddr or '-'}")
        for endpoint in self.endpoints:
            lines.extend(endpoint.describe())
        if self.broker is not None:
            lines.append(f"rmqd store: {self.broker.config.storePathRootDir}")
        return lines

    def ready_line(self) -> str:
        """One line with every endpoint this process serves."""
        parts = []
        if self.namesrv is not None:
            parts.append(f"name server {self.namesrv.address}")
        if self.broker is not None:
            parts.append(f"broker {self.broker.address} (vip {self.broker.vip_address})")
        for endpoint in self.endpoints:
            ready_parts = getattr(endpoint, "ready_parts", None)
            parts.extend(ready_parts() if ready_parts is not None else endpoint.describe())
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


def run(services_factory, footer: Sequence[str] = ()) -> int:
    install_event_loop_policy()

    async def main() -> int:
        return await run_until_signalled(services_factory(), footer)

    try:
        return asyncio.run(main())
    except OSError as exc:
        print(f"rmqd: {exc}", file=sys.stderr)
        return 1
