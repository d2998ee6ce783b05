"""serverChannelMaxIdleTimeSeconds: like the Java servers (Netty's IdleStateHandler, 120 s by default), the
broker and the name server close a connection that read and wrote nothing for that long; a connection in use
stays open, and rmqd's own long-lived clients (AdminClient, the console's) connect again."""
from __future__ import annotations

import time

from rmqd.admin.client import AdminClient
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode
from rmqd.remoting.command import new_request
from rmqd.testing import EmbeddedServer


def runtime_info(c: BlockingClient) -> int:
    return c.invoke(new_request(RequestCode.GET_BROKER_RUNTIME_INFO), 5).code


def test_an_idle_connection_is_closed_and_a_busy_one_is_not(tmp_path, caplog):
    with EmbeddedServer(store_dir=str(tmp_path / "store"),
                        broker_properties={"serverChannelMaxIdleTimeSeconds": 1}) as s:
        assert s.broker.server.max_idle_s == 1
        with BlockingClient(s.broker_addr) as idle, BlockingClient(s.broker_addr) as busy, \
                caplog.at_level("INFO", logger="rmqd.remoting.server"):
            assert runtime_info(idle) == 0
            last = time.monotonic()
            while not idle.peer_closed() and time.monotonic() - last < 5:
                assert runtime_info(busy) == 0          # a request every 0.2 s keeps this one open
                time.sleep(0.2)
            closed_after = time.monotonic() - last
            assert idle.peer_closed() and 0.9 <= closed_after <= 2.0, closed_after
            assert not busy.peer_closed() and runtime_info(busy) == 0
            local = "%s:%d" % idle.sock.getsockname()
            assert f"closing {local}, idle for" in caplog.text


def test_admin_client_connects_again_after_an_idle_close(tmp_path):
    with EmbeddedServer(store_dir=str(tmp_path / "store"),
                        broker_properties={"serverChannelMaxIdleTimeSeconds": 1}) as s:
        admin = AdminClient(s.namesrv_addr)
        try:
            first = admin._client(s.broker_addr)
            assert admin.call(s.broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO).code == 0
            deadline = time.monotonic() + 5
            while not first.peer_closed() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert first.peer_closed()
            assert admin.call(s.broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO).code == 0
            assert admin._client(s.broker_addr) is not first
        finally:
            admin.close()


def test_java_defaults_and_zero_turns_it_off(tmp_path):
    with EmbeddedServer(store_dir=str(tmp_path / "a")) as s:
        assert s.broker.server.max_idle_s == 120 and s.services.namesrv.server.max_idle_s == 120
        assert s.broker.server._idle_sweep is not None
    with EmbeddedServer(store_dir=str(tmp_path / "b"), broker_properties={"serverChannelMaxIdleTimeSeconds": 0}) as s:
        assert s.broker.server._idle_sweep is None
        with BlockingClient(s.broker_addr) as c:
            assert runtime_info(c) == 0
            time.sleep(0.3)
            assert not c.peer_closed() and runtime_info(c) == 0
