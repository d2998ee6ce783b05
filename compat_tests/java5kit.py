"""The RocketMQ 5.x Java reference kit: fetched from Maven Central into a cache outside the repository.

Nothing of it is committed. :func:`fetch_kit5` resolves the pinned artifacts with Maven
(``mvn dependency:copy-dependencies``) into ``$RMQD_CACHE`` (default ``~/.cache/rmqd``):

- ``lib/``: the server side and the 5.x remoting client — org.apache.rocketmq rocketmq-namesrv, -broker, -proxy,
  -controller, -tools, -client at :data:`KIT5_VERSION`, with everything they pull in;
- ``client-java/``: the 5.x gRPC Java client, org.apache.rocketmq:rocketmq-client-java at
  :data:`CLIENT_JAVA_VERSION` (its own classpath: it shades its dependencies).

The version is 5.5.0: Maven Central serves rocketmq-broker, -controller, -common, -remoting and -store at 5.5.1 but
not rocketmq-namesrv, -proxy, -tools, -client, -auth, -srvutil or -filter (404 on 2026-11-29), and a classpath
mixing two releases is not a reference. ``RMQD_JAVA5_VERSION=5.5.1`` switches once it resolves.

:class:`Reference5Cluster` runs a real name server and a broker with the proxy in local mode (gRPC; one JVM, as
``mqbroker --enable-proxy``), :class:`Controller5` a standalone controller; all on free loopback ports below the
ephemeral range, with ROCKETMQ_HOME, conf/ and logs in their work directory and heaps sized for these machines.
:class:`Mqadmin5` is 5.x's ``mqadmin`` in one JVM (javakit's MqadminShell on the 5.x classpath).

Like the 4.9.8 kit's tests, the tests on this kit are core tests: a missing JDK, Maven or artifact fails them
naming the step (:func:`require_kit5`); they never skip.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

from javakit import JAVA_SRC, REFERENCE_BROKER_PROPERTIES, JavaProcess, JavaRun, MqadminShell, _run, compile_java, \
    disk_ratio_system_properties, free_port_block, work_dir
from serverproc import ServerProcess, kit_main, wait_broker_registered

KIT5_VERSION = os.environ.get("RMQD_JAVA5_VERSION", "5.5.0")
CLIENT_JAVA_VERSION = os.environ.get("RMQD_CLIENT_JAVA_VERSION", "5.2.0")
SERVER_ARTIFACTS = ("rocketmq-namesrv", "rocketmq-broker", "rocketmq-proxy", "rocketmq-controller",
                    "rocketmq-tools", "rocketmq-client")
JAVA5_SRC = Path(__file__).resolve().parent / "java5"

# The session reference's settings beyond the defaults: those of the 4.9.8 reference (1 s delay levels,
# transaction check-backs after 1 s, SQL92 filtering) and the short waits rmqd's gRPC tests use (invisible times
# from 1 s, long polls of at most 3 s), so one scenario runs in seconds on both.
# Lite Mode (5.5) needs the LMQ and multi-dispatch on (both default to false in Java; rmqd needs neither); recall of
# delay messages (5.3.2) is off by default in both and on here, so that it can be compared.
REFERENCE5_BROKER_PROPERTIES = dict(REFERENCE_BROKER_PROPERTIES, enableLmq="true", enableMultiDispatch="true",
                                    recallMessageEnable="true")
REFERENCE5_PROXY_PROPERTIES = {"minInvisibleTimeMillsForRecv": 1000,
                               "grpcClientConsumerMaxLongPollingTimeoutMillis": 3000}

FETCH_TIMEOUT = 900.0
START_TIMEOUT = 150.0

# RocketMQ's MappedFile cleaner and Netty's direct buffers need these on Java 17 (the 5.x scripts add none; the
# same list as the 4.9.8 kit's common.sh).
JDK17_OPTS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED", "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED", "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED", "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED", "--add-exports=java.base/sun.security.x509=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
)
GC_OPTS = ("-XX:+UseG1GC", "-XX:SoftRefLRUPolicyMSPerMB=0", "-XX:-OmitStackTraceInFastThrow")


class Kit5Error(RuntimeError):
    """A step of making or starting the 5.x kit failed; the message names the step."""


def cache_dir() -> Path:
    return Path(os.environ.get("RMQD_CACHE") or Path.home() / ".cache" / "rmqd")


def kit5_dir() -> Path:
    return cache_dir() / f"rocketmq-java-{KIT5_VERSION}"


def _pom(deps: Sequence[tuple[str, str]]) -> str:
    rows = "".join(f"<dependency><groupId>org.apache.rocketmq</groupId><artifactId>{a}</artifactId>"
                   f"<version>{v}</version></dependency>\n" for a, v in deps)
    return ("<project xmlns=\"http://maven.apache.org/POM/4.0.0\"><modelVersion>4.0.0</modelVersion>"
            "<groupId>rmqd.kit</groupId><artifactId>kit</artifactId><version>1</version><packaging>pom</packaging>\n"
            f"<dependencies>\n{rows}</dependencies></project>\n")


def _kit_parts() -> dict[str, list[tuple[str, str]]]:
    return {"lib": [(a, KIT5_VERSION) for a in SERVER_ARTIFACTS],
            "client-java": [("rocketmq-client-java", CLIENT_JAVA_VERSION)]}


def kit5_ready() -> bool:
    kit = kit5_dir()
    return all((kit / part / ".done").exists() for part in _kit_parts())


def fetch_kit5(timeout: float = FETCH_TIMEOUT) -> Path:
    """Resolve the kit's jars with Maven into :func:`kit5_dir` (once; a file lock keeps concurrent runs apart).
    Raises :class:`Kit5Error` naming the step that failed."""
    kit = kit5_dir()
    if kit5_ready():
        return kit
    if shutil.which("mvn") is None:
        raise Kit5Error("java5kit step 'mvn': Maven is not on PATH (the RocketMQ 5.x kit is fetched with "
                        "`mvn dependency:copy-dependencies`; .ci/run installs Debian's maven)")
    kit.mkdir(parents=True, exist_ok=True)
    with open(kit / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for part, deps in _kit_parts().items():
            target = kit / part
            if (target / ".done").exists():
                continue
            pom = kit / f"{part}.pom.xml"
            pom.write_text(_pom(deps))
            tmp = kit / f"{part}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            cmd = ["mvn", "-B", "-q", "-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={tmp}",
                   "-DincludeScope=runtime"]
            try:
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=kit)
            except subprocess.TimeoutExpired:
                raise Kit5Error(f"java5kit step 'mvn dependency:copy-dependencies' for {part} "
                                f"({', '.join(a + ':' + v for a, v in deps)}) took over {timeout:.0f} s") from None
            if res.returncode != 0:
                raise Kit5Error(f"java5kit step 'mvn dependency:copy-dependencies' for {part} "
                                f"({', '.join(a + ':' + v for a, v in deps)}) failed: "
                                f"{(res.stdout + res.stderr)[-2500:]}")
            (tmp / ".done").write_text(" ".join(f"{a}:{v}" for a, v in deps) + "\n")
            shutil.rmtree(target, ignore_errors=True)
            tmp.rename(target)
    return kit


def missing5_reason() -> str | None:
    """Why the 5.x kit cannot be used here, or None when it can (fetching it first if need be)."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not on PATH: the RocketMQ 5.x reference kit needs a JDK 17"
    try:
        fetch_kit5()
    except Kit5Error as exc:
        return str(exc)
    return None


