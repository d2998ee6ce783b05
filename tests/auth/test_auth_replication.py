"""Users and ACLs reach slaves and survive a failover: a slave copies its master's store (pushed at once by
WAIT_METADATA_CHANGE, and every round), signing its requests with innerClientAuthenticationCredentials as the
master demands; in controller mode a change is answered once the in-sync replicas hold it, so a kill -9 of the
master right after it leaves the user and its ACL on the new master."""
from __future__ import annotations

import json
import time

import pytest

from rmqd.acl.signer import sign_request
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from tests.failover.kit import FailoverGroup, wait_until

SU = ("rocketmq", "12345678")
AUTH = {"authenticationEnabled": "true", "authorizationEnabled": "true",
        "initAuthenticationUser": '{"username":"rocketmq","password":"12345678"}',
        "innerClientAuthenticationCredentials": '{"accessKey":"innerBroker","secretKey":"innerSecret1"}'}
ACL = {"subject": "User:replicated", "policies": [{"entries": [
    {"resource": "Topic:ReplTopic", "actions": ["Pub"], "decision": "Allow"},
    {"resource": "Cluster:*", "actions": ["Get"], "decision": "Allow"}]}]}


def signed(addr: str, code: int, ext: dict, body=None, cred=SU, timeout: float = 10):
    raw = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    with BlockingClient(addr, timeout) as c:
        return c.invoke(new_request(code, sign_request(dict(ext), raw, *cred), raw), timeout)


def make_user(addr: str) -> None:
    r = signed(addr, 3001, {"username": "replicated"}, {"password": "replPass01"})
    assert r.code == 0, (r.code, r.remark)
    r = signed(addr, 3006, {"subject": "User:replicated"}, ACL)
    assert r.code == 0, (r.code, r.remark)


@pytest.mark.timeout(120)
def test_a_slave_copies_users_and_acls_and_signs_its_sync(group_factory) -> None:
    group = group_factory(master_conf=AUTH, slave_conf=AUTH)
    master, slave = group.master, group.slave
    topic_ext = {"topic": "ReplTopic", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
                 "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    assert signed(master.address, 17, topic_ext).code == 0
    t0 = time.monotonic()
    make_user(master.address)
    wait_until(lambda: slave.auth.store.state.users.get("replicated"), 10, interval=0.05, what="the user on the slave")
    print(f"user on the slave {time.monotonic() - t0:.2f} s after its creation")
    # the user and its ACL are two changes: the slave may copy the first before the second is made
    wait_until(lambda: slave.auth.store.state.version == master.auth.store.state.version, 10, interval=0.05,
               what=lambda: f"the slave at the master's auth version ({slave.auth.store.state.version} vs "
                            f"{master.auth.store.state.version})")
    wait_until(lambda: slave.topic_config_manager.get("ReplTopic"), 10, interval=0.05, what="the topic on the slave (a signed sync)")
    # the slave decides with its copy
    r = signed(slave.address, 3005, {"filter": "repl"}, cred=("replicated", "replPass01"))
    assert r.code == 0 and json.loads(bytes(r.body))[0]["username"] == "replicated"
    # a change and a deletion follow
    assert signed(master.address, 3002, {"username": "replicated"}, {"userStatus": "disable"}).code == 0
    wait_until(lambda: slave.auth.store.state.users["replicated"].user_status.value == "disable", 10, interval=0.05, what="disable")
    r = signed(slave.address, 3005, {}, cred=("replicated", "replPass01"))
    assert (r.code, r.remark) == (16, "User:replicated is disabled.")
    assert signed(master.address, 3003, {"username": "replicated"}).code == 0
    wait_until(lambda: "replicated" not in slave.auth.store.state.users, 10, interval=0.05, what="the deletion on the slave")
    assert "User:replicated" not in slave.auth.store.state.acls
    # the copy needs a super user: a normal user's signature is refused
    signed(master.address, 3001, {"username": "plain"}, {"password": "plainPass1"})
    r = signed(master.address, 9020, {}, cred=("plain", "plainPass1"))
    assert r.code == 16


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_users_survive_a_kill9_failover_in_controller_mode(tmp_path) -> None:
    group = FailoverGroup(str(tmp_path), replicas=2, **AUTH)
    try:
        group.start_all()
        st = wait_until(lambda: (lambda s: s if s and s.get("masterBrokerId") is not None and
                                 len(s.get("inSyncReplicas") or ()) >= 2 else None)(group.sync_state()),
                        60, interval=0.1, what="a master and 2 in-sync replicas")
        old = st["masterAddress"]
        topic_ext = {"topic": "ReplTopic", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
                     "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
        wait_until(lambda: signed(old, 17, topic_ext).code == 0, 30, interval=0.5, what="the topic made on the master")
        wait_until(lambda: signed(old, 3001, {"username": "replicated"}, {"password": "replPass01"}).code in (0, 16),
                   30, interval=0.5, what="the user made (answered once the in-sync replica holds it)")
        r = signed(old, 3006, {"subject": "User:replicated"}, ACL)
        assert r.code == 0, (r.code, r.remark)
        group.kill9(group.index_of(old))
        new = group.wait_new_master("ReplTopic", old, 30, "a new master in the name server's route")
        with BlockingClient(new, 10) as c:
            ext = {"a": "PG", "b": "ReplTopic", "c": "TBW102", "d": "4", "e": "0", "f": "0",
                   "g": str(int(time.time() * 1000)), "h": "0", "i": "", "j": "0", "k": "false", "m": "false"}
            r = c.invoke(new_request(310, sign_request(dict(ext), b"after", "replicated", "replPass01"), b"after"), 10)
            assert r.code == 0, (r.code, r.remark)              # the user and its ACL are on the new master
            ext["b"] = "OtherTopic"
            r = c.invoke(new_request(310, sign_request(dict(ext), b"x", "replicated", "replPass01"), b"x"), 10)
            assert r.code == 16 and "no matched policies" in r.remark
    finally:
        group.stop()
