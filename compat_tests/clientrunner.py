"""Run RocketMQ C++-client scenario scripts in a subprocess, with a hard timeout.

The official C++ client (``librocketmq.so`` behind the ``rocketmq`` Python package) keeps
process-global state and background threads, logs into ``$HOME/logs/...`` and may crash on
shutdown (the 2.x build segfaults in ``PushConsumer.shutdown()``). So compat tests never import
it in the pytest process: they run a small *scenario script* with the interpreter of a venv
that has the client installed, and read what the script reports as JSON lines on stdout.

Example::

    from clientrunner import available_clients, run_client_script

    SCRIPT = '''
    from rocketmq.client import Producer, Message
    p = Producer('PG'); p.set_namesrv_addr(NAMESRV); p.start()
    m = Message('TopicTest'); m.set_tags('TagA'); m.set_body('hello')
    r = p.send_sync(m)
    emit(op='send', status=int(r.status), msg_id=r.msg_id, offset=r.offset)
    p.shutdown()
    '''

    for name, python in available_clients().items():      # {'cpp1': ..., 'cpp2': ...}
        res = run_client_script(python, SCRIPT, env={'NAMESRV': '127.0.0.1:9876'}, timeout=30)
        assert res.returncode == 0, res.stderr
        assert res.events == [{'op': 'send', 'status': 0, 'msg_id': ..., 'offset': 0}]

With ``prelude=True`` (the default) the script is prefixed with :data:`PRELUDE`, which
provides ``NAMESRV`` (from the env var of that name), ``emit(**fields)`` (prints one JSON line,
flushed), ``subscribe_raw(consumer, topic, expression, fn)`` (register a message callback whose
return value decides the status: ``False``/``1``/``'RECONSUME_LATER'`` or an exception →
RECONSUME_LATER; anything else (``True``/``None``/``0``) → CONSUME_SUCCESS. The wheel's own
``subscribe()`` re-raises exceptions inside the ctypes callback, so the status returned after an
exception is undefined), and ``wait_until(pred, timeout)``.

``compat_tests`` has no ``__init__.py``; tests next to this file can ``import clientrunner``
(pytest's default rootdir-relative import puts the test's directory on ``sys.path``).

The C++ client's logs are redirected into a fresh temporary directory: ``HOME`` is pointed there
(1.x logs to ``$HOME/logs/rocketmq-cpp/<pid>_rocketmq-cpp.log.N``) and
``ROCKETMQ_CLIENT_LOG_DIR`` too (2.x honours it). The directory is removed after the run unless
``keep_logs=True``; ``result.log_text()`` returns the concatenated logs while they exist
(the text is also captured into ``result.client_log`` before cleanup).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping

REPO = Path(__file__).resolve().parent.parent

PRELUDE = '''\
import json as _json, os as _os, sys as _sys, time as _time
NAMESRV = _os.environ.get('NAMESRV', '127.0.0.1:9876')

def emit(**fields):
    """Report one event to the runner as a JSON line on stdout."""
    _sys.stdout.write(_json.dumps(fields, default=repr) + '\\n')
    _sys.stdout.flush()

def wait_until(pred, timeout=10.0, interval=0.05):
    end = _time.time() + timeout
    while _time.time() < end:
        if pred():
            return True
        _time.sleep(interval)
    return bool(pred())

def subscribe_raw(consumer, topic, expression, fn):
    """Subscribe with a callback fn(RecvMessage) whose result is the consume status.

    False/1/'RECONSUME_LATER' -> reconsume later; anything else (True/None/0) -> success;
    an exception -> reconsume later (reported via emit(op='callback_error')).
    """
    from rocketmq.client import RecvMessage
    from rocketmq.ffi import dll
    def _cb(_consumer, handle):
        try:
            r = fn(RecvMessage(handle))
        except BaseException as e:  # never let an exception escape into C++
            emit(op='callback_error', error=repr(e))
            return 1
        if r is True or r is None:  # check bools by identity: True == 1, False == 0
            return 0
        if r is False or r == 1 or r == 'RECONSUME_LATER':
            return 1
        return 0
    dll.Subscribe(consumer._handle, topic.encode(), expression.encode())
    consumer._register_callback(_cb)
'''


class ClientRun(subprocess.CompletedProcess):
    """CompletedProcess plus parsed JSON events, timeout flag and the client log dir."""

    def __init__(self, args, returncode, stdout, stderr, *, events, timed_out, log_dir,
                 client_log):
        super().__init__(args, returncode, stdout, stderr)
        self.events: list[dict] = events
        self.timed_out: bool = timed_out
        self.log_dir: str = log_dir
        self.client_log: str = client_log

    @property
    def crashed(self) -> bool:
        """Killed by a signal other than our own timeout kill (e.g. SIGSEGV = -11)."""
        return self.returncode < 0 and not self.timed_out

    def events_of(self, op: str) -> list[dict]:
        return [e for e in self.events if e.get("op") == op]

    def log_text(self) -> str:
        if os.path.isdir(self.log_dir):
            return _read_logs(self.log_dir)
        return self.client_log

    def __repr__(self) -> str:
        return (f"ClientRun(rc={self.returncode}, timed_out={self.timed_out}, "
                f"events={len(self.events)}, log_dir={self.log_dir!r})")


def parse_json_lines(text: str) -> list[dict]:
    """JSON objects printed one per line; anything else (client noise) is ignored."""
    events = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            events.append(obj)
    return events


def _read_logs(log_dir: str, limit: int = 2_000_000) -> str:
    chunks = []
    for p in sorted(Path(log_dir).rglob("*")):
        if p.is_file() and ("rocketmq" in p.name or p.suffix == ".log" or ".log." in p.name):
            try:
                chunks.append(f"==> {p} <==\n" + p.read_text(errors="replace"))
            except OSError:
                pass
    return "\n".join(chunks)[-limit:]


def run_client_script(python_exe: str, script: str, env: Mapping[str, str] | None = None,
                      timeout: float = 60.0, *, args: Iterable[str] = (), prelude: bool = True,
                      keep_logs: bool = False, cwd: str | None = None) -> ClientRun:
    """Run ``script`` with ``python_exe -c`` in its own session; kill it after ``timeout`` s.

    ``env`` is added on top of ``os.environ`` (then HOME/ROCKETMQ_CLIENT_LOG_DIR are pointed to a
    temp dir unless ``env`` sets them). ``script`` is dedented. Returns a :class:`ClientRun`;
    never raises on non-zero exit or timeout (``timed_out`` is set and returncode is -9).
    """
    log_dir = tempfile.mkdtemp(prefix="rmqd-client-")
    full_env = dict(os.environ)
    full_env.update({"HOME": log_dir, "ROCKETMQ_CLIENT_LOG_DIR": os.path.join(log_dir, "logs"),
                     "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    if env:
        full_env.update({k: str(v) for k, v in env.items()})
    code = textwrap.dedent(script)
    if prelude:
        code = PRELUDE + "\n" + code
    argv = [python_exe, "-c", code, *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env,
                            cwd=cwd or log_dir, start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
    stdout = out.decode("utf-8", "replace")
    stderr = err.decode("utf-8", "replace")
    client_log = _read_logs(log_dir)
    if not keep_logs:
        shutil.rmtree(log_dir, ignore_errors=True)
    return ClientRun([python_exe, "-c", "<script>", *args], proc.returncode, stdout, stderr,
                     events=parse_json_lines(stdout), timed_out=timed_out, log_dir=log_dir,
                     client_log=client_log)


@lru_cache(maxsize=None)
def _has_client(python_exe: str) -> bool:
    if not os.path.exists(python_exe):
        return False
    try:
        cp = subprocess.run([python_exe, "-c", "import rocketmq.client"], capture_output=True,
                            timeout=30, env=dict(os.environ, HOME=tempfile.gettempdir()))
    except (OSError, subprocess.TimeoutExpired):
        return False
    return cp.returncode == 0


def available_clients(require_import: bool = True) -> dict[str, str]:
    """Interpreters with a usable C++ client, keyed ``'cpp1'`` / ``'cpp2'``.

    cpp1: ``$RMQD_CPP1_PYTHON`` or ``<repo>/.venv/bin/python`` (wheel rocketmq==0.4.4,
    librocketmq 1.0.1). cpp2: ``$RMQD_CPP2_PYTHON`` or ``<repo>/.venv-cpp2/bin/python``
    (sdist rocketmq-python-cvs==2.1.0.3, librocketmq "2.1.0_cvs"). Missing ones are omitted.
    With ``require_import`` the interpreter must be able to ``import rocketmq.client``
    (checked once per process, in a subprocess).
    """
    candidates = {
        "cpp1": os.environ.get("RMQD_CPP1_PYTHON") or str(REPO / ".venv" / "bin" / "python"),
        "cpp2": os.environ.get("RMQD_CPP2_PYTHON") or str(REPO / ".venv-cpp2" / "bin" / "python"),
    }
    found = {}
    for name, exe in candidates.items():
        exe = os.path.abspath(exe)  # not resolve(): venv interpreters are symlinks
        if os.path.exists(exe) and (not require_import or _has_client(exe)):
            found[name] = exe
    return found


CPP2_PACKAGE = "rocketmq-python-cvs==2.1.0.3"


def ensure_cpp2_python(venv: str | None = None) -> str:
    """Interpreter with the C++ 2.x client, creating its venv on first use.

    ``$RMQD_CPP2_PYTHON`` wins; else ``$RMQD_CPP2_VENV`` or ``<repo>/.venv-cpp2`` is created
    (``python -m venv`` + ``pip install rocketmq-python-cvs==2.1.0.3``, a few seconds: the sdist
    ships a prebuilt librocketmq).  Raises if the client still cannot be imported.
    """
    explicit = os.environ.get("RMQD_CPP2_PYTHON")
    if explicit:
        return explicit
    venv_dir = Path(venv or os.environ.get("RMQD_CPP2_VENV") or REPO / ".venv-cpp2")
    python = venv_dir / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv_dir)], check=True, timeout=120)
    if not _has_client(str(python)):
        subprocess.run([str(python), "-m", "pip", "install", "-q", CPP2_PACKAGE], check=True, timeout=600)
        _has_client.cache_clear()
    if not _has_client(str(python)):
        raise RuntimeError(f"{CPP2_PACKAGE} is not importable from {python}")
    return str(python)


if __name__ == "__main__":  # tiny manual check: python compat_tests/clientrunner.py
    print(available_clients())
    r = run_client_script(sys.executable, "emit(op='hello', ns=NAMESRV)", env={"NAMESRV": "x:1"},
                          timeout=10)
    print(r, r.events)
