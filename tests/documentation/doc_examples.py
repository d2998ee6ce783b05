"""The documentation's code examples, found and run (the rules are in docs/development.md, "Documentation").

- :func:`doc_files` / :func:`blocks_of`: the fenced blocks of README.md, BENCHMARKS.md, RELIABILITY.md and
  docs/**/*.md, with their language, first line and ``# no-run: <why>`` reason.
- :class:`PageRun`: one page's scratch directory (also ``$HOME``), free ports, the servers its blocks start, and
  how each kind of block runs (bash, a Python script, in-process Spark, the 5.x client's venv, javac + java).
"""
from __future__ import annotations

import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parents[2]
RUNNABLE = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python", "py": "python", "java": "java"}
BLOCK_TIMEOUT_S = 240.0
READY_TIMEOUT_S = 60.0

# documented default port -> the page's port of that name
DOC_PORTS = {9876: "namesrv", 10911: "broker", 10909: "vip", 8080: "console", 8081: "grpc", 5557: "metrics",
             8088: "console2"}
PORT_RE = re.compile(r"(?:(?<=127\.0\.0\.1:)|(?<=localhost:)|(?<=port )|(?<=port=))(%s)\b"
                     % "|".join(map(str, DOC_PORTS)))
SERVER_RE = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*rmqd\s+(serve|namesrv|broker|console|proxy)\b")
NO_RUN_RE = re.compile(r"^\s*(?:#|//)\s*no-run:\s*(?P<why>.+)$")
FILE_RE = re.compile(r"^#\s*file:\s*(?P<name>[\w.-]+)\s*$")
FENCE_RE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
SPARK_RE = re.compile(r"\bpyspark\b|\bSparkSession\b")
CLIENT5_RE = re.compile(r"^from rocketmq import .*\bClientConfiguration\b", re.M)
NEEDS_SERVER_RE = re.compile(r"rmqd admin|\bmqadmin\b|" + PORT_RE.pattern)


@dataclass
class Block:
    path: Path
    line: int                       # the opening fence's line, 1-based
    lang: str                       # sh, python or java
    code: str
    no_run: Optional[str] = None

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}-{self.lang}"


def doc_files() -> list[Path]:
    """Every Markdown file the site shows or the repository's front page is."""
    files = [REPO / "README.md", REPO / "BENCHMARKS.md", REPO / "RELIABILITY.md"]
    files += sorted((REPO / "docs").rglob("*.md"))
    return [f for f in files if f.is_file()]


def blocks_of(path: Path) -> list[Block]:
    """The runnable blocks (sh, python, java) of one Markdown file, in order."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE_RE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = len(m.group("indent")), m.group("fence")
        lang = (m.group("info").split() or [""])[0].lower()
        start = i
        body = []
        i += 1
        closing = re.compile(r"\s*%s{%d,}\s*" % (re.escape(fence[0]), len(fence)))
        while i < len(lines) and not closing.fullmatch(lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1
        if lang in RUNNABLE:
            code = "\n".join(body) + "\n"
            first = next((ln for ln in body if ln.strip()), "")
            m_no = NO_RUN_RE.match(first)
            out.append(Block(path, start + 1, RUNNABLE[lang], code, m_no.group("why").strip() if m_no else None))
    return out


def all_blocks() -> list[Block]:
    return [b for f in doc_files() for b in blocks_of(f)]


# ------------------------------------------------------------------------------------------------ ports
def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# below the kernel's ephemeral range (32768-60999 by default): a port the runner picks is never taken meanwhile
# by the local end of some outgoing connection
PORT_RANGE = (20000, 32000)


#: a controller's Raft port is its own + controllerRaftPortOffset (rmqd/controller/config.py)
RAFT_PORT_OFFSET = 1000


def ports_the_page_names(text: str) -> set[int]:
    """Port numbers a page's examples use as they are (not substituted: e.g. a controller at 127.0.0.1:19878) and
    the Raft ports those imply (+1000): the page's own servers must not take them (one did: 20878, the Raft port
    of the example's controller at 19878, which then could not bind it)."""
    named = {int(n) for n in re.findall(r"(?<![\d.])(\d{4,5})(?![\d.])", text) if 1024 <= int(n) <= 65535}
    return named | {n + RAFT_PORT_OFFSET for n in named}


