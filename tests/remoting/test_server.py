"""The reactor: dispatch, error responses, malformed frames, fast failure, server-initiated calls."""
import asyncio
import struct
import threading
import time

import pytest

from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import (
    JSON,
    ROCKETMQ,
    FrameReader,
    RemotingCommand,
    encode_frame_bytes,
    new_request,
    new_response,
)
from rmqd.remoting.connection import Connection
from rmqd.remoting.dispatch import TO_POOL, Dispatcher, ProcessorPool
from rmqd.remoting.server import RemotingServer


class RawClient:
    """An asyncio stream client speaking frames, for tests."""

    def __init__(self, reader, writer):
        self.r, self.w = reader, writer
        self.frames = FrameReader()
        self.inbox = []
        self.opaque = 0

    @classmethod
    async def connect(cls, port):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        return cls(r, w)

    def send(self, cmd):
        if not cmd.opaque:
            self.opaque += 1
            cmd.opaque = self.opaque
        self.w.write(encode_frame_bytes(cmd))
        return cmd.opaque

    async def recv(self, timeout=3.0):
        while not self.inbox:
            data = await asyncio.wait_for(self.r.read(65536), timeout)
            if not data:
                raise ConnectionError("closed")
            self.inbox += self.frames.feed(data)
        return self.inbox.pop(0)

    async def call(self, cmd, timeout=3.0):
        self.send(cmd)
        return await self.recv(timeout)

    async def closed(self, timeout=3.0):
        try:
            data = await asyncio.wait_for(self.r.read(65536), timeout)
        except ConnectionError:
            return True
        return data == b""

    def close(self):
        self.w.close()


@pytest.fixture
async def server():
    dispatcher = Dispatcher("test")
    slow_pool = ProcessorPool("slow", threads=1, capacity=2, max_wait_ms=100)
    release = threading.Event()

    def echo(conn, req):
        return new_response(0, f"echo {req.code}", req.ext_fields, req.body_bytes() or None)

    def boom(conn, req):
        raise RuntimeError("kaboom")

    def block(conn, req):
        release.wait(5)
        return new_response(0, "unblocked")

    async def ask_back(conn, req):
        # The server calls the client over the same connection and relays its answer.
        answer = await conn.invoke(new_request(307, {"consumerGroup": "G"}), timeout=2)
        return new_response(answer.code, answer.remark)

    dispatcher.register(1000, echo)
    dispatcher.register(1001, boom)

    def parse_body(conn, req):
        import orjson
        return new_response(0, str(orjson.loads(req.body_bytes())))

    dispatcher.register(1006, parse_body)
    dispatcher.register(1002, block, slow_pool)
    dispatcher.register(1003, echo, slow_pool)
    dispatcher.register(1004, ask_back)

    def where(conn, req):
        return new_response(0, threading.current_thread().name)

    def where_inline(conn, req):
        return TO_POOL if req.ext("big") == "true" else where(conn, req)

    fast_pool = ProcessorPool("fast", threads=1)
    dispatcher.register(1005, where, fast_pool, inline_first=where_inline)
    srv = RemotingServer(dispatcher, "127.0.0.1", 0, name="test")
    await srv.start()
    srv.release = release
    yield srv
    release.set()
    await srv.close()


async def test_echo_json_and_rocketmq_reply_in_request_type(server):
    c = await RawClient.connect(server.port)
    for stype in (JSON, ROCKETMQ):
        resp = await c.call(RemotingCommand(1000, {"k": "v"}, b"body", serialize_type=stype, version=333))
        assert resp.serialize_type == stype and resp.is_response and resp.code == 0
        assert resp.remark == "echo 1000" and resp.ext_fields == {"k": "v"} and resp.body == b"body"
        assert resp.version == 409
    c.close()


async def test_unknown_code_gets_request_code_not_supported(server):
    c = await RawClient.connect(server.port)
    resp = await c.call(RemotingCommand(4242))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "4242" in resp.remark
    resp = await c.call(RemotingCommand(1000))  # connection kept
    assert resp.code == 0
    c.close()


async def test_processor_exception_is_system_error_and_connection_kept(server):
    c = await RawClient.connect(server.port)
    resp = await c.call(RemotingCommand(1001))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "kaboom" in resp.remark
    assert (await c.call(RemotingCommand(1000))).code == 0
    c.close()


async def test_oneway_gets_no_reply(server):
    c = await RawClient.connect(server.port)
    c.send(RemotingCommand(1000, flag=2))
    c.send(RemotingCommand(4242, flag=2))
    resp = await c.call(RemotingCommand(1000, {"n": "2"}))
    assert resp.ext_fields == {"n": "2"} and not c.inbox
    c.close()


MALFORMED = [
    struct.pack(">I", 2) + b"ab",                                   # length < 4
    struct.pack(">II", 10, 500) + b"{}{}{}",                        # header length larger than frame
    struct.pack(">II", 4 + 9, 9) + b"{notjson}",                    # bad JSON
    struct.pack(">II", 4 + 2, (7 << 24) | 2) + b"{}",               # unknown serialize type
    struct.pack(">I", 16 * 1024 * 1024 + 1) + b"\x00" * 8,          # frame over maxFrameLength
]


async def test_malformed_frames_close_only_their_connection(server):
    good = await RawClient.connect(server.port)
    for i, raw in enumerate(MALFORMED):
        bad = await RawClient.connect(server.port)
        bad.w.write(raw)
        assert await bad.closed(), f"malformed frame {i} did not close the connection"
        resp = await good.call(RemotingCommand(1000, {"i": str(i)}))
        assert resp.code == 0 and resp.ext_fields == {"i": str(i)}
    good.close()


