"""RocketMQ 5's controller (automatic master/slave failover), on an existing Raft library.

``replicas_info``  the replicated state machine (Java's ReplicasInfoManager): pure, no I/O
``events``         its Raft log entries (JSON, Java's event types)
``elect_policy``   who becomes master (Java's DefaultElectPolicy)
``heartbeat``      broker liveness as this controller sees it (Java's DefaultBrokerHeartbeatManager)
``raft``           the Raft group member on pysyncobj, the only importer of the Raft library
``controller``     one node's logic: write/read paths, leader duties (Java's DLedgerController + ControllerManager)
``notify``         NOTIFY_BROKER_ROLE_CHANGED pushes
``processors``     request codes 904 and 1001-1013 on a remoting Dispatcher
``server``         the process component: standalone or inside the name server
``config``, ``codes``  5.x settings and codes

See docs/controller.md.
"""
