"""Hosts with their own addresses for the network fault tests: each name server, controller and broker runs in a
network namespace of its own, joined by veth pairs to one bridge, and the faults are real ones on those links.

* :class:`NetKit` makes a bridge (``rqb<N>``) with the address ``198.18.<N>.1/24`` in this (the test's) namespace,
  which is the clients' host, and :meth:`NetKit.add_host` one namespace per server with ``198.18.<N>.<k>``
  (198.18.0.0/15 is the range set aside for network tests, RFC 2544; nothing else on the machine uses it). A
  server is started with :attr:`Host.wrap` (``ip netns exec NS``) before its command.
* Faults, all as rules inside the hosts' own namespaces (so deleting the namespace deletes them):
  :meth:`~NetKit.partition` (both ways, DROP: no reset, as a cut cable), :meth:`~NetKit.drop_one_way`,
  :meth:`~NetKit.loss` (iptables ``statistic --mode random``), :meth:`~NetKit.delay` (200 ms and reordering by
  holding packets on an NFQUEUE, compat_tests/nfq_delay.py), :meth:`~NetKit.link` / :meth:`~NetKit.flap` (the
  host's interface down and up). :meth:`~NetKit.heal` lifts every fault.
* **No netem.** This kernel is built without ``sch_netem`` (``tc qdisc add ... netem`` answers "Specified qdisc
  kind is unknown"), so latency and reordering come from the NFQUEUE delayer above and loss from iptables'
  ``statistic`` match: packet-level faults on the real link, not a TCP proxy.
* :meth:`NetKit.close` removes everything it made (processes left in its namespaces, the namespaces with their
  rules and veths, the bridge); it runs at exit too, and a new NetKit first removes what a killed run left
  (its owner process is gone).

Needs root, iproute2's ``ip netns`` and Debian's ``iptables`` package (``iptables-legacy``: this kernel has the
legacy x_tables with the statistic match and the NFQUEUE target); :func:`missing_capability` names what is missing
and :func:`require_netns` fails the calling test with it (never a skip).
"""
from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence, Union

IPTABLES = "iptables-legacy"
STATE_DIR = Path("/run/rmqd-netkit")
NFQ_DELAY = Path(__file__).resolve().parent / "nfq_delay.py"
CMD_TIMEOUT = 20.0


class NetkitError(RuntimeError):
    """A step of making the hosts or a fault failed; the message names the command and its answer."""


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=CMD_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise NetkitError(f"`{' '.join(cmd)}` took over {CMD_TIMEOUT:.0f} s") from None
    if check and res.returncode != 0:
        raise NetkitError(f"`{' '.join(cmd)}` failed ({res.returncode}): {(res.stderr or res.stdout).strip()}")
    return res


def missing_capability() -> Optional[str]:
    """What the network tests need and this machine lacks (None: nothing): root, ``ip netns``, a bridge,
    ``iptables-legacy`` with the statistic match and the NFQUEUE target."""
    if os.geteuid() != 0:
        return "netkit needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN: network namespaces, veth, iptables)"
    if shutil.which("ip") is None:
        return "netkit needs iproute2's `ip` (Debian's iproute2 package) for `ip netns`"
    if shutil.which(IPTABLES) is None:
        return (f"netkit needs `{IPTABLES}` (Debian's iptables package; .ci/run installs it): partitions and loss "
                "are iptables rules in the hosts' namespaces")
    probe = f"rqprobe{os.getpid()}"
    res = _run("ip", "netns", "add", probe, check=False)
    if res.returncode != 0:
        return f"netkit needs `ip netns` (network namespaces): `ip netns add` answered {res.stderr.strip()!r}"
    try:
        for rule, what in ((["-A", "OUTPUT", "-m", "statistic", "--mode", "random", "--probability", "0.05",
                             "-j", "DROP"], "the iptables statistic match (random loss)"),
                           (["-A", "OUTPUT", "-p", "tcp", "--dport", "1", "-j", "NFQUEUE", "--queue-num", "0"],
                            "the iptables NFQUEUE target (latency and reordering)")):
            res = _run("ip", "netns", "exec", probe, IPTABLES, *rule, check=False)
            if res.returncode != 0:
                return f"netkit needs {what}: {IPTABLES} answered {res.stderr.strip()!r}"
    finally:
        _run("ip", "netns", "del", probe, check=False)
    return None


def require_netns() -> None:
    """Fail the calling test (never skip) naming the missing capability."""
    import pytest

    reason = missing_capability()
    if reason:
        pytest.fail(reason, pytrace=False)


