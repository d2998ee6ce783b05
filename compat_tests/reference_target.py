"""Which real RocketMQ the differential tests compare rmqd with: the official Docker image (through
testcontainers) where a Docker engine answers, else the Java kit's reference cluster.

``RMQD_REFERENCE=docker|kit`` chooses explicitly; unset, it is ``docker`` when an engine answers and
``kit`` otherwise. Asking for ``docker`` without an engine fails the tests that need it (no silent fall-back).
``RMQD_REFERENCE_IMAGE`` overrides the image (default ``apache/rocketmq:4.9.7``, the newest 4.9 image).
"""
from __future__ import annotations

import logging
import os
import time
from typing import Callable, Mapping, Sequence

log = logging.getLogger(__name__)

DEFAULT_IMAGE = "apache/rocketmq:4.9.7"


def docker_engine_answers(timeout: float = 3.0) -> bool:
    """True when a Docker engine answers a ping (DOCKER_HOST or the default socket)."""
    try:
        import docker
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine here"
        log.debug("no Docker engine: %s", exc)
        return False


def choose_reference(env: Mapping[str, str] | None = None,
                     engine_answers: Callable[[], bool] = docker_engine_answers) -> str:
    """``docker`` or ``kit`` (see the module docstring); ValueError for any other RMQD_REFERENCE."""
    env = os.environ if env is None else env
    wanted = (env.get("RMQD_REFERENCE") or "").strip().lower()
    if wanted in ("docker", "kit"):
        return wanted
    if wanted:
        raise ValueError(f"RMQD_REFERENCE={wanted!r}: use 'docker' or 'kit'")
    return "docker" if engine_answers() else "kit"


def container_script(namesrv_port: int, broker_port: int, extra_conf: Sequence[str] = ()) -> str:
    """The shell command the container runs: the image's name server, then a broker that advertises
    127.0.0.1 and listens on ``broker_port`` (published on the same host port, so the address the name
    server hands out is reachable from the host); ``extra_conf`` lines complete its broker.conf, as the
    kit cluster's (javakit.reference_conf_lines)."""
    conf = "\\n".join(["brokerClusterName=DefaultCluster", "brokerName=broker-a", "brokerId=0",
                       f"listenPort={broker_port}", f"namesrvAddr=127.0.0.1:{namesrv_port}",
                       "brokerIP1=127.0.0.1", "brokerRole=ASYNC_MASTER", "flushDiskType=ASYNC_FLUSH",
                       "autoCreateTopicEnable=true", *extra_conf])
    return (f'cd "$ROCKETMQ_HOME/bin" && printf "{conf}\\n" > /tmp/broker.conf && '
            f'printf "listenPort={namesrv_port}\\n" > /tmp/namesrv.conf && '
            f'(sh mqnamesrv -c /tmp/namesrv.conf >/tmp/namesrv.out 2>&1 &) && '
            f'sleep 2 && exec sh mqbroker -c /tmp/broker.conf')


class DockerReference:
    """namesrv + broker of the official image in one container, ports published 1:1 on loopback."""

    def __init__(self, image: str | None = None) -> None:
        from javakit import free_port_block, reference_conf_lines

        self.image = image or os.environ.get("RMQD_REFERENCE_IMAGE") or DEFAULT_IMAGE
        base = free_port_block(5)
        self.namesrv_port, self.broker_port = base, base + 3
        self.namesrv_addr = f"127.0.0.1:{self.namesrv_port}"
        self.broker_addr = f"127.0.0.1:{self.broker_port}"
        self.extra_conf = reference_conf_lines()
        self.container = None

    def start(self, timeout: float = 180.0) -> "DockerReference":
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.waiting_utils import wait_for_logs

        ports = (self.namesrv_port, self.broker_port - 2, self.broker_port, self.broker_port + 1)
        c = DockerContainer(self.image).with_command(["sh", "-c", container_script(
            self.namesrv_port, self.broker_port, self.extra_conf)])
        for p in ports:
            c = c.with_bind_ports(p, ("127.0.0.1", p))
        self.container = c.start()
        wait_for_logs(self.container, "boot success", timeout=timeout)
        deadline = time.monotonic() + 30
        from rmqd.remoting.client import BlockingClient
        from rmqd.remoting.command import new_request
        while time.monotonic() < deadline:          # the broker's first registration reached the name server
            try:
                with BlockingClient(self.namesrv_addr) as cl:
                    if cl.invoke(new_request(106)).code == 0:
                        return self
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{self.image}: the name server never listed the broker")

    def stop(self) -> None:
        if self.container is not None:
            self.container.stop()
            self.container = None
