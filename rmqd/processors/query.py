"""QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33) (README §3.5).

Java: ``broker/processor/QueryMessageProcessor`` + ``DefaultMessageStore.queryMessage``.  Both read
the store, so they run in the query pool.  Unlike the Java broker (whose key re-check is commented
out) index hits are re-checked against the record's topic, KEYS tokens and UNIQ_KEY so that hash
collisions in the index never reach the client.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_response, require
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.store.message import record_carries_key

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer
    from rmqd.store.api import MessageStoreAPI

log = logging.getLogger(__name__)

UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


def record_matches(record: bytes, topic: str, key: str) -> bool:
    """True when the stored ``record`` belongs to ``topic`` and carries ``key`` (KEYS or UNIQ_KEY)."""
    try:
        return record_carries_key(record, topic, key)
    except ValueError as exc:
        log.warning("query: undecodable record at an index hit: %s", exc)
        return False


class QueryMessageProcessor:
    """``default_query_max_num``: () -> the broker's defaultQueryMaxNum (a unique-key query's limit)."""

    def __init__(self, store: MessageStoreAPI, default_query_max_num: Callable[[], int]) -> None:
        self.store = store
        self.default_query_max_num = default_query_max_num

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        dispatcher.register(RequestCode.QUERY_MESSAGE, self.query_message, pool)
        dispatcher.register(RequestCode.VIEW_MESSAGE_BY_ID, self.view_message_by_id, pool)

    def query_message(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        topic, key, max_num_text, begin, end = require(request, "topic", "key", "maxNum", "beginTimestamp",
                                                       "endTimestamp")
        max_num = int(max_num_text)
        if (request.ext_fields or {}).get(UNIQUE_MSG_QUERY_FLAG) == "true":
            max_num = int(self.default_query_max_num())
        result = self.store.query_message(topic, key, max_num, int(begin), int(end))
        found = [r for r in result.messages if record_matches(r, topic, key)]
        header = {"indexLastUpdateTimestamp": str(result.index_last_update_timestamp),
                  "indexLastUpdatePhyoffset": str(result.index_last_update_phyoffset)}
        if not found:
            return new_response(ResponseCode.QUERY_NOT_FOUND,
                                "can not find message, maybe time range not correct", header)
        return new_response(ResponseCode.SUCCESS, None, header, found)

    def view_message_by_id(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (offset_text,) = require(request, "offset")
        offset = int(offset_text)
        record = self.store.read_message(offset) if offset >= 0 else None
        if record is None:
            return error_response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        return new_response(body=record)

