"""Controller-mode replica groups that mix rmqd and real Java 5.x processes, on loopback or on hosts of their own.

A :class:`Mix` names the controller (rmqd's, in ``rmqd namesrv`` or as ``rmqd controller`` processes; or Java's,
in the 5.x name server or as ControllerStartup processes) and the kind of each broker, the first one started being
the first master. :data:`MIXES` are the groups the issue asks for: rmqd alone, an rmqd master with Java slaves, a
Java master with rmqd slaves, rmqd brokers under Java's controller, Java brokers under rmqd's, and the Java-only
reference. Both kinds get the same broker.conf (:data:`GROUP_CONF`: allAckInSyncStateSet=true, the short timers of
tests/failover/kit.py, 16 MiB CommitLog files so the files line up), replicate over the AutoSwitch HA wire and
register with the same name server.

:class:`MixedGroup` starts and restarts the processes (kill -9, SIGSTOP/SIGCONT), tells what the controller and the
name server say (:meth:`~MixedGroup.sync_state`, :meth:`~MixedGroup.master_addr`, :meth:`~MixedGroup.wait_group`)
and compares the members' CommitLog bytes (:meth:`~MixedGroup.commitlog_differences`). With a
:class:`~netkit.NetKit` each process runs on its own host (``ns`` for the name server and controller, ``c1``..
for more controllers, ``b0``.. for the brokers) at the same ports; the test process is the clients' host.
"""
from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import orjson

from java5kit import LOOPBACK, Broker5, Controller5, Namesrv5, Placement
from netkit import Host, NetKit

from rmqd.common.localports import free_port_block, free_ports
from rmqd.remoting.codes import ResponseCode
from tests.controller.ctlkit import conf_text, find_leader
from tests.failover.kit import FAST, call, create_topic, master_in_route, route_of, wait_until
from tests.kit.processes import ControllerProcess, RmqdProcess, write_conf

CLUSTER = "MixedCluster"
BROKER_NAME = "broker-mx"
COMMITLOG_FILE_SIZE = 16 << 20

#: broker.conf of every member, rmqd or Java (plus its addresses, store and the controller's address)
GROUP_CONF = dict(FAST, brokerClusterName=CLUSTER, brokerName=BROKER_NAME, enableControllerMode="true",
                  allAckInSyncStateSet="true", flushIntervalCommitLog=200, autoCreateTopicEnable="true",
                  autoCreateSubscriptionGroup="true", mappedFileSizeCommitLog=COMMITLOG_FILE_SIZE,
                  registerNameServerPeriod=10000)
#: controller keys of both kinds: find a dead broker within half a second, a dead master within a second
CONTROLLER_CONF = dict(scanNotActiveBrokerInterval=500, scanInactiveMasterInterval=1000)


@dataclass(frozen=True)
class Mix:
    """Which controller (``rmqd`` or ``java``; ``standalone`` processes, else inside the name server, which is
    then of the same kind) and which brokers, the first one the first master."""

    name: str
    controller: str
    brokers: tuple[str, ...]
    standalone: bool = False
    controllers: int = 1

    @property
    def kinds(self) -> set[str]:
        return {self.controller, *self.brokers}


MIXES = {m.name: m for m in (
    Mix("rmqd-only", "rmqd", ("rmqd", "rmqd", "rmqd")),
    Mix("rmqd-master-java-slaves", "rmqd", ("rmqd", "java", "java")),
    Mix("java-master-rmqd-slaves", "java", ("java", "rmqd", "rmqd")),
    Mix("rmqd-under-java-controller", "java", ("rmqd", "rmqd", "rmqd")),
    Mix("java-under-rmqd-controller", "rmqd", ("java", "java", "java")),
    Mix("java-only", "java", ("java", "java", "java")),
)}
REFERENCE_MIX = "java-only"


