"""EpochFileCache (5.x epochFileCheckpoint format, written crash-safely) and the consistent point."""
from __future__ import annotations

import os
import zlib

import pytest

from rmqd.store.ha.epoch_file import EpochFileCache, EpochFileError, consistent_point, decode, encode


def test_format_is_5x_epoch_file_checkpoint(tmp_path):
    path = str(tmp_path / "epochFileCheckpoint")
    cache = EpochFileCache(path)
    assert cache.last_epoch() == -1
    assert cache.append(1, 0) and cache.append(2, 1048576)
    text = open(path).read()
    lines = "1-0\n2-1048576\n"
    assert text == f"2\n{zlib.crc32(lines.encode()) & 0x7FFFFFFF}\n{lines}"
    assert EpochFileCache(path).snapshot() == [(1, 0), (2, 1048576)]
    assert decode(encode([(3, 7)])) == [(3, 7)]


def test_append_rules(tmp_path):
    cache = EpochFileCache(str(tmp_path / "e"))
    assert cache.append(1, 0)
    assert not cache.append(1, 10)          # the epoch must grow
    assert not cache.append(0, 20)
    assert cache.append(2, 0)               # epoch 1 wrote nothing: epoch 2 takes its place (5.x drops epoch 2)
    assert cache.snapshot() == [(2, 0)]
    assert cache.append(3, 100) and not cache.append(4, 50)      # the start must not go back
    cache.truncate_suffix(100)
    assert cache.snapshot() == [(2, 0)]
    cache.append(3, 100)
    cache.append(5, 300)
    cache.drop_from_epoch(5)
    assert cache.snapshot() == [(2, 0), (3, 100)]


def test_damaged_file_falls_back_to_the_backup_and_a_write_never_leaves_half_a_file(tmp_path):
    path = str(tmp_path / "e")
    cache = EpochFileCache(path)
    cache.append(1, 0)
    cache.append(2, 500)                    # the previous content is now path.bak
    assert os.path.exists(path + ".bak")
    with open(path, "r+") as f:             # a torn write of the main file
        f.write("2\n123\n1-0\n2-5")
    with pytest.raises(EpochFileError):
        decode(open(path).read())
    assert EpochFileCache(path).snapshot() == [(1, 0)]
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


@pytest.mark.parametrize("local, local_max, master, master_max, want", [
    ([(1, 0)], 1000, [(1, 0), (2, 800)], 5000, 800),           # a returning old master: cut to the new epoch
    ([(1, 0), (2, 800)], 900, [(1, 0), (2, 800)], 5000, 900),  # a slave behind: nothing to cut
    ([(1, 0), (2, 800)], 5000, [(1, 0), (3, 600)], 7000, 600), # its epoch 2 was never the group's
    ([(1, 0), (2, 800), (4, 9000)], 900, [(1, 0), (2, 800)], 5000, 900),   # entries past its data are ignored
    ([], 700, [(1, 0)], 5000, 700),                            # no epochs: trusted as it is (as 5.x)
    ([(2, 0)], 700, [(1, 0), (3, 500)], 5000, -1),             # nothing in common
])
def test_consistent_point(local, local_max, master, master_max, want):
    assert consistent_point(local, local_max, master, master_max) == want
