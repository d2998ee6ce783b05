"""Controller request processors (Java's ``ControllerRequestProcessor``): codes 904 and 1001-1013.

Headers are parsed here and handed to :class:`rmqd.controller.controller.Controller`; everything runs on
the loop (the Raft waits are awaited, never blocked on).  What Java answers, rmqd answers: a missing
``@CFNotNull`` field is SYSTEM_ERROR "the custom field <x> is null", an unparsable number SYSTEM_ERROR
with Java's NumberFormatException words (both from the dispatcher).  Where Java would fail with a
NullPointerException or a fastjson error (a missing plain field, a malformed body), rmqd answers
CONTROLLER_INVALID_REQUEST (2005) with what is wrong.  A refused request changes nothing.

Only the leader serves 1001-1004, 1006 and 1011-1013 (others: CONTROLLER_NOT_LEADER, 2007); every node
serves heartbeats, metadata and config.  1007 and 1008 are broker codes and are not served here.
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Awaitable, Optional, Union

from rmqd.common.fileutil import atomic_write
from rmqd.config import parse_properties
from rmqd.controller.codes import ControllerRequestCode as R, ControllerResponseCode as C
from rmqd.controller.config import ControllerConfig
from rmqd.controller.controller import Controller
from rmqd.controller.heartbeat import BrokerHeartbeatManager
from rmqd.controller.replicas_info import ControllerResult
from rmqd.controller.request_meter import OperationMeter, metered
from rmqd.remoting import fastjson
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, ext_bool, ext_int, new_response, require
from rmqd.remoting.dispatch import Dispatcher

if TYPE_CHECKING:
    from rmqd.remoting.connection import Connection
    from rmqd.remoting.dispatch import AsyncResponse, Handler, HandlerResult
    from rmqd.remoting.fastjson import JsonValue

    # a leader-only handler: a refusal at once, or the answer once the Raft write or read is done
    LeaderReply = Union[RemotingCommand, AsyncResponse]

log = logging.getLogger(__name__)


class InvalidRequest(Exception):
    """A request rmqd refuses with CONTROLLER_INVALID_REQUEST (2005)."""


async def _respond(pending: Awaitable[ControllerResult]) -> RemotingCommand:
    result = await pending
    return new_response(result.code, result.remark, result.header, result.body)


def _field(request: RemotingCommand, name: str) -> str:
    value = (request.ext_fields or {}).get(name)
    if value is None or value == "":
        raise InvalidRequest(f"the request header field <{name}> is required")
    return value


def _int_field(request: RemotingCommand, name: str) -> int:
    value = _field(request, name)
    try:
        return int(value)
    except ValueError:
        raise InvalidRequest(f"the request header field <{name}> is not a number: {value!r}") from None


def _broker_set(request: RemotingCommand) -> tuple[str, str]:
    """(clusterName, brokerName): the broker set a request is about, both required."""
    return _field(request, "clusterName"), _field(request, "brokerName")


def _json_body(request: RemotingCommand, what: str) -> JsonValue:
    raw = request.body_bytes() if request.body is not None else b""
    if not raw:
        raise InvalidRequest(f"the request needs a {what} body")
    try:
        return fastjson.loads_lenient(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"the {what} body is not JSON: {exc}") from None


def _answering_invalid(handler: "Handler") -> "Handler":
    """``handler`` with its InvalidRequest (raised while it reads the request) answered CONTROLLER_INVALID_REQUEST."""
    def run(conn: Connection, request: RemotingCommand) -> HandlerResult:
        try:
            return handler(conn, request)
        except InvalidRequest as exc:
            return error_response(C.CONTROLLER_INVALID_REQUEST, str(exc))
    return run


class ControllerProcessors:
    """Handlers for every controller request code."""

    def __init__(self, config: ControllerConfig, controller: Controller, heartbeat: BrokerHeartbeatManager,
                 meter: Optional[OperationMeter] = None) -> None:
        self.config = config
        self.controller = controller
        self.heartbeat = heartbeat
        #: 5.x's request_total/request_latency by request type
        self.meter = meter or OperationMeter()

    def register(self, dispatcher: Dispatcher) -> None:
        table = {
            R.BROKER_HEARTBEAT: self.broker_heartbeat,
            R.CONTROLLER_ALTER_SYNC_STATE_SET: self.alter_sync_state_set,
            R.CONTROLLER_ELECT_MASTER: self.elect_master,
            R.CONTROLLER_REGISTER_BROKER: self.register_broker,
            R.CONTROLLER_GET_REPLICA_INFO: self.get_replica_info,
            R.CONTROLLER_GET_METADATA_INFO: self.get_metadata_info,
            R.CONTROLLER_GET_SYNC_STATE_DATA: self.get_sync_state_data,
            R.UPDATE_CONTROLLER_CONFIG: self.update_config,
            R.GET_CONTROLLER_CONFIG: self.get_config,
            R.CLEAN_BROKER_DATA: self.clean_broker_data,
            R.CONTROLLER_GET_NEXT_BROKER_ID: self.get_next_broker_id,
            R.CONTROLLER_APPLY_BROKER_ID: self.apply_broker_id,
        }
        for code, handler in table.items():
            dispatcher.register(code, metered(self.meter, code, _answering_invalid(handler)))

    # -- every node ------------------------------------------------------------------------------------
    def broker_heartbeat(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        cluster, broker_addr, broker_name = require(request, "clusterName", "brokerAddr", "brokerName")
        broker_id = ext_int(request, "brokerId")
        if broker_id is None:
            return error_response(C.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
        self.heartbeat.on_heartbeat(cluster, broker_name, broker_addr, broker_id,
                                    ext_int(request, "heartbeatTimeoutMills"), conn, ext_int(request, "epoch"),
                                    ext_int(request, "maxOffset"), ext_int(request, "confirmOffset"),
                                    ext_int(request, "electionPriority"))
        return new_response(ResponseCode.SUCCESS, "Heart beat success")

    def get_metadata_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return new_response(ResponseCode.SUCCESS, None, self.controller.metadata())

    async def update_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        body = request.body_bytes() if request.body is not None else b""
        if not body:
            return new_response(ResponseCode.SUCCESS)
        try:
            properties = parse_properties(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            log.error("updateControllerConfig from %s: bad properties body: %s", conn.remote_address, exc)
            return error_response(ResponseCode.SYSTEM_ERROR, "string2Properties error")
        if self.config.black_list() & properties.keys():
            return error_response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        try:
            ControllerConfig().update(properties)           # all values must parse before any is taken
        except ValueError as exc:
            return error_response(ResponseCode.SYSTEM_ERROR, f"updateControllerConfig: bad value: {exc}")
        log.info("updateControllerConfig called by %s: %s", conn.remote_address, properties)
        self.config.update(properties, source="UPDATE_CONTROLLER_CONFIG")
        try:
            await asyncio.get_running_loop().run_in_executor(None, self._persist_config)
        except OSError as exc:
            log.error("could not persist the controller config to %s: %s", self.config.configStorePath, exc)
            return error_response(ResponseCode.SYSTEM_ERROR, f"persist config failed: {exc}")
        return new_response(ResponseCode.SUCCESS)

    def _persist_config(self) -> None:
        """Java's Configuration.persist: all settings to configStorePath (temp file, fsync, rename)."""
        path = os.path.abspath(os.path.expanduser(str(self.config.configStorePath)))
        atomic_write(path, self.config.to_properties_text(), keep_backup=False)

    def get_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return new_response(ResponseCode.SUCCESS, None, None, self.config.to_properties_text().encode("utf-8"))

    # -- leader ----------------------------------------------------------------------------------------
    def alter_sync_state_set(self, conn: Connection, request: RemotingCommand) -> LeaderReply:
        broker_name = _field(request, "brokerName")
        master_id = _int_field(request, "masterBrokerId")
        master_epoch = _int_field(request, "masterEpoch")
        body = _json_body(request, "SyncStateSet")
        members, set_epoch = _sync_state_set(body)
        return _respond(self.controller.alter_sync_state_set(broker_name, master_id, master_epoch, members, set_epoch))

    def elect_master(self, conn: Connection, request: RemotingCommand) -> LeaderReply:
        # Java's header defaults: clusterName "", brokerName "", brokerId -1, designateElect false
        ext = request.ext_fields or {}
        broker_id = ext_int(request, "brokerId", -1)
        return _respond(self.controller.elect_master(
            ext.get("clusterName") or "", ext.get("brokerName") or "", broker_id,
            ext_bool(request, "designateElect", False)))

    def register_broker(self, conn: Connection, request: RemotingCommand) -> LeaderReply:
        cluster, broker_name = _broker_set(request)
        broker_id = _int_field(request, "brokerId")
        address = _field(request, "brokerAddress")
        return _respond(self.controller.register_broker(cluster, broker_name, broker_id, address))

    def get_replica_info(self, conn: Connection, request: RemotingCommand) -> LeaderReply:
        broker_name = _field(request, "brokerName")
        return _respond(self.controller.get_replica_info(broker_name))

    def get_sync_state_data(self, conn: Connection, request: RemotingCommand) -> LeaderReply:
        raw = request.body_bytes() if request.body is not None else b""
        if not raw:
            return error_response(ResponseCode.SYSTEM_ERROR, "not set any response code")    # Java's answer
        try:
            names = fastjson.loads_lenient(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidRequest(f"the broker name list body is not JSON: {exc}") from None
        if not isinstance(names, list):
            raise InvalidRequest("the body must be a JSON array of broker names")
        broker_names = [n for n in names if isinstance(n, str)]
        if len(broker_names) != len(names):
            raise InvalidRequest("the body must be a JSON array of broker names")
        if not broker_names:
            return error_response(ResponseCode.SYSTEM_ERROR, "not set any response code")
        return _respond(self.controller.get_sync_state_data(broker_names))

    def clean_broker_data(self, conn: Connection, request: RemotingCommand) -> LeaderReply:
        (broker_name,) = require(request, "brokerName")
        ext = request.ext_fields or {}
        return _respond(self.controller.clean_broker_data(
            ext.get("clusterName") or None, broker_name, ext.get("brokerControllerIdsToClean"),
            ext_bool(request, "isCleanLivingBroker", False)))

    def get_next_broker_id(self, conn: Connection, request: RemotingCommand) -> LeaderReply:
        cluster, broker_name = _broker_set(request)
        return _respond(self.controller.get_next_broker_id(cluster, broker_name))

    def apply_broker_id(self, conn: Connection, request: RemotingCommand) -> LeaderReply:
        cluster, broker_name = _broker_set(request)
        broker_id = _int_field(request, "appliedBrokerId")
        check_code = _field(request, "registerCheckCode")
        return _respond(self.controller.apply_broker_id(cluster, broker_name, broker_id, check_code))


def _sync_state_set(body: JsonValue) -> tuple[set[int], int]:
    """A SyncStateSet body: ``{"syncStateSet": [ids], "syncStateSetEpoch": n}``."""
    if not isinstance(body, dict):
        raise InvalidRequest("the SyncStateSet body must be a JSON object")
    members = body.get("syncStateSet")
    epoch = body.get("syncStateSetEpoch")
    if not isinstance(members, list):
        raise InvalidRequest("SyncStateSet.syncStateSet must be an array of broker ids")
    ids = [x for x in members if isinstance(x, int) and not isinstance(x, bool)]
    if len(ids) != len(members):
        raise InvalidRequest("SyncStateSet.syncStateSet must be an array of broker ids")
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        raise InvalidRequest("SyncStateSet.syncStateSetEpoch must be a number")
    return set(ids), epoch
