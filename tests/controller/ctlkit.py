"""Harness of the controller tests and scripts/controller_faults.py.

* ``ControllerProcess`` (tests/kit/processes.py): ``python -m rmqd.runtime.cli controller -c FILE`` in a subprocess;
* ``InProcessController``: one controller node on a background uvloop thread (fast single-node tests);
* ``FakeBroker``: a broker of a replica group as the controller sees it: GET_NEXT_BROKER_ID, APPLY_BROKER_ID,
  REGISTER_BROKER, BROKER_HEARTBEAT, ELECT_MASTER over the wire, and a listening socket that records the
  NOTIFY_BROKER_ROLE_CHANGED pushes;
* ``Heartbeater``: a thread sending each live fake broker's heartbeat to every controller;
* ``ControllerCluster``: controller processes whose Raft links each go through a ``FaultProxy``
  (tests/kit/netfaults.py) that can cut them.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Iterable, Optional

import orjson

from rmqd.common.localports import free_ports
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import RemotingCommand, new_request
from tests.kit import clients
from tests.kit.loop import LoopThread
from tests.kit.netfaults import FaultProxy
from tests.kit.peers import RecordingPeer
from tests.kit.processes import REPO, ControllerProcess
from tests.kit.waits import wait_until

__all__ = ["REPO", "NOT_LEADER", "ControllerProcess", "InProcessController", "FakeBroker", "Heartbeater",
           "ControllerCluster", "free_ports", "wait_until", "call", "conf_text", "find_leader", "agreed_leader",
           "metadata", "sync_state_set_body"]

NOT_LEADER = 2007


def conf_text(peers: dict[str, str], self_id: str, store: str, raft: dict[str, str], **extra: object) -> str:
    lines = {"controllerDLegerGroup": "group1",
             "controllerDLegerPeers": ";".join(f"{pid}-{addr}" for pid, addr in peers.items()),
             "controllerDLegerSelfId": self_id,
             "controllerRaftPeers": ";".join(f"{pid}-{addr}" for pid, addr in raft.items()),
             "controllerStorePath": os.path.join(store, "raft"),
             "configStorePath": os.path.join(store, "controller.properties"),
             "scanNotActiveBrokerInterval": 500, "scanInactiveMasterInterval": 1000}
    lines.update(extra)
    return "".join(f"{k}={v}\n" for k, v in lines.items())


# ------------------------------------------------------------------------------------------- controllers
class InProcessController:
    """A ControllerServer on its own uvloop thread in this process."""

    def __init__(self, config) -> None:
        self.config = config
        self.server = None
        self._lt: Optional[LoopThread] = None

    def start(self, timeout: float = 15.0) -> "InProcessController":
        from rmqd.controller.server import ControllerServer

        async def boot() -> ControllerServer:
            server = ControllerServer(self.config)
            await server.start()
            return server

        self._lt = LoopThread(name="rmqd-controller")
        try:
            self.server = self._lt.call(boot(), timeout)
        except BaseException:
            self._lt.stop()
            self._lt = None
            raise
        return self

    def stop(self) -> None:
        if self._lt is None:
            return
        self._lt.call(self.server.close(), 20)
        self._lt.stop()
        self._lt = None

    @property
    def addr(self) -> str:
        return self.server.address


def metadata(addr: str, timeout: float = 2.0) -> Optional[dict]:
    """CONTROLLER_GET_METADATA_INFO of one controller (None if it does not answer)."""
    try:
        with BlockingClient(addr, timeout) as c:
            r = c.invoke(new_request(1005, {}), timeout)
    except (OSError, TimeoutError, ConnectionError):
        return None
    return r.ext_fields if r.code == 0 else None


def find_leader(addrs: Iterable[str], timeout: float = 15.0, exclude: Iterable[str] = ()) -> str:
    """The address of the controller that says it leads (and answers a leader-only read)."""
    addrs, exclude = list(addrs), set(exclude)

    def leader() -> Optional[str]:
        for addr in addrs:
            if addr in exclude:
                continue
            md = metadata(addr)
            if md and md.get("isLeader") == "true":
                try:
                    with BlockingClient(addr, 3.0) as c:
                        r = c.invoke(new_request(1012, {"clusterName": "probe", "brokerName": "probe"}), 3.0)
                except (OSError, TimeoutError, ConnectionError):
                    continue
                if r.code == 0:
                    return addr
        return None
    return wait_until(leader, timeout, interval=0.1, what="a controller leader")


def agreed_leader(addrs: Iterable[str], timeout: float = 20.0) -> str:
    """The leader that every controller in ``addrs`` names (waited for: on a loaded machine a leader may step
    down and be re-elected in between)."""
    addrs = list(addrs)

    def agreed() -> Optional[str]:
        leader = find_leader(addrs, timeout)
        return leader if all((metadata(a) or {}).get("controllerLeaderAddress") == leader for a in addrs) else None
    return wait_until(agreed, timeout, interval=0.2, what="all controllers agreeing on the leader")


def call(addr: str, code: int, ext: Optional[dict] = None, body: Optional[bytes] = None,
         timeout: float = 6.0) -> RemotingCommand:
    """tests/kit/clients.py's one-shot call with the controller tests' 6 s."""
    return clients.call(addr, code, ext, body, timeout)


# ------------------------------------------------------------------------------------------- brokers
class NotifySink(RecordingPeer):
    """A listening socket standing in for a broker's remoting port: records the requests pushed to it."""

    def role_changes(self) -> list[RemotingCommand]:
        return [c for c in self.received if c.code == 1008]


