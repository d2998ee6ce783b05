"""Broker liveness (heartbeat table) and the controller's settings, without any server."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rmqd.controller.config
from rmqd.controller.config import ControllerConfig, ControllerConfigError, Peer
from rmqd.controller.heartbeat import DEFAULT_BROKER_CHANNEL_EXPIRED_TIME, INT_MAX, BrokerHeartbeatManager


class Clock:
    now = 0

    def __call__(self) -> int:
        return self.now


class Channel:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_alive_until_timeout_then_scanned_out():
    clock, inactive = Clock(), []
    hb = BrokerHeartbeatManager(clock)
    hb.add_inactive_listener(lambda *key: inactive.append(key))
    ch = Channel()
    hb.on_heartbeat("c", "b", "127.0.0.1:1", 1, 3000, ch)
    hb.on_heartbeat("c", "b", "127.0.0.1:2", 2, None, Channel())            # default timeout 10 s
    assert hb.live_info("c", "b", 2).heartbeatTimeoutMillis == DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
    info = hb.live_info("c", "b", 1)
    assert (info.epoch, info.maxOffset, info.electionPriority) == (-1, -1, INT_MAX)
    clock.now = 3000
    assert hb.is_active("c", "b", 1) and hb.scan_not_active() == []
    clock.now = 3001
    assert not hb.is_active("c", "b", 1) and hb.is_active("c", "b", 2)
    assert hb.active_brokers_num() == {"c": {"b": 1}}
    assert hb.scan_not_active() == [("c", "b", 1)]
    assert ch.closed and inactive == [("c", "b", 1)]
    assert hb.live_info("c", "b", 1) is None


def test_channel_close_makes_inactive_at_once():
    inactive = []
    hb = BrokerHeartbeatManager(Clock())
    hb.add_inactive_listener(lambda *key: inactive.append(key))
    old, new = Channel(), Channel()
    hb.on_heartbeat("c", "b", "a:1", 1, 10000, old)
    hb.on_heartbeat("c", "b", "a:1", 1, 10000, new)        # the broker reconnected
    hb.on_channel_close(old)                               # the stale channel closing changes nothing
    assert inactive == [] and hb.is_active("c", "b", 1)
    hb.on_channel_close(new)
    assert inactive == [("c", "b", 1)] and not hb.is_active("c", "b", 1)


def test_latest_values_on_a_channel_win():
    """A slave that truncated reports a lower offset: the election must see it (Java keeps the old maximum)."""
    hb = BrokerHeartbeatManager(Clock())
    ch = Channel()
    hb.on_heartbeat("c", "b", "a:1", 1, 10000, ch, epoch=3, max_offset=5000, confirm_offset=4000, election_priority=2)
    hb.on_heartbeat("c", "b", "a:1", 1, 10000, ch, epoch=3, max_offset=4000, confirm_offset=4000, election_priority=2)
    info = hb.live_info("c", "b", 1)
    assert (info.epoch, info.maxOffset, info.confirmOffset, info.electionPriority) == (3, 4000, 4000, 2)


def test_listener_errors_are_logged_not_raised(caplog):
    hb = BrokerHeartbeatManager(Clock())
    hb.add_inactive_listener(lambda *key: 1 / 0)
    ch = Channel()
    hb.on_heartbeat("c", "b", "a:1", 1, 10000, ch)
    hb.on_channel_close(ch)
    assert "inactive-broker listener failed" in caplog.text


def test_dledger_peers_and_raft_addresses():
    c = ControllerConfig(controllerDLegerGroup="g", controllerDLegerPeers="n0-127.0.0.1:9878;n1-127.0.0.1:9868",
                         controllerDLegerSelfId="n1")
    assert c.peers() == [Peer("n0", "127.0.0.1:9878", "127.0.0.1:10878"),
                         Peer("n1", "127.0.0.1:9868", "127.0.0.1:10868")]
    assert c.self_peer().id == "n1" and c.group() == "g"
    c.update({"controllerRaftPeers": "n0-10.0.0.1:7000;n1-10.0.0.2:7000",
              "controllerRaftDialPeers": "n0-127.0.0.1:31000"})
    assert [p.raft_addr for p in c.peers()] == ["10.0.0.1:7000", "10.0.0.2:7000"]
    assert c.dial_addrs() == {"n0": "127.0.0.1:31000"}
    assert c.black_list() == {"configBlackList", "configStorePath", "rocketmqHome"}


def test_jraft_keys_map_to_the_same_group():
    c = ControllerConfig(controllerType="jRaft", jRaftServerId="127.0.0.1:9881",
                         jRaftInitConf="127.0.0.1:9880,127.0.0.1:9881,127.0.0.1:9882",
                         jRaftControllerRPCAddr="127.0.0.1:9770,127.0.0.1:9771,127.0.0.1:9772")
    assert c.self_peer() == Peer("n1", "127.0.0.1:9771", "127.0.0.1:9881")
    assert c.group() == "jRaft-Controller"
    assert c.store_path().endswith("jRaftController")


@pytest.mark.parametrize("peers,self_id,message", [
    ("", "n0", "controllerDLegerPeers of ControllerConfig is null or empty"),
    ("n0-127.0.0.1", "n0", "is not id-host:port"),
    ("n0-127.0.0.1:1;n0-127.0.0.1:2", "n0", "appears twice"),
    ("n0-127.0.0.1:1", "", "controllerDLegerSelfId of ControllerConfig is null or empty"),
    ("n0-127.0.0.1:1", "n1", "is not one of controllerDLegerPeers"),
])
def test_bad_peer_settings(peers, self_id, message):
    c = ControllerConfig(controllerDLegerPeers=peers, controllerDLegerSelfId=self_id)
    with pytest.raises(ControllerConfigError, match=message):
        c.self_peer()


def test_typed_properties_match_the_defaults():
    """ControllerConfig's properties are typed for the checker in an ``if TYPE_CHECKING:`` block: one annotation per
    key of ``_DEFAULTS``, of the default's type (``str | None`` where the default is None)."""
    tree = ast.parse(Path(rmqd.controller.config.__file__).read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ControllerConfig")
    typed = {item.target.id: ast.unparse(item.annotation)
             for node in cls.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
             for item in node.body if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
    expected = {key: "str | None" if default is None else type(default).__name__
                for key, default in ControllerConfig._DEFAULTS.items()}
    assert typed == expected
