"""Who becomes master (Java's ``DefaultElectPolicy``).

Candidates are the alive members of the SyncStateSet; when none is alive and unclean election is on,
every alive registered replica.  Among the candidates:

1. the old master, if it is a candidate and no other broker is asked for, stays (MASTER_STILL_EXIST);
2. an asked-for broker (admin ``electMaster -b``) wins if it is a candidate, else nobody does;
3. otherwise the best heartbeat wins: higher epoch, then higher max offset, then the lower
   ``electionPriority`` value, then the lower broker id; among the *fresh* candidates (a heartbeat at most half
   its time-out old) when there are any. Java ranks every alive candidate alike, so after a partition that cut the
   master off with one slave it can elect that slave, alive only until its own heartbeat expires a moment later;
   its SyncStateSet is then that slave alone and no member can be master until the partition heals (seen once in
   20 minority-partition rounds, RELIABILITY.md). Any in-sync replica is a safe choice: freshness only orders them.

Offsets are compared as Python integers: Java casts their difference to ``int`` (#10578), so two
replicas more than 2 GiB apart could elect the shorter log.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

from rmqd.controller.heartbeat import INT_MAX, BrokerLiveInfo

AlivePredicate = Callable[[str, str, int], bool]                  # (clusterName, brokerName, brokerId)
LiveInfoGetter = Callable[[str, str, int], Optional[BrokerLiveInfo]]


class DefaultElectPolicy:
    def __init__(self, alive: Optional[AlivePredicate] = None, live_info: Optional[LiveInfoGetter] = None,
                 fresh: Optional[AlivePredicate] = None) -> None:
        self.alive = alive
        self.live_info = live_info
        self.fresh = fresh

    def elect(self, cluster: str, broker_name: str, sync_state_brokers: Optional[Iterable[int]],
              all_replica_brokers: Optional[Iterable[int]], old_master: Optional[int],
              prefer_broker_id: Optional[int]) -> Optional[int]:
        """The new master's id, or None when no candidate qualifies."""
        if sync_state_brokers is not None:
            chosen = self._try_elect(cluster, broker_name, sync_state_brokers, old_master, prefer_broker_id)
            if chosen is not None:
                return chosen
        if all_replica_brokers is not None:
            return self._try_elect(cluster, broker_name, all_replica_brokers, old_master, prefer_broker_id)
        return None

    def _try_elect(self, cluster: str, broker_name: str, brokers: Iterable[int], old_master: Optional[int],
                   prefer: Optional[int]) -> Optional[int]:
        candidates = sorted(set(brokers))
        if self.alive is not None:
            candidates = [b for b in candidates if self.alive(cluster, broker_name, b)]
        if not candidates:
            return None
        if old_master in candidates and (prefer is None or prefer == old_master):
            return old_master
        if prefer is not None:
            return prefer if prefer in candidates else None
        if self.fresh is not None:
            candidates = [b for b in candidates if self.fresh(cluster, broker_name, b)] or candidates
        return min(candidates, key=lambda b: self._rank(cluster, broker_name, b))

    def _rank(self, cluster: str, broker_name: str, broker_id: int) -> tuple[int, int, int, int]:
        info = self.live_info(cluster, broker_name, broker_id) if self.live_info is not None else None
        if info is None:
            return (1, 1, INT_MAX, broker_id)
        return (-info.epoch, -info.maxOffset, info.electionPriority, broker_id)
