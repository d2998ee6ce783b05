"""Three controller processes on loopback, driven over the wire by fake brokers.

One cluster for the module; the tests run in order and each leaves it whole (all three up, links healed):
register -> apply id -> heartbeat -> elect; a master's heartbeat expires -> a new master is elected and
NOTIFY_BROKER_ROLE_CHANGED pushed; kill -9 of the leader; a partitioned leader (its Raft links cut by
fault-injecting proxies) stops serving while the majority goes on.
"""
from __future__ import annotations

import time

import pytest

from ctlkit import (
    NOT_LEADER,
    ControllerCluster,
    FakeBroker,
    Heartbeater,
    call,
    find_leader,
    metadata,
    sync_state_set_body,
    wait_until,
)
from rmqd.remoting import fastjson

CLUSTER = "DefaultCluster"
GROUP = "broker-a"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ControllerCluster(str(tmp_path_factory.mktemp("ctl-cluster"))).start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def group(cluster):
    """Three fake brokers of broker-a, heartbeating to all controllers; b1 is elected master first."""
    brokers = [FakeBroker(CLUSTER, GROUP, epoch=1, max_offset=100 * (i + 1), priority=1) for i in range(3)]
    hb = Heartbeater(cluster.addrs, brokers).start()
    yield brokers, hb
    hb.stop()
    for b in brokers:
        b.close()


def replica_info(leader: str) -> tuple[dict, dict]:
    r = call(leader, 1004, {"brokerName": GROUP})
    assert r.code == 0, r.remark
    return r.ext_fields, fastjson.loads_lenient(r.body_bytes())


def grow_sync_state_set(leader: str, members: list[int]) -> dict:
    """The current master reports ``members`` in sync (CONTROLLER_ALTER_SYNC_STATE_SET at the current epochs)."""
    header, body = replica_info(leader)
    r = call(leader, 1001, {"brokerName": GROUP, "masterBrokerId": header["masterBrokerId"],
                            "masterEpoch": header["masterEpoch"]},
             sync_state_set_body(members, body["syncStateSetEpoch"]))
    assert r.code == 0, r.remark
    return fastjson.loads_lenient(r.body_bytes())


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
    header, body = replica_info(leader)
    assert header["masterBrokerId"] == "1" and header["masterAddress"] == brokers[0].addr
    assert body == {"syncStateSet": [1, 2, 3], "syncStateSetEpoch": 2}
    # a registering broker now hears about the live master
    assert brokers[2].register(leader).ext_fields["masterBrokerId"] == "1"
    # followers refuse leader-only requests, and agree on who leads
    for addr in cluster.addrs:
        if addr != leader:
            assert call(addr, 1004, {"brokerName": GROUP}).code == NOT_LEADER
            assert metadata(addr)["controllerLeaderAddress"] == leader


def test_master_heartbeat_expiry_elects_new_master(cluster, group):
    brokers, hb = group
    leader = find_leader(cluster.addrs)
    master = brokers[0]
    master.beating = False                          # hung master: its connections stay open, heartbeats stop
    t0 = time.monotonic()

    def new_master():
        r = call(leader, 1004, {"brokerName": GROUP})
        return r.code == 0 and r.ext_fields.get("masterBrokerId") not in (None, "1") and r
    r = wait_until(new_master, 15, 0.1, "a new master")
    elapsed = time.monotonic() - t0
    # broker 3 has the highest offset among the alive in-sync replicas
    assert r.ext_fields["masterBrokerId"] == "3" and r.ext_fields["masterEpoch"] == "2"
    assert fastjson.loads_lenient(r.body_bytes()) == {"syncStateSet": [3], "syncStateSetEpoch": 3}
    assert elapsed < 2.0 + 0.5 + 1.0 + 3.0         # heartbeat timeout + scan period + slack
    # the alive brokers were told at once; the hung one was not
    for b in brokers[1:]:
        last = wait_until(lambda b=b: [c for c in b.sink.role_changes() if c.ext_fields["masterEpoch"] == "2"],
                          5, 0.05, f"1008 at {b.addr}")[-1]
        assert last.ext_fields["masterBrokerId"] == "3" and last.ext_fields["masterEpoch"] == "2"
        assert last.ext_fields["masterAddress"] == brokers[2].addr
        assert fastjson.loads_lenient(last.body_bytes()) == {"syncStateSet": [3], "syncStateSetEpoch": 3}
    assert [c.ext_fields["masterEpoch"] for c in master.sink.role_changes()] == ["1"]   # only the first
    # the old master comes back: it registers as a slave of broker 3
    master.beating = True
    hb.beat_once()
    assert master.register(leader).ext_fields["masterBrokerId"] == "3"
    r = call(leader, 1001, {"brokerName": GROUP, "masterBrokerId": 3, "masterEpoch": 2},
             sync_state_set_body([1, 2, 3], 3))
    assert r.code == 0, r.remark


