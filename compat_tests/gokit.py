"""The official Go RocketMQ clients in tests: our Go scenario programs, built at test time from the Go module proxy.

``compat_tests/go`` is a Go module (go.mod and go.sum pin github.com/apache/rocketmq-client-go/v2, the remoting
client, and github.com/apache/rocketmq-clients/golang/v5, the gRPC client); its ``cmd/*`` programs run one scenario
each and print one JSON line per event, as our Java programs do. :func:`go_programs` builds them with ``go build``
once per content hash (the module's sources, go.mod, go.sum and the Go version) into
``$RMQD_CACHE/go-bin/<hash>`` (``~/.cache/rmqd`` by default), fetching the modules through the module proxy
(``GOFLAGS=-mod=mod``) into Go's own module cache. The toolchain is never switched (``GOTOOLCHAIN=local``): a
module needing a newer Go fails the build, saying so.

Like the Java kits' tests, the Go tests are core tests: a missing ``go``, a module proxy that refuses or a failed
build fails them naming the step (:func:`require_go_programs`); they never skip. :func:`run_go` and
:func:`go_process` run a program with javakit's process wrappers (a hard timeout; events parsed from stdout).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Hashable, Mapping, Sequence

from java5kit import cache_dir
from javakit import JavaProcess, JavaRun, _run

GO_MODULE = Path(__file__).resolve().parent / "go"
PROGRAMS = ("remoting2", "grpc5", "grpcauth", "grpcload")
BUILD_TIMEOUT = 600.0          # a first build downloads the modules and compiles gRPC: minutes on a busy machine


class GoKitError(RuntimeError):
    """A step of building the Go programs failed; the message names the step."""


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["GOFLAGS"] = "-mod=mod -buildvcs=false"
    env["GOTOOLCHAIN"] = "local"
    return env


@lru_cache(maxsize=1)
def go_version() -> str:
    if shutil.which("go") is None:
        raise GoKitError("gokit step 'go': `go` is not on PATH (the Go client tests build their programs with it; "
                         ".ci/run installs Debian's golang when missing)")
    res = subprocess.run(["go", "version"], capture_output=True, text=True, timeout=60, env=_go_env())
    if res.returncode != 0:
        raise GoKitError(f"gokit step 'go version' failed: {res.stderr[-2000:]}")
    return res.stdout.strip()


def source_hash() -> str:
    """The hash of everything a build depends on: the module's files and the Go version."""
    digest = hashlib.sha256(go_version().encode())
    files = sorted(p for p in GO_MODULE.rglob("*") if p.is_file() and (p.suffix == ".go" or p.name in
                                                                        ("go.mod", "go.sum")))
    for p in files:
        digest.update(str(p.relative_to(GO_MODULE)).encode() + b"\0" + p.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def bin_dir() -> Path:
    return cache_dir() / "go-bin" / source_hash()


def _build_failure(step: str, res: subprocess.CompletedProcess) -> GoKitError:
    out = (res.stdout + res.stderr)[-3000:]
    if "go.mod requires go >=" in out or "toolchain" in out and "GOTOOLCHAIN=local" in out:
        return GoKitError(f"gokit step '{step}': a module needs a newer Go than {go_version()} (the toolchain is not "
                          f"switched; GOTOOLCHAIN=local): {out}")
    if any(s in out for s in ("proxy.golang.org", "dial tcp", "reading https://", "410 Gone", "404 Not Found",
                              "403 Forbidden", "verifying module", "no such host")):
        return GoKitError(f"gokit step '{step}' (module download through the Go module proxy) failed: {out}")
    return GoKitError(f"gokit step '{step}' failed: {out}")


def go_programs(timeout: float = BUILD_TIMEOUT) -> Path:
    """Build every program under ``compat_tests/go/cmd`` once per :func:`source_hash`; returns the directory that
    holds the binaries. A file lock keeps concurrent sessions apart. Raises :class:`GoKitError`."""
    out = bin_dir()
    if (out / ".done").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / ".done").exists():
            return out
        tmp = Path(tempfile.mkdtemp(prefix="build-", dir=out.parent))
        try:
            cmd = ["go", "build", "-trimpath", "-o", str(tmp) + os.sep, *[f"./cmd/{p}" for p in PROGRAMS]]
            try:
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=GO_MODULE,
                                     env=_go_env())
            except subprocess.TimeoutExpired:
                raise GoKitError(f"gokit step 'go build' took over {timeout:.0f} s (modules: "
                                 f"{GO_MODULE / 'go.mod'})") from None
            if res.returncode != 0:
                raise _build_failure("go build", res)
            missing = [p for p in PROGRAMS if not (tmp / p).is_file()]
            if missing:
                raise GoKitError(f"gokit step 'go build': no binary for {missing}")
            (tmp / ".done").write_text(go_version() + "\n")
            shutil.rmtree(out, ignore_errors=True)
            tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def require_go_programs() -> Path:
    """The binaries' directory; fails the calling test (never skips) naming the step that failed."""
    import pytest

    try:
        return go_programs()
    except GoKitError as exc:
        pytest.fail(str(exc), pytrace=False)


def go_command(program: str, *args: str) -> list[str]:
    return [str(require_go_programs() / program), *args]


def run_go(program: str, *args: str, timeout: float = 90.0, env: Mapping[str, str] | None = None) -> JavaRun:
    """Run one of our Go programs to its end with a hard timeout (JSON events on stdout, as javakit.run_java)."""
    return _run(go_command(program, *args), timeout, env, home=tempfile.gettempdir())


def run_go_all(jobs: Mapping[Hashable, Sequence[str]], timeout: float) -> dict[Hashable, JavaRun]:
    """Run many of our Go programs at once (``{key: [program, *args]}``), each with the hard ``timeout``: the
    scenarios mostly wait (delays, check-backs, rebalances), so together they take about as long as the longest."""
    from concurrent.futures import ThreadPoolExecutor

    require_go_programs()
    with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
        futures = {key: pool.submit(run_go, cmd[0], *cmd[1:], timeout=timeout) for key, cmd in jobs.items()}
        runs = {key: f.result() for key, f in futures.items()}
    keep = os.environ.get("RMQD_GO_EVENTS_DIR")
    if keep:                     # what each program printed, for reading after a run
        Path(keep).mkdir(parents=True, exist_ok=True)
        for key, run in runs.items():
            name = "-".join(map(str, key if isinstance(key, tuple) else (key,)))
            (Path(keep) / f"{name}.out").write_text(run.stdout + "\n--- stderr\n" + run.stderr)
    return runs


def go_process(program: str, *args: str, env: Mapping[str, str] | None = None) -> JavaProcess:
    """One of our Go programs in the background (javakit.JavaProcess: events read as they come)."""
    return JavaProcess(program, env=env, cmd=go_command(program, *args))


def main() -> int:
    """``python compat_tests/gokit.py build``: build the programs into the cache (what .ci/run may do up front)."""
    import sys

    try:
        print(go_programs())
    except GoKitError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
