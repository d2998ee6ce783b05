"""Store admin codes: QUERY_CONSUME_QUEUE (321, ``mqadmin queryCq``) and DELETE_EXPIRED_COMMITLOG (329,
``mqadmin deleteExpiredCommitLog``); 5.x's EXPORT_ROCKSDB_CONFIG_TO_JSON (355, ``mqadmin exportRocksDBConfigToJson``),
CHECK_ROCKSDB_CQ_WRITE_PROGRESS (354, ``mqadmin checkRocksdbCqWriteProgress``), POP_ROLLBACK (200056, ``mqadmin
exportPopRecord``) and SET_COMMITLOG_READ_MODE (2004, ``mqadmin setCommitLogReadAheadMode``).

The RocksDB codes move data out of RocksDB (metadata, POP records) into the JSON and file stores, or compare a
RocksDB consume queue with the file one. rmqd keeps its metadata in JSON files, its POP checkpoints in the file
store and its consume queues in files only, so it answers as a Java broker on those stores answers: success,
nothing to move or to check.

Java: ``AdminBrokerProcessor.queryConsumeQueue`` / ``deleteExpiredCommitLog``. Both read or change store
files, so they run in the admin pool.
"""
from __future__ import annotations

import logging
import re
import struct
from typing import TYPE_CHECKING, Union

from rmqd.processors.admin_common import NOT_SET_REMARK, json_response
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.remoting.command import RemotingCommand, error_response, new_response, require

if TYPE_CHECKING:
    from rmqd.broker.client_manager import ConsumerManager
    from rmqd.processors.handles import RequestPeer, StoreWithCommitLog
    from rmqd.remoting import fastjson
    from rmqd.store.local_queue import LocalQueue


log = logging.getLogger(__name__)

_CQ_UNIT = struct.Struct(">qiq")
EXPORT_ROCKSDB_CONFIG_TO_JSON = 355
CHECK_ROCKSDB_CQ_WRITE_PROGRESS = 354
POP_ROLLBACK = 200056
SET_COMMITLOG_READ_MODE = 2004
INVALID_PARAMETER = 29          # 5.x ResponseCode
CHECK_IN_PROGRESS = 2           # 5.x CheckRocksdbCqWriteResult.CheckStatus
MADV_NORMAL, MADV_RANDOM = 0, 1  # the READ_AHEAD_MODE values (Linux madvise advice numbers, as Java's LibC)
_JAVA_INT = re.compile(r"[+-]?\d{1,10}")
_CONFIG_TYPES = ("topics", "subscriptionGroups", "consumerOffsets")


