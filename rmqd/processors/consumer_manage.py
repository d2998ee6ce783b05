"""GET_CONSUMER_LIST_BY_GROUP (38), QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15).

Java: ``ConsumerManageProcessor`` (README §3.3, §3.4, §6.5).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_response, require
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.remoting.java_errors import java_int

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer
    from rmqd.broker.client_manager import ConsumerManager
    from rmqd.store.api import MessageStoreAPI
    from rmqd.store.metadata import ConsumerOffsetManager


class ConsumerManageProcessor:
    """Reads the consumer table, the offset table and the store."""

    def __init__(self, consumers: ConsumerManager, offsets: ConsumerOffsetManager, store: MessageStoreAPI) -> None:
        self.consumers = consumers
        self.offsets = offsets
        self.store = store

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        dispatcher.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.get_consumer_list_by_group, pool)
        dispatcher.register(RequestCode.QUERY_CONSUMER_OFFSET, self.query_consumer_offset, pool)
        dispatcher.register(RequestCode.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset, pool)

    def get_consumer_list_by_group(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (group,) = require(request, "consumerGroup")
        info = self.consumers.get(group)
        ids = info.client_ids() if info is not None else []
        if not ids:
            return error_response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return new_response(body=orjson.dumps({"consumerIdList": ids}))

    def update_consumer_offset(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        group, topic, queue_id, offset = require(request, "consumerGroup", "topic", "queueId", "commitOffset")
        qid = java_int(queue_id)
        if self.offsets.has_offset_reset(topic, group, qid):    # 5.x: a server-side reset not yet taken wins
            return new_response(ResponseCode.SUCCESS, "Offset has been previously reset")
        self.offsets.commit_offset(conn.remote_address, group, topic, qid, java_int(offset, 64))
        return new_response()

    def query_consumer_offset(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """Stored offset; else 0 when the queue still starts at 0 and its message 0 is "hot"
        (Java: ``minOffset <= 0 && !checkInDiskByConsumeOffset(topic, q, 0)``: it lies within 40 % of
        RAM behind the CommitLog head); otherwise QUERY_NOT_FOUND (22) and the client decides by
        consumeFromWhere. A queue that never received a message answers 0."""
        group, topic, queue_id = require(request, "consumerGroup", "topic", "queueId")
        qid = java_int(queue_id)
        offset = self.offsets.query_offset(group, topic, qid)
        if offset >= 0:
            return new_response(ext_fields={"offset": str(offset)})
        store = self.store
        min_offset = store.get_min_offset(topic, qid)
        if min_offset <= 0 and not store.check_in_disk_by_consume_offset(topic, qid, 0):
            return new_response(ext_fields={"offset": "0"})
        return error_response(ResponseCode.QUERY_NOT_FOUND,
                              "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