def _any_port(rng: random.Random, avoid: "set[int] | frozenset[int]" = frozenset()) -> int:
    while True:
        p = rng.randrange(*PORT_RANGE)
        if p not in avoid and _free(p):
            return p


def page_ports(avoid: "set[int] | frozenset[int]" = frozenset()) -> dict[str, int]:
    """Free ports for one page: the broker's with its VIP (port-2) and HA (port+1) ports and room for a second
    broker of ``--brokers 2`` (port+10, its -2 and +1), and the metrics port with port+1 (that broker's); none of
    them (or the neighbours they imply) in ``avoid``."""
    rng = random.Random()
    ports: dict[str, int] = {}
    for _ in range(200):
        p = _any_port(rng, avoid)
        if all(_free(p + d) and p + d not in avoid for d in (-2, 1, 8, 10, 11)):
            ports["broker"], ports["vip"] = p, p - 2
            break
    else:
        raise RuntimeError("no free broker port window found")
    taken = {ports["broker"] + d for d in range(-2, 12)}
    for name in ("namesrv", "console", "grpc", "metrics", "console2"):
        while True:
            p = _any_port(rng, avoid)
            if not {p, p + 1} & (taken | avoid) and (name != "metrics" or _free(p + 1)):
                break
        ports[name] = p
        taken.update({p, p + 1})
    return ports


def substitute_ports(text: str, ports: dict[str, int]) -> str:
    """Documented default ports (after ``127.0.0.1:``, ``localhost:``, ``port `` or ``port=``) -> the page's."""
    return PORT_RE.sub(lambda m: str(ports[DOC_PORTS[int(m.group(1))]]), text)


# ------------------------------------------------------------------------------------------------ servers
@dataclass
class Server:
    command: str
    kind: str
    proc: subprocess.Popen
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    ready_line: str = ""

    def pump(self) -> None:
        def read(stream, sink, watch):
            for line in stream:
                sink.append(line)
                if watch and line.startswith("rmqd ready:"):
                    self.ready_line = line.strip()
                    self.ready.set()
            if watch:
                self.ready.set()                 # stdout closed: the process is exiting
        threading.Thread(target=read, args=(self.proc.stdout, self.out, True), daemon=True).start()
        threading.Thread(target=read, args=(self.proc.stderr, self.err, False), daemon=True).start()

    def tail(self) -> str:
        return f"$ {self.command}\nstdout:\n{''.join(self.out)[-3000:]}\nstderr:\n{''.join(self.err)[-3000:]}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def _logical_lines(code: str) -> list[tuple[int, str]]:
    """(index of the first physical line, the command with ``\\`` continuations joined), skipping blank and
    comment-only lines."""
    out, buf, first = [], "", None
    for i, line in enumerate(code.splitlines()):
        if first is None:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            first = i
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        out.append((first, buf + line))
        buf, first = "", None
    return out


def _has_option(argv: str, *names: str) -> bool:
    return any(re.search(r"(?:^|\s)%s(?:[\s=]|$)" % re.escape(n), argv) for n in names)


def server_options(kind: str, command: str, ports: dict[str, int]) -> list[str]:
    """The port options the runner adds to a server command that does not give them."""
    wanted = {
        "serve": [("--namesrv-port", "namesrv"), ("--broker-port", "broker"), ("--grpc-port", "grpc"),
                  ("--console-port", "console"), ("--metrics-port", "metrics")],
        "broker": [("--broker-port", "broker"), ("--grpc-port", "grpc")],
        "namesrv": [("--port", "namesrv")],
        "console": [("--port", "console")],
        "proxy": [("--grpc-port", "grpc")],
    }[kind]
    extra = []
    for option, name in wanted:
        aliases = (option, "--namesrv-port") if kind == "namesrv" else (option,)
        if not _has_option(command, *aliases):
            extra += [option, str(ports[name])]
    return extra


