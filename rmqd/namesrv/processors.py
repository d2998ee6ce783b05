"""Name-server request processors (RocketMQ's DefaultRequestProcessor, README §3.1).

Every handler is cheap and runs inline on the loop; the KV writes await the KV manager's
off-loop persistence.  Response codes and remarks follow the Java name server.
"""
from __future__ import annotations

import logging
import zlib
from typing import TYPE_CHECKING, Mapping, Optional, cast

from rmqd.config import NamesrvConfig, parse_properties
from rmqd.namesrv.kvconfig import LIVE_NAMESPACES, NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from rmqd.namesrv.route_data import DataVersion, QueueData, RegisterBrokerBody
from rmqd.namesrv.route_info import RouteInfoManager
from rmqd.remoting.codes import RequestCode, ResponseCode, Version
from rmqd.remoting.command import (
    RemotingCommand,
    error_response,
    ext_bool,
    ext_int,
    new_response,
    require,
)
from rmqd.remoting.dispatch import Dispatcher
from rmqd.remoting.fastjson import dumps, loads_lenient

if TYPE_CHECKING:
    from rmqd.common.data_version import DataVersionJson
    from rmqd.namesrv.route_data import TopicRouteDataJson
    from rmqd.remoting.command import Body, ExtValue
    from rmqd.remoting.connection import Connection
    from rmqd.remoting.dispatch import Handler
    from rmqd.remoting.fastjson import Encodable

log = logging.getLogger(__name__)

V3_0_11 = 37  # brokers from this version send RegisterBrokerBody (with filter servers)
V4_9_4 = 401  # clients from this version get standard JSON routes
APPLY_TOPIC_URL = "http://rocketmq.apache.org/docs/faq/"
APPLY_TOPIC_URL_5X = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"    # 5.x FAQUrl.APPLY_TOPIC_URL
CONFIG_BLACK_LIST = frozenset(("configBlackList", "configStorePath", "kvConfigPath"))
GET_BROKER_MEMBER_GROUP = 901     # 5.x: the addresses of one broker group (a 5.x broker asks on start)
BROKER_HEARTBEAT = 904            # 5.x: a broker's lightweight keep-alive between registrations
NOT_SET_REMARK = "not set any response code"


def suggest_todo(url: str) -> str:
    """FAQUrl.suggestTodo."""
    return f"\nSee {url} for further details."


def crc32_masked(data: bytes) -> int:
    """UtilAll.crc32: CRC32 & 0x7FFFFFFF."""
    return zlib.crc32(data) & 0x7FFFFFFF


def _success(body: Optional[Body] = None, ext: Optional[Mapping[str, Optional[ExtValue]]] = None) -> RemotingCommand:
    return new_response(ResponseCode.SUCCESS, None, ext, body)


def _topic_list(topics: list[str], broker_addr: str | None = None) -> bytes:
    body: dict[str, Encodable] = {"topicList": topics}
    if broker_addr is not None:
        body["brokerAddr"] = broker_addr
    return dumps(body)


