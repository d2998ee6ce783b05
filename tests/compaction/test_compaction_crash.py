"""kill -9 at every step of a compaction run, then restart: no surviving key lost or duplicated,
the run resumes from the checkpoint, and nothing is left in compacting/."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from rmqd.store.message import MessageToStore
from tests.compaction.helpers import TOPIC, newest_per_key, open_store, read_all
from tests.kit.processes import child_env

STEPS = ["build", "writing", "write", "rename", "moved-log", "installed", "checkpoint"]

CHILD = textwrap.dedent("""
    import os
    from tests.compaction.helpers import open_store, TOPIC
    store = open_store({root!r}, map_bytes={map_bytes})
    seen = {{}}
    def hook(step):
        seen[step] = seen.get(step, 0) + 1
        if step == {step!r} and seen[step] == {nth}:
            os._exit(9)
    store.compaction.step_hook = hook
    store.compaction.compact(TOPIC, 0)
    os._exit(3)      # the step never came: the test would be meaningless
""")


def _prepare(root):
    store = open_store(root, map_bytes=400 * 24)        # 300 keys per round: several rounds
    sent = []
    batch = []
    for v in range(4):
        for k in range(500):
            body = b"" if (v == 3 and k % 50 == 0) else f"v{v}-{k}-".encode() + b"p" * 150
            batch.append(MessageToStore.create(TOPIC, 0, body, {"KEYS": f"key-{k}"}))
            sent.append((len(sent), f"key-{k}", body))
    for f in range(300):
        batch.append(MessageToStore.create(TOPIC, 0, b"f" * 150, {"KEYS": f"filler-{f}"}))
        sent.append((len(sent), f"filler-{f}", b"f" * 150))
    for i in range(0, len(batch), 100):
        store.put_messages(batch[i:i + 100])
    store.compaction.catch_up(TOPIC, 0)
    store.shutdown()
    return sent


def _expected(store, sent):
    qlog = store.compaction.logs[(TOPIC, 0)]
    active_from = qlog.segments[-1].qoffs[0]
    table = newest_per_key([s for s in sent if s[0] < active_from])
    want = sorted((off, k, v) for k, (off, v) in table.items() if v)
    return want + [s for s in sent if s[0] >= active_from]


@pytest.mark.slow
@pytest.mark.parametrize("step", STEPS)
def test_kill_at_step_then_restart(tmp_path, step):
    root = str(tmp_path / "s")
    sent = _prepare(root)
    nth = 2 if step in ("writing", "write", "rename", "moved-log", "installed") else 1
    script = CHILD.format(root=root, map_bytes=400 * 24, step=step, nth=nth)
    rc = subprocess.run([sys.executable, "-c", script], timeout=60, env=child_env()).returncode
    assert rc == 9, f"child exited {rc}, not killed at {step}"
    store = open_store(root, map_bytes=400 * 24)
    for d in ("compactionLog", "compactionCq"):
        assert os.listdir(os.path.join(root, "compaction", d, TOPIC, "0", "compacting")) == []
    got_before = read_all(store)
    keys_before = [k for _o, k, _v in got_before]
    offs_before = [o for o, _k, _v in got_before]
    # no record twice, none out of order: strictly increasing offsets, each the record sent there
    assert all(a < b for a, b in zip(offs_before, offs_before[1:])), f"non-increasing offsets after a kill at {step}"
    assert all(sent[o] == (o, k, v) for o, k, v in got_before)
    newest = newest_per_key(sent)
    for k, (off, v) in newest.items():          # nothing surviving was lost by the kill
        if v:
            assert (off, k, v) in got_before, (k, off)
    (_, res), = store.compaction.compact(TOPIC, 0)
    got = read_all(store)
    assert got == _expected(store, sent)
    offs = [o for o, _k, _v in got]
    assert all(a < b for a, b in zip(offs, offs[1:]))
    assert len(keys_before) >= len(got)
    store.shutdown()