class StoreAdminProcessor:
    def __init__(self, store: StoreWithCommitLog, consumers: ConsumerManager) -> None:
        self.store = store
        self.consumers = consumers

    def query_consume_queue(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """The units of one ConsumeQueue from ``index`` (at most ``count``), its min/max index and, with a
        consumer group, the group's subscription (QueryConsumeQueueResponseBody)."""
        topic, queue_id = require(request, "topic", "queueId")
        ext = request.ext_fields or {}
        qid, index, count = int(queue_id), int(ext.get("index") or 0), int(ext.get("count") or 0)
        group = ext.get("consumerGroup")
        cq = self.store.local_queue(topic, qid)
        if cq is None:
            return error_response(ResponseCode.SYSTEM_ERROR, f"{qid}@{topic} is not exist!")
        body: dict[str, fastjson.Encodable] = {"maxQueueIndex": cq.max_offset, "minQueueIndex": cq.min_offset}
        if group is not None:
            info = self.consumers.get(group)
            entry = info.subscriptions.get(topic) if info is not None else None
            if entry is None:
                body["filterData"] = f"{group}@{topic} is not online!"
            else:
                body["subscriptionData"] = entry.data
                body["filterData"] = "null"      # JSON of the group's ConsumerFilterData: none is kept
        units: list[dict[str, Union[bool, int]]] = []
        if cq.min_offset <= index < cq.max_offset:
            end = min(cq.max_offset, index + max(0, count), _file_end(cq, index))
            for i in range(index, end):
                e = cq.get_entry(i)
                if e is None:
                    break
                units.append({"eval": False, "physicOffset": e[0], "physicSize": e[1], "tagsCode": e[2]})
        else:
            return new_response(ResponseCode.SUCCESS, f"Index {index} of {qid}@{topic} is not exist!")
        body["queueData"] = units
        resp = json_response(body)
        resp.remark = NOT_SET_REMARK        # Java sets the code of its createResponseCommand(null), not the remark
        return resp

    def delete_expired_commit_log(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """Delete expired CommitLog files now, whatever the hour (Java executeDeleteFilesManually)."""
        log.warning("invoke deleteExpiredCommitLog start (from %s)", conn.remote_address)
        deleted = self.store.execute_delete_files_manually()
        log.warning("invoke deleteExpiredCommitLog end: %d commit log file(s) deleted", deleted)
        return new_response()

    def export_rocksdb_config_to_json(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """``configType``: ``;``-separated names of topics / subscriptionGroups / consumerOffsets (an unknown one
        is refused as Java's header parser refuses it); the files are JSON already."""
        (config_type,) = require(request, "configType")
        for name in (n for n in config_type.split(";") if n):
            if name.strip().lower() not in (t.lower() for t in _CONFIG_TYPES):
                return error_response(ResponseCode.SYSTEM_ERROR,
                                      f"java.lang.IllegalArgumentException: Unknown config type: {name}")
        log.info("exportRocksDBConfigToJson(%s) from %s: rmqd's metadata is JSON already", config_type,
                 getattr(conn, "remote_address", "?"))
        return new_response(ResponseCode.SUCCESS, "export done.")

    def check_rocksdb_cq_write_progress(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """Java answers CHECK_IN_PROGRESS at once and checks in the background; on a store without a RocksDB
        consume queue (Java's default store, and rmqd's) the check finds nothing to compare and only logs so."""
        log.info("checkRocksdbCqWriteProgress from %s (%s): consume queues are files only, no RocksDB consume "
                 "queue: no need to check", getattr(conn, "remote_address", "?"), request.ext_fields)
        return json_response({"checkStatus": CHECK_IN_PROGRESS}, remark=NOT_SET_REMARK)

    def set_commitlog_read_mode(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """``READ_AHEAD_MODE`` 0 (MADV_NORMAL: read-ahead on) or 1 (MADV_RANDOM: off) for every CommitLog
        segment, as Java's AdminBrokerProcessor.setCommitLogReadaheadMode, with its answers to bad input."""
        log.info("setCommitLogReadaheadMode called by %s", getattr(conn, "remote_address", "?"))
        ext = request.ext_fields
        if ext is None:
            return error_response(ResponseCode.SYSTEM_ERROR, "set commitlog readahead mode param error")
        raw = ext.get("READ_AHEAD_MODE")
        if raw is None or not _JAVA_INT.fullmatch(raw) or not -2**31 <= int(raw) < 2**31:
            log.error("set commitlog readahead mode failed: READ_AHEAD_MODE %r is not a number", raw)
            return error_response(ResponseCode.SYSTEM_ERROR, "set commitlog readahead mode failed")
        mode = int(raw)
        if mode not in (MADV_NORMAL, MADV_RANDOM):
            return error_response(INVALID_PARAMETER, "set commitlog readahead mode param value error")
        self.store.commitlog.set_read_ahead(mode == MADV_NORMAL)
        return new_response(ResponseCode.SUCCESS, f"set commitlog readahead mode success, mode: {mode}")

    def pop_rollback(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """Move POP records from the RocksDB POP store back to the file store: rmqd has only the file store."""
        log.info("POP_ROLLBACK from %s: POP records are in the file store already", getattr(conn, "remote_address", "?"))
        return new_response(ResponseCode.SUCCESS, NOT_SET_REMARK)

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        """Register the codes this processor answers (in ``pool``, or on the loop where noted)."""
        dispatcher.register(RequestCode.QUERY_CONSUME_QUEUE, self.query_consume_queue, pool)
        dispatcher.register(RequestCode.DELETE_EXPIRED_COMMITLOG, self.delete_expired_commit_log, pool)
        dispatcher.register(EXPORT_ROCKSDB_CONFIG_TO_JSON, self.export_rocksdb_config_to_json, pool)
        dispatcher.register(POP_ROLLBACK, self.pop_rollback, pool)
        dispatcher.register(CHECK_ROCKSDB_CQ_WRITE_PROGRESS, self.check_rocksdb_cq_write_progress, pool)
        dispatcher.register(SET_COMMITLOG_READ_MODE, self.set_commitlog_read_mode, pool)


def _file_end(cq: LocalQueue, index: int) -> int:
    """First index past the ConsumeQueue file holding ``index`` (Java reads one file's buffer)."""
    per_file = cq.file_size // _CQ_UNIT.size
    return (index // per_file + 1) * per_file
