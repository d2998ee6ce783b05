"""Child process of the adoption kill -9 test: opens a store whose tier has a complete `rmqd pipeline index`
output waiting, with a hook that SIGKILLs this process the ``nth`` time adoption reaches ``step``.
argv: store root, tier dir, step, nth."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

from crash_hooks import kill_at  # noqa: E402
from pipeline.index_helpers import tier_store  # noqa: E402


def main() -> int:
    root, tier_dir, step, nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = tier_store(root, tier_dir, index=False)
    hook, seen = kill_at(step, nth)
    store.tier.step_hook = hook
    store.start()
    print("step never reached", step, seen[0], file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