def require_kit5() -> Path:
    """The kit's directory; fails the calling test (does not skip) naming the step that is missing."""
    import pytest

    reason = missing5_reason()
    if reason:
        pytest.fail(reason, pytrace=False)
    return kit5_dir()


def server_classpath(*extra: str | Path) -> str:
    return os.pathsep.join([str(kit5_dir() / "lib" / "*"), *map(str, extra)])


def client_java_classpath(*extra: str | Path) -> str:
    return os.pathsep.join([str(kit5_dir() / "client-java" / "*"), *map(str, extra)])


@lru_cache(maxsize=None)
def compiled(kind: str) -> Path:
    """Our 5.x Java programs compiled: ``remoting`` (compat_tests/java5/remoting plus javakit's MqadminShell,
    against the 5.x client and tools) or ``grpc`` (compat_tests/java5/grpc, against rocketmq-client-java)."""
    require_kit5()
    if kind == "remoting":
        src = Path(tempfile.gettempdir()) / f"rmqd-java5-src-{os.getpid()}"
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir()
        for f in [*(JAVA5_SRC / "remoting").glob("*.java"), JAVA_SRC / "MqadminShell.java"]:
            shutil.copyfile(f, src / f.name)
        try:
            return compile_java(src, cp=server_classpath())
        finally:
            shutil.rmtree(src, ignore_errors=True)
    if kind == "grpc":
        return compile_java(JAVA5_SRC / "grpc", cp=client_java_classpath())
    raise ValueError(kind)


