"""rmqd's own admin codes for compaction topics (documented in the README):

* ``COMPACT_TOPIC`` (9001), header ``topic`` and optional ``queueId``: copy and compact now; the
  body lists the run of each queue.
* ``GET_COMPACTION_STATUS`` (9002), optional ``topic``: per queue, the last compacted offset, files,
  records, bytes before/after and the last run's time and duration.
* ``ADOPT_COMPACTION`` (9005), optional ``topic`` and ``dir``: adopt the complete outputs of
  ``rmqd pipeline compact`` found in ``dir`` (default ``<store>/compaction/pipeline``); the body lists
  the result per output.

Both block on disk work: they run in the admin pool.
"""
from __future__ import annotations

import logging
import os
from dataclasses import asdict
from typing import TYPE_CHECKING

from rmqd.processors.admin_common import json_document, json_response
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.remoting.command import RemotingCommand, error_response, require

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer
    from rmqd.store.api import MessageStoreAPI


log = logging.getLogger(__name__)

COMPACT_TOPIC = 9001
GET_COMPACTION_STATUS = 9002
ADOPT_COMPACTION = 9005


class CompactionAdminProcessor:
    def __init__(self, store: MessageStoreAPI) -> None:
        self.store = store

    def compact_topic(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (topic,) = require(request, "topic")
        ext = request.ext_fields or {}
        comp = self.store.compaction
        if comp is None or not comp.is_compaction_topic(topic):
            return error_response(ResponseCode.SYSTEM_ERROR,
                                  f"topic[{topic}] is not a compaction topic (cleanup.policy=COMPACTION)")
        qid = int(ext["queueId"]) if ext.get("queueId") not in (None, "", "-1") else None
        log.info("compactTopic %s queue %s requested by %s", topic, qid, conn.remote_address)
        try:
            runs = comp.compact(topic, qid)
        except Exception as exc:
            return error_response(ResponseCode.SYSTEM_ERROR, f"compaction of {topic} failed: {exc}")
        return json_response({"runs": [{"queueId": q, **asdict(r)} for q, r in runs]})

    def compaction_status(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        topic = (request.ext_fields or {}).get("topic") or None
        comp = self.store.compaction
        return json_response(json_document({"queues": comp.status(topic) if comp is not None else []}))


    def adopt_compaction(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        topic, directory = ext.get("topic") or None, ext.get("dir") or None
        comp = self.store.compaction
        if comp is None:
            return error_response(ResponseCode.SYSTEM_ERROR, "compaction is not enabled on this broker")
        if directory is not None and not os.path.isdir(directory):
            return error_response(ResponseCode.SYSTEM_ERROR, f"no directory {directory} on the broker")
        log.info("adoptCompaction topic %s dir %s requested by %s", topic, directory, conn.remote_address)
        return json_response(json_document({"results": comp.adopt_pending(topic, directory)}))

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        """Register the codes this processor answers (in ``pool``, or on the loop where noted)."""
        dispatcher.register(COMPACT_TOPIC, self.compact_topic, pool)
        dispatcher.register(GET_COMPACTION_STATUS, self.compaction_status, pool)
        dispatcher.register(ADOPT_COMPACTION, self.adopt_compaction, pool)
