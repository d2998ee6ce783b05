"""The index service's steps never run twice at once: `rmqd admin commitTier` (an admin pool thread) and the
index thread both call run_once, and two compactions of one file crashed the broker with a segmentation fault
(the second unmapped what the first still read; found by the storage page's example, docs/storage.md)."""
from __future__ import annotations

import threading
import time

from tests.tier.helpers import make_store, put, tier_props


def test_commit_tier_calls_and_the_index_thread_take_turns(tmp_path):
    store = make_store(str(tmp_path / "store"), tier_props("posix", str(tmp_path / "tier")))
    store.start()
    try:
        put(store, "Serial", 300)
        svc = store.tier.index
        guard = threading.Lock()
        inside, most = [0], [0]

        def watched(step):
            def run(f) -> None:
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                try:
                    time.sleep(0.02)          # widen the window two unserialised callers would overlap in
                    step(f)
                finally:
                    with guard:
                        inside[0] -= 1
            return run
        svc._compact, svc._upload = watched(svc._compact), watched(svc._upload)
        callers = [threading.Thread(target=store.tier.commit_now) for _ in range(3)]
        callers.append(threading.Thread(target=lambda: [svc.run_once() for _ in range(10)]))
        for t in callers:
            t.start()
        for t in callers:
            t.join(60)
        assert most[0] == 1                   # one compaction or upload at a time
        assert all(f.state != "writing" or not f.sealed for f in svc.files)   # the sealed files were compacted
    finally:
        store.shutdown()
