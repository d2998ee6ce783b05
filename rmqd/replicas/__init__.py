"""The broker's side of replication: who it is in its replica group and what follows from that.

- :mod:`.role_manager` the one owner of role, brokerId, master addresses and epoch;
- :mod:`.slave_sync` SlaveSynchronize: topics, groups, consumer and delay offsets from the master;
- :mod:`.wiring` builds both with the store's HA service for a BrokerController;
- :mod:`.status` GET_BROKER_HA_STATUS (5.x ``mqadmin haStatus``) and the lag figures admin and metrics show.

The CommitLog replication itself is a store concern: :mod:`rmqd.store.ha`.
"""
