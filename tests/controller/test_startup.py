"""Starting a controller: ``rmqd controller -c`` (standalone) and ``enableControllerInNamesrv`` (inside the name
server's process), with the 5.x keys."""
from __future__ import annotations

import contextlib
import io
import os

import pytest

from rmqd.runtime.cli import main
from tests.controller.ctlkit import call, find_leader, free_ports
from tests.kit.processes import READY, RmqdProcess


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def test_print_config_items_with_5x_defaults(tmp_path):
    conf = tmp_path / "controller.conf"
    conf.write_text("controllerDLegerGroup=group1\ncontrollerDLegerPeers=n0-127.0.0.1:9878\n"
                    "controllerDLegerSelfId=n0\nenableElectUncleanMaster=true\n")
    rc, out, _ = run_cli("controller", "-c", str(conf), "-p")
    assert rc == 0
    props = dict(line.split("=", 1) for line in out.splitlines())
    assert props["enableElectUncleanMaster"] == "true"
    assert (props["controllerType"], props["scanNotActiveBrokerInterval"], props["scanInactiveMasterInterval"],
            props["electMasterMaxRetryCount"], props["notifyBrokerRoleChanged"], props["processReadEvent"],
            props["configBlackList"]) == ("DLedger", "5000", "5000", "3", "true", "false",
                                          "configBlackList;configStorePath")


def test_missing_peers_is_a_clear_error(tmp_path):
    conf = tmp_path / "controller.conf"
    conf.write_text("controllerDLegerGroup=group1\n")
    rc, _, err = run_cli("controller", "-c", str(conf))
    assert rc == 2
    assert "controllerDLegerPeers of ControllerConfig is null or empty" in err
    conf.write_text("controllerDLegerPeers=n0-127.0.0.1:9878\ncontrollerDLegerSelfId=n5\n")
    rc, _, err = run_cli("controller", "-c", str(conf))
    assert rc == 2 and "controllerDLegerSelfId n5 is not one of controllerDLegerPeers" in err


@pytest.mark.slow
def test_controller_embedded_in_name_server(tmp_path):
    ns_port, ctl_port, raft_port = free_ports(3)
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort={ns_port}\nkvConfigPath={tmp_path}/kv.json\nenableControllerInNamesrv=true\n"
                    f"controllerDLegerGroup=group1\ncontrollerDLegerPeers=n0-127.0.0.1:{ctl_port}\n"
                    f"controllerDLegerSelfId=n0\ncontrollerRaftPeers=n0-127.0.0.1:{raft_port}\n"
                    f"controllerStorePath={tmp_path}/DLedgerController\n"
                    f"configStorePath={tmp_path}/controller.properties\n")
    proc = RmqdProcess("namesrv", "-c", str(conf), log_path=tmp_path / "namesrv.log", ready=READY)
    try:
        ready = proc.start(30).ready_line
        assert ready.startswith("rmqd ready:"), "".join(proc.lines)
        assert f"name server 127.0.0.1:{ns_port}" in ready and f"controller n0 127.0.0.1:{ctl_port}" in ready
        assert call(f"127.0.0.1:{ns_port}", 106).code == 0                   # the name server
        leader = find_leader([f"127.0.0.1:{ctl_port}"], 15)                  # and the controller, same process
        assert call(leader, 1012, {"clusterName": "c", "brokerName": "b"}).ext_fields["nextBrokerId"] == "1"
        assert call(f"127.0.0.1:{ns_port}", 1005).code == 3                  # not on the name server's port
    finally:
        rc = proc.stop(20)
    assert rc == 0
    assert os.path.exists(tmp_path / "DLedgerController" / "raft.journal")
