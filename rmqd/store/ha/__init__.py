"""Master/slave replication of the CommitLog (Java's ``store/ha``), wire-compatible with RocketMQ 4.9.8.

- :mod:`.protocol` the DefaultHA wire format (8-byte slave reports, 12-byte transfer headers);
- :mod:`.config` the settings, from broker.conf's Java names;
- :mod:`.service` :class:`~.service.DefaultHAService`: the HA port, one :class:`~.connection.HAConnection` per
  slave (master side) and the :class:`~.client.HAClient` (slave side);
- :mod:`.transfer` the SYNC_MASTER wait (Java's GroupTransferService);
- :mod:`.slave_append` the slave's raw append of a received range and its dispatch;
- :mod:`.layer` :class:`~.layer.ReplicatedStore`, the store layer that makes a put "durable" only once the
  slave has it (SYNC_MASTER) and refuses puts on a slave.

Threads, not the event loop: each HA connection has a reader and a writer thread that block in socket calls (GIL
released); CommitLog ranges go out as memoryview slices of the mapped files in one ``sendmsg`` per round and come
in with ``recv_into`` straight into a reusable buffer that is copied once into the mapped file.
"""
