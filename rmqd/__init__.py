"""rmqd: a RocketMQ-compatible name server and broker."""
__version__ = "0.1.0"
