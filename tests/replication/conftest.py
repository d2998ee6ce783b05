"""Fixtures of the replication tests (helpers in :mod:`tests.replication.harness`)."""
from __future__ import annotations

import pytest

from tests.replication.harness import Group


@pytest.fixture
def group_factory(loop_thread, tmp_path):
    groups: list[Group] = []

    def make(master_conf: dict | None = None, slave_conf: dict | None = None, start: bool = True) -> Group:
        g = Group(loop_thread, str(tmp_path / f"group{len(groups)}"), master_conf, slave_conf)
        groups.append(g)
        if start:
            g.start_master()
            g.start_slave()
        return g

    yield make
    for g in groups:
        g.close()
