"""The Raft adapter on pysyncobj, one member: commits, read barriers, snapshots that survive a restart, and
the refusals (not leader, another member's store, a taken port)."""
from __future__ import annotations

import asyncio
import os
import socket

import orjson
import pytest

from rmqd.controller.raft import NotLeaderError, RaftNode, RaftStartError
from tests.controller.ctlkit import free_ports


class Counter:
    """A tiny state machine: a dict of key -> sum."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}
        self.restored = 0

    def apply_entry(self, payload: bytes):
        if not payload:
            return None
        key, n = orjson.loads(payload)
        self.values[key] = self.values.get(key, 0) + n
        return self.values[key]

    def snapshot(self) -> bytes:
        return orjson.dumps(self.values)

    def restore(self, data: bytes) -> None:
        self.values = orjson.loads(data)
        self.restored += 1


async def leading(node: RaftNode, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if node.is_leader:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("no leader")


def member(tmp_path, machine, port, self_id="n0", group="g") -> RaftNode:
    return RaftNode(self_id, {self_id: f"127.0.0.1:{port}"}, str(tmp_path / "raft"), machine, group=group,
                    election_timeout_s=0.4, heartbeat_interval_s=0.05)


@pytest.mark.slow
async def test_commit_snapshot_and_restart(tmp_path):
    (port,) = free_ports(1)
    machine = Counter()
    node = member(tmp_path, machine, port)
    with pytest.raises(NotLeaderError):            # no election has happened yet
        await node.propose(b'["a", 1]', 1.0)
    await node.start()
    try:
        await leading(node)
        results = [await node.propose(orjson.dumps(["a", i]), 5.0) for i in range(1, 11)]
        assert results == [sum(range(1, i + 1)) for i in range(1, 11)]
        await asyncio.gather(*(node.read_barrier(5.0) for _ in range(20)))   # shared barriers
        node.force_snapshot()
        snap = tmp_path / "raft" / "raft.snapshot"
        for _ in range(100):
            if snap.exists():
                break
            await asyncio.sleep(0.05)
        assert snap.read_bytes().startswith(b"RMQDCTL1")
        assert await node.propose(b'["b", 7]', 5.0) == 7                   # after the snapshot, in the journal
        assert node.status()["state"] == "leader"
    finally:
        await node.stop()
    again = Counter()
    node = member(tmp_path, again, port)
    await node.start()
    try:
        await leading(node)
        await node.read_barrier(5.0)
        assert again.values == {"a": 55, "b": 7} and again.restored == 1
    finally:
        await node.stop()


async def test_store_of_another_member_is_refused(tmp_path):
    (port,) = free_ports(1)
    os.makedirs(tmp_path / "raft")
    (tmp_path / "raft" / "member.json").write_bytes(b'{"group":"g","selfId":"n1"}')
    with pytest.raises(RaftStartError, match="holds the Raft log of"):
        await member(tmp_path, Counter(), port).start()


async def test_taken_raft_port_is_refused(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        with pytest.raises(RaftStartError, match="cannot bind the Raft port"):
            await member(tmp_path, Counter(), s.getsockname()[1]).start()


async def test_store_in_use_is_refused(tmp_path):
    first_port, second_port = free_ports(2)
    node = member(tmp_path, Counter(), first_port)
    await node.start()
    try:
        with pytest.raises(RaftStartError, match="in use by another controller process"):
            await member(tmp_path, Counter(), second_port).start()
    finally:
        await node.stop()


def test_importing_the_raft_library_leaves_socket_alone():
    """pysyncobj replaces socket.inet_ntop with a Windows-only version on import; rmqd.controller.raft undoes it
    (a broker in the same process decodes IPv6 message ids with it)."""
    import rmqd.controller.raft  # noqa: F401  (imported above too; the import is what is tested)
    assert socket.inet_ntop(socket.AF_INET6, b"\xfe\x80" + b"\x00" * 13 + b"\x01") == "fe80::1"
    assert socket.inet_ntop(socket.AF_INET, b"\x7f\x00\x00\x01") == "127.0.0.1"
