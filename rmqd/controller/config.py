"""Controller settings: RocketMQ 5's ``ControllerConfig`` (and ``JraftConfig``) names and defaults, plus the
few keys rmqd's Raft engine adds (``controllerRaft*``).

A controller group is described the DLedger way::

    controllerDLegerGroup=group1
    controllerDLegerPeers=n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858
    controllerDLegerSelfId=n0

Each peer's address is where brokers and ``mqadmin -a`` reach that controller (as with Java, where DLedger's
RPC port doubles as the controller port).  Raft traffic between the controllers uses a second port per peer:
``controllerRaftPeers`` when given (same ids), else the peer's port + ``controllerRaftPortOffset``.  The jRaft
spelling (``controllerType=jRaft``, ``jRaftInitConf``, ``jRaftServerId``, ``jRaftControllerRPCAddr``) is read too;
both run on the same Raft engine here.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmqd.config import _PropertiesConfig

DLEDGER_CONTROLLER = "DLedger"
JRAFT_CONTROLLER = "jRaft"
ALWAYS_BLACKLISTED = ("configBlackList", "configStorePath", "rocketmqHome")


class ControllerConfigError(ValueError):
    """The controller settings cannot describe a Raft group (missing or inconsistent peers)."""


@dataclass(frozen=True)
class Peer:
    """One controller of the group: its id, remoting address (brokers, admin) and Raft address."""

    id: str
    addr: str
    raft_addr: str


class ControllerConfig(_PropertiesConfig):
    """Java's ControllerConfig + JraftConfig keys with their 5.x defaults, and rmqd's ``controllerRaft*`` keys."""

    if TYPE_CHECKING:     # the properties of _DEFAULTS below, typed (a test in tests/controller keeps them equal)
        rocketmqHome: str
        configStorePath: str
        controllerType: str
        scanNotActiveBrokerInterval: int
        controllerThreadPoolNums: int
        controllerRequestThreadPoolQueueCapacity: int
        controllerDLegerGroup: str | None
        controllerDLegerPeers: str | None
        controllerDLegerSelfId: str | None
        mappedFileSize: int
        controllerStorePath: str
        electMasterMaxRetryCount: int
        enableElectUncleanMaster: bool
        processReadEvent: bool
        notifyBrokerRoleChanged: bool
        scanInactiveMasterInterval: int
        metricsExporterType: str
        metricsGrpcExporterTarget: str
        metricsGrpcExporterHeader: str
        metricGrpcExporterTimeOutInMills: int
        metricGrpcExporterIntervalInMills: int
        metricLoggingExporterIntervalInMills: int
        metricsPromExporterPort: int
        metricsPromExporterHost: str
        metricsLabel: str
        metricsInDelta: bool
        configBlackList: str
        jRaftElectionTimeoutMs: int
        jRaftScanWaitTimeoutMs: int
        jRaftSnapshotIntervalSecs: int
        jRaftGroupId: str
        jRaftServerId: str
        jRaftInitConf: str
        jRaftControllerRPCAddr: str
        controllerRaftPeers: str
        controllerRaftPortOffset: int
        controllerRaftDialPeers: str
        controllerRaftElectionTimeoutMs: int
        controllerRaftHeartbeatIntervalMs: int
        controllerRaftPassword: str
        controllerRequestTimeoutMs: int

    _DEFAULTS = {
        "rocketmqHome": os.environ.get("ROCKETMQ_HOME") or os.path.join(os.path.expanduser("~"), ".rmqd"),
        "configStorePath": os.path.join(os.path.expanduser("~"), "controller", "controller.properties"),
        "controllerType": DLEDGER_CONTROLLER,
        "scanNotActiveBrokerInterval": 5000,
        "controllerThreadPoolNums": 16,
        "controllerRequestThreadPoolQueueCapacity": 50000,
        "controllerDLegerGroup": None,
        "controllerDLegerPeers": None,
        "controllerDLegerSelfId": None,
        "mappedFileSize": 1024 * 1024 * 1024,
        "controllerStorePath": "",
        "electMasterMaxRetryCount": 3,
        "enableElectUncleanMaster": False,
        "processReadEvent": False,
        "notifyBrokerRoleChanged": True,
        "scanInactiveMasterInterval": 5000,
        "metricsExporterType": "DISABLE",
        "metricsGrpcExporterTarget": "",
        "metricsGrpcExporterHeader": "",
        "metricGrpcExporterTimeOutInMills": 3000,
        "metricGrpcExporterIntervalInMills": 60000,
        "metricLoggingExporterIntervalInMills": 10000,
        "metricsPromExporterPort": 5557,
        "metricsPromExporterHost": "",
        "metricsLabel": "",
        "metricsInDelta": False,
        "configBlackList": "configBlackList;configStorePath",
        # JraftConfig
        "jRaftElectionTimeoutMs": 1000,
        "jRaftScanWaitTimeoutMs": 1000,
        "jRaftSnapshotIntervalSecs": 3600,
        "jRaftGroupId": "jRaft-Controller",
        "jRaftServerId": "localhost:9880",
        "jRaftInitConf": "localhost:9880,localhost:9881,localhost:9882",
        "jRaftControllerRPCAddr": "localhost:9770,localhost:9771,localhost:9772",
        # rmqd: the Raft engine (pysyncobj) under both controller types
        "controllerRaftPeers": "",          # id-host:port;... Raft addresses (default: peer port + offset)
        "controllerRaftPortOffset": 1000,
        "controllerRaftDialPeers": "",      # id-host:port;... where to connect to a peer's Raft port instead
        "controllerRaftElectionTimeoutMs": 1000,    # a follower waits 1-2x this without a leader
        "controllerRaftHeartbeatIntervalMs": 100,
        "controllerRaftPassword": "",       # encrypt and authenticate Raft traffic (needs `cryptography`)
        "controllerRequestTimeoutMs": 5000,  # a leader-side wait longer than this answers SYSTEM_ERROR
    }

    # -- derived -------------------------------------------------------------------------------
    def store_path(self) -> str:
        """controllerStorePath, or Java's default ``~/<controllerType>Controller``."""
        path = str(self.controllerStorePath or "")
        if not path:
            path = os.path.join(os.path.expanduser("~"), f"{self.controllerType}Controller")
        return os.path.abspath(os.path.expanduser(path))

    def is_jraft(self) -> bool:
        return str(self.controllerType) == JRAFT_CONTROLLER

    def group(self) -> str:
        return str(self.jRaftGroupId if self.is_jraft() else (self.controllerDLegerGroup or ""))

    def black_list(self) -> set[str]:
        keys = {k.strip() for k in str(self.configBlackList or "").split(";") if k.strip()}
        return keys | set(ALWAYS_BLACKLISTED)

    def peers(self) -> list[Peer]:
        """Every controller of the group, in configuration order."""
        if self.is_jraft():
            return self._jraft_peers()
        text = str(self.controllerDLegerPeers or "").strip()
        if not text:
            raise ControllerConfigError("Attribute value controllerDLegerPeers of ControllerConfig is null or empty")
        addrs = _parse_id_addrs(text, "controllerDLegerPeers")
        raft_text = str(self.controllerRaftPeers or "").strip()
        if raft_text:
            raft = _parse_id_addrs(raft_text, "controllerRaftPeers")
            if set(raft) != set(addrs):
                raise ControllerConfigError(
                    f"controllerRaftPeers ids {sorted(raft)} differ from controllerDLegerPeers ids {sorted(addrs)}")
        else:
            offset = int(self.controllerRaftPortOffset)
            raft = {pid: _with_port_offset(addr, offset) for pid, addr in addrs.items()}
        return [Peer(pid, addr, raft[pid]) for pid, addr in addrs.items()]

    def self_id(self) -> str:
        if self.is_jraft():
            server = str(self.jRaftServerId).strip()
            for peer in self._jraft_peers():
                if peer.raft_addr == server:
                    return peer.id
            raise ControllerConfigError(f"jRaftServerId {server} is not in jRaftInitConf {self.jRaftInitConf}")
        ids = {p.id for p in self.peers()}         # Java checks the peers first
        sid = str(self.controllerDLegerSelfId or "").strip()
        if not sid:
            raise ControllerConfigError("Attribute value controllerDLegerSelfId of ControllerConfig is null or empty")
        if sid not in ids:
            raise ControllerConfigError(f"controllerDLegerSelfId {sid} is not one of controllerDLegerPeers")
        return sid

    def self_peer(self) -> Peer:
        sid = self.self_id()
        return next(p for p in self.peers() if p.id == sid)

    def dial_addrs(self) -> dict[str, str]:
        """Peer id -> where to connect to its Raft port, when that is not its Raft address."""
        text = str(self.controllerRaftDialPeers or "").strip()
        return _parse_id_addrs(text, "controllerRaftDialPeers") if text else {}

    def _jraft_peers(self) -> list[Peer]:
        raft = [a.strip() for a in str(self.jRaftInitConf).split(",") if a.strip()]
        rpc = [a.strip() for a in str(self.jRaftControllerRPCAddr).split(",") if a.strip()]
        if not raft or len(raft) != len(rpc):
            raise ControllerConfigError("jRaftInitConf and jRaftControllerRPCAddr must list the same number of peers")
        return [Peer(f"n{i}", rpc[i], raft[i]) for i in range(len(raft))]


def _parse_id_addrs(text: str, key: str) -> dict[str, str]:
    """``n0-host:port;n1-host:port`` -> {id: "host:port"} (order kept)."""
    out: dict[str, str] = {}
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        pid, sep, addr = item.partition("-")
        host, colon, port = addr.rpartition(":")
        if not sep or not pid or not colon or not host or not port.isdigit():
            raise ControllerConfigError(f"{key}: '{item}' is not id-host:port")
        if pid in out:
            raise ControllerConfigError(f"{key}: peer id {pid} appears twice")
        out[pid] = f"{host}:{int(port)}"
    if not out:
        raise ControllerConfigError(f"{key} lists no peer")
    return out


def _with_port_offset(addr: str, offset: int) -> str:
    host, _, port = addr.rpartition(":")
    return f"{host}:{int(port) + offset}"
