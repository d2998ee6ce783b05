"""Fault rounds on a mixed controller-mode group (compat_tests/mixed_group.py) whose members run on hosts of their own
(compat_tests/netkit.py), with routed producers and a consumer recording what they saw (compat_tests/queue_checker.py).

A round: wait until the group has a master and all three replicas in its SyncStateSet, keys tagged with the
round's name, sends acknowledged by the master; inject the fault (``t0``); wait for what it must bring (a new master
in the name server's route for the faults that take the master away; the fault's length for the others); heal; wait
until the group is whole again. Each round records ``first_send_s`` (``t0`` to the first send acknowledged after
it; after a switch, by the new master), ``gap_s`` (the longest pause between acknowledged sends from ``t0`` until
the group is whole), ``switched`` and the new master's kind. :func:`judge` runs the checker once for all rounds of a
group and splits its findings by round (the keys carry the round's name).

Faults (:data:`FAULTS`): ``kill9`` and ``sigstop`` of the master; ``partition-node`` (the master cut off from
every host and the clients), ``partition-minority`` (the master and one slave cut off from the controller, the other
slave and the name server; clients reach both sides), ``partition-master-controller`` (the master cut off from the
controller host only), ``one-way-loss`` (every packet from the master to the controller host lost, the other way
fine); ``latency-loss`` (200 ms on every packet the master sends and 5 % of them lost, for
:data:`NET_FAULT_S`), ``reorder-replication`` (the master's replication link: 200 ms, 30 % of packets let through
at once, overtaking the held ones), ``flapping-link`` (the master's link down 1 s, up 1 s, three times);
``slow-disk`` (the master moved onto the member whose store is on a throttled loop device, its writes capped at 40
IOPS, then kill -9 of it).
"""
from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from mixed_group import BROKER_NAME, CLUSTER, Member, MixedGroup, broker_epochs
from netkit import NetKit
from queue_checker import RoutedConsumer, Verdict, check, wait_read_back

from tests.failover.kit import RoutedProducer, SlowDisk, call, wait_until

TOPIC = "MixedFaultTopic"
NET_FAULT_S = 4.0
PACE_S = 0.01                   # each of the two producer threads sends at most ~100 messages a second
ROUTE_REFRESH_S = 1.0           # the producers ask the name server for the route every second (the Java kit's 0.5 s)
SWITCH_TIMEOUT_S = 20.0
WHOLE_TIMEOUT_S = 90.0
JAVA_STUCK_S = 45.0


@dataclass
class RoundContext:
    """What a round works on."""

    group: MixedGroup
    net: Optional[NetKit]
    producer: RoutedProducer
    consumer: Optional[RoutedConsumer]
    disk: Optional[SlowDisk] = None
    slow_member: int = 0
    records: list[dict] = field(default_factory=list)
    log: Callable[[str], None] = print
    fault_at: Optional[float] = None        # set by a fault whose decisive moment comes after it starts (slow disk)


@dataclass(frozen=True)
class Fault:
    """``inject(ctx, master)`` starts the fault and returns what heals it; ``switch``: the fault takes the master
    away (a new one must be routed); ``net``: needs the hosts of a NetKit."""

    name: str
    inject: Callable[[RoundContext, Member], Callable[[], None]]
    switch: bool
    net: bool = True


def _nothing() -> None:
    return None


def _kill9(ctx: RoundContext, master: Member) -> Callable[[], None]:
    master.kill9()
    return master.start


def _sigstop(ctx: RoundContext, master: Member) -> Callable[[], None]:
    master.signal(signal.SIGSTOP)
    return lambda: master.signal(signal.SIGCONT)


def _host(ctx: RoundContext, m: Member):
    return ctx.group.host(f"b{m.index}")


def _partition_node(ctx: RoundContext, master: Member) -> Callable[[], None]:
    ctx.net.isolate(_host(ctx, master), clients_too=True)
    return ctx.net.heal


