"""The controller state machine, case by case after Java's ReplicasInfoManagerTest, plus rmqd's fixes."""
from __future__ import annotations

import pytest

from rmqd.controller.codes import ControllerResponseCode as C
from rmqd.controller.elect_policy import DefaultElectPolicy
from rmqd.controller.events import (
    AlterSyncStateSetEvent,
    ElectMasterEvent,
    decode_events,
    encode_events,
)
from rmqd.controller.heartbeat import BrokerHeartbeatManager
from rmqd.controller.replicas_info import ReplicasInfoManager
from rmqd.remoting import fastjson

CLUSTER = "cluster-a"
NAME = "broker-set-a"
IPS = ["127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002"]
ALL_ALIVE = lambda c, b, i: True  # noqa: E731


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def unclean() -> list[bool]:
    return [False]


@pytest.fixture
def rim(unclean) -> ReplicasInfoManager:
    return ReplicasInfoManager(lambda: unclean[0])


@pytest.fixture
def hb() -> BrokerHeartbeatManager:
    return BrokerHeartbeatManager(Clock())


def apply_all(rim: ReplicasInfoManager, result) -> None:
    # Through the log encoding, as a controller applies them.
    for event in decode_events(encode_events(result.events)):
        assert rim.apply(event), event


def replicas(rim: ReplicasInfoManager, name: str = NAME, alive=ALL_ALIVE) -> dict:
    return rim.sync_state_data([name], alive)["replicasInfoTable"][name]


def register(rim, addr, expect_id, expect_master, name=NAME):
    nxt = rim.get_next_broker_id(CLUSTER, name)
    assert nxt.code == 0 and nxt.header["nextBrokerId"] == expect_id
    applied = rim.apply_broker_id(CLUSTER, name, expect_id, f"{addr};1700000000000")
    assert applied.code == 0, applied.remark
    apply_all(rim, applied)
    info = replicas(rim, name)
    ident = [r for r in info["notInSyncReplicas"] + info["inSyncReplicas"] if r["brokerId"] == expect_id][0]
    assert ident == {"brokerName": name, "brokerId": expect_id, "brokerAddress": addr, "alive": True}
    reg = rim.register_broker(CLUSTER, name, expect_id, addr, ALL_ALIVE)
    assert reg.code == 0
    apply_all(rim, reg)
    assert reg.header.get("masterBrokerId") == expect_master


def elect(rim, broker_id, alive=ALL_ALIVE, designate=False, live_info=None):
    result = rim.elect_master(CLUSTER, NAME, broker_id, designate, DefaultElectPolicy(alive, live_info))
    apply_all(rim, result)
    return result


def alter(rim, master, master_epoch, new_set, set_epoch):
    result = rim.alter_sync_state_set(NAME, master, master_epoch, set(new_set), set_epoch, ALL_ALIVE)
    assert result.code == 0, result.remark
    apply_all(rim, result)
    info = rim.get_replica_info(NAME)
    body = fastjson.loads_lenient(info.body)
    assert body == {"syncStateSet": sorted(new_set), "syncStateSetEpoch": set_epoch + 1}


def mock_metadata(rim):
    """Three brokers; 1 elected first, 2 and 3 find it alive; then the set grows to {1,2,3}."""
    for i in range(3):
        register(rim, IPS[i], i + 1, None)
    first = elect(rim, 1)
    assert first.code == 0
    assert first.header == {"masterBrokerId": 1, "masterAddress": IPS[0], "masterEpoch": 1, "syncStateSetEpoch": 1}
    assert elect(rim, 2).code == C.CONTROLLER_MASTER_STILL_EXIST
    assert elect(rim, 3).code == C.CONTROLLER_MASTER_STILL_EXIST
    alter(rim, 1, 1, {1, 2, 3}, 1)


def heartbeats(hb, rows):
    """rows: (brokerId, timeoutMs, epoch, maxOffset, priority)"""
    for bid, timeout, epoch, offset, prio in rows:
        hb.on_heartbeat(CLUSTER, NAME, IPS[bid - 1], bid, timeout, None, epoch, offset, -1, prio)