def test_kill_leader_new_leader_state_intact(cluster, group):
    leader = find_leader(cluster.addrs)
    before = replica_info(leader)
    victim = cluster.nodes[cluster.id_of(leader)]
    t0 = time.monotonic()
    victim.kill()
    new_leader = find_leader(cluster.addrs, 15, exclude=[leader])
    elapsed = time.monotonic() - t0
    assert new_leader != leader and elapsed < 8.0
    assert replica_info(new_leader) == before
    # writes go on: the next broker id is still 4 and a planned switchover works
    assert call(new_leader, 1012, {"clusterName": CLUSTER, "brokerName": GROUP}).ext_fields["nextBrokerId"] == "4"
    r = call(new_leader, 1002, {"clusterName": CLUSTER, "brokerName": GROUP, "brokerId": 2, "designateElect": "true"})
    assert r.code == 0 and r.ext_fields["masterBrokerId"] == "2" and r.ext_fields["masterEpoch"] == "3"
    victim.start()                                  # the old leader rejoins as a follower on its store
    wait_until(lambda: (metadata(victim.addr) or {}).get("controllerLeaderAddress") == new_leader, 15, 0.1,
               "the restarted controller following the new leader")
    assert call(victim.addr, 1004, {"brokerName": GROUP}).code == NOT_LEADER


def test_partitioned_leader_stops_majority_goes_on(cluster, group):
    leader = find_leader(cluster.addrs)
    isolated = cluster.id_of(leader)
    before = replica_info(leader)
    cluster.isolate(isolated)
    try:
        t0 = time.monotonic()
        new_leader = find_leader(cluster.addrs, 15, exclude=[leader])
        failover = time.monotonic() - t0
        assert failover < 8.0
        # the cut-off leader steps down and refuses to read or elect
        wait_until(lambda: call(leader, 1004, {"brokerName": GROUP}).code == NOT_LEADER, 10, 0.1,
                   "the isolated controller stepping down")
        elect = call(leader, 1002, {"clusterName": CLUSTER, "brokerName": GROUP, "brokerId": 1,
                                    "designateElect": "true"})
        assert elect.code == NOT_LEADER
        # the majority keeps the state and keeps electing
        assert replica_info(new_leader) == before
        grow_sync_state_set(new_leader, [1, 2, 3])
        r = call(new_leader, 1002, {"clusterName": CLUSTER, "brokerName": GROUP, "brokerId": 1,
                                    "designateElect": "true"})
        assert r.code == 0 and r.ext_fields["masterBrokerId"] == "1"
        after = replica_info(new_leader)
        # the minority never learns of it while cut off, and never claims to lead
        for _ in range(10):
            assert (metadata(leader) or {}).get("isLeader") != "true"
            time.sleep(0.1)
    finally:
        cluster.heal()
    # healed: one leader for all three, with the majority's state
    final = find_leader(cluster.addrs, 20)
    wait_until(lambda: all((metadata(a) or {}).get("controllerLeaderAddress") == final for a in cluster.addrs),
               15, 0.2, "all controllers agreeing on the leader")
    assert replica_info(final) == after
