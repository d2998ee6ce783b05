"""``rmqd serve`` as a benchmark's child process: the addresses its ready line names, and its stop (SIGTERM, then
SIGKILL after a grace period)."""
from __future__ import annotations

import re
import subprocess
import time

ADDR = re.compile(r"(\d+\.\d+\.\d+\.\d+:\d+)")
GRPC = re.compile(r"grpc (\d+\.\d+\.\d+\.\d+:\d+)")


def ready_addresses(proc: subprocess.Popen, timeout: float = 60.0) -> tuple[list[str], str | None]:
    """Read ``proc``'s stdout (text) up to its ``rmqd ready:`` line: every address printed so far (name server
    first, then the broker) and the gRPC endpoint of the ready line (None without one). RuntimeError when it
    exits first or prints no ready line within ``timeout``."""
    addrs: list[str] = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("server exited during start-up")
        addrs += ADDR.findall(line)
        if line.startswith("rmqd ready:"):
            m = GRPC.search(line)
            return addrs, m.group(1) if m else None
    raise RuntimeError(f"no ready line within {timeout:.0f} s")


def stop_child(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM, SIGKILL if it has not exited after ``grace`` seconds."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