async def test_requests_waiting_too_long_in_pool_get_system_busy_fast(server):
    c = await RawClient.connect(server.port)
    c.send(RemotingCommand(1002))          # occupies the only worker
    await asyncio.sleep(0.05)
    t0 = time.monotonic()
    c.send(RemotingCommand(1003))          # waits in the queue past 100 ms
    resp = await c.recv(timeout=2)
    elapsed = time.monotonic() - t0
    # Java (BrokerFastFailure.cleanExpiredRequestInQueue) tags a request that waited too long TIMEOUT_CLEAN_QUEUE;
    # PCBUSY_CLEAN_QUEUE is its page-cache-busy answer
    assert resp.code == ResponseCode.SYSTEM_BUSY and resp.remark.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy")
    assert elapsed < 0.5
    server.release.set()
    resp = await c.recv(timeout=2)
    assert resp.remark == "unblocked"
    c.close()


async def test_full_pool_queue_answers_overload(server):
    c = await RawClient.connect(server.port)
    c.send(RemotingCommand(1002))
    await asyncio.sleep(0.05)
    for _ in range(3):                     # capacity 2: the third is rejected at once
        c.send(RemotingCommand(1003))
    resp = await c.recv(timeout=1)
    assert resp.code == ResponseCode.SYSTEM_BUSY and "OVERLOAD" in resp.remark
    server.release.set()
    c.close()


async def test_server_can_call_the_client_back(server):
    c = await RawClient.connect(server.port)
    c.send(RemotingCommand(1004))
    pushed = await c.recv()
    assert pushed.code == 307 and not pushed.is_response and pushed.ext_fields == {"consumerGroup": "G"}
    answer = new_response(0, "running info")
    answer.opaque = pushed.opaque
    c.w.write(encode_frame_bytes(answer))
    resp = await c.recv()
    assert resp.code == 0 and resp.remark == "running info"
    c.close()


async def test_server_call_times_out_when_client_never_answers(server):
    c = await RawClient.connect(server.port)
    c.send(RemotingCommand(1004))
    await c.recv()                          # the pushed request, left unanswered
    resp = await c.recv(timeout=4)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "Timeout" in resp.remark
    c.close()


async def test_close_listener_sees_disconnects(server):
    closed = asyncio.Event()
    server.add_close_listener(lambda conn: closed.set())
    c = await RawClient.connect(server.port)
    await c.call(RemotingCommand(1000))
    c.close()
    await asyncio.wait_for(closed.wait(), 2)


class FakeTransport:
    def __init__(self):
        self.paused = False

    def pause_reading(self):
        self.paused = True

    def resume_reading(self):
        self.paused = False


def test_backpressure_pauses_reading_when_write_buffer_is_full():
    conn = Connection(None, max_frame_length=1024)
    conn.transport = FakeTransport()
    conn.pause_writing()
    assert conn.transport.paused
    conn.resume_writing()
    assert not conn.transport.paused


async def test_replies_from_pool_threads_reach_the_client(server):
    c = await RawClient.connect(server.port)
    server.release.set()
    opaques = [c.send(RemotingCommand(1003, {"n": str(i)})) for i in range(2)]
    got = [await c.recv(), await c.recv()]
    assert sorted(r.opaque for r in got) == sorted(opaques)
    c.close()


async def test_inline_first_answers_on_the_loop_or_hands_over_to_the_pool(server):
    c = await RawClient.connect(server.port)
    small = await c.call(RemotingCommand(1005, {"big": "false"}))
    big = await c.call(RemotingCommand(1005, {"big": "true"}))
    assert small.remark == threading.main_thread().name   # the event loop runs in the main thread here
    assert big.remark == "fast-0"
    c.close()


def test_a_code_claimed_twice_is_refused_unless_replaced():
    d = Dispatcher("x")
    d.register([1, 2], lambda c, r: None)
    with pytest.raises(ValueError, match=r"\[2\] already have a handler"):
        d.register(2, lambda c, r: None)
    d.register(2, lambda c, r: "new", replace=True)


def test_a_broker_with_every_feature_on_claims_each_code_once(tmp_path):
    """Compaction, tier, ACL, POP ... each register their own admin codes: none may collide."""
    from rmqd.testing import EmbeddedServer
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("accounts:\n  - accessKey: everyFeature1\n    secretKey: everySecret1\n    admin: true\n")
    props = {"aclEnable": "true", "aclFile": str(acl), "tieredStoreFilePath": str(tmp_path / "tier"),
             "messageStorePlugIn": "org.apache.rocketmq.tieredstore.TieredMessageStore"}
    with EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties=props) as s:
        assert all(s.broker.dispatcher.handles(c) for c in (9003, 9004, 9005, 9006))


def test_inline_first_requires_a_pool():
    with pytest.raises(ValueError):
        Dispatcher("x").register(1, lambda c, r: None, None, inline_first=lambda c, r: None)


async def test_undecodable_body_is_a_one_line_system_error(server, caplog):
    c = await RawClient.connect(server.port)
    with caplog.at_level("WARNING"):
        resp = await c.call(RemotingCommand(1006, None, b"{not json"))
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark.startswith("bad request body")
    assert "undecodable body" in caplog.text and "Traceback" not in caplog.text
    assert (await c.call(RemotingCommand(1006, None, b"[1]"))).remark == "[1]"
    c.close()
