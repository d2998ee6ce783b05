"""``rmqd admin <sub-command>``: argument parsing (mqadmin's names and options) and dispatch."""
from __future__ import annotations

import argparse
import sys
from typing import Callable, Optional

from rmqd.admin import auth_commands, commands, controller_commands, lite_commands
from rmqd.admin.client import AdminClient, AdminError, tools_credentials
from rmqd.admin.ha_status import ha_status

# sub-command → (handler, help, [(flags, kwargs)...])
_B = ("-b", "--brokerAddr")
_C = ("-c", "--clusterName")
_T = ("-t", "--topic")
_G = ("-g", "--consumerGroup")

SPEC: dict[str, tuple[Callable, str, list]] = {
    "updateTopic": (commands.update_topic, "Update or create topic", [
        (_B, {}), (_C, {}), (_T, {"required": True}), (("-r", "--readQueueNums"), {"type": int, "default": 8}),
        (("-w", "--writeQueueNums"), {"type": int, "default": 8}), (("-p", "--perm"), {"type": int, "default": 6}),
        (("-o", "--order"), {"default": "false"}), (("-u", "--unit"), {"default": "false"}),
        (("-s", "--hasUnitSub"), {"default": "false"}), (("-a", "--attributes"), {})]),
    "deleteTopic": (commands.delete_topic, "Delete topic from broker and NameServer", [
        (_T, {"required": True}), (_C, {"required": True})]),
    "topicList": (commands.topic_list, "Fetch all topic list from name server", [
        (("-c", "--clusterModel"), {"action": "store_true"})]),
    "topicRoute": (commands.topic_route, "Examine topic route info", [(_T, {"required": True})]),
    "topicStatus": (commands.topic_status, "Examine topic Status info", [(_T, {"required": True})]),
    "topicClusterList": (commands.topic_cluster_list, "get cluster info for topic", [(_T, {"required": True})]),
    "updateTopicPerm": (commands.update_topic_perm, "Update topic perm", [
        (_B, {}), (_C, {}), (_T, {"required": True}), (("-p", "--perm"), {"type": int, "required": True})]),
    "updateOrderConf": (commands.update_order_conf, "Create or update or delete order conf", [
        (_T, {"required": True}), (("-v", "--orderConf"), {}), (("-m", "--method"), {"required": True})]),
    "allocateMQ": (commands.allocate_mq, "Allocate MQ", [
        (_T, {"required": True}), (("-i", "--ipList"), {"required": True})]),
    "updateSubGroup": (commands.update_sub_group, "Update or create subscription group", [
        (_B, {}), (_C, {}), (_G, {"required": True}), (("-s", "--consumeEnable"), {"default": "true"}),
        (("-m", "--consumeFromMinEnable"), {"default": "false"}),
        (("-d", "--consumeBroadcastEnable"), {"default": "false"}),
        (("-q", "--retryQueueNums"), {"type": int, "default": 1}),
        (("-r", "--retryMaxTimes"), {"type": int, "default": 16}), (("-i", "--brokerId"), {"type": int, "default": 0}),
        (("-w", "--whichBrokerWhenConsumeSlowly"), {"type": int, "default": 1}),
        (("-a", "--notifyConsumerIdsChanged"), {"default": "true"}),
        (("-o", "--consumeMessageOrderly"), {"default": "false"}), (("--attributes",), {})]),
    "setConsumeMode": (commands.set_consume_mode, "set consume mode (PULL or POP) of a group on a topic", [
        (_B, {}), (_C, {}), (("-t", "--topicName"), {"required": True}), (_G, {"required": True}),
        (("-m", "--mode"), {"required": True, "choices": ["PULL", "POP"]}),
        (("-q", "--popShareQueueNum"), {"type": int, "default": 0})]),
    "deleteSubGroup": (commands.delete_sub_group, "Delete subscription group from broker", [
        (_B, {}), (_C, {}), (_G, {"required": True}), (("-r", "--removeOffset"), {"default": "false"})]),
    "consumerProgress": (commands.consumer_progress, "Query consumers's progress, speed", [
        (_G, {}), (("-s", "--showClientIP"), {"default": "false"})]),
    "consumerStatus": (commands.consumer_status, "Query consumer's internal data structure", [
        (_G, {"required": True}), (("-i", "--clientId"), {}), (("-s", "--jstack"), {"default": "false"})]),
    "consumerConnection": (commands.consumer_connection, "Query consumer's socket connection", [
        (_G, {"required": True})]),
    "producerConnection": (commands.producer_connection, "Query producer's socket connection", [
        (("-g", "--producerGroup"), {"required": True}), (_T, {"required": True})]),
    "cloneGroupOffset": (commands.clone_group_offset, "clone offset from other group", [
        (("-s", "--srcGroup"), {"required": True}), (("-d", "--destGroup"), {"required": True}),
        (_T, {"required": True}), (("-o", "--offline"), {"default": "false"})]),
    "resetOffsetByTime": (commands.reset_offset_by_time, "Reset consumer offset by timestamp", [
        (_G, {"required": True}), (_T, {"required": True}), (("-s", "--timestamp"), {"required": True}),
        (("-f", "--force"), {"default": "true"}), (("-c", "--cplus"), {"action": "store_true"})]),
    "skipAccumulatedMessage": (commands.skip_accumulated, "Skip all messages that are accumulated (not consumed)", [
        (_G, {"required": True}), (_T, {"required": True}), (("-f", "--force"), {"default": "true"})]),
    "clusterList": (commands.cluster_list, "List all of clusters", [
        (("-m", "--moreStats"), {"action": "store_true"}), (_C, {}), (("-i", "--interval"), {"type": int})]),
    "brokerStatus": (commands.broker_status, "Fetch broker runtime status data", [(_B, {}), (_C, {})]),
    "haStatus": (ha_status, "Fetch ha runtime status data (masters' slaves with their lag in bytes and ms)", [
        (_B, {}), (_C, {})]),
    "getBrokerConfig": (commands.get_broker_config, "Get broker config by cluster or special broker", [
        (_B, {}), (_C, {})]),
    "updateBrokerConfig": (commands.update_broker_config, "Update broker's config", [
        (_B, {}), (_C, {}), (("-k", "--key"), {"required": True}), (("-v", "--value"), {"required": True})]),
    "getNamesrvConfig": (commands.get_namesrv_config, "Get configs of name server", []),
    "updateNamesrvConfig": (commands.update_namesrv_config, "Update configs of name server", [
        (("-k", "--key"), {"required": True}), (("-v", "--value"), {"required": True})]),
    "wipeWritePerm": (commands.wipe_write_perm, "Wipe write perm of broker in all name server", [
        (("-b", "--brokerName"), {"required": True})]),
    "addWritePerm": (commands.add_write_perm, "Add write perm of broker in all name server", [
        (("-b", "--brokerName"), {"required": True})]),
    "cleanExpiredCQ": (commands.clean_expired_cq, "Clean expired ConsumeQueue on broker", [(_B, {}), (_C, {})]),
    "cleanUnusedTopic": (commands.clean_unused_topic, "Clean unused topic on broker", [(_B, {}), (_C, {})]),
    "deleteExpiredCommitLog": (commands.delete_expired_commit_log, "Delete expired CommitLog files",
                               [(_B, {}), (_C, {})]),
    "queryCq": (commands.query_cq, "Query cq command.", [
        (_T, {"required": True}), (("-q", "--queue"), {"type": int, "required": True}),
        (("-i", "--index"), {"type": int, "required": True}), (("-c", "--count"), {"type": int, "default": 10}),
        (("-b", "--broker"), {}), (("-g", "--consumer"), {})]),
    "statsAll": (commands.stats_all, "Topic and Consumer tps stats", [
        (("-a", "--activeTopic"), {"action": "store_true"}), (_T, {})]),
    "brokerConsumeStats": (commands.broker_consume_stats, "Fetch broker consume stats data", [
        (("-b", "--brokerAddr"), {"required": True}), (("-t", "--timeoutMillis"), {"type": int}),
        (("-l", "--level"), {"type": int, "default": 0}), (("-o", "--order"), {"default": "false"})]),
    "queryMsgById": (commands.query_msg_by_id, "Query Message by Id", [
        (("-i", "--msgId"), {"required": True}), (("-d", "--bodyFormat"), {})]),
    "queryMsgByKey": (commands.query_msg_by_key, "Query Message by Key", [
        (_T, {"required": True}), (("-k", "--msgKey"), {"required": True})]),
    "queryMsgByUniqueKey": (commands.query_msg_by_unique_key, "Query Message by Unique key", [
        (("-i", "--msgId"), {"required": True}), (_T, {"required": True}), (_G, {}), (("-d", "--clientId"), {})]),
    "queryMsgByOffset": (commands.query_msg_by_offset, "Query Message by offset", [
        (_T, {"required": True}), (("-b", "--brokerName"), {"required": True}),
        (("-i", "--queueId"), {"type": int, "required": True}), (("-o", "--offset"), {"type": int, "required": True})]),
    "printMsg": (commands.print_msg, "Print Message Detail", [
        (_T, {"required": True}), (("-c", "--charsetName"), {"default": "UTF-8"}),
        (("-s", "--subExpression"), {"default": "*"}), (("-b", "--beginTimestamp"), {}),
        (("-e", "--endTimestamp"), {}), (("-d", "--printBody"), {"default": "true"})]),
    "printMsgByQueue": (commands.print_msg_by_queue, "Print Message Detail by queueId", [
        (_T, {"required": True}), (("-a", "--brokerName"), {"required": True}),
        (("-i", "--queueId"), {"type": int, "required": True}), (("-c", "--charsetName"), {"default": "UTF-8"}),
        (("-s", "--subExpression"), {"default": "*"}), (("-b", "--beginTimestamp"), {}),
        (("-e", "--endTimestamp"), {}), (("-p", "--print"), {"default": "false"}),
        (("-d", "--printBody"), {"default": "false"}), (("-f", "--calculate"), {"default": "false"})]),
    "sendMessage": (commands.send_message, "Send a message", [
        (_T, {"required": True}), (("-p", "--body"), {"required": True}), (("-k", "--key"), {}),
        (("-c", "--tags"), {}), (("-b", "--broker"), {}), (("-i", "--qid"), {"type": int})]),
    "consumeMessage": (commands.consume_message, "Consume message", [
        (_T, {"required": True}), (("-b", "--brokerName"), {}), (("-i", "--queueId"), {"type": int}),
        (("-o", "--offset"), {"type": int}), (_G, {}), (("-s", "--beginTimestamp"), {}),
        (("-e", "--endTimestamp"), {}), (("-c", "--MessageNumber"), {"type": int, "default": 128})]),
    "checkMsgSendRT": (commands.check_msg_send_rt, "Check message send response time", [
        (_T, {"required": True}), (("-a", "--amount"), {"type": int, "default": 100}),
        (("-s", "--size"), {"type": int, "default": 128})]),
    "updateKvConfig": (commands.update_kv_config, "Create or update KV config", [
        (("-s", "--namespace"), {"required": True}), (("-k", "--key"), {"required": True}),
        (("-v", "--value"), {"required": True})]),
    "updateAclConfig": (commands.update_acl_config, "Update acl config yaml file in broker", [
        (_B, {}), (_C, {}), (("-a", "--accessKey"), {"required": True}), (("-s", "--secretKey"), {}),
        (("-w", "--whiteRemoteAddress"), {}), (("-i", "--defaultTopicPerm"), {}), (("-u", "--defaultGroupPerm"), {}),
        (("-t", "--topicPerms"), {}), (("-g", "--groupPerms"), {}), (("-m", "--admin"), {})]),
    "deleteAclConfig": (commands.delete_acl_config, "Delete Acl Config Account in broker", [
        (_B, {}), (_C, {}), (("-a", "--accessKey"), {"required": True})]),
    "clusterAclConfigVersion": (commands.cluster_acl_config_version, "List all of acl config version information "
                                "in cluster", [(_B, {}), (_C, {})]),
    "updateGlobalWhiteAddr": (commands.update_global_white_addr, "Update global white address for acl Config File "
                              "in broker", [(_B, {}), (_C, {}), (("-g", "--globalWhiteRemoteAddresses"),
                                                                  {"required": True}),
                                            (("-p", "--aclFileFullPath"), {})]),
    "getTopicConfig": (commands.get_topic_config, "Get the topic's config, attributes included", [
        (_T, {"required": True}), (_B, {})]),
    "compactTopic": (commands.compact_topic, "Compact a COMPACTION topic now (rmqd)", [
        (_T, {"required": True}), (("-q", "--queueId"), {"type": int}), (_B, {})]),
    "adoptCompaction": (commands.adopt_compaction, "Adopt the output of `rmqd pipeline compact` (rmqd)", [
        (_T, {}), (("-d", "--dir"), {"help": "where the output is, on the broker's host (default "
                                              "<store>/compaction/pipeline)"}), (_B, {})]),
    "compactionStatus": (commands.compaction_status, "Compaction state per queue (rmqd)", [(_T, {}), (_B, {})]),
    "tierStatus": (commands.tier_status, "Tiered storage: queues and index files (rmqd)", [(_T, {}), (_B, {})]),
    "adoptTierIndex": (commands.adopt_tier_index, "Adopt the index files of `rmqd pipeline index` (rmqd)", [
        (("-d", "--dir"), {"help": "where the outputs are, on the broker's host (default "
                                   "<store>/tiered_index_file/pipeline)"}), (_B, {})]),
    "commitTier": (commands.commit_tier, "Copy pending messages to the tier, seal and upload the index (rmqd)", [
        (_B, {}), (("-u", "--upload"), {"default": "true"})]),
    "dumpCompactionLog": (commands.dump_compaction_log, "Decode a compaction log file", [
        (("-f", "--file"), {"required": True})]),
    "deleteKvConfig": (commands.delete_kv_config, "Delete KV config", [
        (("-s", "--namespace"), {"required": True}), (("-k", "--key"), {"required": True})]),
}
SPEC.update(controller_commands.SPEC)      # RocketMQ 5 controller mode (-a controller address)