def java5_command(kind: str, main_class: str, *args: str, heap: str = "-Xmx256m",
                  system_props: Mapping[str, str] | None = None) -> list[str]:
    """The command line of one of our 5.x programs (see :func:`compiled`)."""
    classes = compiled(kind)
    cp = server_classpath(classes) if kind == "remoting" else client_java_classpath(classes)
    props = [f"-D{k}={v}" for k, v in (system_props or {}).items()]
    return ["java", heap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *JDK17_OPTS, *props,
            f"-Duser.home={tempfile.gettempdir()}", "-cp", cp, main_class, *args]


def run_java5(kind: str, main_class: str, *args: str, timeout: float = 60.0,
              env: Mapping[str, str] | None = None, system_props: Mapping[str, str] | None = None) -> JavaRun:
    """Run one of our 5.x programs with a hard timeout (JSON lines on stdout, as javakit.run_java)."""
    return _run(java5_command(kind, main_class, *args, system_props=system_props), timeout, env,
                home=tempfile.gettempdir())


def java5_process(kind: str, main_class: str, *args: str, env: Mapping[str, str] | None = None,
                  system_props: Mapping[str, str] | None = None) -> JavaProcess:
    """One of our 5.x programs in the background (javakit.JavaProcess)."""
    return JavaProcess(main_class, env=env, cmd=java5_command(kind, main_class, *args, system_props=system_props))


class Mqadmin5(MqadminShell):
    """5.x's mqadmin (MQAdminStartup of rocketmq-tools) in one JVM for many sub-commands."""

    def __init__(self, home: str | Path | None = None) -> None:
        props = {"rocketmq.home.dir": str(home or work_dir())}
        super().__init__(cmd=java5_command("remoting", "MqadminShell", system_props=props))


