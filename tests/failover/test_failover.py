"""Automatic failover of a controller-mode replica group of rmqd processes, with a producer that follows the name
server's route and a checker: kill -9 of the master, a master partitioned from the controller (not from its
clients) that must stop taking writes before another master exists, and the unmodified Java 4.9.8 producer
sending through a kill.

``RMQD_FAILOVER_ROUNDS`` (default 1) repeats the master kill in the same group; ``scripts/failover_rounds.py``
runs many and writes the failover times. ``RMQD_FAILOVER_REPORT=FILE`` appends each round's times (JSON lines).
"""
from __future__ import annotations

import os
import signal
import time
from contextlib import contextmanager
from typing import Iterator

import pytest

import orjson

from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import new_request
from tests.failover.kit import (BROKER_NAME, FailoverGroup, RoutedProducer, SlowDisk, call, check_acked,
                                create_topic, find_leader, read_all_keys, report, route_of, wait_until)
from tests.replication.procs import BlockingClient, send_one

pytestmark = pytest.mark.slow

ROUNDS = int(os.environ.get("RMQD_FAILOVER_ROUNDS", "1"))
TOPIC = "FailoverTopic"


@contextmanager
def sending_group(tmp_path, **conf: object) -> Iterator[tuple[FailoverGroup, RoutedProducer]]:
    """A started group (all three replicas in sync) with a :class:`RoutedProducer` sending to it; both stopped
    on the way out."""
    group = FailoverGroup(str(tmp_path), **conf)
    producer = None
    try:
        group.start_all()
        group.wait_group(TOPIC, 3)
        producer = RoutedProducer(group.namesrv, TOPIC).start()
        yield group, producer
    finally:
        if producer is not None:
            producer.stop()
        group.stop()