class Member:
    """One broker of the group, rmqd or Java, on its host; its store survives kill -9 and restart."""

    def __init__(self, kind: str, index: int, root: Path, conf: dict, host: Optional[Host],
                 store: Optional[Path] = None) -> None:
        self.kind, self.index = kind, index
        self.host = host
        self.dir = root / f"b{index}-{kind}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ip = host.ip if host else "127.0.0.1"
        if host is None:
            self.port = free_port_block(4) + 2
            self.grpc_port = free_ports(1)[0]
        else:
            self.port, self.grpc_port = 10911, 8081
        self.addr = f"{self.ip}:{self.port}"
        self.ha_port = self.port + 1
        self.store = Path(store) if store is not None else self.dir / "store"
        self.conf = dict(conf, brokerIP1=self.ip, brokerIP2=self.ip, listenPort=self.port,
                         storePathRootDir=str(self.store), storePathCommitLog=str(self.store / "commitlog"))
        self.proc: Optional[RmqdProcess] = None
        self.java: Optional[Broker5] = None
        if kind == "java":
            self.java = Broker5(self.dir, dict(self.conf, bindAddress=self.ip), host=self.placement,
                                port=self.port, name=f"b{index}")

    @property
    def placement(self) -> Placement:
        return (self.host.ip, self.host.wrap) if self.host else LOOPBACK

    @property
    def commitlog_dir(self) -> Path:
        return self.store / "commitlog"

    def start(self, wait: bool = True) -> "Member":
        if self.kind == "java":
            self.java.start(wait=wait)
            return self
        conf = write_conf(str(self.dir / "broker.conf"), **self.conf)
        self.proc = RmqdProcess("broker", "-c", conf, "--store-dir", str(self.store), "--grpc-port",
                                str(self.grpc_port), "--no-metrics", log_path=str(self.dir / "broker.log"),
                                wrap=self.host.wrap if self.host else ()).start(60)
        return self

    @property
    def pid(self) -> Optional[int]:
        if self.kind == "java":
            return self.java.pid
        return self.proc.proc.pid if self.proc is not None and self.proc.proc.poll() is None else None

    def alive(self) -> bool:
        return self.pid is not None

    def kill9(self) -> None:
        if self.kind == "java":
            self.java.kill()
        elif self.proc is not None and self.proc.proc.poll() is None:
            self.proc.kill9()

    def signal(self, sig: int) -> None:
        pid = self.pid
        if pid is not None:
            os.kill(pid, sig)

    def stop(self) -> None:
        """SIGKILL for both: a test's group need not wait for graceful shutdowns (the stores are not reused)."""
        self.kill9()

    def log_tail(self, n: int = 4000) -> str:
        if self.kind == "java":
            return self.java.output(n) + "\n--- store.log ---\n" + self.java.store_log(n)
        try:
            return (self.dir / "broker.log").read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def describe(self) -> str:
        return f"b{self.index} ({self.kind}, {self.addr})"


