"""POP state survives kill -9: un-acked messages come back after their invisible time, acked ones
never do, and nothing is handed out twice while still invisible."""
from __future__ import annotations

import time

import pytest

from tests.pop.pop_helpers import ack, create_group, create_topic, extra_info, pop, popped, send, serving

INVISIBLE_MS = 6000


@pytest.mark.slow
def test_kill9_in_the_middle_of_the_invisible_time(tmp_path):
    store = str(tmp_path / "store")
    with serving(store, 30) as c:
        create_topic(c, "K9")
        create_group(c, "K9G")
        uniq = [send(c, "K9", f"k{i}".encode()) for i in range(4)]
        # 6 s: the kill and the restart below fit in it on a loaded machine (3 s did not, once)
        resp = pop(c, "K9", "K9G", invisible=INVISIBLE_MS)
        popped_at = time.monotonic()
        msgs = popped(resp)
        assert len(msgs) == 4
        for m in msgs[:2]:
            assert ack(c, "K9", "K9G", extra_info(resp, m), m.queue_offset).code == 0
    with serving(store, 30) as c:
        first = pop(c, "K9", "K9G", invisible=60000, poll=0)
        elapsed = time.monotonic() - popped_at
        assert elapsed < INVISIBLE_MS / 1000, f"the restart took {elapsed:.1f} s: past the invisible time"
        assert first.code == 210            # still invisible: not handed out again before the deadline
        got = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(got) < 2:
            got += popped(pop(c, "K9", "K9G", invisible=60000, poll=1000))
        assert sorted(m.properties["UNIQ_KEY"] for m in got) == sorted(uniq[2:])
        assert all(m.reconsume_times == 1 for m in got)
        assert pop(c, "K9", "K9G", poll=1500).code == 210