def _partition_minority(ctx: RoundContext, master: Member) -> Callable[[], None]:
    slaves = [m for m in ctx.group.members if m is not master]
    minority = [_host(ctx, master), _host(ctx, slaves[0])]
    majority = ctx.group.controller_hosts() + [_host(ctx, slaves[1])]
    ctx.net.partition(minority, majority)
    return ctx.net.heal


def _partition_master_controller(ctx: RoundContext, master: Member) -> Callable[[], None]:
    ctx.net.partition([_host(ctx, master)], ctx.group.controller_hosts())
    return ctx.net.heal


def _one_way_loss(ctx: RoundContext, master: Member) -> Callable[[], None]:
    for h in ctx.group.controller_hosts():
        ctx.net.drop_one_way(_host(ctx, master), h)
    return ctx.net.heal


def _latency_loss(ctx: RoundContext, master: Member) -> Callable[[], None]:
    host = _host(ctx, master)
    ctx.net.delay(host, 200.0)
    ctx.net.loss(host, 0.05)
    time.sleep(NET_FAULT_S)
    return ctx.net.heal


def _reorder_replication(ctx: RoundContext, master: Member) -> Callable[[], None]:
    ctx.net.delay(_host(ctx, master), 200.0, reorder=0.3, port=master.ha_port)
    time.sleep(NET_FAULT_S)
    return ctx.net.heal


def _flapping_link(ctx: RoundContext, master: Member) -> Callable[[], None]:
    stop = ctx.net.flap(_host(ctx, master), 1.0, 1.0, 6.0)
    time.sleep(6.0)
    return lambda: (stop.set(), ctx.net.heal())


def _slow_disk(ctx: RoundContext, master: Member) -> Callable[[], None]:
    slow = ctx.group.members[ctx.slow_member]
    ctx.disk.throttle(write_iops=40)
    time.sleep(2.0)
    ctx.fault_at = time.monotonic()         # the failover is timed from the kill
    slow.kill9()

    def heal() -> None:
        ctx.disk.throttle(0)
        slow.start()
    return heal


FAULTS = {f.name: f for f in (
    Fault("kill9", _kill9, switch=True, net=False),
    Fault("sigstop", _sigstop, switch=True, net=False),
    Fault("partition-node", _partition_node, switch=True),
    Fault("partition-minority", _partition_minority, switch=True),
    Fault("partition-master-controller", _partition_master_controller, switch=True),
    Fault("one-way-loss", _one_way_loss, switch=True),
    Fault("latency-loss", _latency_loss, switch=False),
    Fault("reorder-replication", _reorder_replication, switch=False),
    Fault("flapping-link", _flapping_link, switch=False),
    Fault("slow-disk", _slow_disk, switch=True, net=False),
)}


def wait_sending(producer: RoutedProducer, master: str, timeout: float = 30) -> None:
    wait_until(lambda: len(producer.acked_after(time.monotonic() - 0.5, master)) > 5, timeout, interval=0.05,
               what=f"sends acknowledged by {master}")


def move_master_to(group: MixedGroup, member: Member) -> dict:
    """A planned switchover to ``member`` (CONTROLLER_ELECT_MASTER 1002 with designateElect, as mqadmin
    electMaster) once it is in the SyncStateSet; the group's state once it is routed."""
    st = group.wait_group(TOPIC, 3, timeout=WHOLE_TIMEOUT_S)
    if st["masterAddress"] == member.addr:
        return st
    target = next(int(b["brokerId"]) for b in st["inSyncReplicas"] if b["brokerAddress"] == member.addr)
    r = call(group.leader_controller(), 1002, {"clusterName": CLUSTER, "brokerName": BROKER_NAME,
                                               "brokerId": str(target), "designateElect": "true"})
    assert r.code == 0, (r.code, r.remark)
    return wait_until(lambda: (lambda s: s if s["masterAddress"] == member.addr else None)(
        group.wait_group(TOPIC, 3, timeout=WHOLE_TIMEOUT_S)), WHOLE_TIMEOUT_S, interval=0.2,
        what=f"{member.describe()} master after electMaster")


