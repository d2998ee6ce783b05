"""Child process of the kill -9 tests: fills a store with a tier, then runs ``commit_now`` (copy,
seal, compact, upload) and retention with a hook that sends SIGKILL to this process at the
``nth`` time step ``step`` is reached. argv: root, props JSON, step, nth, first message, count.

For step ``index.uploading.partial`` uploads go in parts of 1 KiB, so the test's index files
(about 4 KiB) upload in several parts (S3: a multipart upload). Step ``local.deleting`` is reached
after each local CommitLog file retention deletes. Run as ``python -m tests.tier.crash_child`` with
tests.kit.processes.child_env()."""
from __future__ import annotations

import json
import sys

from rmqd.store.mapped_file import MappedFile
from tests.kit.crash_hooks import kill_at
from tests.tier.helpers import make_store, put


def main() -> int:
    root, props, step, nth, first, count = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4]), \
        int(sys.argv[5]), int(sys.argv[6])
    store = make_store(root, props)
    store.start()
    if step == "index.uploading.partial":
        store.tier.backend.upload_part_size = 1024
    put(store, "CrashTopic", count, start=first)
    hook, seen = kill_at(step, nth)
    store.tier.step_hook = hook
    commitlog_dir = store.commitlog.mfq.directory
    destroy = MappedFile.destroy

    def destroy_then_step(mf: MappedFile) -> None:
        destroy(mf)
        if mf.path.startswith(commitlog_dir):
            hook("local.deleting")
    MappedFile.destroy = destroy_then_step
    store.tier.commit_now()
    store.execute_delete_files_manually()
    print("step never reached", step, seen[0], file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