def test_register_broker_success(rim):
    mock_metadata(rim)
    info = replicas(rim)
    assert (info["masterBrokerId"], info["masterAddress"], info["masterEpoch"], info["syncStateSetEpoch"]) == \
        (1, IPS[0], 1, 2)
    assert len(info["inSyncReplicas"]) == 3 and info["notInSyncReplicas"] == []


def test_register_with_master_exist_resp(rim):
    register(rim, IPS[0], 1, None)
    register(rim, IPS[1], 2, None)
    assert elect(rim, 1).code == 0
    assert elect(rim, 2).code == C.CONTROLLER_MASTER_STILL_EXIST
    register(rim, IPS[2], 3, 1)                       # the master exists and is alive: register says so
    assert elect(rim, 3).code == C.CONTROLLER_MASTER_STILL_EXIST
    info = replicas(rim)
    assert (info["masterBrokerId"], info["masterEpoch"], info["syncStateSetEpoch"]) == (1, 1, 1)
    assert len(info["inSyncReplicas"]) == 1 and len(info["notInSyncReplicas"]) == 2


def test_register_with_old_master_inactive(rim):
    mock_metadata(rim)
    result = elect(rim, 3, alive=lambda c, b, i: i == 3)   # only broker 3 alive: it becomes master
    assert result.code == 0 and result.header["masterBrokerId"] == 3
    info = replicas(rim)
    assert (info["masterBrokerId"], info["masterAddress"], info["masterEpoch"], info["syncStateSetEpoch"]) == \
        (3, IPS[2], 2, 3)
    assert len(info["inSyncReplicas"]) == 1 and len(info["notInSyncReplicas"]) == 2


def test_elect_master_old_master_still_alive(rim, hb):
    mock_metadata(rim)
    heartbeats(hb, [(1, 10**10, 1, 1, 0), (2, 10**10, 1, 2, 0), (3, 10**10, 1, 3, 0)])
    result = rim.elect_master(CLUSTER, NAME, None, False, DefaultElectPolicy(hb.is_active, hb.live_info))
    assert result.code == C.CONTROLLER_MASTER_STILL_EXIST and not result.events
    assert result.header["masterBrokerId"] == 1 and result.header["masterEpoch"] == 1


@pytest.mark.parametrize("rows,winner", [
    # prefer the higher epoch (broker 3 has the higher offset but an older epoch)
    ([(1, -10000, 1, 3, 0), (2, 10**10, 1, 2, 0), (3, 10**10, 0, 3, 0)], 2),
    # same epoch: prefer the higher offset
    ([(1, -10000, 1, 3, 0), (2, 10**10, 1, 2, 0), (3, 10**10, 1, 3, 0)], 3),
    # same epoch and offset: prefer the lower electionPriority value
    ([(1, -10000, 1, 3, 3), (2, 10**10, 1, 3, 2), (3, 10**10, 1, 3, 1)], 3),
    # offsets more than 2^31 apart (Java #10578 casts the difference to int and elects broker 2)
    ([(1, -10000, 1, 3, 0), (2, 10**10, 1, 1, 0), (3, 10**10, 1, (1 << 31) + 5, 0)], 3),
    ([(1, -10000, 1, 3, 0), (2, 10**10, 1, 3 << 32, 0), (3, 10**10, 1, 1 << 32, 0)], 2),
])
def test_elect_master_prefers_epoch_then_offset_then_priority(rim, hb, rows, winner):
    mock_metadata(rim)
    heartbeats(hb, rows)                              # broker 1 (the master) has a negative timeout: dead
    result = rim.elect_master(CLUSTER, NAME, None, False, DefaultElectPolicy(hb.is_active, hb.live_info))
    assert result.code == 0
    assert (result.header["masterBrokerId"], result.header["masterAddress"], result.header["masterEpoch"]) == \
        (winner, IPS[winner - 1], 2)


