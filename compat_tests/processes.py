"""Start rmqd processes (`rmqd namesrv`, `rmqd broker`) for multi-process scenarios."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

ADDR = re.compile(r"listening on (127\.0\.0\.1:\d+)")


class RmqdProcess:
    """A running `python -m rmqd.cli ...`; ``addr`` is the first address it printed."""

    def __init__(self, *args: str, timeout: float = 15.0) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "rmqd.cli", "--log-level", "WARNING", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        deadline = time.monotonic() + timeout
        self.addr = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = ADDR.search(line)
            if m:
                self.addr = m.group(1)
                break
        if not self.addr:
            self.stop()
            raise RuntimeError(f"rmqd {' '.join(args)} did not start")

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()