def _props(values: Mapping[str, object]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


class _Jvm(ServerProcess):
    """One server JVM of a 5.x cluster: started with its log in ``workdir/<name>.out``; SIGKILLed or stopped.
    ``wrap`` goes before the command (``ip netns exec NS``: the JVM runs on a host of compat_tests/netkit.py,
    which execs it, so the process is still ``proc``); ``host`` is the address its ports are probed on."""

    def __init__(self, name: str, workdir: Path, main_class: str, heap: Sequence[str], args: Sequence[str],
                 wrap: Sequence[str] = (), host: str = "127.0.0.1") -> None:
        home = workdir / "home"
        cmd = [*wrap, "java", "-server", *heap, *GC_OPTS, *JDK17_OPTS, f"-Duser.home={workdir}",
               f"-Drocketmq.home.dir={home}",
               *[f"-D{k}={v}" for k, v in disk_ratio_system_properties().items()],
               "-cp", server_classpath(), main_class, *args]
        super().__init__(name, workdir, cmd, dict(os.environ, ROCKETMQ_HOME=str(home)), "java5kit", Kit5Error, host)


NAMESRV_HEAP = ("-Xms128m", "-Xmx256m")
BROKER_HEAP = ("-Xms512m", "-Xmx768m", "-XX:MaxDirectMemorySize=1g")
CONTROLLER_HEAP = ("-Xms128m", "-Xmx256m")
PROXY_HEAP = ("-Xms128m", "-Xmx384m")


class Reference5Cluster:
    """A real 5.x name server and a broker with the proxy in local mode (gRPC), in ``workdir``.

    Ports (one free block): name server, broker (with VIP = broker - 2, HA = broker + 1), proxy gRPC, proxy
    remoting, the broker's Prometheus exporter (``metrics_url``). ``broker_conf`` adds or replaces broker.conf keys, ``proxy_conf`` rmq-proxy.json keys,
    ``namesrv_conf`` the name server's (e.g. ``enableControllerInNamesrv``)."""

    def __init__(self, workdir: str | Path, broker_conf: Mapping[str, object] | None = None,
                 proxy_conf: Mapping[str, object] | None = None,
                 namesrv_conf: Mapping[str, object] | None = None) -> None:
        self.workdir = Path(workdir)
        base = free_port_block(8)
        self.namesrv_port = base
        self.broker_port = base + 3            # base+1 is the VIP channel (broker - 2), base+4 HA
        self.grpc_port = base + 5
        self.proxy_remoting_port = base + 6
        self.metrics_port = base + 7           # the broker's Prometheus exporter
        self.namesrv_addr = f"127.0.0.1:{self.namesrv_port}"
        self.broker_addr = f"127.0.0.1:{self.broker_port}"
        self.grpc_addr = f"127.0.0.1:{self.grpc_port}"
        self.proxy_remoting_addr = f"127.0.0.1:{self.proxy_remoting_port}"
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        self.broker_name = "broker-a"
        self.cluster_name = "DefaultCluster"
        self.broker_conf = {
            "brokerClusterName": self.cluster_name, "brokerName": self.broker_name, "brokerId": 0,
            "listenPort": self.broker_port, "namesrvAddr": self.namesrv_addr, "brokerIP1": "127.0.0.1",
            "brokerIP2": "127.0.0.1", "bindAddress": "127.0.0.1", "brokerRole": "ASYNC_MASTER",
            "flushDiskType": "ASYNC_FLUSH", "storePathRootDir": str(self.workdir / "store"),
            "storePathCommitLog": str(self.workdir / "store" / "commitlog"), "autoCreateTopicEnable": "true",
            "metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1",
            "metricsPromExporterPort": self.metrics_port, **(broker_conf or {})}
        self.proxy_conf = {"rocketMQClusterName": self.cluster_name, "grpcServerPort": self.grpc_port,
                           "remotingListenPort": self.proxy_remoting_port, "namesrvAddr": self.namesrv_addr,
                           **(proxy_conf or {})}
        self.namesrv_conf = {"listenPort": self.namesrv_port, "bindAddress": "127.0.0.1", **(namesrv_conf or {})}
        self.namesrv: _Jvm | None = None
        self.broker: _Jvm | None = None

    def start(self, timeout: float = START_TIMEOUT) -> "Reference5Cluster":
        import orjson

        require_kit5()
        deadline = time.monotonic() + timeout
        conf = self.workdir / "home" / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "namesrv.conf").write_text(_props(self.namesrv_conf))
        (conf / "broker.conf").write_text(_props(self.broker_conf))
        (conf / "rmq-proxy.json").write_bytes(orjson.dumps(self.proxy_conf))
        try:
            self.namesrv = _Jvm("namesrv", self.workdir, "org.apache.rocketmq.namesrv.NamesrvStartup", NAMESRV_HEAP,
                                ["-c", str(conf / "namesrv.conf")])
            self.namesrv.wait_port(self.namesrv_port, deadline)
            self.broker = _Jvm("broker-proxy", self.workdir, "org.apache.rocketmq.proxy.ProxyStartup", BROKER_HEAP,
                               ["-pm", "local", "-bc", str(conf / "broker.conf"), "-pc", str(conf / "rmq-proxy.json")])
            self.broker.wait_output("rocketmq-proxy startup successfully", deadline)
            self.broker.wait_port(self.grpc_port, deadline)
            self._wait_registered(deadline)
        except BaseException:
            self.kill()
            raise
        return self

    def _wait_registered(self, deadline: float) -> None:
        if not wait_broker_registered(self.namesrv_addr, self.broker_addr, deadline):
            raise Kit5Error("java5kit step 'broker registers with the name server': not within the start timeout: "
                            f"{self.broker.output() if self.broker else ''}")

    def kill(self) -> None:
        """Crash both JVMs (SIGKILL): a throwaway cluster need not wait for the broker's graceful shutdown."""
        for jvm in (self.broker, self.namesrv):
            if jvm is not None:
                jvm.kill()

    def stop(self) -> None:
        for jvm in (self.broker, self.namesrv):
            if jvm is not None:
                jvm.stop()

    def __enter__(self) -> "Reference5Cluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()




