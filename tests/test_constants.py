"""The shared constants: rmqd/common/constants.py and its Cython mirror consts.pxi agree; ServiceThread's contract."""
import re
import threading
import time
from pathlib import Path

import rmqd.common.constants as C
from rmqd.common.service_thread import ServiceThread

PXI = Path(C.__file__).parent.parent / "cython_ext" / "consts.pxi"


def test_pxi_mirrors_python_constants():
    text = PXI.read_text()
    strings = dict(re.findall(r'cdef str (\w+) = "([^"]*)"', text))
    ints = {k: int(v, 0) for k, v in re.findall(r"^\s+(\w+) = (-?0x[0-9a-fA-F]+|-?\d+)\s*(?:#.*)?$", text, re.M)}
    assert strings and ints and "MESSAGE_MAGIC_CODE" in ints
    for name, value in strings.items():
        assert getattr(C, name) == value.encode().decode("unicode_escape"), name
    for name, value in ints.items():
        assert getattr(C, name) == value, name


def test_topic_helpers():
    assert C.retry_topic("g") == "%RETRY%g" and C.is_retry_topic("%RETRY%g")
    assert C.dlq_topic("g") == "%DLQ%g" and C.is_dlq_topic("%DLQ%g") and not C.is_retry_topic("t")


def test_service_thread_runs_wakes_and_stops():
    rounds = []
    done = threading.Event()

    def work():
        rounds.append(time.monotonic())
        if len(rounds) == 3:
            done.set()

    svc = ServiceThread("t-svc", interval=30.0, target=work)
    svc.start()
    for _ in range(2):
        time.sleep(0.05)
        svc.wakeup()
    assert done.wait(5)
    svc.shutdown()
    assert not svc.alive and len(rounds) == 3


def test_service_thread_survives_a_failing_round(caplog):
    calls = []

    def work():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")

    svc = ServiceThread("t-fail", interval=0.01, target=work)
    svc.start()
    deadline = time.monotonic() + 5
    while len(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    svc.shutdown()
    assert len(calls) >= 3
    assert any("t-fail" in r.getMessage() and r.exc_info for r in caplog.records)


def test_broker_role_parses_java_values():
    import pytest
    from rmqd.config import BrokerRole
    assert BrokerRole.parse("slave") is BrokerRole.SLAVE and not BrokerRole.SLAVE.is_master
    assert BrokerRole.parse(" SYNC_MASTER ") is BrokerRole.SYNC_MASTER and BrokerRole.SYNC_MASTER.is_master
    with pytest.raises(ValueError, match="brokerRole"):
        BrokerRole.parse("LEADER")


def test_a_service_thread_that_does_not_stop_is_logged_with_where_it_is(caplog):
    release = threading.Event()

    def stuck_in_a_round():
        release.wait(10)

    svc = ServiceThread("t-stuck", interval=0.01, target=stuck_in_a_round, join_timeout=0.2)
    svc.start()
    time.sleep(0.05)
    try:
        with caplog.at_level("ERROR", logger="rmqd.common.service_thread"):
            svc.shutdown()
    finally:
        release.set()
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "t-stuck did not stop within 0.2 s" in text and "in stuck_in_a_round" in text, text
