"""Live Java clients for the console tests: compat_tests/java/src/ConsoleClients.java in the background."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading


class JavaClients:
    """compat_tests/java/src/ConsoleClients.java in the background: a producer + push consumer."""

    def __init__(self, namesrv: str, topic: str, group: str, producer_group: str, seconds: int = 120) -> None:
        import javakit
        javakit.require_kit()
        classes = javakit.compile_java()
        cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *javakit.jdk17_opts(),
               "-Drocketmq.client.logUseSlf4j=false", "-cp", javakit.classpath(classes), "ConsoleClients",
               namesrv, topic, group, producer_group, str(seconds)]
        self.home = tempfile.mkdtemp(prefix="rmqd-java-home-")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=dict(os.environ, HOME=self.home), start_new_session=True)
        self.events: list[dict] = []

        def read() -> None:
            for line in self.proc.stdout:
                if line.startswith("{"):
                    self.events.append(json.loads(line))
        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()

    def received(self) -> list[dict]:
        return [e for e in self.events if e.get("op") == "recv"]

    def started(self) -> dict | None:
        return next((e for e in self.events if e.get("op") == "started"), None)

    def stop(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(10)
        except Exception:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(5)
        shutil.rmtree(self.home, ignore_errors=True)
