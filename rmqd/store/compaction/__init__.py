"""Compaction topics (RocketMQ 5.x ``cleanup.policy=COMPACTION``): per-queue compaction logs."""
