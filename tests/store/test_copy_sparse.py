"""fileutil.copy_sparse: a copied store file keeps its holes (tests copy whole stores; a dense copy of
each 420 MB index file filled the disk)."""
from __future__ import annotations

import os

from rmqd.fileutil import copy_sparse


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
