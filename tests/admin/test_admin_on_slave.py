"""Topic and subscription group changes sent to a slave are refused with Java's SYSTEM_ERROR and remark, before the
request is read; on a master the same handler runs (here: a bad body gets its own answer)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from rmqd.config import BrokerRole
from rmqd.processors.admin_common import SLAVE_REMARK
from rmqd.processors.admin_group import GroupAdminProcessor
from rmqd.processors.admin_topic import TopicAdminProcessor
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import new_request

PEER = SimpleNamespace(remote_address="127.0.0.1:1", peer_host="127.0.0.1", peer_port=1, closed=False)
CHANGES = [(TopicAdminProcessor, "update_and_create_topic"), (TopicAdminProcessor, "update_and_create_topic_list"),
           (TopicAdminProcessor, "delete_topic"), (GroupAdminProcessor, "update_and_create_subscription_group"),
           (GroupAdminProcessor, "update_and_create_subscription_group_list"),
           (GroupAdminProcessor, "delete_subscription_group")]


@pytest.mark.parametrize("processor, handler", CHANGES)
def test_a_slave_refuses_the_change(processor, handler) -> None:
    on_slave = processor(SimpleNamespace(role=BrokerRole.SLAVE))
    r = getattr(on_slave, handler)(PEER, new_request(17))
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)


def test_a_master_reads_the_request() -> None:
    on_master = GroupAdminProcessor(SimpleNamespace(role=BrokerRole.ASYNC_MASTER))
    r = on_master.update_and_create_subscription_group(PEER, new_request(200, body=b"[]"))
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the subscription group config body is invalid")