class ClusterProxy5:
    """A real 5.x proxy in cluster mode (``mqproxy -pm cluster``: its own JVM, talking remoting to the brokers it
    finds through ``namesrv_addr``), on free loopback ports. 5.5.0's local-mode proxy (:class:`Reference5Cluster`)
    does not serve Lite Mode (SyncLiteSubscription fails with a NullPointerException, receiving from a lite topic with
    NotImplementedException ``LocalMessageService.popLiteMessage``); the cluster-mode proxy does. ``proxy_conf`` adds
    or replaces rmq-proxy.json keys."""

    def __init__(self, workdir: str | Path, namesrv_addr: str, cluster_name: str = "DefaultCluster",
                 proxy_conf: Mapping[str, object] | None = None) -> None:
        self.workdir = Path(workdir)
        base = free_port_block(2)
        self.grpc_port = base
        self.grpc_addr = f"127.0.0.1:{base}"
        self.conf = {"rocketMQClusterName": cluster_name, "namesrvAddr": namesrv_addr, "grpcServerPort": base,
                     "remotingListenPort": base + 1, **(proxy_conf or {})}
        self.jvm: _Jvm | None = None

    def launch(self) -> "ClusterProxy5":
        """Start the JVM without waiting for it (:meth:`wait_started`): a caller can do other work meanwhile."""
        import orjson

        require_kit5()
        conf = self.workdir / "home" / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "rmq-proxy.json").write_bytes(orjson.dumps(self.conf))
        self.jvm = _Jvm("cluster-proxy", self.workdir, "org.apache.rocketmq.proxy.ProxyStartup", PROXY_HEAP,
                        ["-pm", "cluster", "-pc", str(conf / "rmq-proxy.json")])
        return self

    def wait_started(self, timeout: float = START_TIMEOUT, attempts: int = 2) -> "ClusterProxy5":
        """Until it serves; a proxy that exits while starting is launched again (``attempts`` in all): on a loaded
        machine its first step, creating its system topics on the brokers, can time out and end the JVM."""
        deadline = time.monotonic() + timeout
        for attempt in range(attempts):
            try:
                self.jvm.wait_output("rocketmq-proxy startup successfully", deadline)
                self.jvm.wait_port(self.grpc_port, deadline)
                return self
            except Kit5Error:
                if self.jvm.alive() or attempt == attempts - 1:
                    self.kill()
                    raise
                log_tail = self.jvm.output(600)
                self.kill()
                self.jvm.log.rename(self.jvm.log.with_suffix(f".out.{attempt}"))
                print(f"java5kit: cluster proxy exited while starting; launched again: {log_tail}")
                self.launch()
            except BaseException:
                self.kill()
                raise
        return self

    def start(self, timeout: float = START_TIMEOUT) -> "ClusterProxy5":
        return self.launch().wait_started(timeout)

    def kill(self) -> None:
        if self.jvm is not None:
            self.jvm.kill()

    def __enter__(self) -> "ClusterProxy5":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


