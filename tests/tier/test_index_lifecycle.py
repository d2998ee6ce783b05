"""The tier index's lifecycle against its background work: a close (the broker's shutdown) or a second
compaction (the index thread next to ``commitTier``) while a compaction is between pieces must stop
or wait for it, never let it read an unmapped file; the C entry points refuse None and short buffers.
Each case runs in a child process (index_close_child.py) so that a SIGSEGV fails the test instead of
killing pytest; before the fix every case died with SIGSEGV in ``IndexStoreFile.compact``."""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.kit.processes import REPO, child_env


@pytest.mark.parametrize("mode", ["close", "shutdown", "race", "cython"])
def test_compaction_never_reads_a_closed_index_file(mode, tmp_path):
    child = subprocess.run([sys.executable, "-m", "tests.tier.index_close_child", mode, str(tmp_path)],
                           cwd=REPO, capture_output=True, text=True, timeout=60, env=child_env())
    died = f" (died of {signal.Signals(-child.returncode).name})" if child.returncode < 0 else ""
    assert child.returncode == 0, f"rc {child.returncode}{died}\n{child.stderr[-4000:]}"
    assert child.stdout.strip().endswith("ok"), child.stdout
