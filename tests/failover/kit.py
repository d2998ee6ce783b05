"""Harness of the failover tests and scripts/failover_rounds.py: a controller-mode replica group of rmqd processes,
a producer that follows the name server's route and records what was acknowledged, and a checker.

* :class:`FailoverGroup`: a name server with the controller inside (``enableControllerInNamesrv``, one Raft
  member) and ``replicas`` brokers with ``enableControllerMode=true``, each its own process (kill -9, restart);
* :class:`RoutedProducer`: threads sending with rmqd's BlockingClient to whatever broker the name server's route
  names brokerId 0 (asking again after a failure, as a client's route refresh does); ``acked`` maps each key
  answered SEND_OK to the time of the answer;
* :func:`read_all_keys` (tests/replication/procs.py) reads a broker back for the checker.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Optional

import orjson

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode, ResponseCode
from tests.controller.ctlkit import conf_text, find_leader, free_ports
from tests.kit.clients import call, create_topic
from tests.kit.netfaults import FaultProxy
from tests.kit.processes import ControllerProcess, RmqdProcess, write_conf
from tests.kit.waits import wait_until
from tests.replication.procs import read_all_keys, read_key_counts, send_one

__all__ = ["FailoverGroup", "RoutedProducer", "FaultProxy", "SlowDisk", "read_all_keys", "read_key_counts",
           "check_acked", "wait_until", "route_of", "call", "create_topic"]

BROKER_NAME = "broker-fo"
CLUSTER = "FailoverCluster"

#: a send's time-out in :class:`RoutedProducer`: the Java client's default sendMsgTimeout (3 s)
SEND_TIMEOUT_S = 3.0
#: a connect to a live server here takes well under a millisecond; one that takes longer is to a host cut off, and the
#: producer asks the route again rather than wait (a 5 s connect once added 5 s to a failover: connect to the
#: cut-off master the route still named a moment before the new master registered)
CONNECT_TIMEOUT_S = 1.0

#: short timers so a CI round is seconds (the 5.x defaults are 10 s heartbeat timeout, 5 s polls)
FAST = dict(brokerHeartbeatInterval=300, controllerHeartBeatTimeoutMills=3000, syncBrokerMetadataPeriod=1000,
            checkSyncStateSetPeriod=1000, haMaxTimeSlaveNotCatchup=3000, haSendHeartbeatInterval=1000,
            haHousekeepingInterval=6000, slaveTimeout=3000)


def route_of(namesrv: str, topic: str) -> Optional[dict]:
    try:
        r = call(namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, timeout=3)
    except (OSError, TimeoutError, ConnectionError):
        return None
    if r.code != ResponseCode.SUCCESS or not r.body:
        return None
    return orjson.loads(r.body_bytes())


def master_in_route(namesrv: str, topic: str) -> Optional[str]:
    route = route_of(namesrv, topic)
    for bd in (route or {}).get("brokerDatas") or ():
        addr = (bd.get("brokerAddrs") or {}).get("0")
        if addr:
            return addr
    return None


class FailoverGroup:
    """A name server + controller process and ``replicas`` controller-mode brokers (see the module docstring)."""

    controller_conf: dict = {}          # more keys for the embedded controller (a subclass's metrics port)

    def __init__(self, root: str, replicas: int = 3, proxies: bool = False, controllers: int = 1,
                 grpc: bool = False, **broker_conf: object) -> None:
        """With ``proxies`` each broker reaches the controller through its own ``FaultProxy``; with
        ``controllers=3`` three ``rmqd controller`` processes beside a plain name server; with ``grpc`` each
        broker serves the 5.x gRPC endpoint on its own port (``grpc_addrs``, kept across restarts)."""
        self.root = root
        self.grpc_ports = free_ports(replicas) if grpc else [0] * replicas
        self.grpc_addrs = [f"127.0.0.1:{p}" for p in self.grpc_ports] if grpc else []
        os.makedirs(root, exist_ok=True)
        self.controller_procs: list[ControllerProcess] = []
        if controllers > 1:
            self._start_controllers(controllers)
            self.namesrv_proc = RmqdProcess("namesrv", "--port", "0",
                                            log_path=os.path.join(root, "namesrv.log")).start()
        else:
            self._start_embedded()
        self.namesrv = self.namesrv_proc.addr
        conf = dict(FAST, brokerClusterName=CLUSTER, brokerName=BROKER_NAME, enableControllerMode="true",
                    controllerAddr=";".join(self.controller_addrs), namesrvAddr=self.namesrv,
                    allAckInSyncStateSet="true", flushIntervalCommitLog=200)
        conf.update(broker_conf)
        self.brokers: list[Optional[RmqdProcess]] = [None] * replicas
        self.proxies = [FaultProxy(self.controller) for _ in range(replicas)] if proxies else []
        self.confs = []
        for i in range(replicas):
            store = os.path.join(root, f"b{i}")
            if proxies:
                conf["controllerAddr"] = self.proxies[i].addr
            self.confs.append(write_conf(os.path.join(root, f"b{i}.conf"), storePathRootDir=store, **conf))
        self.restarts = 0

    def _start_controllers(self, n: int) -> None:
        ports = free_ports(2 * n)
        peers = {f"n{i}": f"127.0.0.1:{ports[i]}" for i in range(n)}
        raft = {f"n{i}": f"127.0.0.1:{ports[n + i]}" for i in range(n)}
        self.controller_addrs = list(peers.values())
        self.controller = self.controller_addrs[0]
        for pid, addr in peers.items():
            conf = os.path.join(self.root, f"{pid}.conf")
            with open(conf, "w", encoding="utf-8") as f:
                f.write(conf_text(peers, pid, os.path.join(self.root, pid), raft))
            self.controller_procs.append(ControllerProcess(conf, os.path.join(self.root, f"{pid}.log"), addr))
        for c in self.controller_procs:
            c.start()
        find_leader(self.controller_addrs, 30)

    def leader_controller(self, exclude=()) -> ControllerProcess:
        addr = find_leader(self.controller_addrs, 30, exclude=exclude)
        return next(c for c in self.controller_procs if c.addr == addr)

    def _start_embedded(self) -> None:
        root = self.root
        ctl_port, raft_port = free_ports(2)
        self.controller = f"127.0.0.1:{ctl_port}"
        self.controller_addrs = [self.controller]
        ns_conf = write_conf(os.path.join(root, "namesrv.conf"), listenPort=0,
                             kvConfigPath=os.path.join(root, "kv.json"), enableControllerInNamesrv="true",
                             controllerDLegerGroup="fo", controllerDLegerPeers=f"n0-{self.controller}",
                             controllerDLegerSelfId="n0", controllerRaftPeers=f"n0-127.0.0.1:{raft_port}",
                             controllerStorePath=os.path.join(root, "ctl"),
                             configStorePath=os.path.join(root, "ctl.properties"),
                             scanNotActiveBrokerInterval=500, scanInactiveMasterInterval=1000,
                             **self.controller_conf)
        self.namesrv_proc = RmqdProcess("namesrv", "-c", ns_conf, log_path=os.path.join(root, "namesrv.log")).start()

    # ------------------------------------------------------------------ processes
    def start(self, i: int) -> RmqdProcess:
        proc = RmqdProcess("broker", "-c", self.confs[i], "--broker-port", "0", "--store-dir",
                           os.path.join(self.root, f"b{i}"), "--grpc-port", str(self.grpc_ports[i]), "--no-metrics",
                           log_path=os.path.join(self.root, f"b{i}.log")).start()
        self.brokers[i] = proc
        return proc

    def start_all(self) -> None:
        for i in range(len(self.brokers)):
            self.start(i)

    def kill9(self, i: int) -> None:
        proc = self.brokers[i]
        if proc is not None and proc.proc.poll() is None:
            proc.kill9()
        self.brokers[i] = None

    def index_of(self, addr: Optional[str]) -> Optional[int]:
        for i, p in enumerate(self.brokers):
            if p is not None and p.addr == addr:
                return i
        return None

    def stop(self) -> None:
        for p in self.brokers:                      # all at once: no elections while they go one by one
            if p is not None and p.proc.poll() is None:
                p.proc.terminate()
        for p in self.brokers:
            if p is not None:
                p.stop()
        self.namesrv_proc.stop()
        for c in self.controller_procs:
            c.stop()
        for proxy in self.proxies:
            proxy.close()

    # ------------------------------------------------------------------ views
    def sync_state(self) -> Optional[dict]:
        """The controller leader's BrokerReplicasInfo of the group (1006)."""
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

    def wait_new_master(self, topic: str, old: str, timeout: float, what: str = "a new master") -> str:
        """Until the name server routes ``topic`` to a master other than ``old``; its address."""
        def other() -> Optional[str]:
            addr = self.master_addr(topic)
            return addr if addr not in (None, old) else None
        return wait_until(other, timeout, interval=0.02, what=what)

    def wait_group(self, topic: str, in_sync: int, timeout: float = 40.0) -> dict:
        """Until the controller has a master, ``in_sync`` replicas in the SyncStateSet, and the name server
        routes ``topic`` to the master."""
        def ready() -> Optional[dict]:
            st = self.sync_state()
            if not st or st.get("masterBrokerId") is None or len(st.get("inSyncReplicas") or ()) < in_sync:
                return None
            if self.master_addr(topic) != st.get("masterAddress"):
                if route_of(self.namesrv, topic) is None:       # not created yet: on the master, as mqadmin does
                    try:
                        create_topic(st["masterAddress"], topic)
                    except (AssertionError, OSError, TimeoutError, ConnectionError):
                        pass                                    # a master still starting up: next look
                return None
            return st
        return wait_until(ready, timeout, interval=0.1, what=f"a master and {in_sync} in-sync replicas routed for {topic}")

    def epoch_file(self, i: int) -> str:
        with open(os.path.join(self.root, f"b{i}", "epochFileCheckpoint"), encoding="utf-8") as f:
            return f.read()

    def log_tail(self, i: int, n: int = 4000) -> str:
        path = os.path.join(self.root, f"b{i}.log")
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()[-n:]


