"""rmqd and Java 5.x in one controller-mode deployment, on loopback, beyond the CI fault rounds' embedded
controllers: rmqd brokers registered with three standalone Java controllers (ControllerStartup, DLedger), and Java
brokers registered with three ``rmqd controller`` processes. In each: the group forms (ids from the controller,
one master, all in the SyncStateSet), survives kill -9 of its master and of the controller leader, and after the
old master rejoined, the checker finds every acknowledged send and the three CommitLogs are the same bytes."""
from __future__ import annotations

import time

import pytest

from fault_rounds import TOPIC, wait_sending
from java5kit import require_kit5
from mixed_group import Mix, MixedGroup
from queue_checker import check, wait_read_back

from tests.failover.kit import RoutedProducer, wait_until

MIXES = [Mix("rmqd-under-3-java-controllers", "java", ("rmqd", "rmqd", "rmqd"), standalone=True, controllers=3),
         Mix("java-under-3-rmqd-controllers", "rmqd", ("java", "java", "java"), standalone=True, controllers=3)]


def kill_controller_leader(group: MixedGroup) -> str:
    leader = group.leader_controller()
    i = group.controller_addrs.index(leader)
    if group.controllers_java is not None:
        group.controllers_java.kill_node(i)
    else:
        group.controllers_rmqd[i].kill()
    return leader


def restart_controller(group: MixedGroup, addr: str) -> None:
    i = group.controller_addrs.index(addr)
    if group.controllers_java is not None:
        group.controllers_java.restart(i)
    else:
        group.controllers_rmqd[i].start(60)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mix", MIXES, ids=[m.name for m in MIXES])
def test_a_group_under_the_other_kind_of_three_controllers_fails_over_and_loses_nothing(mix, tmp_path):
    require_kit5()
    group = MixedGroup(tmp_path, mix)
    producer = None
    try:
        group.start()
        st = group.wait_group(TOPIC, 3, timeout=180)
        assert {b["brokerId"] for b in st["inSyncReplicas"]} == {1, 2, 3}, st
        producer = RoutedProducer(group.namesrv, TOPIC, pace_s=0.01, route_refresh_s=1.0).start()
        old = group.member(st["masterAddress"])
        wait_sending(producer, old.addr)
        t0 = time.monotonic()
        old.kill9()
        new = group.wait_new_master(TOPIC, old.addr, 60)
        first = wait_until(lambda: producer.acked_after(t0, new), 60, interval=0.05, what="a send on the new master")[0]
        print(f"{mix.name}: kill -9 of {old.describe()}: first send on {new} after {first - t0:.2f} s")
        leader = kill_controller_leader(group)
        t1 = time.monotonic()
        new_leader = group.leader_controller()
        assert new_leader != leader
        wait_until(lambda: len(producer.acked_after(t1, new)) > 20, 60, interval=0.1, what="sends go on under the new leader")
        restart_controller(group, leader)
        old.start()
        st = group.wait_group(TOPIC, 3, timeout=180)
        assert st["masterAddress"] == new, st
        time.sleep(0.5)
        producer.stop()
        wait_read_back(new, TOPIC, producer)
        verdict = check(new, TOPIC, producer, epochs=None)
        print(f"{mix.name}: {verdict.summary()}")
        assert verdict.ok, verdict.summary()
        assert verdict.acked > 100
        upto = group.wait_caught_up(60)
        assert not group.commitlog_differences(upto)
    finally:
        if producer is not None:
            producer.stop()
        group.stop()
