"""``rmqd admin`` sub-commands of RocketMQ 5's controller mode, with mqadmin's names, options and output
(``tools/command/controller/*``, ``tools/command/ha/GetSyncStateSetSubCommand``).

Each ``fn(client, args)`` talks to the controllers given with ``-a``.  Like mqadmin, the commands that
change or read replicated state (getSyncStateSet, electMaster, cleanBrokerMetadata) first ask ``-a``
for the leader (CONTROLLER_GET_METADATA_INFO) and then send to the leader.

One deliberate difference: ``electMaster`` prints the group's members (``#Broker id addr`` lines) from the
response body's ``brokerMemberGroup``; mqadmin 5.x decodes the body as the wrong type and prints none.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import cast

from rmqd.admin.bodies import ElectMasterBody, EpochCache, ReplicaIdentity, SyncStateData
from rmqd.admin.client import AdminClient, AdminError
from rmqd.admin.options import SpecTable
from rmqd.config import parse_properties
from rmqd.controller.codes import ControllerRequestCode as R
from rmqd.remoting import fastjson

_A = ("-a", "--controllerAddress")


def _java(value: object) -> str:
    """Java's ``%s`` / ``%d`` of a possibly-null value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _first_addr(addrs: str) -> str:
    return addrs.strip().split(";")[0].strip()


def _addr_list(addrs: str) -> list[str]:
    return [a.strip() for a in addrs.strip().split(";") if a.strip()]


def controller_metadata(c: AdminClient, addr: str) -> dict[str, str]:
    return dict(c.call(addr, R.CONTROLLER_GET_METADATA_INFO).ext_fields or {})


def _leader(c: AdminClient, addr: str) -> str:
    leader = controller_metadata(c, addr).get("controllerLeaderAddress")
    if not leader:
        raise AdminError(-1, f"controller {addr} knows no leader (election in progress, or no quorum)")
    return leader


# ====================================================================== commands
def get_controller_metadata(c: AdminClient, a: argparse.Namespace) -> None:
    md = controller_metadata(c, a.controllerAddress.strip())
    out = [f"\n#ControllerGroup\t{_java(md.get('group'))}",
           f"\n#ControllerLeaderId\t{_java(md.get('controllerLeaderId'))}",
           f"\n#ControllerLeaderAddress\t{_java(md.get('controllerLeaderAddress'))}"]
    out += [f"\n#Peer:\t{peer}" for peer in (md.get("peers") or "").split(";") if peer]
    sys.stdout.write("".join(out) + "\n")


def get_sync_state_set(c: AdminClient, a: argparse.Namespace) -> None:
    addr = _first_addr(a.controllerAddress)
    if a.brokerName:
        names = [a.brokerName.strip()]
    elif a.clusterName:
        names = c.broker_names(a.clusterName.strip())
    else:
        raise AdminError(-1, "please set -b or -c")
    if a.interval is None:
        _print_sync_state_set(c, addr, names)
        return
    while True:                                   # mqadmin -i: print again every interval until interrupted
        _print_sync_state_set(c, addr, names)
        time.sleep(int(a.interval or 3))


def _print_sync_state_set(c: AdminClient, addr: str, names: list[str]) -> None:
    if not names:
        return
    resp = c.call(_leader(c, addr), R.CONTROLLER_GET_SYNC_STATE_DATA, body=fastjson.dumps(names))
    # the JSON decode boundary: the controller's BrokerReplicasInfo
    data = cast(SyncStateData, fastjson.loads_lenient(resp.body_bytes()) or {})
    table = data.get("replicasInfoTable") or {}
    for name, info in table.items():
        in_sync = info.get("inSyncReplicas") or []
        not_in_sync = info.get("notInSyncReplicas") or []
        sys.stdout.write(f"\n#brokerName\t{name}\n#MasterBrokerId\t{_java(info.get('masterBrokerId'))}\n"
                         f"#MasterAddr\t{_java(info.get('masterAddress'))}\n"
                         f"#MasterEpoch\t{_java(info.get('masterEpoch'))}\n"
                         f"#SyncStateSetEpoch\t{_java(info.get('syncStateSetEpoch'))}\n"
                         f"#SyncStateSetNums\t{len(in_sync)}\n")
        for member in in_sync:
            sys.stdout.write(f"\nInSyncReplica:\t{_replica_identity(member)}\n")
        for member in not_in_sync:
            sys.stdout.write(f"\nNotInSyncReplica:\t{_replica_identity(member)}\n")


