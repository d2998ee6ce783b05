"""Fixtures of the feature tests."""
from __future__ import annotations

import pytest
from tests.features.sched_helpers import Broker


@pytest.fixture
def rb(tmp_path):
    """A restartable broker with short delay levels (sched_helpers.Broker); the transaction,
    query, queue-lock and reply modules define their own ``rb``."""
    b = Broker(str(tmp_path / "store")).start()
    yield b
    b.stop()
