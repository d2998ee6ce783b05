"""What a gRPC request touches, as 5.x's ``DefaultAuthorizationContextBuilder.build(Metadata, message)``.

SendMessage, RecallMessage, EndTransaction: Pub on the (first message's) topic. QueryRoute: Pub or Sub on the
topic. Heartbeat of a push, simple or pull consumer, ChangeInvisibleDuration, NotifyClientTermination (with a
group): Sub on the group. ReceiveMessage, AckMessage, ForwardMessageToDeadLetterQueue, QueryAssignment,
SyncLiteSubscription (with lite topics): Sub on the group and on the topic. Telemetry settings: Pub on each
published topic, Sub on the subscribing group and each subscribed topic. Everything else touches nothing.
A missing name is refused as 5.x words it ("topic is null.", "group is null.", ...).
"""
from __future__ import annotations

from typing import Optional

from google.protobuf.message import Message

from rmqd.auth.authorization import AuthContext
from rmqd.auth.errors import AuthorizationError
from rmqd.auth.model import Action, Resource
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s

_CONSUMERS = (d.PUSH_CONSUMER, d.SIMPLE_CONSUMER, d.PULL_CONSUMER)


def _blank(text: str) -> bool:
    return not text or not text.strip()


def _pub(topic: Optional[d.Resource]) -> list[AuthContext]:
    if topic is None or _blank(topic.name):
        raise AuthorizationError("topic is null.")
    return [AuthContext(Resource.topic(topic.name), (Action.PUB,))]


def _group(group: Optional[d.Resource]) -> list[AuthContext]:
    if group is None or _blank(group.name):
        raise AuthorizationError("group is null.")
    return [AuthContext(Resource.group(group.name), (Action.SUB,))]


def _topic(topic: Optional[d.Resource]) -> list[AuthContext]:
    if topic is None or _blank(topic.name):
        raise AuthorizationError("topic is null.")
    return [AuthContext(Resource.topic(topic.name), (Action.SUB,))]


def _sub(group: Optional[d.Resource], topic: Optional[d.Resource]) -> list[AuthContext]:
    return _group(group) + _topic(topic)


def contexts_of(request: Message) -> Optional[list[AuthContext]]:
    """The contexts of one gRPC request message (None: nothing to decide)."""
    if isinstance(request, s.SendMessageRequest):
        if len(request.messages) <= 0:
            raise AuthorizationError("message is null.")
        return _pub(request.messages[0].topic)
    if isinstance(request, (s.RecallMessageRequest, s.EndTransactionRequest)):
        return _pub(request.topic)
    if isinstance(request, s.HeartbeatRequest):
        if request.client_type not in _CONSUMERS:
            return None
        return _group(request.group)
    if isinstance(request, s.ReceiveMessageRequest):
        if not request.HasField("message_queue"):
            raise AuthorizationError("messageQueue is null.")
        return _sub(request.group, request.message_queue.topic)
    if isinstance(request, s.SyncLiteSubscriptionRequest):
        if len(request.lite_topic_set) <= 0:
            return None
        return _sub(request.group, request.topic)
    if isinstance(request, (s.AckMessageRequest, s.ForwardMessageToDeadLetterQueueRequest,
                            s.QueryAssignmentRequest)):
        return _sub(request.group, request.topic)
    if isinstance(request, s.NotifyClientTerminationRequest):
        return None if _blank(request.group.name) else _group(request.group)
    if isinstance(request, s.ChangeInvisibleDurationRequest):
        return _group(request.group)
    if isinstance(request, s.QueryRouteRequest):
        if _blank(request.topic.name):
            raise AuthorizationError("topic is null.")
        return [AuthContext(Resource.topic(request.topic.name), (Action.PUB, Action.SUB))]
    if isinstance(request, s.TelemetryCommand):
        if request.WhichOneof("command") != "settings":
            return None
        settings = request.settings
        if not settings.HasField("publishing") and not settings.HasField("subscription"):
            raise AuthorizationError("settings command doesn't have publishing or subscription.")
        out: list[AuthContext] = []
        if settings.HasField("publishing"):
            for topic in settings.publishing.topics:
                out += _pub(topic)
        if settings.HasField("subscription"):
            out += _group(settings.subscription.group)
            for entry in settings.subscription.subscriptions:
                out += _topic(entry.topic)
        return out
    return None
