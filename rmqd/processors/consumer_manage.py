"""GET_CONSUMER_LIST_BY_GROUP (38), QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15).

Java: ``ConsumerManageProcessor`` (README §3.3, §3.4, §6.5).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import orjson

from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_response, require

if TYPE_CHECKING:
    from rmqd.broker_controller import BrokerController


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


# Java's "hot" threshold: data within 40 % of RAM of the commit log head is "in memory".
HOT_DATA_LIMIT = int(_physical_memory() * 0.40)


class ConsumerManageProcessor:
    def __init__(self, broker: "BrokerController") -> None:
        self.broker = broker

    def get_consumer_list_by_group(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        (group,) = require(request, "consumerGroup")
        info = self.broker.consumer_manager.get(group)
        ids = info.client_ids() if info is not None else []
        if not ids:
            return error_response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return new_response(body=orjson.dumps({"consumerIdList": ids}))

    def update_consumer_offset(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        group, topic, queue_id, offset = require(request, "consumerGroup", "topic", "queueId", "commitOffset")
        self.broker.consumer_offset_manager.commit_offset(conn.remote_address, group, topic, int(queue_id),
                                                          int(offset))
        return new_response()

    def query_consumer_offset(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        """Stored offset; else 0 when the queue still starts at 0 and its head is "hot".

        "Hot" emulates Java's ``checkInDiskByConsumeOffset(topic, q, 0) == false``: the whole
        commit log (max - min) fits in 40 % of physical RAM, so message 0 of the queue is
        considered in memory.  Otherwise QUERY_NOT_FOUND (22) and the client decides by
        consumeFromWhere.  A queue that never received a message (min == max == 0) answers 0.
        """
        group, topic, queue_id = require(request, "consumerGroup", "topic", "queueId")
        qid = int(queue_id)
        broker = self.broker
        offset = broker.consumer_offset_manager.query_offset(group, topic, qid)
        if offset >= 0:
            return new_response(ext_fields={"offset": str(offset)})
        store = broker.store
        min_offset = store.get_min_offset(topic, qid)
        if min_offset <= 0 and (store.get_max_offset(topic, qid) == 0 or
                                store.commitlog_max_offset() - store.commitlog_min_offset() <= HOT_DATA_LIMIT):
            return new_response(ext_fields={"offset": "0"})
        return error_response(ResponseCode.QUERY_NOT_FOUND,
                              "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