#: where one JVM of a group runs: (its address, the command prefix); loopback with none by default, a host of
#: compat_tests/netkit.py (``ip netns exec NS``) in the network tests
Placement = tuple[str, Sequence[str]]
LOOPBACK: Placement = ("127.0.0.1", ())


def _placements(n: int, hosts: Sequence[Placement] | None) -> list[Placement]:
    hosts = list(hosts or [LOOPBACK] * n)
    if len(hosts) != n:
        raise ValueError(f"{n} JVMs need {n} placements, got {len(hosts)}")
    return hosts


@contextlib.contextmanager
def reference5_running(home: Path) -> Iterator["Reference5Cluster"]:
    """A :class:`Reference5Cluster` in ``home`` with the differential settings (:data:`REFERENCE5_BROKER_PROPERTIES`,
    :data:`REFERENCE5_PROXY_PROPERTIES`), started, and killed on the way out (the kit checked first)."""
    require_kit5()
    cluster = Reference5Cluster(home, broker_conf=REFERENCE5_BROKER_PROPERTIES, proxy_conf=REFERENCE5_PROXY_PROPERTIES)
    cluster.start()
    try:
        # right after start the broker answers GET_BROKER_RUNTIME_INFO (mqadmin clusterList, brokerStatus) with
        # SYSTEM_ERROR, a NoSuchElementException from its stats' empty history, for a moment
        deadline = time.monotonic() + START_TIMEOUT
        while not _runtime_info_served(cluster.broker_addr):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Java 5.x broker {cluster.broker_addr} did not serve its runtime info "
                                   f"within {START_TIMEOUT:.0f} s of its start")
            time.sleep(0.5)
        yield cluster
    finally:
        cluster.kill()


def _runtime_info_served(addr: str) -> bool:
    from rmqd.remoting.client import BlockingClient
    from rmqd.remoting.codes import RequestCode, ResponseCode
    from rmqd.remoting.command import new_request

    with BlockingClient(addr) as c:
        return c.invoke(new_request(RequestCode.GET_BROKER_RUNTIME_INFO)).code == ResponseCode.SUCCESS


def controller_peer_conf(peers: Sequence[str], self_index: int, store: Path, group: str = "group1") -> dict:
    """The DLedger keys of node ``self_index`` of a controller group whose peers listen on ``peers``
    (``host:port``; a 5.x controller serves brokers and admin tools on its own peer port)."""
    return {"controllerDLegerGroup": group,
            "controllerDLegerPeers": ";".join(f"n{i}-{a}" for i, a in enumerate(peers)),
            "controllerDLegerSelfId": f"n{self_index}", "controllerStorePath": str(store)}