class NamesrvProcessors:
    """Handlers for every name-server request code."""

    def __init__(self, config: NamesrvConfig, route_info: RouteInfoManager, kv_config: KVConfigManager) -> None:
        self.config = config
        self.route_info = route_info
        self.kv_config = kv_config

    def register(self, dispatcher: Dispatcher) -> None:
        table: dict[int, Handler] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            RequestCode.QUERY_DATA_VERSION: self.query_broker_topic_config,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.REGISTER_TOPIC_IN_NAMESRV: self.register_topic_in_namesrv,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list,
            RequestCode.GET_UNIT_TOPIC_LIST: self.get_unit_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.get_has_unit_sub_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.get_has_unit_sub_un_unit_topic_list,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_config,
            GET_BROKER_MEMBER_GROUP: self.get_broker_member_group,
            BROKER_HEARTBEAT: self.broker_heartbeat,
        }
        for code, handler in table.items():
            dispatcher.register(code, handler)

    # -- KV config ---------------------------------------------------------------------------
    async def put_kv_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        namespace, key, value = require(request, "namespace", "key", "value")
        self.kv_config.put(namespace, key, value)
        if namespace not in LIVE_NAMESPACES:
            await self.kv_config.persist()
        return _success()

    def get_kv_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        namespace, key = require(request, "namespace", "key")
        value = self.kv_config.get(namespace, key)
        if value is None:
            return error_response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}")
        return _success(ext={"value": value})

    async def delete_kv_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        namespace, key = require(request, "namespace", "key")
        if self.kv_config.delete(namespace, key) and namespace not in LIVE_NAMESPACES:
            await self.kv_config.persist()
        return _success()

    def get_kv_list_by_namespace(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        (namespace,) = require(request, "namespace")
        body = self.kv_config.get_kv_list_by_namespace(namespace)
        if body is None:
            return error_response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
        return _success(body)

    # -- broker registry ---------------------------------------------------------------------
    def register_broker(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        broker_name, broker_addr, cluster_name, ha_server_addr, broker_id = require(
            request, "brokerName", "brokerAddr", "clusterName", "haServerAddr", "brokerId")
        body = request.body_bytes()
        with_filter_server = request.version >= V3_0_11
        if with_filter_server:
            expected_crc = ext_int(request, "bodyCrc32", 0) or 0
            if expected_crc != 0 and crc32_masked(body) != expected_crc:
                log.warning("receive registerBroker request,crc32 not match, from %s (%s)",
                            conn.remote_address, broker_addr)
                return error_response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        if body:
            parsed = RegisterBrokerBody.decode(body, compressed=with_filter_server and ext_bool(request, "compressed"),
                                               wrapper_only=not with_filter_server)
        else:
            parsed = RegisterBrokerBody(DataVersion(0, 0))
        result = self.route_info.register_broker(
            cluster_name, broker_addr, broker_name, int(broker_id), ha_server_addr, parsed.data_version,
            parsed.topic_configs, parsed.filter_server_list, conn)
        return _success(self.kv_config.get_kv_list_by_namespace(NAMESPACE_ORDER_TOPIC_CONFIG),
                        {"haServerAddr": result.ha_server_addr, "masterAddr": result.master_addr})

    def unregister_broker(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        broker_name, broker_addr, cluster_name, broker_id = require(
            request, "brokerName", "brokerAddr", "clusterName", "brokerId")
        self.route_info.unregister_broker(cluster_name, broker_addr, broker_name, int(broker_id))
        return _success()

    def query_broker_topic_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        _name, broker_addr, _cluster, _id = require(request, "brokerName", "brokerAddr", "clusterName", "brokerId")
        body = request.body_bytes()
        # decoded JSON: DataVersion.from_json is lenient (anything but an object reads as 0/0)
        data_version = DataVersion.from_json(cast("Optional[DataVersionJson]", loads_lenient(body) if body else None))
        changed = self.route_info.is_broker_topic_config_changed(broker_addr, data_version)
        if not changed:
            self.route_info.update_broker_info_update_timestamp(broker_addr)
        ns_version = self.route_info.query_broker_topic_config(broker_addr)
        return _success(dumps(ns_version) if ns_version is not None else None,
                        {"changed": "true" if changed else "false"})

    # -- routes ------------------------------------------------------------------------------
    def get_route_info_by_topic(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        topic = (request.ext_fields or {}).get("topic")
        route = self.route_info.pickup_topic_route_data(topic) if topic is not None else None
        if topic is None or route is None:  # a missing topic is Java's null: no route for "null"
            shown = "null" if topic is None else topic
            return error_response(ResponseCode.TOPIC_NOT_EXIST,
                                  f"No topic route info in name server for the topic: {shown}"
                                  + suggest_todo(APPLY_TOPIC_URL_5X if request.version >= Version.V5_0_0_SNAPSHOT
                                                 else APPLY_TOPIC_URL))
        if self.config.orderMessageEnable:
            conf = self.kv_config.get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
            if conf is not None:
                route["orderTopicConf"] = conf
        standard = request.version >= V4_9_4 or ext_bool(request, "acceptStandardJsonOnly")
        return _success(dumps(route, standard=standard))

    def get_broker_cluster_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return _success(dumps(self.route_info.get_all_cluster_info()))

    def wipe_write_perm_of_broker(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        (broker_name,) = require(request, "brokerName")
        count = self.route_info.wipe_write_perm_of_broker(broker_name)
        log.info("wipe write perm of broker[%s], client: %s, %d", broker_name, conn.remote_address, count)
        return _success(ext={"wipeTopicCount": str(count)})

    def add_write_perm_of_broker(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        (broker_name,) = require(request, "brokerName")
        count = self.route_info.add_write_perm_of_broker(broker_name)
        log.info("add write perm of broker[%s], client: %s, %d", broker_name, conn.remote_address, count)
        return _success(ext={"addTopicCount": str(count)})

    def get_all_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return _success(_topic_list(self.route_info.get_all_topic_list()))

    def delete_topic_in_namesrv(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        (topic,) = require(request, "topic")
        cluster = (request.ext_fields or {}).get("clusterName") or None
        self.route_info.delete_topic(topic, cluster)
        return _success()

    def register_topic_in_namesrv(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """Add a topic's queue data (body TopicRouteData); without a topic or body nothing changes (as Java)."""
        topic = (request.ext_fields or {}).get("topic")
        body = request.body_bytes() if request.body is not None else b""
        if topic and body:
            route = cast("TopicRouteDataJson", loads_lenient(body) or {})     # decoded JSON, read as its shape
            queue_datas = [QueueData.from_json(q) for q in route.get("queueDatas") or []]
            self.route_info.register_topic(topic, queue_datas)
        return _success()

    def get_broker_member_group(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """``{"brokerMemberGroup": {cluster, brokerName, brokerAddrs}}``: the group's registered addresses."""
        ext = request.ext_fields or {}
        cluster, name = ext.get("clusterName"), ext.get("brokerName")     # Java: absent fields stay null
        with self.route_info.lock:
            data = self.route_info.brokerAddrTable.get(name) if name is not None else None
            addrs = dict(data.brokerAddrs) if data is not None else {}
        group: dict[str, Encodable] = {"brokerAddrs": addrs}
        if name is not None:
            group["brokerName"] = name
        if cluster is not None:
            group["cluster"] = cluster
        return new_response(ResponseCode.SUCCESS, NOT_SET_REMARK, None, dumps({"brokerMemberGroup": group}))

    def broker_heartbeat(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """Refresh a registered broker's liveness (an unknown address is ignored, as Java)."""
        _cluster, broker_addr, _name = require(request, "clusterName", "brokerAddr", "brokerName")
        self.route_info.update_broker_info_update_timestamp(broker_addr)
        return _success()

    def get_topics_by_cluster(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        (cluster,) = require(request, "cluster")
        return _success(_topic_list(self.route_info.get_topics_by_cluster(cluster)))

    def get_system_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        topics, broker_addr = self.route_info.get_system_topic_list()
        return _success(_topic_list(topics, broker_addr))

    def get_unit_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return _success(_topic_list(self.route_info.get_unit_topics()))

    def get_has_unit_sub_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return _success(_topic_list(self.route_info.get_has_unit_sub_topic_list()))

    def get_has_unit_sub_un_unit_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return _success(_topic_list(self.route_info.get_has_unit_sub_un_unit_topic_list()))

    # -- name server config ------------------------------------------------------------------
    def update_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        body = request.body_bytes()
        if body:
            try:
                properties = parse_properties(body.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                log.error("updateConfig from %s: bad properties body: %s", conn.remote_address, exc)
                return error_response(ResponseCode.SYSTEM_ERROR, "string2Properties error")
            if CONFIG_BLACK_LIST & properties.keys():
                return error_response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
            log.info("updateConfig called by %s: %s", conn.remote_address, properties)
            self.config.update(properties, source="UPDATE_NAMESRV_CONFIG")
            self.route_info.broker_expired_millis = int(self.config.brokerExpiredMillis)
        return _success()

    def get_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return _success(self.config.to_properties_text().encode("utf-8"))
