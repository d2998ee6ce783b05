"""The RocketMQ 5.x broker metric families (OTel Prometheus names), from the broker's
BrokerMetricsManager / BrokerMetricsConstant, PopMetricsManager / PopMetricsConstant and the store's
DefaultStoreMetricsManager / DefaultStoreMetricsConstant (the timer, 5.5): exported name -> (type, label keys
besides the common ones).  Written from the 5.x sources and checked against the 5.5.0 broker's exporter
(compat_tests/grpc/test_metrics_reference5.py), not from rmqd's own table, so the parity test is independent.
"""
COMMON = ("cluster", "node_type", "node_id")

FAMILIES = {
    "rocketmq_messages_in_total": ("counter", ("topic", "message_type", "is_system")),
    "rocketmq_throughput_in_total": ("counter", ("topic", "message_type", "is_system")),
    "rocketmq_message_size": ("histogram", ("topic", "message_type", "is_system")),
    "rocketmq_messages_out_total": ("counter", ("topic", "consumer_group", "is_system")),
    "rocketmq_throughput_out_total": ("counter", ("topic", "consumer_group", "is_system")),
    "rocketmq_send_to_dlq_messages_total": ("counter", ("consumer_group", "topic", "is_system")),
    "rocketmq_rpc_latency_milliseconds": ("histogram", ("protocol_type", "request_code", "response_code",
                                                         "is_long_polling", "result")),
    "rocketmq_topic_number": ("gauge", ()),
    "rocketmq_consumer_group_number": ("gauge", ()),
    "rocketmq_broker_permission": ("gauge", ()),
    "rocketmq_processor_watermark": ("gauge", ("processor",)),
    "rocketmq_producer_connections": ("gauge", ("language", "version", "protocol_type")),
    "rocketmq_consumer_connections": ("gauge", ("consumer_group", "language", "version", "consume_mode",
                                                "protocol_type", "is_system")),
    "rocketmq_consumer_lag_messages": ("gauge", ("topic", "consumer_group", "is_retry", "is_system")),
    "rocketmq_consumer_lag_latency_milliseconds": ("gauge", ("topic", "consumer_group", "is_retry", "is_system")),
    "rocketmq_consumer_inflight_messages": ("gauge", ("topic", "consumer_group", "is_retry", "is_system")),
    "rocketmq_consumer_queueing_latency_milliseconds": ("gauge", ("topic", "consumer_group", "is_retry",
                                                                  "is_system")),
    "rocketmq_consumer_ready_messages": ("gauge", ("topic", "consumer_group", "is_retry", "is_system")),
    "rocketmq_topic_create_execution_time_milliseconds": ("histogram", ("invocation_status", "is_system")),
    "rocketmq_consumer_group_create_execution_time_milliseconds": ("histogram", ("invocation_status",)),
    "rocketmq_commit_messages_total": ("counter", ("topic",)),
    "rocketmq_rollback_messages_total": ("counter", ("topic",)),
    "rocketmq_half_messages": ("gauge", ("topic",)),
    "rocketmq_finish_message_latency_milliseconds": ("histogram", ("topic",)),
    "rocketmq_storage_size_bytes": ("gauge", ("storage_type", "storage_medium")),
    "rocketmq_storage_flush_behind_bytes": ("gauge", ("storage_type", "storage_medium")),
    "rocketmq_storage_dispatch_behind_bytes": ("gauge", ("storage_type", "storage_medium")),
    "rocketmq_storage_message_reserve_time_milliseconds": ("gauge", ("storage_type", "storage_medium")),
    # PopMetricsManager / PopMetricsConstant (units "milliseconds": suffixed; the revive lag is a count)
    "rocketmq_pop_buffer_scan_time_consume_milliseconds": ("histogram", ()),
    "rocketmq_pop_revive_in_message_total": ("counter", ("consumer_group", "topic", "revive_message_type",
                                                         "put_status")),
    "rocketmq_pop_revive_out_message_total": ("counter", ("consumer_group", "topic", "queue_id",
                                                          "revive_message_type")),
    "rocketmq_pop_revive_retry_messages_total": ("counter", ("consumer_group", "topic", "put_status")),
    "rocketmq_pop_offset_buffer_size": ("gauge", ()),
    "rocketmq_pop_checkpoint_buffer_size": ("gauge", ()),
    "rocketmq_pop_revive_lag_milliseconds": ("gauge", ("queue_id",)),
    "rocketmq_pop_revive_latency_milliseconds": ("gauge", ("queue_id",)),
    # DefaultStoreMetricsManager's timer families (timerWheelEnable), with the store labels
    "rocketmq_timer_enqueue_lag": ("gauge", ("storage_type", "storage_medium")),
    "rocketmq_timer_enqueue_latency_milliseconds": ("gauge", ("storage_type", "storage_medium")),
    "rocketmq_timer_dequeue_lag": ("gauge", ("storage_type", "storage_medium")),
    "rocketmq_timer_dequeue_latency_milliseconds": ("gauge", ("storage_type", "storage_medium")),
    "rocketmq_timing_messages": ("gauge", ("storage_type", "storage_medium", "topic")),
    "rocketmq_timer_enqueue_total": ("counter", ("storage_type", "storage_medium", "topic")),
    "rocketmq_timer_dequeue_total": ("counter", ("storage_type", "storage_medium", "topic")),
    "rocketmq_timer_message_snapshot": ("gauge", ("storage_type", "storage_medium", "timer_bound_s")),
    "rocketmq_delay_message_latency_seconds": ("histogram", ("storage_type", "storage_medium", "topic")),
}
# Labels only some series of a family carry: 5.x's PopMessageProcessor adds is_retry to what POP hands out,
# the pull path does not.
OPTIONAL = {"rocketmq_messages_out_total": {"is_retry"}, "rocketmq_throughput_out_total": {"is_retry"}}
# OTel's resource gauge: one series, no labels at all.
RESOURCE = "target_info"
PROCESSORS = {"send", "async_put", "pull", "ack", "query_message", "client_manager", "heartbeat", "lite_pull",
              "transaction", "consumer_manager", "admin", "reply"}
