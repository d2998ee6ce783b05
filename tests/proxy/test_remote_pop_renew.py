"""rmqd.proxy.remote_pop: a push consumer's messages (auto-renew) received over remoting stay invisible while they
are renewed (CHANGE_MESSAGE_INVISIBLETIME for the group that received them), and the ack takes the newest handle;
against a real rmqd broker."""
from __future__ import annotations

import asyncio

import pytest

from tests.pop.pop_helpers import create_group, create_topic, pop, send
from rmqd.grpc.backend import ReceiveRequest
from rmqd.pop.extra_info import ReceiptHandle
from rmqd.pop.frontend import PopExecutor
from rmqd.proxy.remote_pop import RemotePop
from rmqd.remoting.client import BlockingClient, RemotingClient
from rmqd.remoting.command import RemotingCommand
from rmqd.remoting.dispatch import Dispatcher
from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig
from rmqd.testing import EmbeddedServer

pytestmark = pytest.mark.timeout(60)


class OneBroker:
    """BrokerCalls to the one broker of the test (any name)."""

    def __init__(self, addr: str) -> None:
        self.addr = addr
        self.client = RemotingClient(Dispatcher("test-remote-pop"))

    async def invoke(self, name: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        return await self.client.invoke(self.addr, request, timeout)


@pytest.fixture(scope="module")
def server():
    with EmbeddedServer(broker_properties={"brokerIP1": "127.0.0.1"}) as s:
        yield s


def _request(topic: str, group: str) -> ReceiveRequest:
    return ReceiveRequest(client_id="c1", group=SubscriptionGroupConfig(group), topic=TopicConfig(topic),
                          broker="broker-a", batch=32, invisible_ms=1000, poll_ms=0, filter_type="TAG",
                          expression="*", message_filter=None, host="127.0.0.1:1", namespace="", auto_renew=True)


async def test_renewed_messages_stay_invisible_and_are_acked_with_the_newest_handle(server):
    c = BlockingClient(server.broker_addr)
    try:
        create_topic(c, "PxRenewT")
        create_group(c, "PxRenewG")
        send(c, "PxRenewT", b"held")
        resp = pop(c, "PxRenewT", "PxRenewG", invisible=1000)      # invisible for 1 s only
        assert resp.code == 0, resp.remark
        calls = OneBroker(server.broker_addr)
        executor = PopExecutor(1, 16, name="test-remote-pop")
        try:
            rp = RemotePop(calls, executor)
            rr = _request("PxRenewT", "PxRenewG")
            got = await rp.received(resp, "broker-a", rr)
            assert [m.body for m in got.messages] == [b"held"]
            keys = [key for key, _ in got.holds]
            # due within 10 s: renewed now for 5 s more, under the group that received it
            assert await rp.renew(keys, 5000, 10_000) == keys
            await asyncio.sleep(1.5)                    # past the first invisible time
            again = pop(c, "PxRenewT", "PxRenewG", invisible=1000)
            assert again.code != 0 or not again.body, "a renewed message was handed out again"
            # the client acks with the handle it was given; the newest (renewed) one goes to the broker
            given = ReceiptHandle.parse(got.messages[0].system_properties.receipt_handle)
            await rp.ack("PxRenewG", "PxRenewT", given)
            assert await rp.renew(keys, 5000, 10_000) == []         # acked: nothing left to renew
        finally:
            executor.shutdown()
            calls.client.close()
    finally:
        c.close()

