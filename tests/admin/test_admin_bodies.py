"""The typed reading of answers in ``rmqd admin`` (rmqd/admin/bodies.py, client.answer): the edges the type
checker pointed at, without a server."""
from __future__ import annotations

import pytest

from rmqd.admin.auth_commands import acl_info
from rmqd.admin.bodies import TopicRoute
from rmqd.admin.client import AdminClient, AdminError, broker_addr_of
from rmqd.admin.message_commands import _pick_queue
from rmqd.remoting.codes import ResponseCode


class _RouteOnly(AdminClient):
    """An AdminClient whose name server answers one route (nothing goes on the wire)."""

    def __init__(self, route: TopicRoute) -> None:
        super().__init__("127.0.0.1:1")
        self._route = route

    def route(self, topic: str) -> TopicRoute:
        return self._route


def test_broker_addr_of_reads_numeric_and_string_ids() -> None:
    assert broker_addr_of({"brokerAddrs": {0: "a:1", 1: "b:1"}}, 0) == "a:1"
    assert broker_addr_of({"brokerAddrs": {"0": "a:1"}}, 0) == "a:1"
    assert broker_addr_of({"brokerAddrs": {"1": "b:1"}}, 0) is None
    assert broker_addr_of({}, 0) is None
    assert broker_addr_of({"brokerAddrs": ["a:1"]}, 0) is None       # not an object: no address


def test_pick_queue_without_a_master_is_an_admin_error() -> None:
    """A route whose broker group has no master (id 0) is refused with TOPIC_NOT_EXIST, not sent to None."""
    c = _RouteOnly({"brokerDatas": [{"brokerName": "b", "brokerAddrs": {1: "slave:10911"}}],
                    "queueDatas": [{"brokerName": "b", "perm": 6, "readQueueNums": 4, "writeQueueNums": 4}]})
    try:
        with pytest.raises(AdminError) as err:
            _pick_queue(c, "T", None, None)
        assert err.value.code == ResponseCode.TOPIC_NOT_EXIST
        assert "no master of b" in str(err.value)
    finally:
        c.close()


def test_pick_queue_takes_the_master_of_the_first_writable_broker() -> None:
    c = _RouteOnly({"brokerDatas": [{"brokerName": "b", "brokerAddrs": {0: "m:10911"}},
                                    {"brokerName": "a", "brokerAddrs": {"0": "n:10911"}}],
                    "queueDatas": [{"brokerName": "b", "perm": 6, "readQueueNums": 4, "writeQueueNums": 4},
                                   {"brokerName": "a", "perm": 4, "readQueueNums": 4, "writeQueueNums": 4}]})
    try:
        assert _pick_queue(c, "T", None, 3) == ("b", "m:10911", 3)      # "a" is read-only
    finally:
        c.close()


def test_acl_info_leaves_out_what_is_not_given_in_5x_order() -> None:
    info = acl_info("User:u", ["Topic:t", "Group:g"], ["Pub", "Sub"], None, "Allow")
    assert info == {"subject": "User:u", "policies": [{"entries": [
        {"resource": "Topic:t", "actions": ["Pub", "Sub"], "decision": "Allow"},
        {"resource": "Group:g", "actions": ["Pub", "Sub"], "decision": "Allow"}]}]}
    assert list(info["policies"][0]["entries"][0]) == ["resource", "actions", "decision"]
    assert acl_info(None, None, None, None, None) == {"subject": None, "policies": [{"entries": []}]}
