"""``rmqd proxy``: a stateless gRPC front for RocketMQ 5.x clients over brokers anywhere (the 5.x proxy's CLUSTER
mode, ``mqproxy -pm cluster``).

Modules: ``brokers`` (the name servers' view; calls by broker name to the group's master, failovers followed),
``backend`` (the MessagingService's backend over remoting), ``popped`` (POP answers read as the proxy reads them),
``registry`` (heartbeats; the brokers' transaction check-backs relayed to the clients), ``lite`` (5.5 Lite Mode),
``app`` (the process). The gRPC side (checks, conversions, TLS, sessions) is :mod:`rmqd.grpc`'s.
"""
