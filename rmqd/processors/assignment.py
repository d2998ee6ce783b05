"""Server-side rebalance for 5.x remoting consumers: QUERY_ASSIGNMENT 400, SET_MESSAGE_REQUEST_MODE 401,
GET_ALL_MESSAGE_REQUEST_MODE 402.

Java: ``QueryAssignmentProcessor`` and ``MessageRequestModeManager`` (``config/messageRequestMode.json``).
A (topic, group) is in PULL mode (default, ``defaultMessageRequestMode``) or POP mode (5.x mqadmin
``setConsumeMode``).  PULL: the broker spreads the topic's queues over the group's live clients
(AllocateMessageQueueAveragely); POP: every client gets the broker's queue ``-1`` and pops from all
queues.  BROADCASTING: every queue to everyone.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional, TypedDict, TypeVar, Union

import orjson

from rmqd.common.constants import is_retry_topic
from rmqd.processors.client_manage import parse_json_body
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_response
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.store.metadata import ConfigManager

if TYPE_CHECKING:
    from rmqd.broker.client_manager import ConsumerManager
    from rmqd.config import BrokerConfig
    from rmqd.processors.handles import RequestPeer
    from rmqd.store.metadata import SubscriptionGroupManager, TopicConfigManager

log = logging.getLogger(__name__)

QUERY_ASSIGNMENT = 400
SET_MESSAGE_REQUEST_MODE = 401
GET_ALL_MESSAGE_REQUEST_MODE = 402
PULL, POP = "PULL", "POP"


class RequestModeJson(TypedDict):
    """One (topic, group)'s mode (Java ``SetMessageRequestModeRequestBody``)."""

    topic: str
    consumerGroup: str
    mode: str
    popShareQueueNum: int


class RequestModeFileJson(TypedDict, total=False):
    """``messageRequestMode.json``."""

    messageRequestModeMap: dict[str, dict[str, RequestModeJson]]


# A MessageQueue of an assignment: {"topic", "brokerName", "queueId"}
MessageQueueJson = dict[str, Union[str, int]]
_Q = TypeVar("_Q")


class MessageRequestModeManager(ConfigManager[RequestModeFileJson]):
    """``messageRequestMode.json``: ``{"messageRequestModeMap": {topic: {group: body}}}``."""

    file_name = "messageRequestMode.json"

    def __init__(self, config_dir: str) -> None:
        super().__init__(config_dir)
        self.table: dict[str, dict[str, RequestModeJson]] = {}

    def encode(self) -> RequestModeFileJson:
        return {"messageRequestModeMap": self.table}

    def decode(self, data: RequestModeFileJson) -> None:
        self.table = {t: dict(g) for t, g in (data.get("messageRequestModeMap") or {}).items()}

    def get(self, topic: str, group: str) -> Optional[RequestModeJson]:
        return (self.table.get(topic) or {}).get(group)

    def set(self, body: RequestModeJson) -> None:
        with self._lock:
            self.table.setdefault(body["topic"], {})[body["consumerGroup"]] = body
        self.persist()


def allocate_averagely(mqs: list[_Q], cids: list[str], cid: Optional[str]) -> list[_Q]:
    """AllocateMessageQueueAveragely (Java's default strategy)."""
    if cid not in cids or not mqs:
        return []
    index = cids.index(cid)
    mod = len(mqs) % len(cids)
    if len(mqs) <= len(cids):
        size = 1
    else:
        size = len(mqs) // len(cids) + (1 if mod > 0 and index < mod else 0)
    start = index * size if mod > 0 and index < mod else index * size + mod
    rng = min(size, len(mqs) - start)
    return [mqs[(start + i) % len(mqs)] for i in range(max(rng, 0))]


def allocate_for_pop(mqs: list[MessageQueueJson], cids: list[str], cid: Optional[str],
                     share: int) -> list[MessageQueueJson]:
    """QueryAssignmentProcessor.allocate4Pop: with no sharing (``popShareQueueNum`` 0, or as many as the other
    clients) every client pops every queue (queue -1); else its own queues and those of the ``share`` clients
    after it in the sorted client list."""
    if share <= 0 or share >= len(cids) - 1:
        return [{**mqs[0], "queueId": -1}] if mqs else []
    if len(cids) > len(mqs):
        return allocate_averagely(mqs, cids, cid)
    out = list(allocate_averagely(mqs, cids, cid))
    if cid in cids:
        index = cids.index(cid)
        for _ in range(share):
            index = (index + 1) % len(cids)
            out += [mq for mq in allocate_averagely(mqs, cids, cids[index]) if mq not in out]
    return out


