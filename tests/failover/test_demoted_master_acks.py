"""A master demoted to slave while sends wait for their SyncStateSet acknowledgements (a planned switchover,
electMaster) must not answer them SEND_OK: the new master may not have them. Found by the slow-disk rounds of
scripts/failover_rounds.py (the designated election moving the master back): 6 acknowledged messages lost in 10
rounds, the demoted master's waits completed as soon as its emptied set left "nobody to wait for"."""
from __future__ import annotations

from rmqd.store.ha.autoswitch import ControllerHAService
from rmqd.store.ha.config import HAConfig


class _Store:
    """What ControllerHAService uses of a store here: the CommitLog's max offset, and where its checkpoint would
    read the confirmOffset from (the local store at the bottom of the chain, ``message_store``, is itself)."""

    def __init__(self) -> None:
        self.message_store = self
        self.max_offset = 0
        self.confirm_offset_source = None

    def commitlog_max_offset(self) -> int:
        return self.max_offset

    def record_confirm_offset_from(self, source) -> None:
        self.confirm_offset_source = source


def _service() -> tuple[ControllerHAService, _Store]:
    store = _Store()
    ha = ControllerHAService(store, HAConfig(), slave=False, all_ack=True)
    ha.become_master(1, 0)
    ha.set_sync_state_set(frozenset({1, 2}))
    return ha, store


def test_a_demoted_master_does_not_acknowledge_its_waiting_sends():
    ha, store = _service()
    answers = []
    store.max_offset = 500
    ha.put_request(500, answers.append)               # waits for broker 2's acknowledgement
    assert answers == []
    ha.become_slave(1)                                # the controller elected broker 2 (or 3)
    ha._recompute()                                   # a late acknowledgement, a set change: what completes
    assert answers == [], "a demoted master answered SEND_OK for a send its successor may not have"


def test_a_put_on_a_demoted_master_is_not_acknowledged_at_once():
    ha, store = _service()
    ha.become_slave(1)
    answers = []
    store.max_offset = 800
    ha.put_request(800, answers.append)               # a put appended just before the demotion
    assert answers == []


def test_a_master_alone_in_its_set_acknowledges_at_once():
    ha, store = _service()
    ha.set_sync_state_set(frozenset({1}))
    answers = []
    store.max_offset = 300
    ha.put_request(300, answers.append)
    assert answers == [True]
