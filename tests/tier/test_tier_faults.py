"""Crash safety of the tier: kill -9 at each step of each state (writing: a group commit's
CommitLog/ConsumeQueue/index writes and the metadata commit; compacting; uploading; deleting the
local copy), inside compaction and upload (a partly written scratch file, a partly uploaded
segment or S3 multipart upload) and while retention deletes local CommitLog files, on the Posix and
S3 backends; then a restart must lose no message and no index entry and double none, clean the
scratch files, abort leftover multipart uploads and finish the interrupted upload. The same steps
fail with an exception (memory backend, in process; S3 for a failed multipart upload): the failed
round is rolled back to the committed state and the next round redoes it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from rmqd.store.message import decode_message
from rmqd.store.message_store import GetMessageStatus as S
from tests.kit.processes import REPO, child_env
from tests.tier.helpers import make_store, put, tier_props

pytestmark = pytest.mark.slow

TOPIC = "CrashTopic"
FIRST, MORE = 240, 60

# (step, nth): the second group commit is in flight for the dispatch steps; ".partial": inside the
# compaction (the scratch file partly written) and inside the upload (a part written, S3: a
# multipart upload begun); "local.deleting": retention has deleted the first local CommitLog file
STEPS = [("dispatch.commitlog", 2), ("dispatch.index", 2), ("dispatch.metadata", 1), ("index.compacting", 2),
         ("index.compacting.partial", 3), ("index.compacted", 1), ("index.uploading", 2),
         ("index.uploading.partial", 2), ("index.uploaded", 1), ("index.deleting_local", 1),
         ("local.deleting", 1)]
LOCAL_FIRST = 600             # enough for retention to delete several CommitLog files in one run


def check_everything(store, n: int) -> None:
    """Every message once, in order, readable from offset 0; every key found exactly once."""
    bodies = []
    for q in (0, 1):
        off = store.get_min_offset(TOPIC, q)
        assert off == 0
        while off < store.get_max_offset(TOPIC, q):
            r = store.get_messages(TOPIC, q, off, 32)
            assert r.status is S.FOUND, (q, off, r.status)
            bodies.extend(bytes(b) for b in r.buffers)
            off = r.next_begin_offset
    assert len(bodies) == n
    assert sorted(int(decode_message(b).body[:6]) for b in bodies) == list(range(n))
    hits = store.query_message(TOPIC, "shared", 10 * n).messages
    assert len(hits) == n and len({decode_message(m).commit_log_offset for m in hits}) == n
    for i in (0, n // 2, n - 1):
        assert len(store.query_message(TOPIC, f"UNIQ{i:08d}", 32).messages) == 1
    # the tier's index alone holds every key once (nothing lost, nothing doubled)
    assert len(store.tier.reads.tier_query(TOPIC, "shared", 10 * n, 0, 2 ** 62)) == n


# every step on Posix; on S3 one step of each state (writing, compacting, uploading, deleting the
# local copy) and the interrupted multipart upload: moto's round trips make each S3 case a second
S3_STEPS = {"dispatch.index", "index.compacting", "index.uploading.partial", "index.deleting_local"}
KILL_CASES = [("posix", s, n) for s, n in STEPS] + [("s3", s, n) for s, n in STEPS if s in S3_STEPS]


def multipart_uploads(props: dict) -> list:
    import boto3
    client = boto3.client("s3", endpoint_url=props["objectStoreEndpoint"], region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    return client.list_multipart_uploads(Bucket=props["objectStoreBucket"]).get("Uploads", [])


@pytest.mark.parametrize("kind,step,nth", KILL_CASES, ids=[f"{k}-{s}" for k, s, _ in KILL_CASES])
def test_kill9_at_each_step(kind, step, nth, tmp_path, request):
    endpoint = request.getfixturevalue("s3_endpoint") if kind == "s3" else ""
    props = tier_props(kind, str(tmp_path / "tier"), endpoint, f"k-{uuid.uuid4().hex[:10]}")
    root = str(tmp_path / "store")
    first = LOCAL_FIRST if step == "local.deleting" else FIRST
    child = subprocess.run([sys.executable, "-m", "tests.tier.crash_child", root, json.dumps(props), step,
                            str(nth), "0", str(first)], cwd=REPO, capture_output=True, text=True, timeout=60,
                           env=child_env())
    assert child.returncode == -9, child.stderr[-3000:]
    idx_dir = os.path.join(root, "tiered_index_file")
    scratch = os.path.join(idx_dir, "compacting")
    if step == "index.compacting.partial":
        left = os.listdir(scratch)                                          # a half-written scratch file
        assert len(left) == 1 and os.path.getsize(os.path.join(scratch, left[0])) > 0
    if kind == "s3" and step == "index.uploading.partial":
        assert len(multipart_uploads(props)) == 1                           # a multipart upload in progress
    if step == "local.deleting":
        cl_files = sorted(os.listdir(os.path.join(root, "commitlog")))
        assert int(cl_files[0]) > 0 and len(cl_files) >= 3                  # killed after the first file went
    store = make_store(root, props)
    store.start()
    try:
        assert not os.path.exists(scratch) or not os.listdir(scratch)      # scratch cleaned
        if kind == "s3":
            assert multipart_uploads(props) == []                           # the interrupted one aborted
        if step == "local.deleting":
            assert store.commitlog.min_offset() > 0
            check_everything(store, first)                                  # the tier serves what went
        put(store, TOPIC, MORE, start=first)
        store.tier.commit_now()
        assert all(f["state"] == "uploaded" for f in store.tier.index.status())   # uploads resumed
        assert store.execute_delete_files_manually() >= 1
        check_everything(store, first + MORE)
        assert not os.listdir(os.path.join(idx_dir, "compacted"))
    finally:
        store.shutdown()


# in process: every step the tier reaches (retention's file deletion is the local store's), and an
# S3 multipart upload that fails half way (it must be aborted, not left in the bucket)
EXC_CASES = [("memory", s, n) for s, n in STEPS if not s.startswith("local.")] + \
    [("s3", "index.uploading.partial", 2)]


@pytest.mark.parametrize("kind,step,nth", EXC_CASES, ids=[f"{k}-{s}" for k, s, _ in EXC_CASES])
def test_exception_at_each_step_is_repaired(kind, step, nth, tmp_path, request):
    endpoint = request.getfixturevalue("s3_endpoint") if kind == "s3" else ""
    props = tier_props(kind, str(tmp_path / "tier"), endpoint, f"e-{uuid.uuid4().hex[:10]}")
    store = make_store(str(tmp_path / "store"), props)
    store.start()
    store.tier.backend.upload_part_size = 1024       # several parts per upload (S3: multipart)
    try:
        put(store, TOPIC, FIRST)
        seen = [0]

        def hook(name):
            if name == step:
                seen[0] += 1
                if seen[0] == nth:
                    raise OSError(f"injected at {step}")
        store.tier.step_hook = hook
        with pytest.raises(OSError, match="injected"):
            store.tier.commit_now()
        store.tier.step_hook = None
        if kind == "s3":
            assert multipart_uploads(props) == []
        put(store, TOPIC, MORE, start=FIRST)
        store.tier.commit_now()
        assert all(f["state"] == "uploaded" for f in store.tier.index.status())
        assert store.execute_delete_files_manually() >= 1
        check_everything(store, FIRST + MORE)
    finally:
        store.shutdown()
