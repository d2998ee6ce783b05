"""rmqd's own admin codes for the tiered store (documented in the README next to 9001/9002):

* ``GET_TIER_STATUS`` (9003): per queue the tier's min/max offset and size, per index file its
  state (writing/compacted/uploaded), item count and time range, plus the backend's counters.
* ``COMMIT_TIER`` (9004): copy everything pending into the tier now, seal the writable index file
  and compact + upload the sealed ones (optional header ``upload=false`` skips the upload).
* ``ADOPT_TIER_INDEX`` (9006), optional ``dir``: adopt the complete outputs of ``rmqd pipeline index``
  found in ``dir`` (default ``<store>/tiered_index_file/pipeline``); the body lists the result per output.

All touch disk or the backend: they run in the admin pool. Without a tier each answers
SYSTEM_ERROR "tiered storage is not enabled (messageStorePlugIn)".
"""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from rmqd.processors.admin_common import json_document, json_response
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.remoting.command import RemotingCommand, error_response

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer
    from rmqd.store.api import MessageStoreAPI


log = logging.getLogger(__name__)

GET_TIER_STATUS = 9003
COMMIT_TIER = 9004
ADOPT_TIER_INDEX = 9006
NOT_ENABLED = "tiered storage is not enabled (messageStorePlugIn)"


class TierAdminProcessor:
    def __init__(self, store: MessageStoreAPI) -> None:
        self.store = store

    def tier_status(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        tier = self.store.tier
        if tier is None or not tier.started:
            return error_response(ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
        status = tier.status()
        topic = (request.ext_fields or {}).get("topic")
        if topic:
            status["queues"] = [q for q in status["queues"] if q["topic"] == topic]
        return json_response(json_document(status))

    def commit_tier(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        tier = self.store.tier
        if tier is None or not tier.started:
            return error_response(ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
        upload = (request.ext_fields or {}).get("upload", "true") != "false"
        log.info("commitTier requested by %s (upload=%s)", conn.remote_address, upload)
        try:
            result = tier.commit_now(upload=upload)
        except Exception as exc:
            log.exception("commitTier failed")
            return error_response(ResponseCode.SYSTEM_ERROR, f"commitTier failed: {exc}")
        return json_response(json_document(result))

    def adopt_tier_index(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        tier = self.store.tier
        if tier is None or not tier.started:
            return error_response(ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
        directory = (request.ext_fields or {}).get("dir") or None
        if directory is not None and not os.path.isdir(directory):
            return error_response(ResponseCode.SYSTEM_ERROR, f"no directory {directory} on the broker")
        log.info("adoptTierIndex dir %s requested by %s", directory, conn.remote_address)
        return json_response(json_document({"results": tier.adopt_index_outputs(directory)}))

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        """Register the codes this processor answers (in ``pool``, or on the loop where noted)."""
        dispatcher.register(GET_TIER_STATUS, self.tier_status, pool)
        dispatcher.register(COMMIT_TIER, self.commit_tier, pool)
        dispatcher.register(ADOPT_TIER_INDEX, self.adopt_tier_index, pool)
