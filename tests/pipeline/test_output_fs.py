"""OutputFS.drop_dir: a failed run's staging directory goes whole, even while an orphan task of the
failed job is still writing into it (Spark ends a failed job's other tasks, but their Python workers
finish the function they are in)."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("pyarrow", reason="the spark extra (pip install -e '.[test]') is required")

from rmqd.pipeline.fs import OutputFS  # noqa: E402


def test_an_orphan_writer_can_neither_finish_nor_recreate_a_dropped_run(tmp_path):
    fs = OutputFS(str(tmp_path))
    run = "_rmqd/staging/0001-run"
    fs.write_json(f"{run}/RUN.json", {"run": "0001-run"})
    fs.mkdirs(f"{run}/messages/day=1")
    part = fs.path(f"{run}/messages/day=1/.part-0.parquet.inprogress")
    orphan = open(part, "wb")                       # the orphan is mid-file when the driver drops the run
    orphan.write(b"half")
    fs.drop_dir(run)
    assert os.listdir(fs.path("_rmqd/staging")) == []
    orphan.write(b"rest")                            # its writes go to an unlinked file ...
    orphan.close()
    with pytest.raises(FileNotFoundError):           # ... and its rename into place fails
        os.rename(part, fs.path(f"{run}/messages/day=1/part-0.parquet"))
    with pytest.raises(FileNotFoundError):           # the guard: no directory is created below a gone run
        fs.mkdirs_under(run, "keyindex/day=1", "RUN.json")
    assert os.listdir(fs.path("_rmqd/staging")) == []


def test_dropping_what_is_not_there_is_a_no_op(tmp_path):
    fs = OutputFS(str(tmp_path))
    fs.drop_dir("_rmqd/staging/none")
    assert os.listdir(tmp_path) == []


def test_a_hidden_leftover_of_a_crashed_drop_is_dropped_by_the_next_recovery(tmp_path):
    from rmqd.pipeline.archive import STAGING, Archive
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    out = tmp_path / "out"
    fs = OutputFS(str(out))
    fs.write_json(f"{STAGING}/.0001-run.dropped-1234abcd/messages/x.json", {})   # crash between rename and delete
    done = Archive(str(store), str(out)).recover()
    assert done == ["dropped .0001-run.dropped-1234abcd"]
    assert fs.listdir(STAGING) == []