# ------------------------------------------------------------------------------------------------ a page
class PageRun:
    """The state of one page's run: scratch directory (= $HOME), ports, servers."""

    def __init__(self, path: Path, scratch: Path) -> None:
        self.path = path
        self.dir = scratch
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ports = page_ports(ports_the_page_names(path.read_text(encoding="utf-8")))
        self.servers: list[Server] = []
        self.bin = self.dir / ".doc-bin"
        self.bin.mkdir(exist_ok=True)
        self._write_shims()

    def _write_shims(self) -> None:
        """``rmqd`` and ``python3`` run this suite's interpreter and tree; ``mqadmin`` is the Java kit's."""
        shims = {"rmqd": f'exec "{sys.executable}" -m rmqd.runtime.cli "$@"',
                 "python3": f'exec "{sys.executable}" "$@"',
                 "python": f'exec "{sys.executable}" "$@"'}
        kit = _kit()
        if kit is not None:
            shims["mqadmin"] = f'exec "{kit / "bin" / "mqadmin"}" "$@"'
        for name, body in shims.items():
            p = self.bin / name
            p.write_text(f"#!/bin/sh\n{body}\n")
            p.chmod(0o755)

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(HOME=str(self.dir), PATH=f"{self.bin}{os.pathsep}{env.get('PATH', '')}",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")])),
                   PYTHONUNBUFFERED="1")
        env.pop("ROCKETMQ_HOME", None)
        return env

    def describe_servers(self) -> str:
        return "\n".join(s.tail() for s in self.servers) or "(no server running)"

    # -- servers
    def start_server(self, command: str, kind: str) -> Server:
        if kind in ("serve", "namesrv"):
            self.stop_servers()
        full = command + " " + " ".join(shlex.quote(o) for o in server_options(kind, command, self.ports))
        proc = subprocess.Popen(["bash", "-c", f"exec {full}"], cwd=self.dir, env=self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        server = Server(full, kind, proc)
        server.pump()
        self.servers.append(server)
        if not server.ready.wait(READY_TIMEOUT_S) or not server.ready_line:
            raise AssertionError(f"server did not get ready in {READY_TIMEOUT_S:.0f} s\n{server.tail()}")
        return server

    def ensure_server(self) -> None:
        if not any(s.proc.poll() is None for s in self.servers):
            self.start_server("rmqd serve", "serve")

    def stop_servers(self) -> None:
        for server in reversed(self.servers):
            server.stop()
        self.servers.clear()

    # -- blocks
    def run(self, block: Block, spark: Callable[[], object], py5: Callable[[], str]) -> None:
        code = substitute_ports(block.code, self.ports)
        if block.lang == "sh":
            self._run_sh(code, spark)
        elif block.lang == "python":
            self._run_python(block, code, spark, py5)
        else:
            self._run_java(code)

    def needs_default_server(self, block: Block) -> bool:
        if block.lang == "java":
            return True
        if block.lang == "sh" and self._server_line(block.code) is not None:
            return False
        return bool(NEEDS_SERVER_RE.search(block.code))

    @staticmethod
    def _server_line(code: str) -> Optional[tuple[int, str, str]]:
        lines = _logical_lines(code)
        if not lines:
            return None
        first, last = lines[-1]
        m = SERVER_RE.match(last.strip())
        return (first, last.strip(), m.group(1)) if m else None

    def _bash(self, script: str, timeout: float = BLOCK_TIMEOUT_S) -> None:
        res = subprocess.run(["bash", "-c", "set -e -o pipefail\n" + script], cwd=self.dir, env=self.env,
                             capture_output=True, text=True, timeout=timeout, start_new_session=True)
        sys.stdout.write(res.stdout)
        assert res.returncode == 0, (f"exit {res.returncode}\n$ {script}\nstdout:\n{res.stdout[-4000:]}\n"
                                     f"stderr:\n{res.stderr[-4000:]}\n--- servers:\n{self.describe_servers()}")

    def _run_sh(self, code: str, spark: Callable[[], object]) -> None:
        server = self._server_line(code)
        if server is not None:
            first, command, kind = server
            before = "\n".join(code.splitlines()[:first])
            if before.strip():
                self._bash(before)
            self.start_server(command, kind)
            return
        lines = _logical_lines(code)
        if not any(cmd.strip().startswith("rmqd pipeline ") for _, cmd in lines):
            self._bash(code)
            return
        # `rmqd pipeline` lines run in this process on the suite's SparkSession, the others in bash, in order
        pending: list[str] = []
        for _, cmd in lines:
            if cmd.strip().startswith("rmqd pipeline "):
                if pending:
                    self._bash("\n".join(pending))
                    pending = []
                self._pipeline(cmd, spark())
            else:
                pending.append(cmd)
        if pending:
            self._bash("\n".join(pending))

    def _pipeline(self, command: str, session: object) -> None:
        from rmqd.pipeline.cli import main as pipeline_main
        with _in_dir_and_home(self.dir):
            argv = [os.path.expanduser(a) for a in shlex.split(command, comments=True)]
            rc = pipeline_main(argv[2:], spark=session)
        assert rc == 0, f"$ {command}: exit {rc}\n--- servers:\n{self.describe_servers()}"

    def _run_python(self, block: Block, code: str, spark: Callable[[], object], py5: Callable[[], str]) -> None:
        first = next((ln for ln in code.splitlines() if ln.strip()), "")
        m = FILE_RE.match(first)
        name = m.group("name") if m else f"block_{block.line}.py"
        script = self.dir / name
        script.write_text(code)
        if SPARK_RE.search(code):
            spark()                                     # the suite's session, made active
            with _in_dir_and_home(self.dir):
                exec(compile(code, f"{block.id}", "exec"), {"__name__": "__main__"})
            return
        python = py5() if CLIENT5_RE.search(code) else sys.executable
        env = self.env
        if python != sys.executable:
            env.pop("PYTHONPATH", None)                 # the 5.x client's venv: nothing of this suite
        res = subprocess.run([python, str(script)], cwd=self.dir, env=env, capture_output=True, text=True,
                             timeout=BLOCK_TIMEOUT_S)
        sys.stdout.write(res.stdout)
        assert res.returncode == 0, (f"exit {res.returncode}\nstdout:\n{res.stdout[-4000:]}\nstderr:\n"
                                     f"{res.stderr[-4000:]}\n--- servers:\n{self.describe_servers()}")

    def _run_java(self, code: str) -> None:
        javakit = _javakit()
        javakit.require_kit()
        m = re.search(r"public\s+(?:final\s+)?class\s+(\w+)", code)
        assert m, "a java block needs a public class with main"
        src = self.dir / "java" / f"{m.group(1)}.java"
        out = self.dir / "java" / "classes"
        out.mkdir(parents=True, exist_ok=True)
        src.write_text(code)
        res = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", javakit.classpath(), "-d", str(out),
                              str(src)], capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
        assert res.returncode == 0, f"javac failed:\n{res.stdout}\n{res.stderr}"
        cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *javakit.jdk17_opts(),
               "-cp", javakit.classpath(out), m.group(1)]
        res = subprocess.run(cmd, cwd=self.dir, env=self.env, capture_output=True, text=True,
                             timeout=BLOCK_TIMEOUT_S)
        sys.stdout.write(res.stdout)
        assert res.returncode == 0, (f"java {m.group(1)}: exit {res.returncode}\nstdout:\n{res.stdout[-4000:]}\n"
                                     f"stderr:\n{res.stderr[-4000:]}\n--- servers:\n{self.describe_servers()}")

    def close(self) -> None:
        self.stop_servers()


class _in_dir_and_home:
    """cwd and $HOME set to the page's directory, for what runs in this process (Spark blocks, pipeline jobs)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def __enter__(self) -> None:
        self.cwd, self.home = os.getcwd(), os.environ.get("HOME")
        os.chdir(self.directory)
        os.environ["HOME"] = str(self.directory)

    def __exit__(self, *exc: object) -> None:
        os.chdir(self.cwd)
        if self.home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = self.home


def _javakit():
    import javakit          # compat_tests/ (pyproject's pythonpath)
    return javakit


def _kit() -> Optional[Path]:
    return _javakit().kit_dir()


def py5_interpreter() -> str:
    """The RocketMQ 5.x Python client's venv (compat_tests/grpc/client5_env: made once, kept)."""
    import client5_env      # compat_tests/grpc/ (pyproject's pythonpath)
    return client5_env.py5_python()
