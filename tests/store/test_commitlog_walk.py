"""The CommitLog record walk (cython_ext/commitlog_walk.pxi) as its two users read it: the recovery scan
(store_commitlog.scan_records) and a slave's check of what its master sent (ha_verify.verify_range) stop at the
same place for the same bytes, each with its own code."""
import os

import pytest

from rmqd.cython_ext import ha_verify as hv
from rmqd.cython_ext import store_commitlog as cl
from rmqd.store.message import MessageToStore
from tests.store.conftest import small_config

MAX = 16 * 1024 + 1024


@pytest.fixture
def records(make_store, tmp_path):
    """A 64 KiB CommitLog file holding three records: (its bytes, the records' (pos, size))."""
    s = make_store()
    for i in range(3):
        assert s.put_message(MessageToStore.create("T", 0, b"body-%d" % i * 10, {"KEYS": f"k{i}"})).ok
    s.flush()
    root = s.config.commitlog_dir
    buf = bytearray(open(os.path.join(root, sorted(os.listdir(root))[0]), "rb").read())
    end, code, recs = cl.scan_records(bytes(buf), 0, len(buf), True, MAX, collect=True)
    assert code == cl.SCAN_END and len(recs) == 3 and end == sum(size for _, size in recs)
    return buf, recs


def both(buf, start, limit, crc=True):
    b = bytes(buf)
    end, code, _ = cl.scan_records(b, start, limit, crc, MAX)
    v_end, v_code, count, nbytes = hv.verify_range(b, start, limit, crc, MAX)
    return (end, code), (v_end, v_code, count)


def test_whole_records_up_to_the_limit(records):
    buf, recs = records
    end = recs[-1][0] + recs[-1][1]
    assert both(buf, 0, end) == ((end, cl.SCAN_LIMIT), (end, hv.VERIFY_LIMIT, 3))
    # past the written end: zeros end the log for recovery, are not a record for a slave
    assert both(buf, 0, end + 100) == ((end, cl.SCAN_END), (end, hv.VERIFY_BAD, 3))


def test_a_record_cut_by_the_limit(records):
    buf, recs = records
    last = recs[-1][0]
    assert both(buf, 0, last + 40) == ((last, cl.SCAN_CORRUPT), (last, hv.VERIFY_PARTIAL, 2))
    assert both(buf, 0, last + 5) == ((last, cl.SCAN_END), (last, hv.VERIFY_PARTIAL, 2))


def test_a_damaged_body_is_caught_by_the_crc_only(records):
    buf, recs = records
    end = recs[-1][0] + recs[-1][1]
    buf[recs[1][0] + recs[1][1] - 60] ^= 0xFF         # inside the second record's body
    assert both(buf, 0, end) == ((recs[1][0], cl.SCAN_CORRUPT), (recs[1][0], hv.VERIFY_BAD, 1))
    assert both(buf, 0, end, crc=False) == ((end, cl.SCAN_LIMIT), (end, hv.VERIFY_LIMIT, 3))


def test_inner_lengths_that_do_not_add_up(records):
    buf, recs = records
    pos, size = recs[1]
    body_len_at = pos + 48 + 8 + 8 + 8 + 12             # IPv4 hosts: the body length follows the reconsume times
    buf[body_len_at:body_len_at + 4] = (size).to_bytes(4, "big")     # a body longer than the record
    assert both(buf, 0, recs[-1][0] + recs[-1][1], crc=False) == ((pos, cl.SCAN_CORRUPT), (pos, hv.VERIFY_BAD, 1))


def test_the_blank_end_of_file_marker(records):
    buf, recs = records
    end = recs[-1][0] + recs[-1][1]
    cl.write_blank(buf, end, len(buf) - end)
    assert both(buf, 0, len(buf)) == ((len(buf), cl.SCAN_BLANK), (len(buf), hv.VERIFY_BLANK, 3))
    # a marker claiming more than the file holds: recovery calls it corrupt, a slave skips it
    cl.write_blank(buf, end, len(buf) - end + 8)
    assert both(buf, 0, len(buf))[0] == (end, cl.SCAN_CORRUPT)
    cl.write_blank(buf, end, 4)                          # smaller than the marker itself
    assert both(buf, 0, len(buf)) == ((end, cl.SCAN_CORRUPT), (end, hv.VERIFY_BAD, 3))