def topics_of(addr: str) -> dict:
    r = call(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    return orjson.loads(r.body_bytes())["topicConfigTable"]


def wait_sending(producer: RoutedProducer, master: str, timeout: float = 15) -> None:
    """Until the producer's sends are being acknowledged on ``master`` (more than 20 in the last half second)."""
    wait_until(lambda: len(producer.acked_after(time.monotonic() - 0.5, master)) > 20, timeout, interval=0.05,
               what="sends on the master")


def check_nothing_lost(group: FailoverGroup, producer: RoutedProducer, fault: str = "") -> dict:
    """The checker on the group's master; with ``fault`` its verdict goes to the report as a summary row."""
    master = wait_until(lambda: group.master_addr(TOPIC), 15, interval=0.05, what="a master in the route")
    verdict = check_acked(master, TOPIC, producer.acked)
    if fault:
        report(fault=fault, summary=True, acked=verdict["acked"], lost=len(verdict["lost"]),
               duplicates=verdict["duplicates"], failures=producer.failures,
               codes={str(k): v for k, v in sorted(producer.codes.items())})
    print(f"checker: {verdict['acked']} acknowledged, {len(verdict['lost'])} lost, {verdict['duplicates']} "
          f"duplicates; send answers {dict(sorted(producer.codes.items()))}")
    assert not verdict["lost"], f"{len(verdict['lost'])} acknowledged messages lost, e.g. {verdict['lost'][:5]}"
    assert len(producer.acked) > 100
    return verdict


def test_kill9_master_fails_over_and_the_old_master_rejoins_as_a_truncated_slave(tmp_path, capsys):
    with sending_group(tmp_path) as (group, producer):
        for rnd in range(ROUNDS):
            st = group.wait_group(TOPIC, 3)
            old = st["masterAddress"]
            old_i = group.index_of(old)
            meta = f"MetaTopic{rnd}"
            create_topic(old, meta, queues=7)           # made on the master just before it dies (rocketmq#9804)
            wait_sending(producer, old)
            t_kill = time.monotonic()
            group.kill9(old_i)
            new = group.wait_new_master(TOPIC, old, 15, "a new master in the name server's route")
            t_route = time.monotonic()
            first = wait_until(lambda: producer.acked_after(t_kill, new), 15, interval=0.02, what="a send acknowledged by "
                               "the new master")[0]
            route = route_of(group.namesrv, TOPIC)
            addrs = [bd["brokerAddrs"] for bd in route["brokerDatas"] if bd["brokerName"] == BROKER_NAME][0]
            assert addrs.get("0") == new and old not in addrs.values()
            assert topics_of(new)[meta]["writeQueueNums"] == 7
            report(fault="kill", round=rnd, route_s=round(t_route - t_kill, 3), first_send_s=round(first - t_kill, 3))
            print(f"round {rnd}: route {t_route - t_kill:.3f} s, first send on the new master {first - t_kill:.3f} s")
            assert first - t_kill < 10
            # the old master comes back as a slave: its epochs become the new master's, its tail is cut
            group.start(old_i)
            st = group.wait_group(TOPIC, 3)
            assert st["masterAddress"] == new
            log = group.log_tail(old_i, 200_000)
            assert f"epoch handshake with {new} done: consistent at" in log
            new_i = group.index_of(new)
            wait_until(lambda: group.epoch_file(old_i) == group.epoch_file(new_i), 10, interval=0.1, what="the same epochs")
        time.sleep(0.5)
        producer.stop()
        check_nothing_lost(group, producer, "kill")
        # mqadmin getBrokerEpoch: every replica's epochs (1007), the master as brokerId 0
        from rmqd.admin.main import main as mqadmin
        capsys.readouterr()
        mqadmin(["getBrokerEpoch", "-n", group.namesrv, "-b", BROKER_NAME])
        out = capsys.readouterr().out
        assert out.count("#brokerAddr") == 3 and "#brokerId\t0" in out, out
        epoch = group.sync_state()["masterEpoch"]
        assert out.count(f"#Epoch: EpochEntry{{epoch={epoch}, startOffset=") == 3, out


def test_master_cut_off_from_the_controller_fences_itself_before_another_is_elected(tmp_path):
    with sending_group(tmp_path, proxies=True) as (group, producer):
        for rnd in range(ROUNDS):
            partition_round(group, producer, rnd)
        producer.stop()
        check_nothing_lost(group, producer, "partition")


def partition_round(group: FailoverGroup, producer: RoutedProducer, rnd: int) -> None:
    st = group.wait_group(TOPIC, 3, timeout=30)
    old = st["masterAddress"]
    old_i = group.index_of(old)
    wait_sending(producer, old)
    probe = BlockingClient(old, timeout=5)
    t_cut = time.monotonic()
    group.proxies[old_i].blackhole()            # the master still serves clients, the controller hears nothing
    old_acks, refused_at = [], None
    i = 0
    try:
        while time.monotonic() - t_cut < 15:
            i += 1
            r = send_one(probe, TOPIC, f"probe{rnd}-{i}", b"x", i % 4)
            if r.code == ResponseCode.SUCCESS:
                old_acks.append(time.monotonic())
            elif r.code == ResponseCode.SERVICE_NOT_AVAILABLE and refused_at is None:
                refused_at = time.monotonic()
                assert "fenced" in (r.remark or "")
            if refused_at is not None and group.master_addr(TOPIC) not in (None, old):
                break
            time.sleep(0.02)
    finally:
        probe.close()
    assert refused_at is not None, "the cut-off master kept accepting sends"
    new = group.wait_new_master(TOPIC, old, 15, "a new master")
    first_new = wait_until(lambda: producer.acked_after(t_cut, new), 15, interval=0.02, what="a send on the new master")[0]
    assert not old_acks or max(old_acks) < first_new, "two masters accepted sends at the same time"
    assert max(producer.acked_after(0, old) or [0]) < first_new
    report(fault="partition", round=rnd, fenced_s=round(refused_at - t_cut, 3),
           first_send_s=round(first_new - t_cut, 3))
    print(f"partition round {rnd}: fenced {refused_at - t_cut:.2f} s after the cut; first send on the new master "
          f"{first_new - t_cut:.2f} s after it")
    group.proxies[old_i].heal()                 # the old master learns the new epoch and follows
    st = group.wait_group(TOPIC, 3, timeout=30)
    assert st["masterAddress"] == new


def test_java_client_sends_through_a_kill9_failover(tmp_path):
    """The unmodified 4.9.8 Java producer (route polled every 500 ms) keeps sending when the master is killed;
    every key it saw SEND_OK is on the new master."""
    from compat_tests.javakit import JavaProcess

    group = FailoverGroup(str(tmp_path))
    java = None
    try:
        group.start_all()
        st = group.wait_group(TOPIC, 3)
        old = st["masterAddress"]
        java = JavaProcess("FailoverProducer", group.namesrv, TOPIC, "2")
        java.wait_for(lambda ev: [e for e in ev if e.get("op") == "ready"], 60, "the Java producer")
        java.wait_for(lambda ev: len([e for e in ev if e.get("op") == "ok"]) > 50, 30, "Java sends")
        group.kill9(group.index_of(old))           # returns once the process is gone
        t_kill = time.time() * 1000
        new = group.wait_new_master(TOPIC, old, 15, "a new master")
        first = java.wait_for(lambda ev: [e["t"] for e in ev if e.get("op") == "ok" and e["t"] > t_kill],
                              30, "a Java send acknowledged after the kill")[0]
        java.wait_for(lambda ev: len([e for e in ev if e.get("op") == "ok" and e["t"] > t_kill]) > 50, 30,
                      "Java sends on the new master")
        java.stop()
        report(fault="kill-java", first_send_s=round((first - t_kill) / 1000, 3))
        print(f"Java producer: first SEND_OK {(first - t_kill) / 1000:.3f} s after the kill")
        acked = {e["key"] for e in java.events if e.get("op") == "ok"}
        keys = read_all_keys(new, TOPIC)
        lost = sorted(acked - keys)
        assert not lost, f"{len(lost)} of {len(acked)} keys the Java client saw SEND_OK are lost: {lost[:5]}"
        assert (first - t_kill) / 1000 < 10
    finally:
        if java is not None:
            java.stop()
        group.stop()


def test_a_master_paused_past_its_lease_acknowledges_nothing_when_it_resumes(tmp_path):
    """SIGSTOP of the master: the controllers elect another after the heartbeat timeout; a send that reached the
    paused master is answered after SIGCONT and must not be SEND_OK (with ``allAckInSyncStateSet=false`` nothing
    but the lease stops it: no slave is waited for; fails without the fencing). The lease is checked by its timer
    and again when an answer is due (``ControllerHAService.put_request``); under uvloop the timer runs first.
    ``RMQD_FAILOVER_SIGSTOP_ALLACK=true`` (scripts/failover_rounds.py) runs the rounds with
    ``allAckInSyncStateSet=true``, where the checker must find nothing acknowledged lost; with ``false`` an ack
    is given before the slaves have the message, so the checker only reports."""
    all_ack = os.environ.get("RMQD_FAILOVER_SIGSTOP_ALLACK", "false")
    with sending_group(tmp_path, allAckInSyncStateSet=all_ack) as (group, producer):
        for rnd in range(ROUNDS):
            sigstop_master_round(group, producer, rnd)
        time.sleep(0.5)
        producer.stop()
        if all_ack == "true":
            check_nothing_lost(group, producer, "sigstop-master")
        else:
            verdict = check_acked(group.master_addr(TOPIC), TOPIC, producer.acked)
            print(f"allAckInSyncStateSet=false: {len(verdict['lost'])} of {verdict['acked']} acknowledged "
                  "messages were not yet on a slave when the master paused")


def sigstop_master_round(group: FailoverGroup, producer: RoutedProducer, rnd: int) -> None:
    st = group.wait_group(TOPIC, 3, timeout=40)
    old = st["masterAddress"]
    old_proc = group.brokers[group.index_of(old)].proc
    wait_sending(producer, old)
    probe = BlockingClient(old, timeout=5)
    try:
        old_proc.send_signal(signal.SIGSTOP)
        t_stop = time.monotonic()
        ext = {"a": "PG", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": str(int(time.time() * 1000)),
               "h": "0", "i": f"KEYS\x01paused{rnd}", "j": "0", "k": "false", "m": "false"}
        opaque = probe.send(new_request(RequestCode.SEND_MESSAGE_V2, ext, b"sent to a paused master"))
        try:
            new = group.wait_new_master(TOPIC, old, 20, "a new master while the old one is paused")
            t_route = time.monotonic()
            first = wait_until(lambda: producer.acked_after(t_stop, new), 15, interval=0.02, what="a send on the new master")[0]
        finally:
            old_proc.send_signal(signal.SIGCONT)
        r = probe.wait_response(opaque, 10)
    finally:
        probe.close()
    assert r.code != ResponseCode.SUCCESS, "the paused master acknowledged a send after it lost its lease"
    assert max(producer.acked_after(0, old) or [0]) < first, "the resumed master acknowledged a producer's send"
    report(fault="sigstop-master", round=rnd, route_s=round(t_route - t_stop, 3), first_send_s=round(first - t_stop, 3))
    print(f"sigstop round {rnd}: new master in the route {t_route - t_stop:.2f} s, first send on it "
          f"{first - t_stop:.2f} s after SIGSTOP; the resumed "
          f"master answered {r.code} {r.remark!r}")
    st = group.wait_group(TOPIC, 3, timeout=30)         # it follows the new master
    assert st["masterAddress"] == new


def test_a_paused_slave_leaves_the_sync_state_set_and_rejoins_after_it_resumes(tmp_path):
    """SIGSTOP of an in-sync slave under ``allAckInSyncStateSet=true``: sends wait for it until the master drops
    it from the SyncStateSet (``haMaxTimeSlaveNotCatchup``), then the master acknowledges again with the other
    replicas; after SIGCONT the slave catches up and is back in the set. The checker reads the master and the
    resumed slave: nothing acknowledged lost on either."""
    with sending_group(tmp_path) as (group, producer):
        for rnd in range(ROUNDS):
            sigstop_slave_round(group, producer, rnd)
        time.sleep(0.5)
        producer.stop()
        check_nothing_lost(group, producer, "sigstop-slave")
        master = group.master_addr(TOPIC)
        for p in group.brokers:                 # every slave has every acknowledged message too
            if p is not None and p.addr != master:
                wait_until(lambda p=p: not check_acked(p.addr, TOPIC, producer.acked)["lost"], 20, interval=0.5,
                           what=f"slave {p.addr} has every acknowledged message")


def sigstop_slave_round(group: FailoverGroup, producer: RoutedProducer, rnd: int) -> None:
    st = group.wait_group(TOPIC, 3, timeout=40)
    master, epoch = st["masterAddress"], st["masterEpoch"]
    slave_i = next(i for i, p in enumerate(group.brokers) if p is not None and p.addr != master)
    slave = group.brokers[slave_i]
    slave_id = next(int(b["brokerId"]) for b in st["inSyncReplicas"] if b["brokerAddress"] == slave.addr)
    wait_sending(producer, master)
    slave.proc.send_signal(signal.SIGSTOP)
    t_stop = time.monotonic()
    try:
        shrunk = wait_until(lambda: (lambda s: s if s and slave_id not in {int(b["brokerId"]) for b in
                                                                           s.get("inSyncReplicas") or ()}
                                     else None)(group.sync_state()), 20, interval=0.05, what="the paused slave out of the set")
        t_shrunk = time.monotonic()
        assert shrunk["masterAddress"] == master and shrunk["masterEpoch"] == epoch, shrunk
        wait_until(lambda: len(producer.acked_after(t_shrunk, master)) > 20, 15, interval=0.05,
                   what="sends acknowledged with the smaller set")
    finally:
        slave.proc.send_signal(signal.SIGCONT)
    t_cont = time.monotonic()
    acks = producer.acked_after(t_stop)
    # sends stall while the paused slave is still in the set: the first ack after the longest gap
    gaps = [(b - a, b) for a, b in zip([t_stop] + acks, acks)]
    stall, resumed = max(gaps)
    st = group.wait_group(TOPIC, 3, timeout=40)         # caught up and back in the set
    t_back = time.monotonic()
    assert st["masterAddress"] == master and st["masterEpoch"] == epoch, st
    report(fault="sigstop-slave", round=rnd, first_send_s=round(resumed - t_stop, 3),
           shrink_s=round(t_shrunk - t_stop, 3), rejoin_s=round(t_back - t_cont, 3))
    print(f"sigstop-slave round {rnd}: set shrunk {t_shrunk - t_stop:.2f} s after SIGSTOP, sends acknowledged "
          f"again {resumed - t_stop:.2f} s after it (longest gap {stall:.2f} s), back in the set "
          f"{t_back - t_cont:.2f} s after SIGCONT")


def leader_kill_round(group: FailoverGroup, producer: RoutedProducer, rnd: int) -> None:
    """kill -9 of the controller leader alone: the master keeps its role through the new leader (no switch, same
    epoch) and sends go on; the killed controller comes back as a follower."""
    st = group.wait_group(TOPIC, 3, timeout=40)
    master, epoch = st["masterAddress"], st["masterEpoch"]
    wait_sending(producer, master)
    leader = group.leader_controller()
    t_kill = time.monotonic()
    leader.kill()
    new_leader = group.leader_controller(exclude=[leader.addr])
    t_leader = time.monotonic()
    wait_until(lambda: len(producer.acked_after(t_leader, master)) > 20, 15, interval=0.05,
               what="sends on the master after the new leader")
    acks = producer.acked_after(t_kill)
    gap, resumed = max((b - a, b) for a, b in zip([t_kill] + acks, acks))
    st = group.sync_state()
    assert st["masterAddress"] == master and st["masterEpoch"] == epoch, st
    report(fault="kill-leader-controller", round=rnd, first_send_s=round(resumed - t_kill, 3),
           leader_s=round(t_leader - t_kill, 3), gap_s=round(gap, 3))
    print(f"leader round {rnd}: new leader {new_leader.addr} {t_leader - t_kill:.2f} s after the kill; "
          f"longest pause between acknowledged sends {gap:.2f} s, ending {resumed - t_kill:.2f} s after "
          "the kill; no master switch")
    leader.start()
    find_leader(group.controller_addrs, 30)


def test_kill9_of_the_master_and_the_leader_controller_together(tmp_path):
    """apache/rocketmq#7689: the master and the controller leader die at once. Another controller leads, elects
    another master, sends resume, and after both come back nothing acknowledged is lost and no queue offset was
    handed out twice (the checker pulls every queue from offset 0). Each round first kills the leader alone
    (:func:`leader_kill_round`). Repeated ``RMQD_FAILOVER_ROUNDS`` times."""
    with sending_group(tmp_path, controllers=3) as (group, producer):
        for rnd in range(ROUNDS):
            leader_kill_round(group, producer, rnd)
            st = group.wait_group(TOPIC, 3, timeout=40)
            old = st["masterAddress"]
            old_i = group.index_of(old)
            wait_sending(producer, old)
            leader = group.leader_controller()
            t_kill = time.monotonic()
            leader.proc.send_signal(signal.SIGKILL)     # the leader first: the election must wait for a new one
            group.brokers[old_i].proc.send_signal(signal.SIGKILL)
            leader.kill()
            group.kill9(old_i)
            new = group.wait_new_master(TOPIC, old, 30, "a new master")
            first = wait_until(lambda: producer.acked_after(t_kill, new), 20, interval=0.02, what="a send on the new master")[0]
            report(fault="kill-master-and-leader", round=rnd, first_send_s=round(first - t_kill, 3))
            print(f"round {rnd}: master and leader controller killed: first send on the new master "
                  f"{first - t_kill:.2f} s later")
            leader.start()
            group.start(old_i)
            st = group.wait_group(TOPIC, 3, timeout=40)
            assert st["masterAddress"] == new
        time.sleep(0.5)
        producer.stop()
        verdict = check_nothing_lost(group, producer, "kill-master-and-leader")
        report(fault="kill-leader-controller", summary=True, acked=verdict["acked"], lost=len(verdict["lost"]),
               duplicates=verdict["duplicates"])


def test_the_whole_group_killed_and_restarted_comes_back_with_everything_acknowledged(tmp_path):
    with sending_group(tmp_path) as (group, producer):
        wait_until(lambda: len(producer.acked) > 200, 10, interval=0.05, what="sends")
        for i in range(3):
            group.kill9(i)
        t_kill = time.monotonic()
        for i in range(3):
            group.start(i)
        st = group.wait_group(TOPIC, 3, timeout=40)
        wait_until(lambda: producer.acked_after(t_kill, st["masterAddress"]), 20, interval=0.05, what="sends after the restart")
        assert st["masterEpoch"] >= 1
        producer.stop()
        check_nothing_lost(group, producer)


def test_min_in_sync_replicas_refuses_sends_until_enough_replicas_are_in_sync(tmp_path):
    group = FailoverGroup(str(tmp_path), minInSyncReplicas=2)
    try:
        group.start_all()
        st = group.wait_group(TOPIC, 3)
        master = st["masterAddress"]
        slaves = [i for i in range(3) if group.brokers[i].addr != master]
        client = BlockingClient(master, timeout=5)
        try:
            assert send_one(client, TOPIC, "before", b"x", 0).code == ResponseCode.SUCCESS
            for i in slaves:
                group.kill9(i)
            wait_until(lambda: len((group.sync_state() or {}).get("inSyncReplicas") or ()) == 1, 15, interval=0.1,
                       what="the SyncStateSet shrunk to the master")
            # the master applies the smaller set when the controller's answer to its proposal arrives, a moment
            # after the controller shows it: until then a send is stored and answered SLAVE_NOT_AVAILABLE
            interim = []

            def refused() -> bool:
                r = send_one(client, TOPIC, "refused", b"x", 0)
                if (r.code, "in-sync replicas not enough" in (r.remark or "")) == (ResponseCode.SYSTEM_ERROR, True):
                    return True
                interim.append(r.code)
                return False
            wait_until(refused, 5, interval=0.05, what="sends refused for want of in-sync replicas")
            assert set(interim) <= {ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT}, interim
            group.start(slaves[0])
            group.wait_group(TOPIC, 2)
            wait_until(lambda: send_one(client, TOPIC, "after", b"x", 0).code == ResponseCode.SUCCESS, 10, interval=0.1,
                       what="sends taken again")
        finally:
            client.close()
    finally:
        group.stop()


#: what a send may get while the master's disk is slow: SEND_OK, or a clear failure
SLOW_DISK_ANSWERS = {ResponseCode.SUCCESS: "SEND_OK", ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
                     ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
                     ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE", ResponseCode.SYSTEM_BUSY: "SYSTEM_BUSY",
                     ResponseCode.SERVICE_NOT_AVAILABLE: "SERVICE_NOT_AVAILABLE", -1: "client time-out (3 s)"}


def rate(producer: RoutedProducer, since: float, by: str) -> float:
    return len(producer.acked_after(since, by)) / max(time.monotonic() - since, 1e-6)


def test_slow_disk_on_the_master_then_a_failover_loses_nothing_acknowledged(tmp_path):
    """The master's store on ext4 on a loop device whose writes the kernel throttles (:class:`SlowDisk`), with
    ``flushDiskType=SYNC_FLUSH`` so every send waits for the disk. The throttle is tightened at run time: sends
    slow down and each either succeeds or fails with a clear code or the client's time-out; the group keeps one
    master and its SyncStateSet. Then the master is killed while its disk is slow: a slave on a fast disk takes
    over with nothing acknowledged lost, and the old master, its disk fast again, rejoins as a slave. Later rounds
    (``RMQD_FAILOVER_ROUNDS``) move the master back onto the slow disk with a designated election (1002)."""
    disk = SlowDisk()
    group = None
    producer = None
    try:
        os.symlink(disk.mount, os.path.join(str(tmp_path), "b0"))
        group = FailoverGroup(str(tmp_path), flushDiskType="SYNC_FLUSH", syncFlushTimeout=2000)
        group.start(0)                                  # the first one up is the first master: its store is slow
        group.wait_group(TOPIC, 1)
        group.start(1)
        group.start(2)
        st = group.wait_group(TOPIC, 3)
        assert st["masterAddress"] == group.brokers[0].addr, st
        producer = RoutedProducer(group.namesrv, TOPIC).start()
        for rnd in range(ROUNDS):
            slow_disk_round(group, producer, disk, rnd)
        time.sleep(0.5)
        producer.stop()
        check_nothing_lost(group, producer, "slow-disk")
        unclear = {c: n for c, n in producer.codes.items() if c not in SLOW_DISK_ANSWERS}
        assert not unclear, f"answers that are neither SEND_OK nor a clear failure: {unclear}"
    finally:
        if producer is not None:
            producer.stop()
        if group is not None:
            group.stop()
        disk.close()


def slow_disk_round(group: FailoverGroup, producer: RoutedProducer, disk: SlowDisk, rnd: int) -> None:
    st = group.wait_group(TOPIC, 3, timeout=40)
    slow = group.brokers[0]
    if st["masterAddress"] != slow.addr:            # a later round: the slow-disk replica becomes master again
        slow_id = next(int(b["brokerId"]) for b in st["inSyncReplicas"] if b["brokerAddress"] == slow.addr)
        r = call(group.controller, 1002, {"clusterName": "FailoverCluster", "brokerName": BROKER_NAME,
                                          "brokerId": str(slow_id), "designateElect": "true"})
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        st = wait_until(lambda: (lambda s: s if s["masterAddress"] == slow.addr else None)(
            group.wait_group(TOPIC, 3, timeout=40)), 40, interval=0.2, what="the slow-disk replica as master")
    epoch = st["masterEpoch"]
    master = slow.addr
    wait_sending(producer, master)
    t0 = time.monotonic()
    time.sleep(1.5)
    fast_rate = rate(producer, t0, master)
    rates = []
    for iops in (40, 4):                            # slow, then very slow; raised at run time
        disk.throttle(write_iops=iops)
        t1 = time.monotonic()
        time.sleep(2.5)
        rates.append((iops, rate(producer, t1, master)))
        st = group.sync_state()
        assert st and st["masterAddress"] == master and st["masterEpoch"] == epoch, st
    codes = dict(producer.codes)
    print(f"slow-disk round {rnd}: {fast_rate:.0f} sends/s on a fast disk; "
          + ", ".join(f"{r:.0f} sends/s at {iops} write IOPS" for iops, r in rates) + f"; answers so far {codes}")
    t_kill = time.monotonic()                       # failover while the disk is slow
    group.kill9(0)
    new = group.wait_new_master(TOPIC, master, 20, "a new master")
    first = wait_until(lambda: producer.acked_after(t_kill, new), 15, interval=0.02, what="a send on the new master")[0]
    report(fault="slow-disk", round=rnd, first_send_s=round(first - t_kill, 3),
           fast_rate=round(fast_rate), slow_rates={str(i): round(r) for i, r in rates})
    print(f"slow-disk round {rnd}: master killed on the slow disk, first send on the new master "
          f"{first - t_kill:.2f} s later")
    disk.throttle(0)
    group.start(0)
    st = group.wait_group(TOPIC, 3, timeout=40)
    assert st["masterAddress"] == new
    new_i = group.index_of(new)                     # the old master rejoined at the new master's epochs
    wait_until(lambda: group.epoch_file(0) == group.epoch_file(new_i), 10, interval=0.1, what="the same epochs")