def _replica_identity(r: ReplicaIdentity) -> str:
    return (f"ReplicaIdentity{{brokerName='{_java(r.get('brokerName'))}', brokerId={_java(r.get('brokerId'))}, "
            f"brokerAddress='{_java(r.get('brokerAddress'))}', alive={_java(r.get('alive'))}}}")


def elect_master(c: AdminClient, a: argparse.Namespace) -> None:
    broker_id = int(a.brokerId.strip())
    leader = _leader(c, a.controllerAddress.strip())
    resp = c.call(leader, R.CONTROLLER_ELECT_MASTER, {
        "clusterName": a.clusterName.strip(), "brokerName": a.brokerName.strip(), "brokerId": broker_id,
        "designateElect": True, "invokeTime": int(time.time() * 1000)})
    h = resp.ext_fields or {}
    sys.stdout.write(f"\n#ClusterName\t{a.clusterName.strip()}\n#BrokerName\t{a.brokerName.strip()}"
                     f"\n#BrokerMasterAddr\t{_java(h.get('masterAddress'))}\n#MasterEpoch\t{_java(h.get('masterEpoch'))}"
                     f"\n#SyncStateSetEpoch\t{_java(h.get('syncStateSetEpoch'))}\n")
    # the JSON decode boundary: the controller's ElectMasterResponseBody
    body = cast(ElectMasterBody, fastjson.loads_lenient(resp.body_bytes()) or {}
                if resp.body is not None and resp.body_bytes() else {})
    group = body.get("brokerMemberGroup") or {}
    for bid, addr in sorted((group.get("brokerAddrs") or {}).items(), key=lambda kv: int(kv[0])):
        sys.stdout.write(f"\t#Broker\t{int(bid)}\t{addr}\n")


def clean_broker_metadata(c: AdminClient, a: argparse.Namespace) -> None:
    ids = a.brokerControllerIdsToClean.strip() if a.brokerControllerIdsToClean else None
    if ids:
        try:
            [int(x) for x in ids.split(";")]
        except ValueError:
            raise AdminError(-1, "please set the option <brokerControllerIdsToClean> according to the format") from None
    cluster = a.clusterName.strip() if a.clusterName else None
    if not a.cleanLivingBroker and not cluster:
        raise AdminError(-1, "cleanLivingBroker option is false, clusterName option can not be empty.")
    leader = _leader(c, a.controllerAddress.strip())
    c.call(leader, R.CLEAN_BROKER_DATA, {"clusterName": cluster, "brokerName": a.brokerName.strip(),
                                         "brokerControllerIdsToClean": ids,
                                         "isCleanLivingBroker": bool(a.cleanLivingBroker),
                                         "invokeTime": int(time.time() * 1000)})
    sys.stdout.write(f"clear broker {a.brokerName.strip()} metadata from controller success! \n")


def update_controller_config(c: AdminClient, a: argparse.Namespace) -> None:
    servers = _addr_list(a.controllerAddress)
    key, value = a.key.strip(), a.value.strip()
    body = f"{key}={value}\n".encode("utf-8")
    for addr in servers:
        c.call(addr, R.UPDATE_CONTROLLER_CONFIG, body=body)
    sys.stdout.write(f"update controller config success![{', '.join(servers)}]\n{key} : {value}\n")


def get_controller_config(c: AdminClient, a: argparse.Namespace) -> None:
    for addr in _addr_list(a.controllerAddress):
        resp = c.call(addr, R.GET_CONTROLLER_CONFIG)
        props = parse_properties(resp.body_bytes().decode("utf-8")) if resp.body is not None else {}
        sys.stdout.write(f"============{addr}============\n")
        for key, value in sorted(props.items()):
            sys.stdout.write(f"{key:<50s}=  {value}\n")


