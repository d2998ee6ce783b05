"""The gRPC endpoint for RocketMQ 5.x clients (``apache.rocketmq.v2.MessagingService``).

grpcio's asyncio server (``grpc.aio``) runs on the broker's uvloop loop; every blocking call
(sends, POP, transactions) is awaited in a bounded executor.  Modules: ``endpoint`` (the
``Services`` endpoint), ``service`` (the RPCs), ``convert`` (5.x message <-> stored format),
``clients`` (client sessions, Telemetry streams, transaction check-back), ``auth`` (the
``authorization`` header against rmqd's ACL), ``pb`` (protoc output of ``proto/``).
"""