class FakeBroker:
    """One replica of a broker-set, speaking the controller protocol like ReplicasManager."""

    def __init__(self, cluster: str, name: str, epoch: int = -1, max_offset: int = 0, priority: int = 0,
                 timeout_ms: int = 2000) -> None:
        self.cluster = cluster
        self.name = name
        self.sink = NotifySink()
        self.addr = self.sink.addr
        self.broker_id: Optional[int] = None
        self.epoch = epoch
        self.max_offset = max_offset
        self.priority = priority
        self.timeout_ms = timeout_ms
        self.beating = True

    def join(self, leader: str) -> RemotingCommand:
        """GET_NEXT_BROKER_ID, APPLY_BROKER_ID, REGISTER_BROKER on the leader; returns the register response."""
        r = call(leader, 1012, {"clusterName": self.cluster, "brokerName": self.name})
        assert r.code == 0, r.remark
        broker_id = int(r.ext_fields["nextBrokerId"])
        r = call(leader, 1013, {"clusterName": self.cluster, "brokerName": self.name,
                                "appliedBrokerId": broker_id,
                                "registerCheckCode": f"{self.addr};{int(time.time() * 1000)}"})
        assert r.code == 0, r.remark
        self.broker_id = broker_id
        return self.register(leader)

    def register(self, leader: str) -> RemotingCommand:
        r = call(leader, 1003, {"clusterName": self.cluster, "brokerName": self.name,
                                "brokerId": self.broker_id, "brokerAddress": self.addr})
        assert r.code == 0, r.remark
        return r

    def heartbeat_request(self) -> RemotingCommand:
        return new_request(904, {"clusterName": self.cluster, "brokerAddr": self.addr, "brokerName": self.name,
                                 "brokerId": self.broker_id, "epoch": self.epoch, "maxOffset": self.max_offset,
                                 "confirmOffset": self.max_offset, "heartbeatTimeoutMills": self.timeout_ms,
                                 "electionPriority": self.priority}, oneway=True)

    def elect(self, leader: str) -> RemotingCommand:
        return call(leader, 1002, {"clusterName": self.cluster, "brokerName": self.name,
                                   "brokerId": self.broker_id, "designateElect": "false"})

    def close(self) -> None:
        self.sink.close()


class Heartbeater:
    """Sends the heartbeat of every beating broker to every controller, every ``period`` seconds."""

    def __init__(self, controllers: list[str], brokers: list[FakeBroker], period: float = 0.3) -> None:
        self.controllers = controllers
        self.brokers = brokers
        self.period = period
        self._clients: dict[tuple[str, int], BlockingClient] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Heartbeater":
        self._thread.start()
        return self

    def beat_once(self) -> None:
        for broker in self.brokers:
            if not broker.beating or broker.broker_id is None:
                continue
            for ctl in self.controllers:
                key = (ctl, id(broker))                 # one connection per broker and controller, as Java
                try:
                    client = self._clients.get(key)
                    if client is not None and client.peer_closed():     # the controller closed it: reconnect
                        client.close()
                        client = None
                    if client is None:
                        client = self._clients[key] = BlockingClient(ctl, 1.0)
                    client.invoke_oneway(broker.heartbeat_request())
                except (OSError, ConnectionError):
                    dead = self._clients.pop(key, None)
                    if dead is not None:
                        dead.close()

    def drop_connections(self, broker: FakeBroker) -> None:
        for key in [k for k in self._clients if k[1] == id(broker)]:
            self._clients.pop(key).close()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.beat_once()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for c in self._clients.values():
            c.close()
        self._clients.clear()


