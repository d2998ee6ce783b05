"""``rmqd admin`` sub-commands of ACL 1.0 (plain_acl.yml): accounts, the global white list, the config versions.

Each ``fn(client, args)`` talks to the servers and prints like mqadmin; ``SPEC`` is their part of the
command table (:mod:`rmqd.admin.main`)."""
from __future__ import annotations

import argparse
from datetime import datetime
import json

from rmqd.admin.client import AdminClient, AdminError
from rmqd.admin.options import BROKER, CLUSTER, SpecTable
from rmqd.remoting.codes import RequestCode, ResponseCode


# ---------------------------------------------------------------------------------------------- ACL
def _acl_targets(c: AdminClient, a: argparse.Namespace) -> list[str]:
    if a.brokerAddr:
        return [a.brokerAddr]
    if a.clusterName:
        return c.master_addrs(a.clusterName)
    raise AdminError(ResponseCode.SYSTEM_ERROR, "one of -b (broker address) or -c (cluster name) is required")


def update_acl_config(c: AdminClient, a: argparse.Namespace) -> None:
    ext = {"accessKey": a.accessKey, "secretKey": a.secretKey, "whiteRemoteAddress": a.whiteRemoteAddress,
           "defaultTopicPerm": a.defaultTopicPerm, "defaultGroupPerm": a.defaultGroupPerm,
           "topicPerms": a.topicPerms, "groupPerms": a.groupPerms,
           "admin": None if a.admin is None else str(a.admin).strip().lower() == "true"}
    for addr in _acl_targets(c, a):
        c.call(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, ext)
        print(f"create or update plain access config to {addr} success.")
    print(f"PlainAccessConfig{{accessKey='{a.accessKey}', whiteRemoteAddress='{a.whiteRemoteAddress}', "
          f"admin={str(a.admin).lower() if a.admin is not None else 'false'}, "
          f"defaultTopicPerm='{a.defaultTopicPerm}', defaultGroupPerm='{a.defaultGroupPerm}', "
          f"topicPerms={a.topicPerms}, groupPerms={a.groupPerms}}}".replace("'None'", "'null'")
          .replace("=None", "=null"))


def delete_acl_config(c: AdminClient, a: argparse.Namespace) -> None:
    for addr in _acl_targets(c, a):
        c.call(addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": a.accessKey})
        print(f"delete plain access config account from {addr} success.")
    print(f"account's accesskey is:{a.accessKey}")


def update_global_white_addr(c: AdminClient, a: argparse.Namespace) -> None:
    ext = {"globalWhiteAddrs": a.globalWhiteRemoteAddresses, "aclFileFullPath": a.aclFileFullPath}
    for addr in _acl_targets(c, a):
        c.call(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, ext)
        print(f"update global white remote addresses to {addr} success.")


def cluster_acl_config_version(c: AdminClient, a: argparse.Namespace) -> None:
    fmt = "%-16s  %-22s  %-22s  %-20s  %-22s  %-22s"
    print(fmt % ("#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath", "#AclConfigVersionNum",
                 "#AclLastUpdateTime"))
    for addr in _acl_targets(c, a):
        resp = c.call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
        ext = resp.ext_fields or {}
        for path, version in json.loads(ext.get("allAclFileVersion") or "{}").items():
            print(fmt % (ext.get("clusterName"), ext.get("brokerName"), ext.get("brokerAddr"), path,
                         str(version.get("counter")),
                         datetime.fromtimestamp(int(version.get("timestamp", 0)) / 1000).strftime("%Y-%m-%d %H:%M:%S")))
    print("get cluster's plain access config version success.")


SPEC: SpecTable = {
    "updateAclConfig": (update_acl_config, "Update acl config yaml file in broker", [
        (BROKER, {}), (CLUSTER, {}), (("-a", "--accessKey"), {"required": True}), (("-s", "--secretKey"), {}),
        (("-w", "--whiteRemoteAddress"), {}), (("-i", "--defaultTopicPerm"), {}), (("-u", "--defaultGroupPerm"), {}),
        (("-t", "--topicPerms"), {}), (("-g", "--groupPerms"), {}), (("-m", "--admin"), {})]),
    "deleteAclConfig": (delete_acl_config, "Delete Acl Config Account in broker", [
        (BROKER, {}), (CLUSTER, {}), (("-a", "--accessKey"), {"required": True})]),
    "clusterAclConfigVersion": (cluster_acl_config_version, "List all of acl config version information "
                                "in cluster", [(BROKER, {}), (CLUSTER, {})]),
    "updateGlobalWhiteAddr": (update_global_white_addr, "Update global white address for acl Config File "
                              "in broker", [(BROKER, {}), (CLUSTER, {}), (("-g", "--globalWhiteRemoteAddresses"),
                                                                  {"required": True}),
                                            (("-p", "--aclFileFullPath"), {})]),
}
