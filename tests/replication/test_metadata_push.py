"""The master's WAIT_METADATA_CHANGE with subscription groups and consumer offsets (throttled), and the role
manager's switch history (the console's and metrics' "last switch")."""
from __future__ import annotations

import asyncio

from rmqd.config import BrokerConfig, BrokerRole
from rmqd.remoting.command import new_request
from rmqd.replicas import role_manager as R
from rmqd.replicas.role_manager import RoleManager
from rmqd.replicas.slave_sync import OFFSET_PUSH_S, WAIT_METADATA_CHANGE, MetadataChangeWaiter
from rmqd.store.metadata import ConsumerOffsetManager, SubscriptionGroupConfig, SubscriptionGroupManager, \
    TopicConfigManager


def _ext(topics, groups, offset_version: str, hold_ms: int = 2000) -> dict:
    t, g = topics.data_version, groups.data_version
    return {"topicTimestamp": str(t.timestamp), "topicCounter": str(t.counter), "groupTimestamp": str(g.timestamp),
            "groupCounter": str(g.counter), "offsetVersion": offset_version, "holdMillis": str(hold_ms),
            "brokerId": "2"}


class _Conn:
    closed = False
    remote_address = "127.0.0.1:1"


def test_master_answers_group_changes_at_once_and_offsets_at_most_every_push_period(tmp_path):
    topics, groups = TopicConfigManager(str(tmp_path)), SubscriptionGroupManager(str(tmp_path))
    offsets = ConsumerOffsetManager(str(tmp_path))
    waiter = MetadataChangeWaiter(topics, groups, offsets)

    async def run() -> list:
        loop = asyncio.get_running_loop()
        out = []

        async def wait(ext: dict) -> tuple[float, dict]:
            t0 = loop.time()
            resp = await waiter.wait(_Conn(), new_request(WAIT_METADATA_CHANGE, ext))
            return loop.time() - t0, resp.ext_fields
        # a slave that holds everything: nothing to say until a group is created
        ext = _ext(topics, groups, str(offsets.change_count))
        loop.call_later(0.2, groups.update, SubscriptionGroupConfig.from_json({"groupName": "G1"}))
        out.append(await wait(ext))
        assert waiter.holds_groups(2, int(ext["groupTimestamp"]), int(ext["groupCounter"]))
        # offsets moved: the first answer at once, the next not before OFFSET_PUSH_S after it
        offsets.commit_offset("c", "G1", "T", 0, 1)
        out.append(await wait(_ext(topics, groups, "0")))
        offsets.commit_offset("c", "G1", "T", 0, 2)
        out.append(await wait(_ext(topics, groups, out[-1][1]["offsetVersion"])))
        return out
    (t_group, group), (t_off1, off1), (t_off2, off2) = asyncio.run(run())
    assert group == {"changed": "true", "what": "group"} and 0.15 < t_group < 1.0
    assert off1["what"] == "offset" and off1["offsetVersion"] == "1" and t_off1 < 0.1
    assert off2["what"] == "offset" and off2["offsetVersion"] == "2"
    assert OFFSET_PUSH_S - 0.06 <= t_off2 < OFFSET_PUSH_S + 0.3          # throttled, not held for the whole hold


def test_a_slave_of_an_older_kind_hears_only_of_topics(tmp_path):
    topics, groups = TopicConfigManager(str(tmp_path)), SubscriptionGroupManager(str(tmp_path))
    offsets = ConsumerOffsetManager(str(tmp_path))
    waiter = MetadataChangeWaiter(topics, groups, offsets)
    offsets.commit_offset("c", "G", "T", 0, 1)
    t = topics.data_version
    ext = {"topicTimestamp": str(t.timestamp), "topicCounter": str(t.counter), "holdMillis": "200", "brokerId": "1"}
    resp = asyncio.run(waiter.wait(_Conn(), new_request(WAIT_METADATA_CHANGE, ext)))
    assert resp.ext_fields == {"changed": "false"}


def test_role_switch_history_and_causes():
    rm = RoleManager(BrokerConfig(brokerRole="SLAVE", brokerId=1))
    assert rm.snapshot()["lastSwitch"] is None
    rm.change_to_slave(3)                           # an id, no controller decision (epoch 0): not a switch
    assert rm.last_switch is None
    rm.epoch = 1
    rm.change_to_slave(3)
    assert rm.last_switch.cause == R.BECAME_SLAVE and rm.last_switch.epoch == 1
    rm.epoch = 2
    rm.change_to_slave(3)
    assert rm.last_switch.cause == R.FOLLOWED_NEW_MASTER
    rm.epoch = 3
    rm.set_fenced(True)                             # a slave fenced is no switch
    rm.change_to_master(BrokerRole.SYNC_MASTER)
    rm.set_fenced(False)
    assert rm.last_switch.cause == R.ELECTED_MASTER and rm.last_switch.role == "SYNC_MASTER"
    rm.set_fenced(True)                             # the lease watch
    assert rm.last_switch.cause == R.FENCED_LEASE_LOST
    rm.set_fenced(False)
    assert rm.last_switch.cause == R.LEASE_REGAINED
    rm.set_fenced(True)
    rm.epoch = 4
    rm.change_to_slave(3)                           # another master elected: the fenced one steps down
    snap = rm.snapshot()
    assert snap["lastSwitch"]["cause"] == R.BECAME_SLAVE and snap["lastSwitch"]["epoch"] == 4
    assert snap["switchCounts"] == {R.ELECTED_MASTER: 1, R.BECAME_SLAVE: 2, R.FOLLOWED_NEW_MASTER: 1,
                                    R.FENCED_LEASE_LOST: 2, R.LEASE_REGAINED: 1}
    assert [s["cause"] for s in snap["switches"]][-2:] == [R.FENCED_LEASE_LOST, R.BECAME_SLAVE]
