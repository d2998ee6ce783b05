"""``rmqd admin`` controller sub-commands: mqadmin 5.x names, options and output, against one controller."""
from __future__ import annotations

import contextlib
import io

import pytest

from rmqd.admin.main import main
from tests.controller.ctlkit import FakeBroker, Heartbeater, call, sync_state_set_body

CLUSTER = "C2"
NAME = "broker-adm"


def admin(*argv: str, rc: int = 0) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        got = main(list(argv))
    assert got == rc, f"{argv}: rc={got} stderr={err.getvalue()} stdout={out.getvalue()}"
    return out.getvalue() if rc == 0 else err.getvalue()


@pytest.fixture(scope="module")
def brokers(single_controller):
    addr = single_controller.addr
    group = [FakeBroker(CLUSTER, NAME, epoch=1, max_offset=5) for _ in range(3)]
    for b in group:
        b.join(addr)
    hb = Heartbeater([addr], group).start()
    hb.beat_once()
    assert group[0].elect(addr).code == 0
    assert call(addr, 1001, {"brokerName": NAME, "masterBrokerId": 1, "masterEpoch": 1},
                sync_state_set_body([1, 2], 1)).code == 0
    yield group
    hb.stop()
    for b in group:
        b.close()


def test_get_controller_metadata(single_controller):
    a = single_controller.addr
    assert admin("getControllerMetaData", "-a", a) == \
        f"\n#ControllerGroup\tsolo\n#ControllerLeaderId\tn0\n#ControllerLeaderAddress\t{a}\n#Peer:\tn0:{a}\n"


def test_get_sync_state_set(single_controller, brokers):
    a = single_controller.addr
    b1, b2, b3 = (b.addr for b in brokers)
    assert admin("getSyncStateSet", "-a", f"{a};127.0.0.1:1", "-b", NAME) == (
        f"\n#brokerName\t{NAME}\n#MasterBrokerId\t1\n#MasterAddr\t{b1}\n#MasterEpoch\t1\n#SyncStateSetEpoch\t2\n"
        f"#SyncStateSetNums\t2\n"
        f"\nInSyncReplica:\tReplicaIdentity{{brokerName='{NAME}', brokerId=1, brokerAddress='{b1}', alive=true}}\n"
        f"\nInSyncReplica:\tReplicaIdentity{{brokerName='{NAME}', brokerId=2, brokerAddress='{b2}', alive=true}}\n"
        f"\nNotInSyncReplica:\tReplicaIdentity{{brokerName='{NAME}', brokerId=3, brokerAddress='{b3}', alive=true}}\n")
    assert "please set -b or -c" in admin("getSyncStateSet", "-a", a, rc=1)


def test_elect_master_planned_switchover(single_controller, brokers):
    a = single_controller.addr
    b1, b2, b3 = (b.addr for b in brokers)
    out = admin("electMaster", "-a", a, "-c", CLUSTER, "-bn", NAME, "-b", "2")
    assert out == (f"\n#ClusterName\t{CLUSTER}\n#BrokerName\t{NAME}\n#BrokerMasterAddr\t{b2}\n#MasterEpoch\t2\n"
                   f"#SyncStateSetEpoch\t3\n\t#Broker\t1\t{b1}\n\t#Broker\t2\t{b2}\n\t#Broker\t3\t{b3}\n")
    # broker 3 is not in the SyncStateSet {2}: refused, nothing changes
    err = admin("electMaster", "-a", a, "-c", CLUSTER, "-bn", NAME, "-b", "3", rc=1)
    assert "electMaster command failed: CODE: 2012" in err
    assert "#MasterEpoch\t2\n" in admin("getSyncStateSet", "-a", a, "-b", NAME)


def test_update_and_get_controller_config(single_controller):
    a = single_controller.addr
    assert admin("updateControllerConfig", "-a", a, "-k", "electMasterMaxRetryCount", "-v", "5") == \
        f"update controller config success![{a}]\nelectMasterMaxRetryCount : 5\n"
    out = admin("getControllerConfig", "-a", a)
    assert out.startswith(f"============{a}============\n")
    assert f"{'electMasterMaxRetryCount':<50s}=  5\n" in out
    err = admin("updateControllerConfig", "-a", a, "-k", "configBlackList", "-v", "x", rc=1)
    assert "CODE: 16" in err and "Can not update config in black list." in err
    assert admin("updateControllerConfig", "-a", a, "-k", "electMasterMaxRetryCount", "-v", "3")
    with open(single_controller.config.configStorePath) as f:        # persisted, as Java's Configuration does
        assert "electMasterMaxRetryCount=3\n" in f.read()


def test_clean_broker_metadata(single_controller):
    a = single_controller.addr
    dead = FakeBroker(CLUSTER, "broker-dead")
    dead.join(a)                                    # registered, never heartbeats, never elected
    err = admin("cleanBrokerMetadata", "-a", a, "-bn", "broker-dead", rc=1)
    assert "cleanLivingBroker option is false, clusterName option can not be empty." in err
    assert admin("cleanBrokerMetadata", "-a", a, "-bn", "broker-dead", "-c", CLUSTER, "-b", "1") == \
        "clear broker broker-dead metadata from controller success! \n"
    assert call(a, 1004, {"brokerName": "broker-dead"}).code == 2008
    err = admin("cleanBrokerMetadata", "-a", a, "-bn", "broker-dead", "-c", CLUSTER, rc=1)
    assert "CODE: 2009" in err and "is not existed" in err
    dead.close()