class AssignmentProcessor:
    """Reads the broker's config (name, default request mode), its topics and the consumer table."""

    def __init__(self, config: BrokerConfig, topics: TopicConfigManager, consumers: ConsumerManager,
                 modes: MessageRequestModeManager, groups: Optional[SubscriptionGroupManager] = None) -> None:
        self.config = config
        self.topics = topics
        self.consumers = consumers
        self.modes = modes
        self.groups = groups            # find(group): the mode of a group that does not exist is refused

    def register(self, dispatcher: Dispatcher, client_pool: ProcessorPool, admin_pool: ProcessorPool) -> None:
        dispatcher.register(QUERY_ASSIGNMENT, self.query_assignment, client_pool)
        dispatcher.register(SET_MESSAGE_REQUEST_MODE, self.set_message_request_mode, admin_pool)
        dispatcher.register(GET_ALL_MESSAGE_REQUEST_MODE, self.get_all_message_request_mode, admin_pool)

    def _mode(self, topic: str, group: str) -> RequestModeJson:
        body = self.modes.get(topic, group)
        if body is not None:
            return body
        mode = PULL if is_retry_topic(topic) else str(self.config.defaultMessageRequestMode).upper()
        return {"topic": topic, "consumerGroup": group, "mode": mode, "popShareQueueNum": 0}

    def query_assignment(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        body = parse_json_body(request)
        if not isinstance(body, dict):
            return error_response(ResponseCode.SYSTEM_ERROR, "the query assignment body is invalid")
        topic, group, cid = body.get("topic"), body.get("consumerGroup"), body.get("clientId")
        model = body.get("messageModel") or "CLUSTERING"
        if not topic or not group:
            return error_response(ResponseCode.SYSTEM_ERROR, "topic and consumerGroup are required")
        mode = self._mode(topic, group)
        tc = self.topics.get(topic)
        name = self.config.brokerName
        assigned: Optional[list[MessageQueueJson]] = None
        if tc is not None:
            mqs: list[MessageQueueJson] = [{"topic": topic, "brokerName": name, "queueId": q}
                                           for q in range(tc.read_queue_nums)]
            if model == "BROADCASTING":
                assigned = mqs
            else:
                info = self.consumers.get(group)
                cids = sorted(info.client_ids()) if info is not None else []
                if not cids:                     # Java: no consumer id list, no assignment
                    assigned = None
                elif mode["mode"] == POP:
                    assigned = allocate_for_pop(mqs, cids, cid, int(mode.get("popShareQueueNum") or 0))
                else:
                    assigned = allocate_averagely(mqs, cids, cid)
        answer = {} if assigned is None else {
            "messageQueueAssignments": [{"messageQueue": mq, "mode": mode["mode"]} for mq in assigned]}
        return new_response(ResponseCode.SUCCESS, None, None, orjson.dumps(answer))

    def get_all_message_request_mode(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """messageRequestMode.json as it stands."""
        return new_response(ResponseCode.SUCCESS, None, None, orjson.dumps(self.modes.encoded()))

    def set_message_request_mode(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        body = parse_json_body(request)
        if not isinstance(body, dict):
            return error_response(ResponseCode.SYSTEM_ERROR, "the message request mode body is invalid")
        topic, group = body.get("topic"), body.get("consumerGroup")
        mode = str(body.get("mode") or PULL).upper()
        if not topic or not group or mode not in (PULL, POP):
            return error_response(ResponseCode.SYSTEM_ERROR, "topic, consumerGroup and mode (PULL or POP) are required")
        if is_retry_topic(topic):
            return error_response(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        if self.topics.get(topic) is None:
            return error_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        if self.groups is not None and self.groups.find(group) is None:
            return error_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist")
        self.modes.set({"topic": topic, "consumerGroup": group, "mode": mode,
                        "popShareQueueNum": int(body.get("popShareQueueNum") or 0)})
        return new_response(ResponseCode.SUCCESS)

