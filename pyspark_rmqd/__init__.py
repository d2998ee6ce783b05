"""Spark finds this module by its ``pyspark_`` prefix and registers ``DefaultSource`` under its name,
``rocketmq``: ``spark.read.format("rocketmq")`` works with no register call (rmqd.spark)."""
from rmqd.spark.source import RocketMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
