"""The topic, group and route a MessagingService request names, looked up and checked as the 5.x proxy does
(names validated first; TOPIC_NOT_FOUND / CONSUMER_GROUP_NOT_FOUND with the proxy's texts)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

from rmqd.grpc import message_types, validate
from rmqd.grpc.errors import RpcError
from rmqd.grpc.lite import LITE_CLIENT_TYPES
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.store import group_attributes as ga

if TYPE_CHECKING:
    from rmqd.grpc.backend import Metadata
    from rmqd.grpc.routes import TopicRoute
    from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig

C = d.Code


def topic_not_found(topic: str) -> RpcError:
    """What the proxy answers for a topic without a route (the client library's MQClientException text)."""
    return RpcError(C.TOPIC_NOT_FOUND, f"CODE: 17  DESC: No topic route info in name server for the topic: {topic}\n"
                                       "For more information, please visit the url, "
                                       "https://rocketmq.apache.org/docs/bestPractice/06FAQ")


def asked_addresses(request_endpoints: Optional[d.Endpoints]) -> list[tuple[str, int]]:
    """The addresses a client used to reach the endpoint (a route answers in their terms)."""
    return [(a.host, a.port) for a in request_endpoints.addresses] if request_endpoints is not None else []


def accept_types(tc: Optional[TopicConfig]) -> list[d.MessageType.ValueType]:
    """The topic's message types (rmqd.grpc.message_types); a topic this broker does not have (another broker's,
    known from the name server) takes the four 4.x-era types: the broker that has it checks each send."""
    return message_types.accept_types(tc) if tc is not None else [d.NORMAL, d.FIFO, d.DELAY, d.TRANSACTION]


class Lookups:
    """Topics, groups and routes of requests (see the module docstring)."""

    def __init__(self, metadata: Metadata) -> None:
        self.metadata = metadata

    async def topic(self, name: str) -> TopicConfig:
        """The config of a topic the request names (validated as the proxy does; TOPIC_NOT_FOUND without one)."""
        validate.check_topic(name)
        tc = await self.metadata.topic(name)
        if tc is None:
            raise topic_not_found(name)
        return tc

    async def group(self, name: str) -> SubscriptionGroupConfig:
        """The group's config (made where the brokers auto-create groups)."""
        validate.check_group(name)
        sg = await self.metadata.group(name)
        if sg is None:
            raise RpcError(C.CONSUMER_GROUP_NOT_FOUND, f"consumer group not found: {name}")
        return sg

    async def route(self, topic: str) -> tuple[Optional[TopicConfig], TopicRoute]:
        """(topic config or None, the route): the route of ``topic`` (every broker); TOPIC_NOT_FOUND without one."""
        validate.check_topic(topic)
        tc = await self.metadata.topic(topic)
        route = await self.metadata.route(topic, tc)
        if route is None:
            raise topic_not_found(topic)
        return tc, route

    async def consumer_group(self, name: str, client_type: d.ClientType.ValueType,
                             subscriptions: Sequence[d.SubscriptionEntry]) -> SubscriptionGroupConfig:
        """The group of a consumer registering (Settings, Heartbeat), with the proxy's checks
        (``ClientProcessor.registerConsumer``): it must exist (rmqd creates a plain consumer's group when
        ``autoCreateSubscriptionGroup`` is on; a lite group cannot be made that way), a lite group takes lite
        consumers only and the other way round, and a lite consumer subscribes its group's bind topic."""
        validate.check_group(name)
        lite_mode = client_type in LITE_CLIENT_TYPES
        sg = await self.metadata.group(name, create=not lite_mode)
        if sg is None:
            raise RpcError(C.ILLEGAL_CONSUMER_GROUP, f"group not found: {name}")
        bind = ga.bind_topic(sg)
        if not bind and lite_mode:
            raise RpcError(C.ILLEGAL_CONSUMER_GROUP, f"regular group cannot use LITE mode: {name}")
        if bind and not lite_mode:
            raise RpcError(C.ILLEGAL_CONSUMER_GROUP, f"lite group must use LITE mode: {name}")
        if lite_mode and len(subscriptions) and subscriptions[0].topic.name != bind:
            raise RpcError(C.ILLEGAL_TOPIC, f"lite group {name} is expected to bind topic {bind}, "
                                            f"but actual is {subscriptions[0].topic.name}")
        return sg