def planned_switchover(ctx: RoundContext, target: Member, rnd: int) -> dict:
    """Move the master onto ``target`` (:func:`move_master_to`) as a round of its own, ``switchover``: its keys are
    tagged apart and its record says which kind of master was demoted (a 5.5.0 Java master demoted this way
    acknowledges the sends still waiting for their SyncStateSet, see :data:`JAVA_SPLIT_BRAIN_FAULTS`)."""
    group, producer = ctx.group, ctx.producer
    st = group.wait_group(TOPIC, 3, timeout=WHOLE_TIMEOUT_S)
    old = group.member(st["masterAddress"])
    if old is target:
        return st
    producer.tag = f"switchover.{rnd}."
    wait_sending(producer, old.addr)
    t0 = time.monotonic()
    st = move_master_to(group, target)
    first = wait_until(lambda: producer.acked_after(t0, target.addr), SWITCH_TIMEOUT_S, interval=0.02,
                       what=f"a send acknowledged by {target.describe()} after the switchover")[0]
    rec = dict(mix=group.mix.name, fault="switchover", round=rnd, tag=producer.tag, first_send_s=round(first - t0, 3),
               gap_s=0.0, fault_s=0.0, whole_s=round(time.monotonic() - t0, 3), switched=True, old_master=old.kind,
               old_addr=old.addr, new_master=target.kind, java_restarted=[], unavailable_during_fault=False)
    ctx.records.append(rec)
    ctx.log(f"{group.mix.name} switchover round {rnd}: electMaster {old.describe()} -> {target.describe()}, first "
            f"send on it {rec['first_send_s']:.2f} s later")
    return st


def run_round(ctx: RoundContext, fault_name: str, rnd: int) -> dict:
    """One round of ``fault_name`` (see the module docstring); its record is appended to ``ctx.records``."""
    fault = FAULTS[fault_name]
    group, producer = ctx.group, ctx.producer
    if fault_name == "slow-disk":
        st = planned_switchover(ctx, group.members[ctx.slow_member], rnd)
    else:
        st = group.wait_group(TOPIC, 3, timeout=WHOLE_TIMEOUT_S)
    master = group.member(st["masterAddress"])
    producer.tag = f"{fault_name}.{rnd}."
    wait_sending(producer, master.addr)
    t0 = time.monotonic()
    codes_before = dict(producer.codes)
    ctx.fault_at = None
    heal = fault.inject(ctx, master)
    t0 = ctx.fault_at or t0
    new_addr = None
    unavailable = None
    try:
        if fault.switch:
            try:
                new_addr = group.wait_new_master(TOPIC, master.addr, SWITCH_TIMEOUT_S)
                first = wait_until(lambda: producer.acked_after(t0, new_addr), SWITCH_TIMEOUT_S, interval=0.02,
                                   what=f"a send acknowledged by the new master {new_addr}")[0]
            except TimeoutError as exc:
                # no master took sends while the fault lasted (e.g. the controller elected a minority member
                # whose heartbeat had not expired yet, then had no candidate): safety is still checked; the time
                # is then to the first acknowledgement after healing
                codes = {c: n - codes_before.get(c, 0) for c, n in producer.codes.items()
                         if n != codes_before.get(c, 0)}
                unavailable = (f"{exc}; send answers since the fault {codes}; route master "
                               f"{group.master_addr(TOPIC)}; controller {group.sync_state()}")
                first = None
        else:
            first = (producer.acked_after(t0) or [None])[0]
    finally:
        t_heal = time.monotonic()
        heal()
    st, restarted = wait_whole(ctx)
    t_whole = time.monotonic()
    if first is None:
        first = wait_until(lambda: producer.acked_after(t0), SWITCH_TIMEOUT_S, interval=0.02, what="a send acknowledged")[0]
        if unavailable:
            ctx.log(f"{group.mix.name} {fault_name} round {rnd}: no master took sends while the fault lasted: "
                    f"{unavailable}")
    acks = producer.acked_after(t0)
    gap = max((b - a for a, b in zip([t0] + acks, acks)), default=t_whole - t0)
    final = group.member(st["masterAddress"])
    rec = dict(mix=group.mix.name, fault=fault_name, round=rnd, tag=producer.tag, first_send_s=round(first - t0, 3),
               gap_s=round(gap, 3), fault_s=round(t_heal - t0, 3), whole_s=round(t_whole - t_heal, 3),
               switched=final is not master, old_master=master.kind, old_addr=master.addr,
               new_master=final.kind if final else None, java_restarted=restarted,
               unavailable_during_fault=bool(unavailable))
    ctx.records.append(rec)
    ctx.log(f"{group.mix.name} {fault_name} round {rnd}: first send {rec['first_send_s']:.2f} s after the fault, "
            f"longest pause {rec['gap_s']:.2f} s, master {master.describe()} -> "
            f"{final.describe() if final else '?'}, whole again {rec['whole_s']:.1f} s after healing"
            + (f" (Java members restarted: {restarted})" if restarted else ""))
    return rec


