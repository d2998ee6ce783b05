"""The role owner, SlaveSynchronize's application of the master's metadata, and the replica-outcome answer frames."""
from __future__ import annotations

import asyncio

import orjson
import pytest

from rmqd.config import BrokerConfig, BrokerRole
from rmqd.common.data_version import DataVersion
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import (JSON, ROCKETMQ, RPC_TYPE_RESPONSE, RemotingCommand, decode_header,
                                   encode_frame_bytes, new_response)
from rmqd.replicas.answers import answer_for, with_code
from rmqd.replicas.role_manager import RoleManager
from rmqd.replicas.slave_sync import SlaveSynchronize, vip_address
from rmqd.store.message_store import PutMessageStatus
from rmqd.store.metadata import (ConsumerOffsetManager, DelayOffsetManager, SubscriptionGroupManager, TopicConfig,
                                 TopicConfigManager)


def test_role_rules_of_broker_startup():
    c = BrokerConfig(brokerRole="sync_master", brokerId=3)
    rm = RoleManager(c)
    assert rm.role is BrokerRole.SYNC_MASTER and rm.broker_id == 0 and c.brokerId == 0   # a master is id 0
    with pytest.raises(ValueError, match="Slave's brokerId must be > 0"):
        RoleManager(BrokerConfig(brokerRole="SLAVE", brokerId=0))


def test_master_addresses_and_role_changes():
    c = BrokerConfig(brokerRole="SLAVE", brokerId=2)
    rm = RoleManager(c)
    seen, roles = [], []
    rm.on_master_change(lambda m, ha: seen.append((m, ha)))
    rm.on_role_change(lambda r: roles.append((r.role, r.broker_id)), call_now=False)
    rm.update_master("10.0.0.1:10911", "10.0.0.1:10912")
    rm.update_master(None, None)                      # master gone: keep its HA address, stop metadata sync
    assert seen == [("10.0.0.1:10911", "10.0.0.1:10912"), (None, "10.0.0.1:10912")]
    rm.change_to_master(BrokerRole.ASYNC_MASTER)
    assert (c.brokerRole, c.brokerId) == ("ASYNC_MASTER", 0) and rm.master_addr is None
    rm.update_master("10.0.0.9:10911", "10.0.0.9:10912")     # a master follows nobody
    assert rm.master_addr is None
    rm.change_to_slave(0)                                     # Java's changeToSlave: id 0 becomes 1
    assert roles == [(BrokerRole.ASYNC_MASTER, 0), (BrokerRole.SLAVE, 1)]
    pinned = RoleManager(BrokerConfig(brokerRole="SLAVE", brokerId=1, haMasterAddress="10.0.0.5:30912"))
    pinned.update_master("10.0.0.1:10911", "10.0.0.1:10912")
    assert pinned.master_ha_addr == "10.0.0.5:30912" and pinned.master_addr == "10.0.0.1:10911"


@pytest.mark.parametrize("serialize_type", [JSON, ROCKETMQ])
def test_replica_outcome_frames(serialize_type):
    resp = new_response(ResponseCode.SUCCESS, None, {"msgId": "ABCD", "queueId": "3", "queueOffset": "7",
                                                     "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
    resp.opaque, resp.flag, resp.serialize_type = 42, RPC_TYPE_RESPONSE, serialize_type
    ok = encode_frame_bytes(resp)
    assert answer_for(PutMessageStatus.PUT_OK, ok, b"flush") == ok
    assert answer_for(PutMessageStatus.FLUSH_DISK_TIMEOUT, ok, b"flush") == b"flush"
    for status, code in ((PutMessageStatus.FLUSH_SLAVE_TIMEOUT, 12), (PutMessageStatus.SLAVE_NOT_AVAILABLE, 11)):
        frame = answer_for(status, ok, b"flush")
        word = int.from_bytes(frame[4:8], "big")
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4 and word >> 24 == serialize_type
        cmd = decode_header(serialize_type, frame[8:8 + (word & 0xFFFFFF)])
        assert cmd.code == code and cmd.opaque == 42 and cmd.ext_fields["msgId"] == "ABCD"
    assert with_code(ok, 12) != ok


class _Role:
    is_slave = True
    master_addr = "127.0.0.1:20911"


class _Client:
    """Answers the four SlaveSynchronize codes from canned bodies; records the addresses called."""

    def __init__(self, bodies: dict) -> None:
        self.bodies = bodies
        self.calls = []

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        self.calls.append((addr, request.code))
        return new_response(ResponseCode.SUCCESS, None, None, self.bodies[request.code])


def test_slave_synchronize_applies_the_masters_tables(tmp_path):
    topics, groups = TopicConfigManager(str(tmp_path)), SubscriptionGroupManager(str(tmp_path))
    offsets, delays = ConsumerOffsetManager(str(tmp_path)), DelayOffsetManager(str(tmp_path))
    topics.update(TopicConfig("SlaveOnly", 1, 1))
    offsets.commit_offset("x", "SlaveGroup", "T", 0, 5)
    version = DataVersion(123, 9)
    bodies = {
        RequestCode.GET_ALL_TOPIC_CONFIG: orjson.dumps({"dataVersion": version.to_json(), "topicConfigTable": {
            "FromMaster": {"topicName": "FromMaster", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}}}),
        RequestCode.GET_ALL_CONSUMER_OFFSET: b'{"offsetTable":{"FromMaster@G":{0:11,1:12}}}',
        RequestCode.GET_ALL_DELAY_OFFSET: b'{"offsetTable":{1:40,3:7}}',
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: orjson.dumps({
            "dataVersion": version.to_json(), "subscriptionGroupTable": {"G": {"groupName": "G"}}}),
    }
    client = _Client(bodies)
    replaced = []

    async def blocking(fn, *args):
        return fn(*args)
    sync = SlaveSynchronize(_Role(), client, topics, groups, offsets, delays, lambda: "127.0.0.1:30911", blocking,
                            replaced.extend)
    asyncio.run(sync.sync_all())
    assert client.calls[0] == (vip_address("127.0.0.1:20911"), RequestCode.GET_ALL_TOPIC_CONFIG) == \
        ("127.0.0.1:20909", RequestCode.GET_ALL_TOPIC_CONFIG)                  # topics from the VIP port
    assert set(topics.table) == {"FromMaster"} and topics.data_version == version   # replaced as a whole
    assert [tc.topic_name for tc in replaced] == ["FromMaster"]
    assert offsets.query_offset("G", "FromMaster", 1) == 12
    assert offsets.query_offset("SlaveGroup", "T", 0) == 5                   # the master's entries overwrite
    assert delays.get(1) == 40 and delays.get(3) == 7
    assert set(groups.table) == {"G"}
    assert TopicConfigManager(str(tmp_path)).load() and sync.rounds == 1      # persisted
    client.calls.clear()
    asyncio.run(sync.sync_all())                                              # same DataVersion: no replace
    assert sync.rounds == 2 and replaced == [topics.table["FromMaster"]]
