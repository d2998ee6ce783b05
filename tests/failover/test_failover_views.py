"""Controller mode seen from outside, before and after a kill -9 of the master, and the metadata that must follow it
(one 2-replica group, each broker with its /metrics and console):

* /metrics of each broker: role, brokerId, master epoch, the SyncStateSet (master), last switch and its cause;
* the console's failover page (a broker's own console, and ``rmqd console -n``'s view of the same cluster):
  per broker the same, the controller's leader and peers, and the controller leader's view of the group;
* a subscription group created on the master just before the kill exists on the new master, and consumer offsets
  committed until the kill reach the new master at most :data:`OFFSET_BOUND_S` behind (the slave's push bound is
  ``OFFSET_PUSH_S`` + ``WAIT_POLL_S`` + a round trip, ~0.3 s; Java 5 keeps SlaveSynchronize's 10 s).
"""
from __future__ import annotations

import os
import threading
import time
import urllib.request

import orjson

from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.replicas.slave_sync import OFFSET_PUSH_S, WAIT_POLL_S
from tests.console.kit import Http
from tests.failover.kit import BROKER_NAME, FailoverGroup, call, free_ports, wait_until
from tests.metrics.promtext import parse
from tests.replication.procs import BlockingClient, RmqdProc, send_one

TOPIC = "ViewsTopic"
OFFSET_GROUP = "CG_views_offsets"
LATE_GROUP = "CG_created_before_kill"
OFFSET_BOUND_S = 1.0       # asserted (loaded CI machine); the design bound is OFFSET_PUSH_S + WAIT_POLL_S + RTT


