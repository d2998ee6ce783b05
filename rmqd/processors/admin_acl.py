"""ACL admin codes (mqadmin updateAclConfig, deleteAclConfig, clusterAclConfigVersion,
updateGlobalWhiteAddr): UPDATE_AND_CREATE_ACL_CONFIG (50), DELETE_ACL_CONFIG (51),
GET_BROKER_CLUSTER_ACL_INFO (52), UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53).

Java: ``AdminBrokerProcessor`` with ``PlainAccessValidator``. They rewrite YAML files, so they run in the
admin pool. With ACL off the Java broker has no validator and these requests fail; rmqd answers with the
failure code and a remark that says ACL is off.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional

from rmqd.broker.context import BrokerIdentity
from rmqd.acl.permission import AclError
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.remoting.command import RemotingCommand, error_response, new_response, require

if TYPE_CHECKING:
    from rmqd.config import BrokerConfig
    from rmqd.processors.handles import RequestPeer
    from rmqd.acl.plain_acl import PlainAclManager

log = logging.getLogger(__name__)


def _split(value: Optional[str]) -> Optional[list[str]]:
    """UtilAll.split: None stays None; otherwise the comma-separated parts."""
    if value is None:
        return None
    return [part for part in value.split(",")]


def _off(code: ResponseCode) -> RemotingCommand:
    return error_response(code, "ACL is not enabled on this broker (aclEnable=false)")


class AclAdminProcessor:
    """``manager``: the broker's ACL manager, None with ACL off; ``identity``: for the broker's address."""

    def __init__(self, manager: "Optional[PlainAclManager]", config: BrokerConfig, identity: BrokerIdentity) -> None:
        self.manager = manager
        self.config = config
        self.identity = identity

    def update_and_create_acl_config(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (access_key,) = require(request, "accessKey")
        manager = self.manager
        if manager is None:
            return _off(ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED)
        ext = request.ext_fields or {}      # present: accessKey was required
        cfg = {"accessKey": access_key, "secretKey": ext.get("secretKey"),
               "whiteRemoteAddress": ext.get("whiteRemoteAddress"),
               "admin": str(ext.get("admin", "false")).lower() == "true",
               "defaultTopicPerm": ext.get("defaultTopicPerm"), "defaultGroupPerm": ext.get("defaultGroupPerm"),
               "topicPerms": _split(ext.get("topicPerms")), "groupPerms": _split(ext.get("groupPerms"))}
        try:
            manager.update_account(cfg)
        except (AclError, OSError, ValueError) as exc:
            log.warning("updateAclConfig of %s from %s failed: %s", access_key, conn.remote_address, exc)
            return error_response(ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, str(exc))
        return new_response()

    def delete_acl_config(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (access_key,) = require(request, "accessKey")
        manager = self.manager
        if manager is None:
            return _off(ResponseCode.DELETE_ACL_CONFIG_FAILED)
        if not manager.delete_account(access_key):
            return error_response(ResponseCode.DELETE_ACL_CONFIG_FAILED,
                                  f"The accesskey[{access_key}] corresponding to accessConfig has been deleted failed.")
        return new_response()

    def get_broker_cluster_acl_info(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        manager = self.manager
        if manager is None:
            return _off(ResponseCode.SYSTEM_ERROR)
        version, all_versions = manager.version_info()
        cfg = self.config
        return new_response(ext_fields={"version": version, "allAclFileVersion": all_versions,
                                        "brokerName": cfg.brokerName, "brokerAddr": self.identity.address,
                                        "clusterName": cfg.brokerClusterName})

    def update_global_white_addrs_config(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (addrs,) = require(request, "globalWhiteAddrs")
        manager = self.manager
        if manager is None:
            return _off(ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED)
        try:
            ok = manager.update_global_white(_split(addrs) or [], (request.ext_fields or {}).get("aclFileFullPath"))
        except (AclError, OSError, ValueError) as exc:
            return error_response(ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, str(exc))
        if not ok:
            return error_response(ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                                  f"The globalWhiteAddresses[{addrs}] has been updated failed.")
        return new_response()

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        """Register the codes this processor answers (in ``pool``, or on the loop where noted)."""
        dispatcher.register(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, self.update_and_create_acl_config, pool)
        dispatcher.register(RequestCode.DELETE_ACL_CONFIG, self.delete_acl_config, pool)
        dispatcher.register(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, self.get_broker_cluster_acl_info, pool)
        dispatcher.register(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, self.update_global_white_addrs_config, pool)
