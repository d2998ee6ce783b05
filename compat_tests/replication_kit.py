"""Replica groups mixing rmqd and the Java 4.9.8 broker (master/slave HA compatibility scenarios).

- :class:`ReferenceBroker`: the kit's ``bin/reference-broker`` (one Java broker, a master or a slave, registering
  with any name server), started with the suite's disk thresholds; ``kill`` is SIGKILL.
- ``RmqdProcess`` (tests/kit/processes.py): ``rmqd namesrv`` / ``rmqd broker`` as processes (log captured, ``kill9``).
- :class:`Clients`: the ``ReplicationClients`` Java program (producer loops, push consumers) in one JVM.
- helpers reading a broker as tools do: runtime info, topic creation, every key of a topic.
"""
from __future__ import annotations

import filecmp
import json
import os
import subprocess
from pathlib import Path

from javakit import JavaProcess, disk_ratio_system_properties, require_kit
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import new_request
from rmqd.store.message import decode_messages
from rmqd.store.metadata import loads_lenient
from tests.kit import clients
from tests.kit.processes import RmqdProcess
from tests.kit.waits import wait_until

__all__ = ["FILE_SIZE", "ReferenceBroker", "RmqdProcess", "Clients", "wait_until", "invoke", "runtime_info",
           "max_offset", "topic_names", "create_topic", "read_all_keys", "same_commitlog"]

FILE_SIZE = 1024 * 1024           # mappedFileSizeCommitLog of both sides: small, so the tests cross file ends


class ReferenceBroker:
    """One Java 4.9.8 broker of the kit (``bin/reference-broker``)."""

    def __init__(self, workdir: Path, namesrv: str, port: int, broker_id: int, role: str,
                 extra: dict | None = None) -> None:
        self.kit = require_kit()
        self.dir = Path(workdir)
        self.namesrv, self.port, self.broker_id, self.role = namesrv, port, broker_id, role
        self.extra = {"mappedFileSizeCommitLog": FILE_SIZE, **(extra or {})}
        self.addr = f"127.0.0.1:{port}"

    @property
    def store_dir(self) -> Path:
        return self.dir / "store"

    def start(self, timeout: float = 180.0) -> "ReferenceBroker":
        self.dir.mkdir(parents=True, exist_ok=True)
        conf = self.dir / "extra.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in self.extra.items()))
        env = dict(os.environ, JAVA_OPT_EXT=" ".join(f"-D{k}={v}" for k, v in disk_ratio_system_properties().items()))
        res = subprocess.run([str(self.kit / "bin" / "reference-broker"), "start", str(self.dir), "--namesrv",
                              self.namesrv, "--broker-port", str(self.port), "--broker-id", str(self.broker_id),
                              "--role", self.role, "--conf", str(conf)],
                             capture_output=True, text=True, timeout=timeout, env=env)
        if res.returncode != 0:
            self.stop()
            raise RuntimeError(f"Java broker did not start: {res.stdout}\n{res.stderr}")
        return self

    def _run(self, cmd: str) -> None:
        subprocess.run([str(self.kit / "bin" / "reference-broker"), cmd, str(self.dir)], capture_output=True,
                       text=True, timeout=60)

    def stop(self) -> None:
        self._run("stop")

    def kill(self) -> None:
        self._run("kill")

    def store_log(self) -> str:
        path = self.dir / "logs" / "rocketmqlogs" / "store.log"
        return path.read_text(errors="replace") if path.exists() else ""


class Clients:
    """The ReplicationClients Java program: one JVM, one JSON command at a time."""

    def __init__(self, namesrv: str) -> None:
        self.proc = JavaProcess("ReplicationClients", namesrv)
        self.proc.wait_for(lambda ev: any(e.get("op") == "ready" for e in ev), 120, "ReplicationClients start")

    def call(self, timeout: float = 120.0, **cmd) -> dict:
        seen = len(self.proc.events)
        self.proc.send(json.dumps(cmd))
        ev = self.proc.wait_for(lambda evs: next((e for e in evs[seen:] if e.get("op") == cmd["cmd"]), None),
                                timeout, f"ReplicationClients {cmd['cmd']}")
        assert "error" not in ev, ev
        return ev

    def stop(self) -> None:
        self.proc.stop()


def invoke(addr: str, code: int, ext: dict | None = None, timeout: float = 10.0):
    return clients.call(addr, code, ext, timeout=timeout)


def runtime_info(addr: str) -> dict:
    r = invoke(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return loads_lenient(r.body_bytes().decode())["table"]


def max_offset(addr: str) -> int:
    return int(runtime_info(addr)["commitLogMaxOffset"])


def topic_names(addr: str) -> set[str]:
    r = invoke(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return set(loads_lenient(r.body_bytes().decode())["topicConfigTable"])


def create_topic(addr: str, topic: str, queues: int = 4) -> None:
    clients.create_topic(addr, topic, queues, timeout=10.0)


def read_all_keys(addr: str, topic: str, queues: int = 4, group: str = "HaReadBackCG") -> set[str]:
    """Every key of ``topic`` on the broker at ``addr`` (pulled from offset 0 to each queue's max)."""
    keys: set[str] = set()
    client = BlockingClient(addr, timeout=10)
    try:
        for q in range(queues):
            offset = 0
            while True:
                ext = {"consumerGroup": group, "topic": topic, "queueId": str(q), "queueOffset": str(offset),
                       "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
                       "subVersion": "0", "subscription": "*", "expressionType": "TAG"}
                r = client.invoke(new_request(RequestCode.PULL_MESSAGE, ext), 10)
                if r.code != ResponseCode.SUCCESS:
                    assert r.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY), \
                        (r.code, r.remark)
                    break
                keys.update(m.properties.get("KEYS") for m in decode_messages(r.body_bytes()))
                offset = int(r.ext_fields["nextBeginOffset"])
    finally:
        client.close()
    return keys


def same_commitlog(master_dir: Path, slave_dir: Path) -> list[str]:
    """The CommitLog files both hold (the slave's, each checked byte for byte against the master's)."""
    names = sorted(os.listdir(slave_dir))
    assert names, f"no CommitLog file in {slave_dir}"
    for name in names:
        assert filecmp.cmp(master_dir / name, slave_dir / name, shallow=False), f"CommitLog file {name} differs"
    return names