def get_broker_epoch(c: AdminClient, a: argparse.Namespace) -> None:
    """GET_BROKER_EPOCH_CACHE (1007) to every master and slave of ``-b`` (or of every group of ``-c``), printed
    as mqadmin's GetBrokerEpochSubCommand (the last epoch ends at the broker's max offset)."""
    info = c.cluster_info()
    if a.brokerName:
        names = [a.brokerName.strip()]
    elif a.clusterName:
        names = sorted(info.get("clusterAddrTable", {}).get(a.clusterName.strip(), []))
    else:
        raise AdminError(-1, "please set -b or -c")
    while True:
        for name in names:
            addrs = (info.get("brokerAddrTable", {}).get(name) or {}).get("brokerAddrs") or {}
            for addr in sorted(set(addrs.values())):
                cache = c.answer(EpochCache, addr, R.GET_BROKER_EPOCH_CACHE)
                out = (f"\n#clusterName\t{_java(cache.get('clusterName'))}\n#brokerName\t{_java(cache.get('brokerName'))}"
                       f"\n#brokerAddr\t{addr}\n#brokerId\t{_java(cache.get('brokerId'))}")
                epochs = cache.get("epochList") or []
                for i, e in enumerate(epochs):
                    end = cache.get("maxOffset") if i == len(epochs) - 1 else e.get("endOffset")
                    out += (f"\n#Epoch: EpochEntry{{epoch={_java(e.get('epoch'))}, "
                            f"startOffset={_java(e.get('startOffset'))}, endOffset={_java(end)}}}")
                sys.stdout.write(out + "\n")
        if a.interval is None:
            return
        time.sleep(int(a.interval or 3))
        info = c.cluster_info()


# sub-command -> (handler, help, [(flags, kwargs)...]), merged into rmqd.admin.main.SPEC
SPEC: SpecTable = {
    "getControllerMetaData": (get_controller_metadata, "Get controller cluster's metadata.", [
        (_A, {"required": True, "help": "the address of controller"})]),
    "getSyncStateSet": (get_sync_state_set, "Fetch syncStateSet for target brokers.", [
        (_A, {"required": True, "help": "the address of controller"}),
        (("-c", "--clusterName"), {"help": "which cluster"}),
        (("-b", "--brokerName"), {"help": "which broker to fetch"}),
        (("-i", "--interval"), {"help": "the interval(second) of get info"})]),
    "electMaster": (elect_master, "Re-elect the specified broker as master.", [
        (_A, {"required": True, "help": "The address of controller"}),
        (("-b", "--brokerId"), {"required": True, "help": "The id of the broker which requires to become master"}),
        (("-bn", "--brokerName"), {"required": True,
                                   "help": "The broker name of the replicas that require to be manipulated"}),
        (("-c", "--clusterName"), {"required": True, "help": "the clusterName of broker"})]),
    "cleanBrokerMetadata": (clean_broker_metadata, "Clean metadata of broker on controller.", [
        (_A, {"required": True, "help": "The address of controller"}),
        (("-b", "--brokerControllerIdsToClean"), {"help": "The brokerController id list which requires to clean "
                                                          "metadata. eg: 1;2;3"}),
        (("-bn", "--brokerName"), {"required": True,
                                   "help": "The broker name of the replicas that require to be manipulated"}),
        (("-c", "--clusterName"), {"help": "The clusterName of broker"}),
        (("-l", "--cleanLivingBroker"), {"action": "store_true",
                                         "help": "Whether clean up living brokers,default value is false"})]),
    "updateControllerConfig": (update_controller_config, "Update controller config.", [
        (_A, {"required": True, "help": "Controller address list, eg: 192.168.0.1:9878;192.168.0.2:9878"}),
        (("-k", "--key"), {"required": True, "help": "config key"}),
        (("-v", "--value"), {"required": True, "help": "config value"})]),
    "getBrokerEpoch": (get_broker_epoch, "Fetch broker epoch entries.", [
        (("-c", "--clusterName"), {"help": "which cluster"}),
        (("-b", "--brokerName"), {"help": "which broker to fetch"}),
        (("-i", "--interval"), {"help": "the interval(second) of get info"})]),
    "getControllerConfig": (get_controller_config, "Get controller config.", [
        (_A, {"required": True, "help": "Controller address list, eg: 192.168.0.1:9878;192.168.0.2:9878"})]),
}