def test_elect_master_admin_designate(rim):
    mock_metadata(rim)
    result = elect(rim, None, alive=lambda c, b, i: i != 1)
    new_master = result.header["masterBrokerId"]
    assert result.header["masterEpoch"] == 2 and new_master != 1
    alter(rim, new_master, 2, {1, 2, 3}, result.header["syncStateSetEpoch"])
    # admin asks for broker 1, which is not alive
    assert elect(rim, 1, alive=lambda c, b, i: i != 1, designate=True).code == C.CONTROLLER_ELECT_MASTER_FAILED
    # admin asks for the current master, alive
    assert elect(rim, new_master, designate=True).code == C.CONTROLLER_MASTER_STILL_EXIST
    # admin switches to broker 1 (planned switchover)
    result = elect(rim, 1, alive=lambda c, b, i: i != new_master, designate=True)
    assert result.code == 0
    assert (result.header["masterBrokerId"], result.header["masterAddress"], result.header["masterEpoch"]) == \
        (1, IPS[0], 3)
    body = fastjson.loads_lenient(result.body)
    assert body["syncStateSet"] == [1]
    assert body["brokerMemberGroup"] == {"cluster": CLUSTER, "brokerName": NAME,
                                         "brokerAddrs": {1: IPS[0], 2: IPS[1], 3: IPS[2]}}


def test_all_replicas_shutdown_and_restart(rim):
    mock_metadata(rim)
    alter(rim, 1, 1, {1}, 2)
    # the master dies; its set is {1}: nobody can replace it, yet the state records that it is gone
    result = rim.elect_master(CLUSTER, NAME, None, False, DefaultElectPolicy(lambda c, b, i: i != 1))
    assert result.code == C.CONTROLLER_MASTER_NOT_AVAILABLE
    assert result.events == [ElectMasterEvent(NAME, False, None, 1)]
    apply_all(rim, result)
    info = rim.get_replica_info(NAME)
    assert info.header["masterAddress"] is None and info.header["masterEpoch"] == 2
    # broker 2 comes back first and asks: not in the set, no unclean election -> refused
    assert elect(rim, 2, alive=lambda c, b, i: i == 2).code == C.CONTROLLER_ELECT_MASTER_FAILED
    # broker 1 comes back: elected again, epoch moves on
    result = elect(rim, 1)
    assert result.code == 0 and result.header["masterBrokerId"] == 1 and result.header["masterEpoch"] == 3


def test_unclean_election(rim, unclean):
    mock_metadata(rim)
    alter(rim, 1, 1, {1}, 2)
    assert elect(rim, None, alive=lambda c, b, i: i != 1).code == C.CONTROLLER_MASTER_NOT_AVAILABLE
    unclean[0] = True                                # updateControllerConfig enableElectUncleanMaster=true
    result = elect(rim, 2, alive=lambda c, b, i: i == 2)
    assert result.code == 0 and result.header["masterBrokerId"] == 2 and result.header["masterEpoch"] == 3


def test_clean_broker_data(rim):
    mock_metadata(rim)
    r = rim.clean_broker_data(CLUSTER, NAME, "1", False, ALL_ALIVE)
    assert r.code == C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert r.remark == f"Broker [{NAME},  1] is still alive, clean up failure"
    r = rim.clean_broker_data(CLUSTER, NAME, None, False, ALL_ALIVE)
    assert (r.code, r.remark) == (C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                  f"Broker {NAME} is still alive, clean up failure")
    r = rim.clean_broker_data(CLUSTER, NAME, "1;x", False, ALL_ALIVE)
    assert r.code == C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA and 'For input string: "x"' in r.remark
    r = rim.clean_broker_data(CLUSTER, "broker12", "1;2;3", True, lambda c, b, i: False)
    assert (r.code, r.remark) == (C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                  "Broker broker12 is not existed,clean broker data failure.")
    # cleaning a living broker with -l cleans that broker only (Java cleans the whole set)
    r = rim.clean_broker_data(None, NAME, "3", True, ALL_ALIVE)
    assert r.code == 0
    apply_all(rim, r)
    info = replicas(rim)
    assert [x["brokerId"] for x in info["inSyncReplicas"]] == [1, 2]
    assert info["syncStateSetEpoch"] == 3            # the set changed: its epoch moves
    # cleaning the dead master: it is dropped, the master epoch moves, the others stay
    r = rim.clean_broker_data(CLUSTER, NAME, "1", False, lambda c, b, i: i != 1)
    assert r.code == 0
    apply_all(rim, r)
    info = rim.get_replica_info(NAME)
    assert info.header["masterBrokerId"] is None and info.header["masterEpoch"] == 2
    assert rim.get_next_broker_id(CLUSTER, NAME).header["nextBrokerId"] == 4   # ids are never reused
    # the whole set
    r = rim.clean_broker_data(CLUSTER, NAME, "2", False, lambda c, b, i: False)
    apply_all(rim, r)
    assert not rim.contains(NAME)
    assert rim.get_replica_info(NAME).code == C.CONTROLLER_BROKER_METADATA_NOT_EXIST
    assert rim.get_next_broker_id(CLUSTER, NAME).header["nextBrokerId"] == 1


