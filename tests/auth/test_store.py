"""The users-and-ACLs store: a kill -9 at any point of an update leaves the old or the new content; a change is on
disk before it returns; a damaged file falls back to its backup."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import orjson
import pytest

from rmqd.auth.model import User, UserType
from rmqd.auth.store import AuthStore

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The child commits users u0, u1, ... one per change and prints each index once committed. With KILL_AT=(n, when)
# it SIGKILLs itself around the n-th rename of the file (before: the old content must stay; after: the new).
CHILD = r"""
import os, signal, sys
from rmqd.auth.model import User, UserType
from rmqd.auth.store import AuthStore
d, kill_at, when = sys.argv[1], int(sys.argv[2]), sys.argv[3]
real_replace, seen = os.replace, [0]
def replace(src, dst):
    if dst.endswith("auth.json"):
        seen[0] += 1
        if seen[0] == kill_at and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        real_replace(src, dst)
        if seen[0] == kill_at and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return
    real_replace(src, dst)
os.replace = replace
s = AuthStore(d)
s.load()
base = len(s.state.users)
for i in range(base, base + 100000):
    s.commit(put_users=[User(f"u{i}", "pw", UserType.NORMAL)])
    print(i, flush=True)
"""


def _run_child(d: str, kill_at: int, when: str, timeout: float = 60) -> list[int]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, d, str(kill_at), when], stdout=subprocess.PIPE, env=env)
    out, _ = proc.communicate(timeout=timeout)
    return [int(x) for x in out.split()]


def _consistent(d: str) -> set[str]:
    """The users on disk, checked to be a whole prefix u0..uk whose count the data version matches."""
    s = AuthStore(d)
    s.load()
    names = set(s.state.users)
    assert names == {f"u{i}" for i in range(len(names))}
    return names


@pytest.mark.timeout(120)
@pytest.mark.parametrize("when", ["before", "after"])
def test_kill_around_the_rename_leaves_the_old_or_the_new_content(tmp_path, when) -> None:
    d = str(tmp_path)
    done = _run_child(d, 5, when)               # dies at the 5th commit's rename
    assert done == [0, 1, 2, 3]
    names = _consistent(d)
    assert len(names) == (4 if when == "before" else 5)


@pytest.mark.timeout(120)
def test_kill_at_random_moments_never_leaves_a_mix(tmp_path) -> None:
    d = str(tmp_path)
    env = dict(os.environ, PYTHONPATH=ROOT)
    for _round in range(4):
        before = len(_consistent(d)) if os.path.exists(os.path.join(d, "auth.json")) else 0
        proc = subprocess.Popen([sys.executable, "-c", CHILD, d, "0", "never"], stdout=subprocess.PIPE, env=env)
        first = proc.stdout.readline()          # it is committing
        assert first
        time.sleep(0.05 + 0.07 * _round)
        os.kill(proc.pid, signal.SIGKILL)
        printed = [int(first)] + [int(x) for x in proc.stdout.read().split()]
        proc.wait()
        names = _consistent(d)
        assert len(names) >= printed[-1] + 1 > before       # every change it reported is on disk


def test_changes_are_durable_and_versioned(tmp_path) -> None:
    s = AuthStore(str(tmp_path))
    s.load()
    v0 = s.state.version.counter
    s.commit(put_users=[User("a", "pw", UserType.SUPER)])
    again = AuthStore(str(tmp_path))
    again.load()
    assert again.state.users["a"].user_type is UserType.SUPER
    assert again.state.version == s.state.version and again.state.version.counter == v0 + 1
    assert oct(os.stat(s.path).st_mode & 0o777) == "0o600"


def test_a_damaged_file_falls_back_to_its_backup(tmp_path) -> None:
    s = AuthStore(str(tmp_path))
    s.load()
    s.commit(put_users=[User("a", "pw")])
    s.commit(put_users=[User("b", "pw")])
    with open(s.path, "wb") as f:
        f.write(b"{garbage")
    again = AuthStore(str(tmp_path))
    again.load()
    assert set(again.state.users) == {"a"}        # the content before the last change


def test_a_damaged_file_and_backup_refuse_to_start_with_no_users(tmp_path) -> None:
    s = AuthStore(str(tmp_path))
    s.load()
    s.commit(put_users=[User("a", "pw")])
    for path in (s.path, s.path + ".bak"):
        with open(path, "wb") as f:
            f.write(b"[1]")
    with pytest.raises(RuntimeError, match="unreadable"):
        AuthStore(str(tmp_path)).load()


def test_replace_takes_a_snapshot_once(tmp_path) -> None:
    master, slave = AuthStore(str(tmp_path / "m")), AuthStore(str(tmp_path / "s"))
    master.load()
    slave.load()
    master.commit(put_users=[User("a", "pw")])
    snap = orjson.loads(orjson.dumps(master.snapshot()))
    assert slave.replace(snap) is True and slave.replace(snap) is False
    assert set(slave.state.users) == {"a"} and slave.state.version == master.state.version