def report(**fields) -> None:
    """Append one fault round's figures to ``RMQD_FAILOVER_REPORT`` (JSON lines; scripts/failover_rounds.py)."""
    path = os.environ.get("RMQD_FAILOVER_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(orjson.dumps(fields).decode() + "\n")


class RoutedProducer:
    """Producer threads sending to the route's master (see the module docstring)."""

    def __init__(self, namesrv: str, topic: str, threads: int = 2, queues: int = 4, body_size: int = 200,
                 pace_s: float = 0.0, route_refresh_s: float = 0.0) -> None:
        """``pace_s``: each thread waits this long after an acknowledged send (a bounded rate);
        ``route_refresh_s``: also ask the name server again this often while sends succeed, and move to the
        master it names (as a client's periodic route poll; otherwise only a failed send moves a thread)."""
        self.namesrv, self.topic, self.queues = namesrv, topic, queues
        self.pace_s, self.route_refresh_s = pace_s, route_refresh_s
        self.body = b"f" * body_size
        self.acked: dict[str, float] = {}           # key -> monotonic time of the SEND_OK
        self.acked_by: dict[str, str] = {}          # key -> broker address that acknowledged it
        #: key -> (queueId, queueOffset, msgId) of the SEND_OK (compat_tests/queue_checker.py checks them)
        self.receipts: dict[str, tuple[int, int, str]] = {}
        # -1: no answer within SEND_TIMEOUT_S (or a broken connection)
        self.failures = 0
        self.codes: dict[int, int] = {}
        self.tag = ""                               # put before each key (a fault round's name, for attribution)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(t,), daemon=True) for t in range(threads)]

    def start(self) -> "RoutedProducer":
        for t in self._threads:
            t.start()
        return self

    def _run(self, n: int) -> None:
        client: Optional[BlockingClient] = None
        addr: Optional[str] = None
        i = 0
        routed_at = 0.0
        while not self._stop.is_set():
            if client is not None and self.route_refresh_s and time.monotonic() - routed_at > self.route_refresh_s:
                routed_at = time.monotonic()
                if master_in_route(self.namesrv, self.topic) not in (None, addr):
                    client.close()
                    client = None
            if client is None:
                routed_at = time.monotonic()
                addr = master_in_route(self.namesrv, self.topic)
                if addr is None:
                    time.sleep(0.05)
                    continue
                try:
                    client = BlockingClient(addr, timeout=CONNECT_TIMEOUT_S)
                except OSError:
                    client = None
                    time.sleep(0.05)
                    continue
            key = f"{self.tag}p{n}-{i}"
            i += 1
            try:
                r = send_one(client, self.topic, key, self.body, i % self.queues, SEND_TIMEOUT_S)
                code = r.code
            except (OSError, TimeoutError, ConnectionError):
                code = -1
            with self._lock:
                self.codes[code] = self.codes.get(code, 0) + 1
                if code == ResponseCode.SUCCESS:
                    self.acked[key] = time.monotonic()
                    self.acked_by[key] = addr
                    ext = r.ext_fields or {}
                    self.receipts[key] = (int(ext.get("queueId", -1)), int(ext.get("queueOffset", -1)),
                                          str(ext.get("msgId", "")))
                else:
                    self.failures += 1
            if code == ResponseCode.SUCCESS:
                if self.pace_s:
                    self._stop.wait(self.pace_s)
                continue
            client.close()
            client = None
            time.sleep(0.05)
        if client is not None:
            client.close()

    def acked_after(self, t: float, by: Optional[str] = None) -> list[float]:
        with self._lock:
            return sorted(when for k, when in self.acked.items()
                          if when > t and (by is None or self.acked_by[k] == by))

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(15)


def check_acked(addr: str, topic: str, acked: "set[str] | dict", queues: int = 4) -> dict:
    """The checker: read every queue of ``topic`` on ``addr`` from offset 0 and compare with the keys a client saw
    acknowledged. Returns ``acked`` (count), ``lost`` (acknowledged keys not stored, sorted), ``duplicates``
    (stored copies beyond the first, over every key) and ``stored`` (distinct keys)."""
    counts = read_key_counts(addr, topic, queues)
    lost = sorted(set(acked) - set(counts))
    return {"acked": len(acked), "stored": len(counts), "lost": lost,
            "duplicates": sum(n - 1 for n in counts.values() if n > 1)}


class SlowDisk:
    """A real slow disk for a store: ext4 on a loop device in a temporary directory this object makes, whose I/O
    the kernel's block-layer throttle slows (cgroup v1 ``blkio.throttle.*_device`` of the root group, so it
    applies to every writer of that device, the page-cache flusher too). :meth:`throttle` changes the limit at
    run time; :meth:`close` lifts it, unmounts, detaches the loop device and removes the directory. Needs root.

    The device-mapper ``delay`` target would add latency instead of capping I/O, but this kernel has no
    device-mapper (``dmsetup create`` answers "/dev/mapper/control: open failed: No such device")."""

    BLKIO = "/sys/fs/cgroup/blkio"

    def __init__(self, size_mb: int = 512) -> None:
        import subprocess
        import tempfile
        self._run = lambda *cmd: subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60).stdout
        knob = os.path.join(self.BLKIO, "blkio.throttle.write_iops_device")
        if not os.path.exists(knob) or os.geteuid() != 0:
            raise RuntimeError(f"a slow disk needs root and the cgroup v1 block throttle ({knob} is missing or "
                               "this is not root)")
        self.dir = tempfile.mkdtemp(prefix="rmqd-slowdisk-")
        self.image = os.path.join(self.dir, "disk.img")
        self.mount = os.path.join(self.dir, "mnt")
        self.device: Optional[str] = None
        self.mounted = False
        try:
            with open(self.image, "wb") as f:
                f.truncate(size_mb << 20)
            self.device = self._run("losetup", "-f", "--show", self.image).strip()
            self._run("mkfs.ext4", "-q", "-F", self.device)
            os.mkdir(self.mount)
            self._run("mount", self.device, self.mount)
            self.mounted = True
            rdev = os.stat(self.device).st_rdev
            self.majmin = f"{os.major(rdev)}:{os.minor(rdev)}"
        except BaseException:
            self.close()
            raise

    def throttle(self, write_iops: int = 0, write_bps: int = 0) -> None:
        """Cap the device's writes (0 = no cap)."""
        for name, value in (("write_iops_device", write_iops), ("write_bps_device", write_bps)):
            with open(os.path.join(self.BLKIO, f"blkio.throttle.{name}"), "w") as f:
                f.write(f"{self.majmin} {value}\n")

    def close(self) -> None:
        import shutil
        import subprocess
        errors = []
        if self.device is not None and getattr(self, "majmin", None):
            try:
                self.throttle(0, 0)
            except OSError as exc:
                errors.append(f"lifting the throttle: {exc}")
        if self.mounted:
            for attempt in range(20):           # a killed broker's last writes may still be flushing
                r = subprocess.run(["umount", self.mount], capture_output=True, text=True, timeout=120)
                if r.returncode == 0:
                    self.mounted = False
                    break
                time.sleep(0.5)
            else:
                errors.append(f"umount {self.mount}: {r.stderr.strip()}")
        if self.device is not None and not self.mounted:
            r = subprocess.run(["losetup", "-d", self.device], capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                errors.append(f"losetup -d {self.device}: {r.stderr.strip()}")
            self.device = None
        if not self.mounted:
            shutil.rmtree(self.dir, ignore_errors=True)
        if errors:
            raise RuntimeError("slow disk cleanup: " + "; ".join(errors))