def test_apply_broker_id_rules(rim):
    assert rim.apply_broker_id(CLUSTER, NAME, 2, "a;1").code == C.CONTROLLER_BROKER_ID_INVALID   # new set: 1 first
    register(rim, IPS[0], 1, None)
    # same id, other broker
    assert rim.apply_broker_id(CLUSTER, NAME, 1, f"{IPS[1]};2").code == C.CONTROLLER_BROKER_ID_INVALID
    # same id, same broker (a retry after a lost reply): fine, and idempotent
    again = rim.apply_broker_id(CLUSTER, NAME, 1, f"{IPS[0]};1700000000000")
    assert again.code == 0
    apply_all(rim, again)
    for bad in (0, -1):
        assert rim.apply_broker_id(CLUSTER, NAME, bad, f"{IPS[1]};2").code == C.CONTROLLER_BROKER_ID_INVALID
    # an id applied out of order moves nextBrokerId past it (Java would hand it out again)
    r = rim.apply_broker_id(CLUSTER, NAME, 7, f"{IPS[1]};2")
    apply_all(rim, r)
    assert rim.get_next_broker_id(CLUSTER, NAME).header["nextBrokerId"] == 8


def test_register_updates_changed_address(rim):
    register(rim, IPS[0], 1, None)
    r = rim.register_broker(CLUSTER, NAME, 1, "10.0.0.9:10911", ALL_ALIVE)
    assert r.code == 0 and len(r.events) == 1
    apply_all(rim, r)
    assert rim.replica_info[NAME].address(1) == "10.0.0.9:10911"
    assert rim.register_broker(CLUSTER, NAME, 9, "x:1", ALL_ALIVE).code == C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert rim.register_broker(CLUSTER, "nope", 1, "x:1", ALL_ALIVE).code == C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED


def test_alter_sync_state_set_checks(rim):
    mock_metadata(rim)                               # master 1, epoch 1, set {1,2,3} at epoch 2
    check = lambda *a, alive=ALL_ALIVE: rim.alter_sync_state_set(*a, alive).code  # noqa: E731
    assert check("nope", 1, 1, {1}, 2) == C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    assert check(NAME, 1, 1, {1, 2, 3}, 2) == C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED     # unchanged
    assert check(NAME, 2, 1, {1, 2}, 2) == C.CONTROLLER_INVALID_MASTER
    assert check(NAME, 1, 0, {1, 2}, 2) == C.CONTROLLER_FENCED_MASTER_EPOCH
    assert check(NAME, 1, 1, {1, 2}, 1) == C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
    assert check(NAME, 1, 1, {1, 9}, 2) == C.CONTROLLER_INVALID_REPLICAS
    assert check(NAME, 1, 1, {1, 2}, 2, alive=lambda c, b, i: i != 2) == C.CONTROLLER_BROKER_NOT_ALIVE
    assert check(NAME, 1, 1, {2, 3}, 2) == C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED       # drops the master
    assert replicas(rim)["syncStateSetEpoch"] == 2                                       # nothing changed


def test_stale_events_change_nothing(rim):
    """Two leaders (or a retried request) computed against the same epochs: only the first applies."""
    mock_metadata(rim)
    dead1 = DefaultElectPolicy(lambda c, b, i: i != 1)
    first = rim.elect_master(CLUSTER, NAME, None, False, dead1)
    second = rim.elect_master(CLUSTER, NAME, None, False, DefaultElectPolicy(lambda c, b, i: i == 3))
    assert first.code == 0 and second.code == 0
    assert all(rim.apply(e) for e in first.events)
    before = rim.snapshot()
    assert not any(rim.apply(e) for e in second.events)
    assert rim.snapshot() == before
    assert not rim.apply(AlterSyncStateSetEvent(NAME, (1, 2), 1, 2))      # epochs moved on
    assert rim.snapshot() == before