class Controller5:
    """Real standalone 5.x controllers (ControllerStartup, DLedger): a group of ``nodes`` (1 or 3), each with
    ``conf`` added to its controller.conf (e.g. ``controllerType=jRaft``). A 5.x controller answers brokers and
    admin tools on its DLedger peer port (``addrs``; ``listenPort`` is overridden by it). ``hosts`` places the
    nodes (default: loopback, free ports); on hosts of their own every node uses ``port``."""

    def __init__(self, workdir: str | Path, conf: Mapping[str, object] | None = None, nodes: int = 1,
                 hosts: Sequence[Placement] | None = None, port: int = 9878) -> None:
        self.workdir = Path(workdir)
        self.hosts = _placements(nodes, hosts)
        if hosts is None:
            base = free_port_block(nodes)
            self.addrs = [f"127.0.0.1:{base + i}" for i in range(nodes)]
        else:
            self.addrs = [f"{ip}:{port}" for ip, _ in self.hosts]
        self.addr = self.addrs[0]
        self.port = int(self.addr.rpartition(":")[2])
        self.conf = dict(conf or {})
        self.jvms: list[_Jvm | None] = [None] * nodes

    @property
    def jvm(self) -> _Jvm | None:
        return self.jvms[0]

    def node_conf(self, i: int) -> dict:
        ip, _ = self.hosts[i]
        return {"listenPort": int(self.addrs[i].rpartition(":")[2]), "bindAddress": ip,
                **controller_peer_conf(self.addrs, i, self.workdir / f"n{i}" / "controller-store"),
                "configStorePath": str(self.workdir / f"n{i}" / "controller.properties"), **self.conf}

    def start_node(self, i: int, deadline: float) -> None:
        d = self.workdir / f"n{i}"
        conf = d / "home" / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "controller.conf").write_text(_props(self.node_conf(i)))
        ip, wrap = self.hosts[i]
        self.jvms[i] = _Jvm("controller", d, "org.apache.rocketmq.controller.ControllerStartup", CONTROLLER_HEAP,
                            ["-c", str(conf / "controller.conf")], wrap=wrap, host=ip)

    def start(self, timeout: float = START_TIMEOUT) -> "Controller5":
        require_kit5()
        deadline = time.monotonic() + timeout
        try:
            for i in range(len(self.addrs)):
                self.start_node(i, deadline)
            for i, jvm in enumerate(self.jvms):
                jvm.wait_port(int(self.addrs[i].rpartition(":")[2]), deadline)
        except BaseException:
            self.kill()
            raise
        return self

    def restart(self, i: int, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        self.kill_node(i)
        self.start_node(i, deadline)
        self.jvms[i].wait_port(int(self.addrs[i].rpartition(":")[2]), deadline)

    def kill_node(self, i: int) -> None:
        if self.jvms[i] is not None:
            self.jvms[i].kill()

    def kill(self) -> None:
        for i in range(len(self.jvms)):
            self.kill_node(i)

    def __enter__(self) -> "Controller5":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


class Namesrv5:
    """A real 5.x name server (NamesrvStartup), with ``controller=True`` the controller inside it
    (``enableControllerInNamesrv``, one DLedger node on ``controller_port``)."""

    def __init__(self, workdir: str | Path, conf: Mapping[str, object] | None = None, controller: bool = False,
                 host: Placement = LOOPBACK, port: int = 9876, controller_port: int = 9878) -> None:
        self.workdir = Path(workdir)
        self.host = host
        ip, _ = host
        if host == LOOPBACK:
            port = free_port_block(2)
            controller_port = port + 1
        self.port = port
        self.addr = f"{ip}:{port}"
        self.controller_addr = f"{ip}:{controller_port}" if controller else None
        self.conf = {"listenPort": port, "bindAddress": ip, **(conf or {})}
        if controller:
            self.conf.update(enableControllerInNamesrv="true",
                             **controller_peer_conf([self.controller_addr], 0, self.workdir / "controller-store"),
                             configStorePath=str(self.workdir / "namesrv.properties"))
        self.jvm: _Jvm | None = None

    def start(self, timeout: float = START_TIMEOUT) -> "Namesrv5":
        require_kit5()
        deadline = time.monotonic() + timeout
        conf = self.workdir / "home" / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "namesrv.conf").write_text(_props(self.conf))
        ip, wrap = self.host
        try:
            self.jvm = _Jvm("namesrv", self.workdir, "org.apache.rocketmq.namesrv.NamesrvStartup", NAMESRV_HEAP,
                            ["-c", str(conf / "namesrv.conf")], wrap=wrap, host=ip)
            self.jvm.wait_port(self.port, deadline)
            if self.controller_addr:
                self.jvm.wait_port(int(self.controller_addr.rpartition(":")[2]), deadline)
        except BaseException:
            self.kill()
            raise
        return self

    def kill(self) -> None:
        if self.jvm is not None:
            self.jvm.kill()


#: 5.x controller mode with short timers, as rmqd's failover tests (tests/failover/kit.py FAST)
CONTROLLER_MODE_FAST = dict(brokerHeartbeatInterval=300, controllerHeartBeatTimeoutMills=3000,
                            syncBrokerMetadataPeriod=1000, checkSyncStateSetPeriod=1000, haMaxTimeSlaveNotCatchup=3000,
                            haSendHeartbeatInterval=1000, haHousekeepingInterval=6000, slaveTimeout=3000)