def wait_whole(ctx: RoundContext) -> tuple[dict, list[str]]:
    """Until the group has a master and all three in its SyncStateSet again. A Java 5.5.0 member that has not
    rejoined within :data:`JAVA_STUCK_S` is restarted, as an operator would (it can lose the controller for good
    after a lossy link: its controller address scan drops an address that did not answer, apache/rocketmq
    PR #9845), and named in the round's record; an rmqd member gets no such help: the round fails."""
    group = ctx.group
    try:
        return group.wait_group(TOPIC, 3, timeout=JAVA_STUCK_S), []
    except TimeoutError:
        st = group.sync_state() or {}
        in_sync = {b["brokerAddress"] for b in st.get("inSyncReplicas") or ()}
        stuck = [m for m in group.members if m.addr not in in_sync]
        if any(m.kind != "java" for m in stuck) or not stuck:
            return group.wait_group(TOPIC, 3, timeout=WHOLE_TIMEOUT_S - JAVA_STUCK_S), []
        for m in stuck:
            ctx.log(f"{m.describe()} has not rejoined {JAVA_STUCK_S:.0f} s after healing: restarting it (its thread "
                    f"dump is in its .out file)")
            m.signal(signal.SIGQUIT)            # the JVM prints its threads to stdout: where it was stuck
            time.sleep(1.0)
            m.kill9()
            m.start()
        return group.wait_group(TOPIC, 3, timeout=WHOLE_TIMEOUT_S), [m.describe() for m in stuck]


#: rounds in which a Java 5.5.0 master acknowledges sends the new master does not have:
#: * faults that leave the master reachable by clients (and by a slave on its side) but not by the controller: it
#:   goes on acknowledging with the slaves it still has once the others follow the new master
#:   (AutoSwitchHAService.removeConnection replaces the local SyncStateSet before the controller has confirmed
#:   it, so the #5663 union is the smaller set);
#: * a planned switchover (electMaster): the demoted master answers the sends still waiting for their SyncStateSet
#:   acknowledgements SEND_OK (its set is emptied; rmqd had the same bug: RELIABILITY.md, "Bugs found and fixed")
JAVA_SPLIT_BRAIN_FAULTS = frozenset({"partition-master-controller", "one-way-loss", "partition-minority",
                                     "switchover"})


