"""GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29),
GET_EARLIEST_MSG_STORETIME (32) – consume-queue bounds for clients and admin (README §3.3)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rmqd.remoting.codes import RequestCode
from rmqd.remoting.command import RemotingCommand, new_response, require
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.remoting.java_errors import java_int

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer
    from rmqd.store.api import MessageStoreAPI


class OffsetQueryProcessor:
    def __init__(self, store: MessageStoreAPI) -> None:
        self.store = store

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        dispatcher.register(RequestCode.GET_MAX_OFFSET, self.get_max_offset, pool)
        dispatcher.register(RequestCode.GET_MIN_OFFSET, self.get_min_offset, pool)
        dispatcher.register(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.search_offset_by_timestamp, pool)
        dispatcher.register(RequestCode.GET_EARLIEST_MSG_STORETIME, self.get_earliest_msg_storetime, pool)

    def get_max_offset(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        topic, queue_id = require(request, "topic", "queueId")
        return new_response(ext_fields={"offset": str(self.store.get_max_offset(topic, java_int(queue_id)))})

    def get_min_offset(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        topic, queue_id = require(request, "topic", "queueId")
        return new_response(ext_fields={"offset": str(self.store.get_min_offset(topic, java_int(queue_id)))})

    def search_offset_by_timestamp(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        topic, queue_id, ts = require(request, "topic", "queueId", "timestamp")
        offset = self.store.get_offset_by_time(topic, java_int(queue_id), java_int(ts, 64))
        return new_response(ext_fields={"offset": str(offset)})

    def get_earliest_msg_storetime(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        topic, queue_id = require(request, "topic", "queueId")
        ts = self.store.get_earliest_message_time(topic, java_int(queue_id))
        return new_response(ext_fields={"timestamp": str(ts)})