SPEC.update(lite_commands.SPEC)      # 5.5 lite sub-commands, priority backlog
SPEC.update(auth_commands.SPEC)      # 5.x access control 2.0: users and ACLs


def build_parser(parser: Optional[argparse.ArgumentParser] = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="rmqd admin", description="mqadmin for rmqd (Python)")
    sub = parser.add_subparsers(dest="admin_command", required=True, metavar="<sub-command>")
    for name, (handler, help_, options) in SPEC.items():
        p = sub.add_parser(name, help=help_, add_help=False)
        p.add_argument("-h", "--help", action="help")
        p.add_argument("-n", "--namesrvAddr", help="Name server address list, eg: 192.168.0.1:9876;192.168.0.2:9876")
        for flags, kw in options:
            p.add_argument(*flags, **kw)
        p.set_defaults(admin_handler=handler)
    return parser


def run(args: argparse.Namespace) -> int:
    client = AdminClient(args.namesrvAddr, credentials=tools_credentials())
    try:
        args.admin_handler(client, args)
        return 0
    except AdminError as exc:
        print(f"{args.admin_command} command failed: {exc}", file=sys.stderr)
        return 1
    except (OSError, TimeoutError) as exc:
        print(f"{args.admin_command} command failed: {exc!r}", file=sys.stderr)
        return 1
    finally:
        client.close()


def main(argv: Optional[list[str]] = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
