"""Three controller processes on loopback, driven over the wire by fake brokers.

One cluster for the module; the tests run in order and each leaves it whole (all three up, links healed):
register -> apply id -> heartbeat -> elect; a master's heartbeat expires -> a new master is elected and
NOTIFY_BROKER_ROLE_CHANGED pushed; kill -9 of the leader; a partitioned leader (its Raft links cut by
fault-injecting proxies) stops serving while the majority goes on; all three killed and restarted.
The fault rounds repeat RMQD_CONTROLLER_FAULT_ROUNDS times (1 here; scripts/controller_faults.py runs more).
"""
from __future__ import annotations

import os
import time

import pytest

from tests.controller.ctlkit import (
    NOT_LEADER,
    agreed_leader,
    ControllerCluster,
    FakeBroker,
    Heartbeater,
    call,
    find_leader,
    kill_leader_round,
    master_expiry_round,
    partition_leader_round,
    replica_info,
    sync_state_set_body,
)

CLUSTER = "DefaultCluster"
GROUP = "broker-a"
ROUNDS = int(os.environ.get("RMQD_CONTROLLER_FAULT_ROUNDS", "1"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ControllerCluster(str(tmp_path_factory.mktemp("ctl-cluster"))).start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def group(cluster):
    """Three fake brokers of broker-a, heartbeating to all controllers."""
    brokers = [FakeBroker(CLUSTER, GROUP, epoch=1, max_offset=100 * (i + 1), priority=1) for i in range(3)]
    hb = Heartbeater(cluster.addrs, brokers).start()
    yield brokers, hb
    hb.stop()
    for b in brokers:
        b.close()


@pytest.mark.slow
def test_register_apply_heartbeat_elect(cluster, group):
    brokers, hb = group
    leader = find_leader(cluster.addrs)
    for i, b in enumerate(brokers):
        resp = b.join(leader)
        assert b.broker_id == i + 1
        assert "masterBrokerId" not in resp.ext_fields          # no master yet
    hb.beat_once()
    first = brokers[0].elect(leader)
    assert first.code == 0, first.remark
    assert first.ext_fields["masterBrokerId"] == "1" and first.ext_fields["masterEpoch"] == "1"
    for b in brokers[1:]:
        again = b.elect(leader)
        assert again.code == 2011 and again.ext_fields["masterBrokerId"] == "1"    # MASTER_STILL_EXIST
    # the master grows its SyncStateSet to everybody
    r = call(leader, 1001, {"brokerName": GROUP, "masterBrokerId": 1, "masterEpoch": 1},
             sync_state_set_body([1, 2, 3], 1))
    assert r.code == 0 and r.ext_fields["newSyncStateSetEpoch"] == "2"
    header, body = replica_info(leader, GROUP)
    assert header["masterBrokerId"] == "1" and header["masterAddress"] == brokers[0].addr
    assert body == {"syncStateSet": [1, 2, 3], "syncStateSetEpoch": 2}
    # a registering broker now hears about the live master
    assert brokers[2].register(leader).ext_fields["masterBrokerId"] == "1"
    # all agree on who leads, and the followers refuse leader-only requests
    leader = agreed_leader(cluster.addrs)
    for addr in cluster.addrs:
        if addr != leader:
            assert call(addr, 1004, {"brokerName": GROUP}).code == NOT_LEADER


@pytest.mark.slow
def test_master_heartbeat_expiry_elects_new_master(cluster, group):
    brokers, hb = group
    for _ in range(ROUNDS):
        # heartbeat timeout 2 s + scan period 0.5 s, with slack for a loaded machine
        assert master_expiry_round(cluster, brokers, GROUP, hb) < 6.0
    # the first round replaced broker 1 by broker 3, the one with the highest offset
    assert ROUNDS > 1 or replica_info(find_leader(cluster.addrs), GROUP)[0]["masterBrokerId"] == "3"


@pytest.mark.slow
def test_kill_leader_new_leader_state_intact(cluster, group):
    for _ in range(ROUNDS):
        assert kill_leader_round(cluster, CLUSTER, GROUP, [1, 2, 3]) < 8.0


@pytest.mark.slow
def test_partitioned_leader_stops_majority_goes_on(cluster, group):
    for _ in range(ROUNDS):
        assert partition_leader_round(cluster, CLUSTER, GROUP, [1, 2, 3]) < 8.0


@pytest.mark.slow
def test_all_controllers_killed_and_restarted_keep_state(cluster, group):
    before = replica_info(find_leader(cluster.addrs), GROUP)
    next_id = call(find_leader(cluster.addrs), 1012, {"clusterName": CLUSTER, "brokerName": GROUP})
    for node in cluster.nodes.values():
        node.kill()
    time.sleep(0.2)
    cluster.start()
    leader = agreed_leader(cluster.addrs)
    assert replica_info(leader, GROUP) == before
    assert call(leader, 1012, {"clusterName": CLUSTER, "brokerName": GROUP}).ext_fields == next_id.ext_fields
