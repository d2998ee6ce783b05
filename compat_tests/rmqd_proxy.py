"""``rmqd proxy`` as a test runs it: a process of its own (optionally on a netkit host), its settings in an
``rmq-proxy.json`` as Java's proxy takes them, its log in a file, stopped and killed by its own pid."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping, Optional, Sequence

from rmqd.common.localports import free_port_block

REPO = Path(__file__).resolve().parent.parent
LISTENING = re.compile(r"rmqd proxy .* listening on (\S+):(\d+)")
#: the proxy keys the differential scenarios need to run in seconds (java5kit.REFERENCE5_PROXY_PROPERTIES)
FAST_PROXY = {"minInvisibleTimeMillsForRecv": 1000, "grpcClientConsumerMaxLongPollingTimeoutMillis": 3000}


class RmqdProxy:
    """One ``rmqd proxy -n NAMESRV`` on ``host`` (the address it binds) and a free port; ``wrap``: a command prefix
    (``ip netns exec NS``) to run it on another host."""

    def __init__(self, workdir: str | Path, namesrv: str, conf: Optional[Mapping[str, object]] = None,
                 host: str = "127.0.0.1", port: int = 0, wrap: Sequence[str] = (), tls_mode: str = "") -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.namesrv = namesrv
        self.conf = dict(FAST_PROXY if conf is None else conf)
        self.host = host
        self.port = port or free_port_block(1)
        self.wrap = tuple(wrap)
        self.tls_mode = tls_mode
        self.log = self.workdir / "proxy.log"
        self.proc: Optional[subprocess.Popen] = None

    @property
    def grpc_addr(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> "RmqdProxy":
        conf = self.workdir / "rmq-proxy.json"
        conf.write_text(json.dumps(self.conf))
        cmd = [*self.wrap, sys.executable, "-m", "rmqd.runtime.cli", "--log-level", "INFO", "proxy", "-n", self.namesrv,
               "-c", str(conf), "--host", self.host, "--grpc-port", str(self.port)]
        if self.tls_mode:
            cmd += ["--tls-mode", self.tls_mode]
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO))
        out = open(self.log, "ab")
        try:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(REPO))
        finally:
            out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if LISTENING.search(self.log.read_text(errors="replace")):
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        tail = self.log_tail()
        self.stop()
        raise RuntimeError(f"rmqd proxy did not start on {self.grpc_addr}: {tail}")

    def log_tail(self, n: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""

    def stop(self, timeout: float = 15.0) -> Optional[int]:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()

    def __enter__(self) -> "RmqdProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