class MixedGroup:
    """A name server, controller(s) and the mix's brokers (see the module docstring)."""

    def __init__(self, root: str | Path, mix: Mix, net: Optional[NetKit] = None,
                 member_conf: Optional[dict[int, dict]] = None, member_store: Optional[dict[int, Path]] = None,
                 **broker_conf: object) -> None:
        """``member_conf`` adds keys for one member (by index), ``member_store`` puts its store elsewhere (a slow
        disk); ``broker_conf`` adds keys for every member."""
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.mix, self.net = mix, net
        self.hosts: dict[str, Host] = {}
        if net is not None:
            names = ["ns"] + [f"c{i}" for i in range(1, mix.controllers if mix.standalone else 0)] + \
                    [f"b{i}" for i in range(len(mix.brokers))]
            self.hosts = {n: net.add_host(n) for n in names}
        self.namesrv_rmqd: Optional[RmqdProcess] = None
        self.namesrv_java: Optional[Namesrv5] = None
        self.controllers_rmqd: list[ControllerProcess] = []
        self.controllers_java: Optional[Controller5] = None
        self.controller_addrs: list[str] = []
        self.namesrv = ""
        self.members: list[Member] = []
        self.broker_conf = dict(GROUP_CONF, **broker_conf)
        self.member_conf = member_conf or {}
        self.member_store = member_store or {}

    # ------------------------------------------------------------------ placement
    def host(self, name: str) -> Optional[Host]:
        return self.hosts.get(name)

    def placement(self, name: str) -> Placement:
        h = self.host(name)
        return (h.ip, h.wrap) if h else LOOPBACK

    def controller_hosts(self) -> list[Host]:
        return [h for n, h in self.hosts.items() if n == "ns" or n.startswith("c")]

    # ------------------------------------------------------------------ start and stop
    def start(self, timeout: float = 180.0) -> "MixedGroup":
        """Name server and controller(s), then the first broker until it is master, then the others."""
        try:
            self._start_control()
            conf = dict(self.broker_conf, namesrvAddr=self.namesrv, controllerAddr=";".join(self.controller_addrs))
            self.members = [Member(kind, i, self.root, dict(conf, **self.member_conf.get(i, {})), self.host(f"b{i}"),
                                   self.member_store.get(i))
                            for i, kind in enumerate(self.mix.brokers)]
            self.members[0].start()
            wait_until(lambda: (self.sync_state() or {}).get("masterAddress") == self.members[0].addr, timeout,
                       interval=0.2, what=f"{self.members[0].describe()} master")
            for m in self.members[1:]:
                m.start(wait=False)
            for m in self.members[1:]:
                if m.kind == "java":
                    m.java.wait_started(time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_control(self) -> None:
        mix = self.mix
        ns_host = self.host("ns")
        ns_ip = ns_host.ip if ns_host else "127.0.0.1"
        if mix.controller == "java":
            self.namesrv_java = Namesrv5(self.root / "namesrv", dict(CONTROLLER_CONF), controller=not mix.standalone,
                                         host=self.placement("ns"))
            if mix.standalone:
                hosts = [self.placement("ns")] + [self.placement(f"c{i}") for i in range(1, mix.controllers)]
                self.controllers_java = Controller5(self.root / "controllers", CONTROLLER_CONF, nodes=mix.controllers,
                                                    hosts=None if ns_host is None else hosts)
                self.controllers_java.start()
                self.controller_addrs = list(self.controllers_java.addrs)
            self.namesrv_java.start()
            self.namesrv = self.namesrv_java.addr
            if not mix.standalone:
                self.controller_addrs = [self.namesrv_java.controller_addr]
            find_leader(self.controller_addrs, 60)
            return
        if mix.standalone:
            n = mix.controllers
            hosts = [ns_host] + [self.host(f"c{i}") for i in range(1, n)]
            if ns_host is None:
                ports = free_ports(2 * n)
                peers = {f"n{i}": f"127.0.0.1:{ports[i]}" for i in range(n)}
                raft = {f"n{i}": f"127.0.0.1:{ports[n + i]}" for i in range(n)}
            else:
                peers = {f"n{i}": f"{h.ip}:9878" for i, h in enumerate(hosts)}
                raft = {f"n{i}": f"{h.ip}:9879" for i, h in enumerate(hosts)}
            for i, (pid, addr) in enumerate(peers.items()):
                d = self.root / f"ctl-{pid}"
                d.mkdir(exist_ok=True)
                conf = d / "controller.conf"
                conf.write_text(conf_text(peers, pid, str(d), raft, **CONTROLLER_CONF))
                self.controllers_rmqd.append(ControllerProcess(str(conf), str(d / "controller.log"), addr,
                                                               wrap=hosts[i].wrap if hosts[i] else ()))
            for c in self.controllers_rmqd:
                c.start(60)
            self.controller_addrs = list(peers.values())
            ns_conf = write_conf(str(self.root / "namesrv.conf"), listenPort=9876 if ns_host else 0, bindAddress=ns_ip,
                                 kvConfigPath=str(self.root / "kv.json"))
        else:
            if ns_host is None:
                ns_port, ctl_port, raft_port = 0, *free_ports(2)
            else:
                ns_port, ctl_port, raft_port = 9876, 9878, 9879
            ctl = f"{ns_ip}:{ctl_port}"
            self.controller_addrs = [ctl]
            ns_conf = write_conf(str(self.root / "namesrv.conf"), listenPort=ns_port, bindAddress=ns_ip,
                                 kvConfigPath=str(self.root / "kv.json"), enableControllerInNamesrv="true",
                                 controllerDLegerGroup="group1", controllerDLegerPeers=f"n0-{ctl}",
                                 controllerDLegerSelfId="n0", controllerRaftPeers=f"n0-{ns_ip}:{raft_port}",
                                 controllerStorePath=str(self.root / "ctl"),
                                 configStorePath=str(self.root / "ctl.properties"), **CONTROLLER_CONF)
        self.namesrv_rmqd = RmqdProcess("namesrv", "-c", ns_conf, log_path=str(self.root / "namesrv.log"),
                                        wrap=ns_host.wrap if ns_host else ()).start(60)
        self.namesrv = self.namesrv_rmqd.addr
        find_leader(self.controller_addrs, 60)

    def stop(self) -> None:
        """Crash everything (SIGKILL): nothing of a test's group is reused."""
        for m in self.members:
            try:
                m.signal(signal.SIGCONT)
            except OSError:
                pass
            m.stop()
        if self.namesrv_rmqd is not None:
            self.namesrv_rmqd.kill9() if self.namesrv_rmqd.proc.poll() is None else None
        for c in self.controllers_rmqd:
            c.kill()
        if self.controllers_java is not None:
            self.controllers_java.kill()
        if self.namesrv_java is not None:
            self.namesrv_java.kill()

    # ------------------------------------------------------------------ views
    def sync_state(self) -> Optional[dict]:
        """The controller leader's BrokerReplicasInfo of the group (1006), or None while none answers."""
        for addr in self.controller_addrs:
            try:
                r = call(addr, 1006, body=orjson.dumps([BROKER_NAME]), timeout=3)
            except (OSError, TimeoutError, ConnectionError):
                continue
            if r.code != ResponseCode.SUCCESS or not r.body:
                continue
            return orjson.loads(r.body_bytes())["replicasInfoTable"].get(BROKER_NAME)
        return None

    def master_addr(self, topic: str) -> Optional[str]:
        return master_in_route(self.namesrv, topic)

    def member(self, addr: Optional[str]) -> Optional[Member]:
        return next((m for m in self.members if m.addr == addr), None)

    def wait_group(self, topic: str, in_sync: int = 3, timeout: float = 60.0) -> dict:
        """Until the controller has a master and ``in_sync`` replicas in the SyncStateSet and the name server
        routes ``topic`` to that master (creating it there first, as an operator does)."""
        def ready() -> Optional[dict]:
            st = self.sync_state()
            if not st or not st.get("masterAddress") or len(st.get("inSyncReplicas") or ()) < in_sync:
                return None
            if self.master_addr(topic) != st["masterAddress"]:
                if route_of(self.namesrv, topic) is None:
                    try:
                        create_topic(st["masterAddress"], topic)
                    except (AssertionError, OSError, TimeoutError, ConnectionError):
                        pass
                return None
            return st
        return wait_until(ready, timeout, interval=0.1, what=lambda: f"a master and {in_sync} in-sync replicas routed "
                          f"for {topic} ({self.mix.name}; state at the deadline {self.sync_state()})")

    def wait_new_master(self, topic: str, old: str, timeout: float) -> str:
        def other() -> Optional[str]:
            addr = self.master_addr(topic)
            return addr if addr not in (None, old) else None
        return wait_until(other, timeout, interval=0.02, what=f"a new master other than {old} in the route")

    def max_offsets(self) -> dict[int, int]:
        """Each live member's CommitLog max offset (GET_BROKER_EPOCH_CACHE 1007 answers it on masters and slaves,
        rmqd and Java)."""
        out = {}
        for m in self.members:
            if not m.alive():
                continue
            epochs = broker_epochs(m.addr)
            if epochs is not None:
                out[m.index] = int(epochs["maxOffset"])
        return out

    def wait_caught_up(self, timeout: float = 30.0) -> int:
        """Until every member has the same CommitLog max offset; returns it."""
        def same() -> Optional[int]:
            offsets = self.max_offsets()
            if len(offsets) == len(self.members) and len(set(offsets.values())) == 1:
                return next(iter(offsets.values())) or None
            return None
        return wait_until(same, timeout, interval=0.2,
                          what=lambda: f"every member at the same CommitLog offset ({self.max_offsets()})")

    def commitlog_differences(self, upto: int) -> list[str]:
        """Byte ranges of ``[0, upto)`` in which a member's CommitLog differs from the first member's (empty:
        identical on every member)."""
        ref = self.members[0]
        out = []
        for m in self.members[1:]:
            diff = compare_commitlogs(ref.commitlog_dir, m.commitlog_dir, upto, COMMITLOG_FILE_SIZE)
            if diff:
                out.append(f"{m.describe()} vs {ref.describe()}: {diff}")
        return out

    def leader_controller(self) -> str:
        return find_leader(self.controller_addrs, 30)


def broker_epochs(addr: str, timeout: float = 3.0) -> Optional[dict]:
    """GET_BROKER_EPOCH_CACHE (1007) of one broker: its EpochEntryCache (epochList, maxOffset, brokerId)."""
    from rmqd.remoting import fastjson
    try:
        r = call(addr, 1007, timeout=timeout)
    except (OSError, TimeoutError, ConnectionError):
        return None
    if r.code != ResponseCode.SUCCESS or not r.body:
        return None
    return fastjson.loads_lenient(r.body_bytes())


def compare_commitlogs(a: Path, b: Path, upto: int, file_size: int) -> Optional[str]:
    """The first differing range of the two CommitLogs in ``[0, upto)`` (None: the same bytes)."""
    offset = 0
    while offset < upto:
        name = f"{offset:020d}"
        n = min(file_size, upto - offset)
        try:
            with open(a / name, "rb") as fa, open(b / name, "rb") as fb:
                da, db = fa.read(n), fb.read(n)
        except OSError as exc:
            return f"file {name}: {exc}"
        if da != db:
            at = next((i for i in range(min(len(da), len(db))) if da[i] != db[i]), min(len(da), len(db)))
            return f"file {name} differs from byte {at} (offset {offset + at})"
        offset += file_size
    return None


def start_group(root: str | Path, mix_name: str, net: Optional[NetKit] = None, topic: Optional[str] = None,
                **conf: object) -> MixedGroup:
    """A started group of :data:`MIXES` ``mix_name``, with ``topic`` created and all three in sync."""
    group = MixedGroup(root, MIXES[mix_name], net, **conf).start()
    if topic:
        try:
            group.wait_group(topic, len(group.members), timeout=120)
        except BaseException:
            group.stop()
            raise
    return group


__all__ = ["Mix", "MIXES", "REFERENCE_MIX", "Member", "MixedGroup", "start_group", "broker_epochs",
           "compare_commitlogs", "GROUP_CONF", "CLUSTER", "BROKER_NAME"]