def test_scan_need_reelect(rim):
    mock_metadata(rim)
    assert rim.scan_need_reelect_broker_sets(ALL_ALIVE) == []
    assert rim.scan_need_reelect_broker_sets(lambda c, b, i: i != 1) == [NAME]
    assert rim.scan_need_reelect_broker_sets(lambda c, b, i: False) == []   # nobody alive: nothing to elect


def test_unknown_set_codes(rim):
    assert rim.elect_master(CLUSTER, NAME, 1, False, DefaultElectPolicy()).code == \
        C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert rim.get_replica_info(NAME).code == C.CONTROLLER_BROKER_METADATA_NOT_EXIST
    assert rim.get_next_broker_id(CLUSTER, NAME).header["nextBrokerId"] == 1
    assert fastjson.loads_lenient(rim.get_sync_state_data([NAME], ALL_ALIVE).body) == {"replicasInfoTable": {}}


def test_first_election_needs_a_registered_requester(rim):
    register(rim, IPS[0], 1, None)
    assert elect(rim, 5).code == C.CONTROLLER_ELECT_MASTER_FAILED     # Java would make unknown broker 5 master
    assert elect(rim, 1).code == 0


def test_serialize(rim):
    mock_metadata(rim)
    apply_all(rim, rim.apply_broker_id(CLUSTER, "broker-b", 1, "127.0.0.1:9100;1"))
    data = rim.snapshot()
    other = ReplicasInfoManager()
    other.restore(data)
    assert other.replica_info == rim.replica_info
    assert other.sync_state_info == rim.sync_state_info
    assert other.snapshot() == data
    with pytest.raises(ValueError):
        other.restore(b'{"version": 99}')


@pytest.mark.parametrize("payload", [b'[{"type": [1]}]', b'[{"type": "1"}]', b'[{"type": 99}]', b'[{}]', b'[1]',
                                     b'{"type": 1}', b'[{"type": 1, "brokerName": "b"}]'])
def test_a_malformed_log_entry_is_a_value_error(payload):
    """Controller.apply_entry skips (and logs) an entry that raises ValueError; an unhashable type raised TypeError."""
    with pytest.raises(ValueError):
        decode_events(payload)


def test_elect_master_prefers_a_fresh_candidate_to_one_cut_off_with_the_master(rim):
    # A partition cut the master (1) off with slave 2 at the same moment: 2 is still within its 3 s time-out when
    # 1 expires, but its heartbeat is as old; 3 heartbeats on. 2 ranks first (higher offset), yet 3 is elected: 2
    # would be master only until its own heartbeat expired, leaving it alone in the SyncStateSet and no master.
    clock = Clock()
    hb = BrokerHeartbeatManager(clock)
    mock_metadata(rim)
    heartbeats(hb, [(1, 3000, 1, 5, 0)])
    clock.now += 100
    heartbeats(hb, [(2, 3000, 1, 5, 0)])                 # the cut: neither 1 nor 2 heartbeats after this
    clock.now += 2950
    heartbeats(hb, [(3, 3000, 1, 4, 0)])
    assert not hb.is_active(CLUSTER, NAME, 1) and hb.is_active(CLUSTER, NAME, 2) and hb.is_fresh(CLUSTER, NAME, 3)
    assert not hb.is_fresh(CLUSTER, NAME, 2)
    result = rim.elect_master(CLUSTER, NAME, None, False, DefaultElectPolicy(hb.is_active, hb.live_info, hb.is_fresh))
    assert result.code == 0 and result.header["masterBrokerId"] == 3
    # without the freshness order (Java's policy) the slave cut off with the master wins
    assert DefaultElectPolicy(hb.is_active, hb.live_info).elect(CLUSTER, NAME, [1, 2, 3], None, 1, None) == 2
    # when no candidate is fresh, the alive ones are ranked as before
    clock.now += 1600
    assert not hb.is_fresh(CLUSTER, NAME, 3) and hb.is_active(CLUSTER, NAME, 3)
    assert DefaultElectPolicy(hb.is_active, hb.live_info, hb.is_fresh).elect(CLUSTER, NAME, [1, 2, 3], None, 1,
                                                                             None) == 3
