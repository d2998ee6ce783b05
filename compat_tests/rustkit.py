"""The Rust RocketMQ (mxsm/rocketmq-rust) kit: its name server, broker and gRPC proxy, built from the Rust crate
registry into a cache outside the repository, and run on free loopback ports.

:func:`ensure_binaries` installs the pinned crates with ``cargo install --root $RMQD_CACHE/rust --version``
:data:`RUST_VERSION` when their binaries are missing (``rocketmq-namesrv`` -> ``rocketmq-namesrv-rust``,
``rocketmq-broker`` -> ``rocketmq-broker-rust``, ``rocketmq-proxy`` -> ``rocketmq-proxy-rust``). The first build
compiles several hundred crates: about an hour per crate on a 2-core machine, which it says before starting. The
proxy's build needs ``protoc`` (Debian's protobuf-compiler, installed with apt-get when missing). A missing
``cargo`` or a failed build raises :class:`RustKitError` naming the step.

:class:`RustCluster` runs a name server and a broker (TOML configuration, ASYNC_MASTER, ASYNC_FLUSH, the store in
its work directory); :class:`RustLocalProxy` the proxy in local mode: the gRPC MessagingService with an embedded
broker in one process (the Rust counterpart of the Java proxy's local mode; it registers with no name server),
whose remoting port takes the admin requests that create topics and groups.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from java5kit import cache_dir
from javakit import free_port_block
from serverproc import ServerProcess, kit_main, wait_broker_registered

RUST_VERSION = os.environ.get("RMQD_RUST_VERSION", "1.0.0")
#: crate -> the binary it installs
CRATES = {"rocketmq-namesrv": "rocketmq-namesrv-rust", "rocketmq-broker": "rocketmq-broker-rust",
          "rocketmq-proxy": "rocketmq-proxy-rust"}
BUILD_TIMEOUT = 3 * 3600.0
START_TIMEOUT = 60.0


class RustKitError(RuntimeError):
    """A step of building or starting the Rust kit failed; the message names the step."""


def rust_root() -> Path:
    return cache_dir() / "rust"


def binary(crate: str) -> Path:
    return rust_root() / "bin" / CRATES[crate]


def _ensure_protoc() -> None:
    if shutil.which("protoc"):
        return
    print("rustkit: the proxy's build needs protoc: apt-get install protobuf-compiler", flush=True)
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "protobuf-compiler"]):
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if res.returncode != 0:
            raise RustKitError(f"rustkit step '{' '.join(cmd)}' failed: {(res.stdout + res.stderr)[-2000:]}")


def ensure_binaries(crates: Sequence[str] = tuple(CRATES), timeout: float = BUILD_TIMEOUT) -> Path:
    """The binaries' directory, each crate of ``crates`` installed first when its binary is missing (a file
    lock keeps concurrent runs apart). Raises :class:`RustKitError`."""
    missing = [c for c in crates if not binary(c).is_file()]
    if not missing:
        return rust_root() / "bin"
    if shutil.which("cargo") is None:
        raise RustKitError("rustkit step 'cargo': `cargo` is not on PATH (the Rust RocketMQ binaries are built with "
                           f"`cargo install {' '.join(missing)}`; install a Rust toolchain, e.g. with rustup)")
    rust_root().mkdir(parents=True, exist_ok=True)
    with open(rust_root() / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for crate in missing:
            if binary(crate).is_file():
                continue
            if crate == "rocketmq-proxy":
                _ensure_protoc()
            print(f"rustkit: {CRATES[crate]} is missing: building {crate} {RUST_VERSION} with `cargo install "
                  f"--root {rust_root()}` (about an hour on a 2-core machine)", flush=True)
            log = rust_root() / f"build-{crate}.log"
            cmd = ["cargo", "install", "--locked", "--root", str(rust_root()), "--version", RUST_VERSION, crate]
            try:
                with open(log, "w") as out:
                    res = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise RustKitError(f"rustkit step 'cargo install {crate}' took over {timeout:.0f} s (log: {log})") \
                    from None
            if res.returncode != 0 or not binary(crate).is_file():
                tail = log.read_text(errors="replace")[-2500:]
                raise RustKitError(f"rustkit step 'cargo install {crate}' failed (log: {log}): {tail}")
    return rust_root() / "bin"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def toml_text(sections: Mapping[str, Mapping[str, object]], top: Mapping[str, object] | None = None) -> str:
    """A TOML document of plain tables (``{"broker.brokerIdentity": {...}}``)."""
    lines = [f"{k} = {_toml(v)}" for k, v in (top or {}).items()]
    for name, table in sections.items():
        lines.append(f"\n[{name}]")
        lines += [f"{k} = {_toml(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _process(name: str, workdir: Path, cmd: list[str], home: Path) -> ServerProcess:
    """One server process of the kit, its output in ``workdir/<name>.out``."""
    return ServerProcess(name, workdir, cmd, dict(os.environ, **_env(home)), "rustkit", RustKitError)


def _env(home: Path) -> dict[str, str]:
    # the binaries check that their listeners are loopback ones under this profile; RUST_LOG keeps the INFO
    # lines of every housekeeping round out of the benchmarks
    return {"ROCKETMQ_HOME": str(home), "ROCKETMQ_SECURITY_PROFILE": "development-insecure-loopback",
            "RUST_LOG": os.environ.get("RMQD_RUST_LOG", "warn")}


class RustCluster:
    """A Rust name server and broker in ``workdir`` on free loopback ports. ``broker`` / ``store`` add or replace
    keys of the broker TOML's ``[broker]`` / ``[store]`` tables (e.g. ``enableLmq``)."""

    def __init__(self, workdir: str | Path, broker: Mapping[str, object] | None = None,
                 store: Mapping[str, object] | None = None) -> None:
        self.workdir = Path(workdir)
        base = free_port_block(5)
        self.namesrv_port = base
        self.broker_port = base + 3            # the fast port is broker - 2, HA broker + 1
        self.namesrv_addr = f"127.0.0.1:{self.namesrv_port}"
        self.broker_addr = f"127.0.0.1:{self.broker_port}"
        store_dir = self.workdir / "store"
        self.broker_conf = {"namesrvAddr": self.namesrv_addr, "brokerIp1": "127.0.0.1",
                            "listenPort": self.broker_port, "storePathRootDir": str(store_dir),
                            "autoCreateTopicEnable": True, **(broker or {})}
        self.store_conf = {"storeType": "LocalFile", "brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH",
                           "storePathRootDir": str(store_dir), "haListenAddress": "127.0.0.1",
                           "haListenPort": self.broker_port + 1, **(store or {})}
        self.namesrv: Optional[ServerProcess] = None
        self.broker: Optional[ServerProcess] = None

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(p.pid for p in (self.namesrv, self.broker) if p is not None)

    def start(self, timeout: float = START_TIMEOUT) -> "RustCluster":
        bins = ensure_binaries(("rocketmq-namesrv", "rocketmq-broker"))
        deadline = time.monotonic() + timeout
        home = self.workdir / "home"
        (home / "conf").mkdir(parents=True, exist_ok=True)
        conf = home / "conf" / "broker.toml"
        conf.write_text(toml_text({"broker": self.broker_conf,
                                   "broker.brokerServerConfig": {"bindAddress": "127.0.0.1"},
                                   "broker.brokerIdentity": {"brokerName": "broker-a",
                                                             "brokerClusterName": "DefaultCluster", "brokerId": 0},
                                   "store": self.store_conf}))
        try:
            self.namesrv = _process("namesrv", self.workdir, [
                str(bins / CRATES["rocketmq-namesrv"]), "--listenPort", str(self.namesrv_port), "--bindAddress",
                "127.0.0.1", "--rocketmqHome", str(home)], home)
            self.namesrv.wait_port(self.namesrv_port, deadline)
            self.broker = _process("broker", self.workdir, [str(bins / CRATES["rocketmq-broker"]), "-c", str(conf)],
                                   home)
            self.broker.wait_port(self.broker_port, deadline)
            self._wait_registered(deadline)
        except BaseException:
            self.stop(timeout=5)
            raise
        return self

    def _wait_registered(self, deadline: float) -> None:
        if not wait_broker_registered(self.namesrv_addr, self.broker_addr, deadline):
            raise RustKitError("rustkit step 'broker registers with the name server': not within the start timeout: "
                               f"{self.broker.output() if self.broker else ''}")

    def stop(self, timeout: float = 20.0) -> None:
        for p in (self.broker, self.namesrv):
            if p is not None:
                p.stop(timeout)

    def __enter__(self) -> "RustCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RustLocalProxy:
    """The Rust proxy in local mode in ``workdir``: gRPC on ``grpc_addr``, its embedded broker's remoting port on
    ``broker_addr`` (for admin requests), the store in the work directory. ``proxy`` adds top-level keys or
    replaces tables of its TOML (e.g. ``{"session": {...}}``)."""

    def __init__(self, workdir: str | Path, proxy: Mapping[str, object] | None = None) -> None:
        self.workdir = Path(workdir)
        base = free_port_block(3)
        self.grpc_port, self.broker_port = base, base + 2
        self.grpc_addr = f"127.0.0.1:{self.grpc_port}"
        self.broker_addr = f"127.0.0.1:{self.broker_port}"
        self.conf: dict = {"mode": "local", "grpc": {"listenAddr": self.grpc_addr},
                           "local": {"brokerClusterName": "DefaultCluster", "brokerName": "broker-a",
                                     "brokerIp": "127.0.0.1", "brokerListenPort": self.broker_port,
                                     "storeRootDir": str(self.workdir / "store")}}
        for k, v in (proxy or {}).items():
            if isinstance(v, Mapping) and isinstance(self.conf.get(k), dict):
                self.conf[k].update(v)
            else:
                self.conf[k] = v
        self.proc: Optional[ServerProcess] = None

    @property
    def pids(self) -> tuple[int, ...]:
        return (self.proc.pid,) if self.proc is not None else ()

    def start(self, timeout: float = START_TIMEOUT) -> "RustLocalProxy":
        bins = ensure_binaries(("rocketmq-proxy",))
        deadline = time.monotonic() + timeout
        home = self.workdir / "home"
        (home / "conf").mkdir(parents=True, exist_ok=True)
        conf = home / "conf" / "proxy.toml"
        conf.write_text(toml_text({k: v for k, v in self.conf.items() if isinstance(v, dict)},
                                  {k: v for k, v in self.conf.items() if not isinstance(v, dict)}))
        try:
            self.proc = _process("proxy", self.workdir, [str(bins / CRATES["rocketmq-proxy"]), "-c", str(conf)],
                                 home)
            self.proc.wait_port(self.grpc_port, deadline)
            self.proc.wait_port(self.broker_port, deadline)
        except BaseException:
            self.stop(timeout=5)
            raise
        return self

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc is not None:
            self.proc.stop(timeout)

    def __enter__(self) -> "RustLocalProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """``python compat_tests/rustkit.py build`` (install what is missing) or ``start DIR`` (a name server and a
    broker until Ctrl-C)."""
    def start(d: Path) -> tuple[str, Callable[[], None]]:
        c = RustCluster(d).start()
        return f"namesrv {c.namesrv_addr} broker {c.broker_addr}", c.stop

    return kit_main(argv, "rustkit", __doc__.split("\n")[0],
                    ("build", "install the missing binaries with cargo",
                     lambda: f"Rust RocketMQ {RUST_VERSION} binaries in {ensure_binaries()}"),
                    ("run a name server and a broker until Ctrl-C", start), RustKitError)


if __name__ == "__main__":
    raise SystemExit(main())
