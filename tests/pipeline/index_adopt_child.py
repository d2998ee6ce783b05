"""Child process of the adoption kill -9 test: opens a store whose tier has a complete `rmqd pipeline index`
output waiting, with a hook that SIGKILLs this process the ``nth`` time adoption reaches ``step``.
argv: store root, tier dir, step, nth. Run as ``python -m tests.pipeline.index_adopt_child`` with
tests.kit.processes.child_env()."""
from __future__ import annotations

import sys

from tests.kit.crash_hooks import kill_at
from tests.pipeline.index_helpers import tier_store


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
