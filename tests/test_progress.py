"""Progress of long work: a bar on a terminal, plain log lines otherwise, no escape codes without a
TTY or with NO_COLOR; store recovery reports its phases."""
from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import sys

from rmqd.common import progress


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_on_a_terminal_redraws_in_place_with_colour(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    out = FakeTTY()
    r = progress.Reporter(out, interval=0)
    with r.phase("verifying commit log", 4 * 1024 * 1024, "B") as p:
        for _ in range(4):
            p.advance(1024 * 1024)
    text = out.getvalue()
    assert text.count("\r") == 5 and text.endswith("\n")
    assert "\x1b[32m" in text and "verifying commit log: 100% (4.0 MB of 4.0 MB)" in text
    assert "verifying commit log: 50% (2.0 MB of 4.0 MB)" in text


def test_no_escape_codes_with_no_color(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    out = FakeTTY()
    r = progress.Reporter(out, interval=0)
    with r.phase("loading consume queues", 3, "topics") as p:
        for _ in range(3):
            p.advance()
    text = out.getvalue()
    assert "\x1b" not in text and "[" + "#" * 30 + "]" in text and "100% (3 topics of 3 topics)" in text


def test_plain_log_lines_without_a_terminal(caplog):
    out = io.StringIO()
    r = progress.Reporter(out, interval=0)
    assert not r.tty
    with caplog.at_level(logging.INFO, logger="rmqd.common.progress"):
        with r.phase("re-dispatching records", 2, "records") as p:
            p.advance()
            p.advance()
    assert out.getvalue() == ""
    lines = [rec.getMessage() for rec in caplog.records]
    assert lines[0] == "re-dispatching records: 50% (1 records of 2 records)"
    assert lines[-1].startswith("re-dispatching records: 100% (2 records of 2 records) done in")
    assert not any("\x1b" in line or "\r" in line for line in lines)


def test_quiet_when_the_work_is_quick(caplog):
    r = progress.Reporter(io.StringIO(), interval=3)
    with caplog.at_level(logging.INFO, logger="rmqd.common.progress"):
        with r.phase("quick", 10) as p:
            p.advance(10)
    assert caplog.records == []


def test_store_recovery_after_kill_reports_its_phases(tmp_path):
    """A broker killed with -9 recovers with log lines per phase (interval 0), no escape codes."""
    store = str(tmp_path / "store")
    env = dict(os.environ, RMQD_PROGRESS_INTERVAL="0", PYTHONUNBUFFERED="1")
    args = [sys.executable, "-m", "rmqd.runtime.cli", "serve", "--namesrv-port", "0", "--broker-port", "0",
            "--console-port", "0", "--store-dir", store]
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in first.stdout:
            if line.startswith("rmqd ready:"):
                break
        from rmqd.admin.client import AdminClient
        ns = line.split("name server ")[1].split(",")[0]
        admin = AdminClient(ns)
        broker = line.split("broker ")[1].split(" ")[0]
        for i in range(20):
            admin.send(broker, "TBW102", 0, b"x" * 100)
        admin.close()
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=10)
    second = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in second.stdout:
            if line.startswith("rmqd ready:"):
                break
    finally:
        second.send_signal(signal.SIGTERM)
        _, err = second.communicate(timeout=20)
    assert "verifying commit log: 100%" in err and "re-dispatching records" in err
    assert "loading consume queues" in err
    assert "\x1b" not in err and "\r" not in err