def java_split_brain(ctx: RoundContext, verdict: Verdict) -> set[str]:
    """The keys the checker's findings may hold because a Java 5.5.0 master acknowledged (or served) what the
    group later cut off: keys of a round whose old master was a Java broker, acknowledged by it or read from it.
    :data:`JAVA_SPLIT_BRAIN_FAULTS` are the rounds where the mechanism is known; a Java master lost acknowledged
    sends in a partition-node round too (6 in one run; not yet traced), so every round with a Java old master is
    kept apart. Every other finding (any round an rmqd master started) stays a failure."""
    rounds = [r for r in ctx.records if r["old_master"] == "java"]
    consumer = ctx.consumer.received if ctx.consumer is not None else {}
    keys = set()
    for r in rounds:
        keys |= {k for k, a in ctx.producer.acked_by.items() if k.startswith(r["tag"]) and a == r["old_addr"]}
        keys |= {k for k, (_, _, a) in consumer.items() if k.startswith(r["tag"]) and a == r["old_addr"]}
    return keys


def unexcused(verdict: Verdict, excused: set[str]) -> list[str]:
    """The checker's findings that ``excused`` does not explain (empty: the group passed)."""
    out = [f"lost {k}" for k in verdict.lost if k not in excused]
    out += [f"duplicated {k} x{n}" for k, n in verdict.duplicated.items()]
    out += [f"queue {q} offset {qo} used by {keys}" for q, qo, keys in verdict.offset_reuse
            if not any(k in excused for k in keys)]
    out += [f"moved {m}" for m in verdict.moved]
    out += [f"two masters in one {e}" for e in verdict.epoch_conflicts]
    out += [f"read but not stored {k}" for k in verdict.phantom_reads if k not in excused]
    return out


def judge(ctx: RoundContext) -> tuple[Verdict, dict[str, dict], list[str]]:
    """Stop the clients, run the checker on the final master, and split its findings by round tag
    (``{tag: {acked, lost}}``); then wait until every member has the same max offset and compare their CommitLog
    bytes up to it (the third item: the differences, empty when identical)."""
    group, producer = ctx.group, ctx.producer
    st = group.wait_group(TOPIC, 3, timeout=WHOLE_TIMEOUT_S)
    master = st["masterAddress"]
    time.sleep(0.5)
    producer.stop()
    if ctx.consumer is not None:
        ctx.consumer.stop()
    wait_read_back(master, TOPIC, producer)
    epochs = (broker_epochs(master) or {}).get("epochList")
    verdict = check(master, TOPIC, producer, ctx.consumer, epochs=epochs)
    per: dict[str, dict] = {}
    for rec in ctx.records:
        tag = rec["tag"]
        acked = [k for k in producer.acked if k.startswith(tag)]
        per[tag] = dict(acked=len(acked), lost=len([k for k in verdict.lost if k.startswith(tag)]),
                        duplicates=sum(n for k, n in verdict.duplicated.items() if k.startswith(tag)),
                        lost_by_old_master=len([k for k in verdict.lost if k.startswith(tag)
                                                and producer.acked_by.get(k) == rec["old_addr"]]))
    upto = group.wait_caught_up(60)
    diffs = group.commitlog_differences(upto)
    ctx.log(f"{group.mix.name}: checker: {verdict.summary()}; CommitLog bytes [0, {upto}) "
            + ("identical on every member" if not diffs else f"DIFFER: {diffs}"))
    return verdict, per, diffs


def new_context(group: MixedGroup, net: Optional[NetKit], disk: Optional[SlowDisk] = None,
                log: Callable[[str], None] = print) -> RoundContext:
    producer = RoutedProducer(group.namesrv, TOPIC, pace_s=PACE_S, route_refresh_s=ROUTE_REFRESH_S).start()
    consumer = RoutedConsumer(group.namesrv, TOPIC).start()
    return RoundContext(group, net, producer, consumer, disk=disk, log=log)


__all__ = ["FAULTS", "TOPIC", "RoundContext", "run_round", "judge", "new_context", "move_master_to",
           "java_split_brain", "unexcused", "wait_sending", "JAVA_SPLIT_BRAIN_FAULTS", "planned_switchover"]
