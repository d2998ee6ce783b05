"""The Java kit itself works here: our program compiles and sends to rmqd and to the reference broker."""
from __future__ import annotations

import pytest

from javakit import SETUP_BUDGET, mqadmin, require_kit, run_java

pytestmark = pytest.mark.timeout(SETUP_BUDGET + 2 * 60 + 60)     # two Java runs of at most 60 s


def test_java_program_sends_to_rmqd_and_reference(rmqd_server, reference_cluster) -> None:
    require_kit()
    for addr in (rmqd_server.namesrv_addr, reference_cluster.namesrv_addr):
        res = run_java("KitSmoke", addr, "KitSmokeTopic", timeout=60)
        assert res.returncode == 0 and not res.timed_out, res.stderr[-2000:]
        assert res.events == [{"op": "send", "status": "SEND_OK", "queueOffset": 0}]


def test_mqadmin_cluster_list_names_the_broker(rmqd_server) -> None:
    res = mqadmin("clusterList", "-n", rmqd_server.namesrv_addr)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "DefaultCluster" in res.stdout and "broker-a" in res.stdout


def test_a_missing_jdk_fails_the_java_tests_with_a_clear_message(monkeypatch) -> None:
    import javakit
    import pytest

    monkeypatch.setattr(javakit.shutil, "which", lambda tool: None)
    with pytest.raises(pytest.fail.Exception, match="`java` is not on PATH"):
        javakit.require_kit()