MIXED_BROKER_HEAP = ("-Xms256m", "-Xmx512m", "-XX:MaxDirectMemorySize=256m")


class Broker5:
    """A real 5.x broker (BrokerStartup) in ``workdir``, no proxy: ``conf`` replaces or adds broker.conf keys
    (controller mode: ``enableControllerMode=true``, ``controllerAddr``, ``allAckInSyncStateSet`` ...). Ports:
    ``port`` (VIP = port - 2, HA = port + 1, as BrokerStartup sets them; default: a free block on loopback, 10911
    on a host of its own). It can be
    killed (SIGKILL), paused (SIGSTOP/SIGCONT) and started again on the same store."""

    def __init__(self, workdir: str | Path, conf: Mapping[str, object], host: Placement = LOOPBACK,
                 port: int | None = None, name: str = "broker") -> None:
        self.workdir = Path(workdir)
        self.host = host
        ip, _ = host
        if port is None:
            port = free_port_block(4) + 2 if host == LOOPBACK else 10911
        self.port = port
        self.addr = f"{ip}:{port}"
        self.ha_addr = f"{ip}:{port + 1}"
        self.name = name
        self.store = self.workdir / "store"
        self.conf = {"brokerIP1": ip, "brokerIP2": ip, "bindAddress": ip, "listenPort": port,
                     "storePathRootDir": str(self.store), "storePathCommitLog": str(self.store / "commitlog"),
                     "flushDiskType": "ASYNC_FLUSH", "autoCreateTopicEnable": "true", **conf}
        self.jvm: _Jvm | None = None

    def start(self, timeout: float = START_TIMEOUT, wait: bool = True) -> "Broker5":
        """Start the JVM; with ``wait`` until its port is open (a controller-mode broker opens it before the
        controller has given it a role)."""
        require_kit5()
        conf = self.workdir / "home" / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "broker.conf").write_text(_props(self.conf))
        ip, wrap = self.host
        self.jvm = _Jvm(self.name, self.workdir, "org.apache.rocketmq.broker.BrokerStartup", MIXED_BROKER_HEAP,
                        ["-c", str(conf / "broker.conf")], wrap=wrap, host=ip)
        if wait:
            self.wait_started(time.monotonic() + timeout)
        return self

    def wait_started(self, deadline: float) -> None:
        try:
            self.jvm.wait_port(self.port, deadline)
        except BaseException:
            self.kill()
            raise

    @property
    def pid(self) -> int | None:
        return self.jvm.proc.pid if self.jvm is not None and self.jvm.alive() else None

    def alive(self) -> bool:
        return self.jvm is not None and self.jvm.alive()

    def kill(self) -> None:
        if self.jvm is not None:
            self.jvm.kill()

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.jvm.proc.pid, sig)

    def output(self, tail: int = 3000) -> str:
        return self.jvm.output(tail) if self.jvm is not None else ""

    def store_log(self, tail: int = 20000) -> str:
        """The broker's store log (HA and truncation lines), under ``user.home``."""
        path = self.workdir / "logs" / "rocketmqlogs" / "store.log"
        try:
            return path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""


def main(argv: Sequence[str] | None = None) -> int:
    """``python compat_tests/java5kit.py fetch`` (what .ci/run does), or ``start DIR`` to run a cluster by hand
    until Ctrl-C."""
    def start(d: Path) -> tuple[str, Callable[[], None]]:
        c = Reference5Cluster(d).start()
        return f"namesrv {c.namesrv_addr} broker {c.broker_addr} grpc {c.grpc_addr}", c.stop

    return kit_main(argv, "java5kit", __doc__.split("\n")[0],
                    ("fetch", "resolve the pinned 5.x artifacts into the cache",
                     lambda: f"RocketMQ {KIT5_VERSION} kit (client-java {CLIENT_JAVA_VERSION}) in {fetch_kit5()}"),
                    ("run a name server and a broker with the local-mode proxy until Ctrl-C", start), Kit5Error)


if __name__ == "__main__":
    raise SystemExit(main())
