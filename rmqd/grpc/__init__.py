"""The gRPC endpoint for RocketMQ 5.x clients (``apache.rocketmq.v2.MessagingService``).

grpcio's asyncio server (``grpc.aio``) runs on the broker's uvloop loop; every blocking call
(sends, POP, transactions) is awaited in a bounded executor.  Modules: ``endpoint`` (the
``Services`` endpoint), ``service`` (the RPCs), ``convert`` (5.x message <-> stored format),
``clients`` (client sessions, Telemetry streams, transaction check-back), ``auth`` (the
``authorization`` header against rmqd's ACL), ``validate`` (the 5.x proxy's request checks and texts),
``message_types`` (its topic message-type check), ``errors`` (how an RPC fails), ``bad_input`` (malformed
requests answered as grpc-java does, logged once per cause), ``lite`` (5.5 Lite Mode), ``pb`` (protoc output of
``proto/``).
"""
