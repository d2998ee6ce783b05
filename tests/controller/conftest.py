"""Fixtures of the controller tests (helpers in ctlkit.py)."""
from __future__ import annotations

import pytest

from rmqd.controller.config import ControllerConfig
from tests.controller.ctlkit import InProcessController, find_leader, free_ports


@pytest.fixture(scope="session")
def single_controller(tmp_path_factory):
    """One in-process controller node (a one-member Raft group), leading, for the whole session."""
    root = tmp_path_factory.mktemp("ctl-single")
    port, raft = free_ports(2)
    config = ControllerConfig(controllerDLegerGroup="solo", controllerDLegerPeers=f"n0-127.0.0.1:{port}",
                              controllerDLegerSelfId="n0", controllerRaftPeers=f"n0-127.0.0.1:{raft}",
                              controllerStorePath=str(root / "raft"),
                              configStorePath=str(root / "controller.properties"),
                              scanNotActiveBrokerInterval=500, scanInactiveMasterInterval=1000)
    node = InProcessController(config).start()
    find_leader([node.addr], 15)
    yield node
    node.stop()