def sync_state_set_body(members: list[int], epoch: int) -> bytes:
    return orjson.dumps({"syncStateSet": members, "syncStateSetEpoch": epoch})


# ------------------------------------------------------------------------------------------- faults
class ControllerCluster:
    """``n`` controller processes on loopback; every Raft link i->j goes through its own ``FaultProxy``."""

    def __init__(self, root: str, n: int = 3, **extra: object) -> None:
        os.makedirs(root, exist_ok=True)
        ports = free_ports(2 * n)
        self.ids = [f"n{i}" for i in range(n)]
        self.peers = {pid: f"127.0.0.1:{ports[i]}" for i, pid in enumerate(self.ids)}
        self.raft = {pid: f"127.0.0.1:{ports[n + i]}" for i, pid in enumerate(self.ids)}
        self.proxies = {(a, b): FaultProxy(self.raft[b]) for a in self.ids for b in self.ids if a != b}
        self.nodes: dict[str, ControllerProcess] = {}
        for pid in self.ids:
            dial = ";".join(f"{b}-{self.proxies[(pid, b)].addr}" for b in self.ids if b != pid)
            conf = os.path.join(root, f"{pid}.conf")
            with open(conf, "w") as f:
                f.write(conf_text(self.peers, pid, os.path.join(root, pid), self.raft,
                                  controllerRaftDialPeers=dial, **extra))
            self.nodes[pid] = ControllerProcess(conf, os.path.join(root, f"{pid}.log"), self.peers[pid])

    @property
    def addrs(self) -> list[str]:
        return [self.peers[pid] for pid in self.ids]

    def id_of(self, addr: str) -> str:
        return next(pid for pid, a in self.peers.items() if a == addr)

    def start(self) -> "ControllerCluster":
        procs = list(self.nodes.values())
        threads = [threading.Thread(target=p.start) for p in procs]   # start together: one Python boot each
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        missing = [p.addr for p in procs if not p.alive()]
        if missing:
            raise RuntimeError(f"controllers did not start: {missing}")
        return self

    def isolate(self, pid: str) -> None:
        """Cut every Raft link to and from ``pid`` (it stays reachable by brokers and admin tools)."""
        for (a, b), proxy in self.proxies.items():
            if pid in (a, b):
                proxy.cut()

    def heal(self) -> None:
        for proxy in self.proxies.values():
            proxy.heal()

    def stop(self) -> None:
        for node in self.nodes.values():
            node.kill()
        for proxy in self.proxies.values():
            proxy.close()


# ------------------------------------------------------------------------------------------- fault rounds
# Shared by tests/controller/test_cluster.py (RMQD_CONTROLLER_FAULT_ROUNDS rounds, 1 by default) and
# scripts/controller_faults.py (the full count, with a timing table).

def replica_info(leader: str, name: str) -> tuple[dict, dict]:
    """CONTROLLER_GET_REPLICA_INFO: (header, SyncStateSet body)."""
    from rmqd.remoting import fastjson
    r = call(leader, 1004, {"brokerName": name})
    assert r.code == 0, r.remark
    return r.ext_fields, fastjson.loads_lenient(r.body_bytes())


def grow_sync_state_set(leader: str, name: str, members: list[int]) -> None:
    """The current master reports ``members`` in sync (CONTROLLER_ALTER_SYNC_STATE_SET at the current epochs)."""
    header, body = replica_info(leader, name)
    if sorted(body["syncStateSet"]) == sorted(members):
        return
    r = call(leader, 1001, {"brokerName": name, "masterBrokerId": header["masterBrokerId"],
                            "masterEpoch": header["masterEpoch"]},
             sync_state_set_body(members, body["syncStateSetEpoch"]))
    assert r.code == 0, r.remark


def switch_master(leader: str, cluster_name: str, name: str, members: list[int]) -> int:
    """A planned switchover (admin electMaster) to the next in-sync member; returns the new master id."""
    grow_sync_state_set(leader, name, members)
    current = int(replica_info(leader, name)[0]["masterBrokerId"])
    target = members[(members.index(current) + 1) % len(members)]
    r = call(leader, 1002, {"clusterName": cluster_name, "brokerName": name, "brokerId": target,
                            "designateElect": "true"})
    assert r.code == 0 and r.ext_fields["masterBrokerId"] == str(target), (r.code, r.remark)
    return target


