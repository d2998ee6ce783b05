"""Progress of long work (store recovery, ...): a bar on a terminal, plain log lines otherwise.

    with progress.phase("verifying commit log", total=nbytes, unit="B") as p:
        for chunk in ...:
            p.advance(len(chunk))

On a TTY (stderr) the bar redraws in place (``\\r``), coloured unless ``NO_COLOR`` is set or
``TERM=dumb`` (then no escape codes at all).  Anywhere else a log line is written at most every
``RMQD_PROGRESS_INTERVAL`` seconds (default 3) while a phase runs, and one when it ends if it logged.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import IO, Optional

log = logging.getLogger("rmqd.common.progress")

BAR_WIDTH = 30


def _fmt(n: float, unit: str) -> str:
    if unit == "B":
        for u in ("B", "KB", "MB", "GB", "TB"):
            if abs(n) < 1024 or u == "TB":
                return f"{n:.1f} {u}" if u != "B" else f"{int(n)} B"
            n /= 1024
    return f"{int(n)}{(' ' + unit) if unit else ''}"


class Phase:
    def __init__(self, reporter: "Reporter", name: str, total: int, unit: str) -> None:
        self.reporter, self.name, self.total, self.unit = reporter, name, max(0, int(total)), unit
        self.done = 0
        self.started = time.monotonic()
        self._last = self.started
        self._logged = False

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        r = self.reporter
        if now - self._last >= r.interval:
            self._last = now
            r.show(self, final=False)
            self._logged = True

    def text(self) -> str:
        pct = f"{self.done * 100 // self.total}% " if self.total else ""
        of = f" of {_fmt(self.total, self.unit)}" if self.total else ""
        return f"{self.name}: {pct}({_fmt(self.done, self.unit)}{of})"

    def __enter__(self) -> "Phase":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._logged:                    # quick work stays silent, on a terminal too
            if self.total:
                self.done = max(self.done, self.total) if exc[0] is None else self.done
            self.reporter.show(self, final=True)


class Reporter:
    """Where progress goes: ``stream`` (a TTY gets the bar) or the log."""

    def __init__(self, stream: Optional[IO[str]] = None, tty: Optional[bool] = None,
                 color: Optional[bool] = None, interval: Optional[float] = None) -> None:
        self.stream = stream or sys.stderr
        if tty is None:
            tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.tty = tty
        env = os.environ
        if color is None:
            color = tty and "NO_COLOR" not in env and env.get("TERM") != "dumb"
        self.color = color
        default = 0.1 if tty else float(env.get("RMQD_PROGRESS_INTERVAL", "3"))
        self.interval = default if interval is None else interval
        self._lock = threading.Lock()

    def phase(self, name: str, total: int = 0, unit: str = "") -> Phase:
        return Phase(self, name, total, unit)

    def show(self, p: Phase, final: bool) -> None:
        if not self.tty:
            log.info("%s%s", p.text(), " done in %.1fs" % (time.monotonic() - p.started) if final else "")
            return
        frac = min(1.0, p.done / p.total) if p.total else (1.0 if final else 0.0)
        fill = int(frac * BAR_WIDTH)
        if self.color:
            bar = "\x1b[32m" + "█" * fill + "\x1b[0m" + "·" * (BAR_WIDTH - fill)
            line = f"\r{bar} {p.text()}\x1b[K"
        else:
            line = f"\r[{'#' * fill}{'.' * (BAR_WIDTH - fill)}] {p.text()}".ljust(100)
        with self._lock:
            self.stream.write(line + ("\n" if final else ""))
            self.stream.flush()


_reporter: Optional[Reporter] = None


def set_reporter(reporter: Optional[Reporter]) -> None:
    global _reporter
    _reporter = reporter


def phase(name: str, total: int = 0, unit: str = "") -> Phase:
    """A phase on the process's reporter (plain log lines unless the CLI installed a TTY one)."""
    global _reporter
    if _reporter is None:
        _reporter = Reporter(tty=False)
    return _reporter.phase(name, total, unit)