class ViewedGroup(FailoverGroup):
    """The kit's group with a metrics and a console port per broker."""

    def __init__(self, root: str, replicas: int) -> None:
        super().__init__(root, replicas=replicas)
        ports = free_ports(2 * replicas)
        self.metrics_ports, self.console_ports = ports[:replicas], ports[replicas:]

    def start(self, i: int) -> RmqdProc:
        proc = RmqdProc(os.path.join(self.root, f"b{i}.log"), "broker", "-c", self.confs[i], "--broker-port", "0",
                        "--store-dir", os.path.join(self.root, f"b{i}"), "--grpc-port", "0",
                        "--metrics-port", str(self.metrics_ports[i]), "--console-port", str(self.console_ports[i]))
        self.brokers[i] = proc
        return proc

    def metrics(self, i: int) -> dict:
        """name -> [(labels, value)] of broker ``i``'s replica families."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_ports[i]}/metrics", timeout=10) as r:
            _, samples = parse(r.read().decode())
        out: dict = {}
        for name, labels, value in samples:
            if name.startswith("rmqd_replica_"):
                out.setdefault(name, []).append((labels, value))
        return out

    def failover_page(self, i: int) -> dict:
        return Http(f"http://127.0.0.1:{self.console_ports[i]}").get_json("/api/features")["features"]["failover"]


def one(m: dict, name: str, **labels: str) -> float:
    got = [v for lbl, v in m.get(name, ()) if all(lbl.get(k) == x for k, x in labels.items())]
    assert len(got) == 1, (name, labels, m.get(name))
    return got[0]


def rows_of(page: dict, table_id: str) -> list[dict]:
    t = next(t for t in page["tables"] if t["id"] == table_id)
    return [dict(zip(t["columns"], r)) for r in t["rows"]]


def create_group(addr: str, group: str) -> None:
    r = call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
             body=orjson.dumps({"groupName": group, "consumeEnable": True, "retryMaxTimes": 16}))
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)


def query_offset(addr: str, group: str, qid: int) -> int:
    r = call(addr, RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": TOPIC, "queueId": str(qid)})
    return int(r.ext_fields["offset"]) if r.code == ResponseCode.SUCCESS else -1


def groups_of(addr: str) -> set[str]:
    r = call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    return set(orjson.loads(r.body_bytes())["subscriptionGroupTable"])


def check_views(group: ViewedGroup, viewer: int, master_i: int, st: dict, cause: str) -> None:
    """Metrics of the master and the console page (broker ``viewer``'s) agree with the controller's view ``st``."""
    m = group.metrics(master_i)
    epoch = st["masterEpoch"]
    assert one(m, "rmqd_replica_role", role="SYNC_MASTER") == 1
    assert one(m, "rmqd_replica_master_epoch") == epoch
    assert one(m, "rmqd_replica_broker_id") == st["masterBrokerId"]
    assert one(m, "rmqd_replica_fenced") == 0
    in_sync = sorted(r["brokerId"] for r in st["inSyncReplicas"])
    assert sorted(int(lbl["member_broker_id"]) for lbl, _ in m["rmqd_replica_sync_state_set_member"]) == in_sync
    assert one(m, "rmqd_replica_sync_state_set_epoch") == st["syncStateSetEpoch"]
    assert one(m, "rmqd_replica_last_switch_time_milliseconds", cause=cause) > 0
    assert one(m, "rmqd_replica_role_switches_total", cause="elected_master") >= 1
    page = group.failover_page(viewer)
    brokers = {r["address"]: r for r in rows_of(page, "failover-brokers")}
    assert st["masterAddress"] in brokers, page
    master = brokers[st["masterAddress"]]
    assert (master["role"], master["brokerId"], master["master epoch"], master["cause"]) == \
        ("SYNC_MASTER", st["masterBrokerId"], epoch, cause)
    assert master["SyncStateSet"] == ", ".join(map(str, in_sync))
    controllers = rows_of(page, "failover-controllers")
    assert [c["role"] for c in controllers] == ["leader"] and controllers[0]["controller"] == group.controller
    (g,) = rows_of(page, "failover-groups")
    assert (g["group"], g["master brokerId"], g["master epoch"]) == (BROKER_NAME, st["masterBrokerId"], epoch)


def test_views_and_metadata_follow_a_kill9_of_the_master(tmp_path):
    group = ViewedGroup(str(tmp_path), replicas=2)
    try:
        group.start_all()
        st = group.wait_group(TOPIC, 2)
        old = st["masterAddress"]
        old_i = group.index_of(old)
        new_i = 1 - old_i
        slave = group.brokers[new_i].addr
        # -------- before: the master's metrics and the slave's console page
        wait_until(lambda: len(group.metrics(old_i).get("rmqd_replica_sync_state_set_member", ())) == 2, 15, 0.2,
                   "the master's SyncStateSet of 2 in its metrics")
        check_views(group, new_i, old_i, group.sync_state(), "elected_master")
        sm = group.metrics(new_i)
        assert one(sm, "rmqd_replica_role", role="SLAVE") == 1 and "rmqd_replica_sync_state_set_size" not in sm
        assert one(sm, "rmqd_replica_last_switch_time_milliseconds", cause="became_slave") > 0
        slave_row = {r["address"]: r for r in rows_of(group.failover_page(new_i), "failover-brokers")}[slave]
        assert (slave_row["role"], slave_row["cause"], slave_row["master epoch"]) == \
            ("SLAVE", "became_slave", st["masterEpoch"])
        # -------- metadata just before the kill
        with BlockingClient(old, timeout=5) as c:
            for n in range(60):
                assert send_one(c, TOPIC, f"k{n}", b"x", 0).code == ResponseCode.SUCCESS
        create_group(old, OFFSET_GROUP)
        commits = []                    # (monotonic time of the answer, offset): a consumer moving on until the kill
        stop = threading.Event()

        def consumer() -> None:
            with BlockingClient(old, timeout=5) as c:
                for off in range(1, 10_000):
                    if stop.is_set():
                        return
                    try:
                        r = c.invoke(_update_offset(OFFSET_GROUP, 0, off), 5)
                    except (OSError, TimeoutError, ConnectionError):
                        return                                   # the master is gone
                    if r.code == ResponseCode.SUCCESS:
                        commits.append((time.monotonic(), off))
                    time.sleep(0.02)
        committer = threading.Thread(target=consumer, daemon=True)
        committer.start()
        time.sleep(1.0)
        create_group(old, LATE_GROUP)              # answered once the in-sync slave holds it
        t_kill = time.monotonic()
        group.kill9(old_i)                         # right after the group's answer, offsets still being committed
        stop.set()
        committer.join(10)
        assert len(commits) >= 10, commits
        wait_until(lambda: group.master_addr(TOPIC) == slave, 20, 0.05, "the slave as master in the route")
        # -------- after: the group and the offsets on the new master
        assert LATE_GROUP in groups_of(slave)
        resumed = query_offset(slave, OFFSET_GROUP, 0)
        assert resumed >= 1, resumed
        behind_s = t_kill - next(t for t, off in commits if off == resumed)
        print(f"offset on the new master: {resumed} of {commits[-1][1]} committed, {behind_s:.3f} s behind the kill "
              f"(push bound {OFFSET_PUSH_S + WAIT_POLL_S:.2f} s + RTT)")
        assert behind_s <= OFFSET_BOUND_S, (resumed, behind_s)
        # -------- after: the views
        st2 = wait_until(lambda: (lambda s: s if s and s.get("masterAddress") == slave else None)(group.sync_state()),
                         10, 0.1, "the controller naming the new master")
        assert st2["masterEpoch"] == st["masterEpoch"] + 1
        wait_until(lambda: len(group.metrics(new_i).get("rmqd_replica_sync_state_set_member", ())) == 1, 10, 0.1,
                   "the new master's metrics")
        check_views(group, new_i, new_i, st2, "elected_master")
        m = group.metrics(new_i)
        assert one(m, "rmqd_replica_role_switches_total", cause="became_slave") == 1
        assert one(m, "rmqd_replica_offset_pushes_total") >= 1
        dead = rows_of(group.failover_page(new_i), "failover-groups")[0]
        assert old not in dead["in sync"]
        # rmqd console -n: the same page over the remoting codes alone
        from rmqd.console.view import RemoteClusterView
        view = RemoteClusterView(group.namesrv)
        try:
            remote = view.extensions()["failover"]
        finally:
            view.close()
        row = {r["address"]: r for r in rows_of(remote, "failover-brokers")}[slave]
        assert (row["role"], row["master epoch"], row["cause"]) == ("SYNC_MASTER", st2["masterEpoch"],
                                                                    "elected_master")
    finally:
        group.stop()


def _update_offset(group: str, qid: int, offset: int):
    from rmqd.remoting.command import new_request
    return new_request(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": group, "topic": TOPIC,
                                                            "queueId": str(qid), "commitOffset": str(offset)})