@dataclass
class Host:
    """One server's host: a network namespace with ``ip`` on the kit's bridge."""

    name: str
    ns: str
    ip: str
    veth: str                                   # the root side of its veth pair (on the bridge)
    delayers: list = field(default_factory=list)

    @property
    def wrap(self) -> tuple[str, ...]:
        """The prefix that runs a command on this host."""
        return ("ip", "netns", "exec", self.ns)

    def run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        return _run(*self.wrap, *cmd, check=check)

    def iptables(self, *rule: str) -> None:
        self.run(IPTABLES, "-w", "5", *rule)


#: a side of a partition: hosts, or CLIENT for the test's own namespace (where producers and consumers run)
CLIENT = "client"
Side = Iterable[Union[Host, str]]


def _owner_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class NetKit:
    """See the module docstring. Use as a context manager (or call :meth:`close`)."""

    def __init__(self) -> None:
        reason = missing_capability()
        if reason:
            raise NetkitError(reason)
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self.hosts: dict[str, Host] = {}
        self._closed = False
        self._flappers: list[threading.Event] = []
        self._lock = threading.Lock()
        with open(STATE_DIR / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._sweep_stale()
            self.net = self._free_net()
            (STATE_DIR / f"{self.net}.pid").write_text(str(os.getpid()))
        self.bridge = f"rqb{self.net}"
        self.client_ip = f"198.18.{self.net}.1"
        atexit.register(self.close)
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "addr", "add", f"{self.client_ip}/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ set-up and removal
    @staticmethod
    def _free_net() -> int:
        used = _run("ip", "-o", "-4", "addr").stdout
        links = _run("ip", "-o", "link", "show").stdout
        taken = {int(p.name.split(".")[0]) for p in STATE_DIR.glob("*.pid")}
        for n in range(10, 250):
            if n not in taken and f"198.18.{n}." not in used and f" rq{n}v" not in links and f" rqb{n}:" not in links:
                return n
        raise NetkitError("no free 198.18.N.0/24 for the hosts' bridge")

    @staticmethod
    def _sweep_stale() -> None:
        """Remove what a run that died without closing left (its pid file names a process that is gone)."""
        for pid_file in STATE_DIR.glob("*.pid"):
            net = int(pid_file.name.split(".")[0])
            try:
                owner = int(pid_file.read_text().strip() or 0)
            except (OSError, ValueError):
                owner = 0
            if owner and _owner_alive(owner):
                continue
            _remove_net(net)
            pid_file.unlink(missing_ok=True)

    def add_host(self, name: str) -> Host:
        """A namespace ``rq<N>-<name>`` with loopback up and ``eth0`` on the bridge at the next address."""
        k = len(self.hosts) + 11
        ns = f"rq{self.net}-{name}"
        host = Host(name, ns, f"198.18.{self.net}.{k}", f"rq{self.net}v{k}")
        self.hosts[name] = host
        inner = f"rq{self.net}i{k}"
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", inner)
        _run("ip", "link", "set", inner, "netns", ns)
        _run("ip", "link", "set", host.veth, "master", self.bridge)
        _run("ip", "link", "set", host.veth, "up")
        host.run("ip", "link", "set", inner, "name", "eth0")
        host.run("ip", "addr", "add", f"{host.ip}/24", "dev", "eth0")
        host.run("ip", "link", "set", "lo", "up")
        host.run("ip", "link", "set", "eth0", "up")
        return host

    def __enter__(self) -> "NetKit":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Lift every fault, end what still runs in the hosts, remove the namespaces and the bridge."""
        if self._closed:
            return
        self._closed = True
        for stop in self._flappers:
            stop.set()
        for host in self.hosts.values():
            self._stop_delayers(host)
        _remove_net(self.net)
        (STATE_DIR / f"{self.net}.pid").unlink(missing_ok=True)

    # ------------------------------------------------------------------ faults
    def _ips(self, side: Side) -> list[str]:
        return [self.client_ip if h == CLIENT else h.ip for h in side]

    def partition(self, side_a: Side, side_b: Side) -> None:
        """Nothing passes between the two sides, either way (packets dropped: no reset, no ICMP)."""
        side_a, side_b = list(side_a), list(side_b)
        for here, there in ((side_a, side_b), (side_b, side_a)):
            for host in here:
                if host == CLIENT:
                    continue
                for ip in self._ips(there):
                    host.iptables("-A", "OUTPUT", "-d", ip, "-j", "DROP")
                    host.iptables("-A", "INPUT", "-s", ip, "-j", "DROP")

    def isolate(self, host: Host, clients_too: bool = True) -> None:
        """``host`` cut off from every other host (and from the clients with ``clients_too``)."""
        others = [h for h in self.hosts.values() if h is not host] + ([CLIENT] if clients_too else [])
        self.partition([host], others)

    def drop_one_way(self, src: Host, dst: Union[Host, str]) -> None:
        """Every packet from ``src`` to ``dst`` is lost; the other way works (asymmetric loss)."""
        src.iptables("-A", "OUTPUT", "-d", self._ips([dst])[0], "-j", "DROP")

    def loss(self, host: Host, probability: float) -> None:
        """Each packet ``host`` sends (to another host or a client) is lost with ``probability``."""
        host.iptables("-A", "OUTPUT", "-o", "eth0", "-m", "statistic", "--mode", "random", "--probability",
                      f"{probability:.4f}", "-j", "DROP")

    def delay(self, host: Host, ms: float = 200.0, reorder: float = 0.0, port: Optional[int] = None,
              queue: int = 0) -> None:
        """Every TCP packet ``host`` sends (with ``port``: only those from or to that port, e.g. its HA port) is
        held ``ms`` before it goes on; with ``reorder`` that share goes at once, overtaking the held ones."""
        proc = subprocess.Popen([*host.wrap, sys.executable, str(NFQ_DELAY), "--queue", str(queue), "--delay-ms",
                                 str(ms), "--reorder", str(reorder)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        host.delayers.append(proc)
        line = proc.stdout.readline()
        if line.strip() != "ready":
            self._stop_delayers(host)
            raise NetkitError(f"the NFQUEUE delayer on {host.name} did not start: {line}{proc.stdout.read()}")
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        match = ["-o", "eth0", "-p", "tcp"]
        rules = [match + ["--sport", str(port)], match + ["--dport", str(port)]] if port else [match]
        for rule in rules:
            host.iptables("-A", "OUTPUT", *rule, "-j", "NFQUEUE", "--queue-num", str(queue))

    def link(self, host: Host, up: bool) -> None:
        host.run("ip", "link", "set", "eth0", "up" if up else "down")

    def flap(self, host: Host, down_s: float = 1.0, up_s: float = 1.0, duration_s: float = 6.0) -> threading.Event:
        """``host``'s link goes down for ``down_s`` and up for ``up_s`` over ``duration_s`` (a thread; returns the
        event that stops it early). The link is up when it ends."""
        stop = threading.Event()
        self._flappers.append(stop)

        def run() -> None:
            end = time.monotonic() + duration_s
            try:
                while not stop.is_set() and time.monotonic() < end:
                    self.link(host, False)
                    stop.wait(down_s)
                    self.link(host, True)
                    stop.wait(up_s)
            finally:
                if not self._closed:
                    self.link(host, True)
        threading.Thread(target=run, name=f"flap-{host.name}", daemon=True).start()
        return stop

    def _stop_delayers(self, host: Host) -> None:
        for proc in host.delayers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        host.delayers.clear()

    def heal(self, hosts: Optional[Sequence[Host]] = None) -> None:
        """Lift every fault on ``hosts`` (default: all): rules flushed, delayers stopped, links up."""
        for stop in self._flappers:
            stop.set()
        self._flappers.clear()
        for host in hosts or list(self.hosts.values()):
            host.iptables("-F", "OUTPUT")
            host.iptables("-F", "INPUT")
            self._stop_delayers(host)
            self.link(host, True)


def _running(pid: str) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its parent does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _remove_net(net: int) -> None:
    """Every namespace ``rq<net>-*`` (first ending the processes still in it) and the bridge ``rqb<net>``."""
    listing = _run("ip", "netns", "list", check=False).stdout
    for line in listing.splitlines():
        ns = line.split()[0] if line.split() else ""
        if not ns.startswith(f"rq{net}-"):
            continue
        pids = _run("ip", "netns", "pids", ns, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        deadline = time.monotonic() + 10
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if _running(p)]
            time.sleep(0.05)
        _run("ip", "netns", "del", ns, check=False)
    # the root ends of the veth pairs: a namespace's removal takes its end (and so the pair) with it, but the kernel
    # does that asynchronously and a dying namespace can linger; deleting the root end removes the pair now
    for line in _run("ip", "-o", "link", "show", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if line.count(":") >= 2 else ""
        if name == f"rqb{net}" or name.startswith(f"rq{net}v"):
            _run("ip", "link", "del", name, check=False)