def kill_leader_round(cluster: ControllerCluster, cluster_name: str, name: str, members: list[int]) -> float:
    """kill -9 the leader: a new leader with the same state takes writes; the old one rejoins as a follower.
    Returns the seconds from the kill to a leader answering a leader-only read."""
    leader = find_leader(cluster.addrs)
    before = replica_info(leader, name)
    victim = cluster.nodes[cluster.id_of(leader)]
    t0 = time.monotonic()
    victim.kill()
    new_leader = find_leader(cluster.addrs, 15, exclude=[leader])
    failover = time.monotonic() - t0
    assert replica_info(new_leader, name) == before
    switch_master(new_leader, cluster_name, name, members)
    after = replica_info(new_leader, name)
    victim.start()                                 # it rejoins on its store; all three follow one leader
    leader_now = agreed_leader(cluster.addrs)
    assert replica_info(leader_now, name) == after
    if leader_now != victim.addr:
        assert call(victim.addr, 1004, {"brokerName": name}).code == NOT_LEADER
    return failover


def partition_leader_round(cluster: ControllerCluster, cluster_name: str, name: str, members: list[int]) -> float:
    """Cut the leader's Raft links: it steps down and refuses, the majority elects a leader that keeps the state
    and takes writes, and after healing all agree on one leader with the majority's state.  Returns the seconds
    from the cut to the majority's leader answering."""
    leader = find_leader(cluster.addrs)
    before = replica_info(leader, name)
    cluster.isolate(cluster.id_of(leader))
    try:
        t0 = time.monotonic()
        new_leader = find_leader(cluster.addrs, 15, exclude=[leader])
        failover = time.monotonic() - t0
        wait_until(lambda: call(leader, 1004, {"brokerName": name}).code == NOT_LEADER, 10, interval=0.1,
                   what="the isolated controller stepping down")
        assert call(leader, 1002, {"clusterName": cluster_name, "brokerName": name, "brokerId": members[0],
                                   "designateElect": "true"}).code == NOT_LEADER
        assert replica_info(new_leader, name) == before
        switch_master(new_leader, cluster_name, name, members)
        after = replica_info(new_leader, name)
        for _ in range(5):                         # the minority never claims to lead while cut off
            assert (metadata(leader) or {}).get("isLeader") != "true"
            time.sleep(0.1)
    finally:
        cluster.heal()
    final = agreed_leader(cluster.addrs)
    assert replica_info(final, name) == after
    return failover


def master_expiry_round(cluster: ControllerCluster, brokers: list[FakeBroker], name: str,
                        heartbeater: Heartbeater) -> float:
    """The master stops heartbeating (hung, connections open): the leader elects the best in-sync replica and
    pushes NOTIFY_BROKER_ROLE_CHANGED to the alive ones.  Returns the seconds from the last heartbeat to the
    new master being readable."""
    leader = find_leader(cluster.addrs)
    by_id = {b.broker_id: b for b in brokers}
    grow_sync_state_set(leader, name, sorted(by_id))
    header, _ = replica_info(leader, name)
    old_id, old_epoch = int(header["masterBrokerId"]), int(header["masterEpoch"])
    master = by_id[old_id]
    master.beating = False
    t0 = time.monotonic()

    def new_master() -> Optional[dict]:
        h = replica_info(find_leader(cluster.addrs), name)[0]
        return h if h.get("masterBrokerId") not in (None, str(old_id)) else None
    header = wait_until(new_master, 20, interval=0.05, what="a new master")
    elapsed = time.monotonic() - t0
    new_id = int(header["masterBrokerId"])
    assert int(header["masterEpoch"]) == old_epoch + 1
    best = max((b for b in brokers if b is not master), key=lambda b: (b.epoch, b.max_offset, -b.priority))
    assert new_id == best.broker_id
    for b in brokers:
        if b is not master:
            wait_until(lambda b=b: any(c.ext_fields.get("masterEpoch") == str(old_epoch + 1)
                                       for c in b.sink.role_changes()), 5, interval=0.05, what=f"1008 at {b.addr}")
    assert not any(c.ext_fields.get("masterEpoch") == str(old_epoch + 1) for c in master.sink.role_changes())
    master.beating = True
    heartbeater.beat_once()
    assert master.register(find_leader(cluster.addrs)).ext_fields["masterBrokerId"] == str(new_id)
    return elapsed
