"""rmqd.common.fileutil: copy_sparse keeps a copied store file's holes (tests copy whole stores; a dense copy of
each 420 MB index file filled the disk); makedirs_below and drop_tree, which keep an orphan task of a
dropped job from re-creating or adding to the directory it was writing into."""
from __future__ import annotations

import os

import pytest

from rmqd.common.fileutil import copy_sparse, drop_tree, makedirs_below


def _sparse_file(path: str, size: int, writes: dict[int, bytes]) -> None:
    with open(path, "wb") as f:
        f.truncate(size)
        for pos, data in writes.items():
            f.seek(pos)
            f.write(data)


def test_data_and_size_are_copied_and_holes_stay_holes(tmp_path):
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    _sparse_file(src, 64 << 20, {0: b"head", 10 << 20: b"x" * 5000, (64 << 20) - 2: b"yz"})
    copy_sparse(src, dst)
    assert os.path.getsize(dst) == 64 << 20
    with open(src, "rb") as a, open(dst, "rb") as b:
        assert a.read() == b.read()
    assert os.stat(dst).st_blocks * 512 <= os.stat(src).st_blocks * 512 + (1 << 20)
    assert os.stat(dst).st_blocks * 512 < 4 << 20
    assert os.stat(dst).st_mtime_ns == os.stat(src).st_mtime_ns


def test_empty_and_all_hole_files(tmp_path):
    empty, hole = str(tmp_path / "empty"), str(tmp_path / "hole")
    open(empty, "wb").close()
    _sparse_file(hole, 8 << 20, {})
    assert os.path.getsize(copy_sparse(empty, str(tmp_path / "e2"))) == 0
    copy_sparse(hole, str(tmp_path / "h2"))
    assert os.path.getsize(tmp_path / "h2") == 8 << 20
    assert open(tmp_path / "h2", "rb").read() == bytes(8 << 20)


def test_makedirs_below_creates_under_an_existing_root_only(tmp_path):
    root = tmp_path / "job.tmp"
    root.mkdir()
    makedirs_below(str(root), str(root / "log" / "0"))
    makedirs_below(str(root), str(root / "log" / "0"))          # already there: fine
    makedirs_below(str(root), str(root))
    assert (root / "log" / "0").is_dir()
    with pytest.raises(ValueError):
        makedirs_below(str(root), str(tmp_path / "elsewhere"))
    gone = tmp_path / "gone.tmp"
    with pytest.raises(FileNotFoundError):
        makedirs_below(str(gone), str(gone / "log" / "0"))
    assert not gone.exists()


def test_drop_tree_leaves_nothing_an_orphan_can_add_to(tmp_path):
    job = tmp_path / "T-0001.tmp"
    (job / "log").mkdir(parents=True)
    (job / "log" / "a").write_bytes(b"x")
    orphan = open(job / "log" / "b.inprogress", "wb")
    assert drop_tree(str(job), ".tmp") is True
    assert os.listdir(tmp_path) == []
    orphan.write(b"late")
    orphan.close()
    with pytest.raises(FileNotFoundError):
        os.rename(job / "log" / "b.inprogress", job / "log" / "b")
    with pytest.raises(FileNotFoundError):
        makedirs_below(str(job), str(job / "log"))
    assert os.listdir(tmp_path) == []
    assert drop_tree(str(job)) is False


def test_drop_tree_trash_name_keeps_the_suffix(tmp_path, monkeypatch):
    job = tmp_path / "T-0001.tmp"
    job.mkdir()
    seen = []
    real_rmtree = __import__("shutil").rmtree
    monkeypatch.setattr("shutil.rmtree", lambda p, *a, **k: seen.append(os.path.basename(p)))  # "crash" before the delete
    drop_tree(str(job), ".tmp")
    (left,) = os.listdir(tmp_path)
    assert left == seen[0] and left.startswith(".T-0001.tmp.dropped-") and left.endswith(".tmp")
    real_rmtree(tmp_path / left)
