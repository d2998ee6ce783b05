"""RoleManager: the one owner of this broker's place in its replica group (Java's ``ReplicasManager`` shape).

It holds the role (ASYNC_MASTER / SYNC_MASTER / SLAVE), the brokerId, the master's remoting and HA addresses and
the epoch (0 in 4.x master/slave; the controller mode of 5.x moves it), and pushes every change to what depends on
it: the store layer (SYNC_MASTER waits, refused puts), the HA service (client on or off, master address), and the
listeners the broker registers (the send lane, the master-only services). Processors ask it; nobody keeps a copy.

Java's ``BrokerStartup`` rules apply at construction: a master's brokerId is forced to 0, a slave's must be > 0.

It also remembers its role switches (when, why: :data:`SWITCH_CAUSES`) for the console and the metrics, read
with :meth:`RoleManager.snapshot`.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional, TypedDict

from rmqd.config import BrokerRole

if TYPE_CHECKING:
    from rmqd.config import BrokerConfig

log = logging.getLogger(__name__)

MASTER_ID = 0

ELECTED_MASTER = "elected_master"        # the controller (or a role change) made this broker master
BECAME_SLAVE = "became_slave"            # a master demoted, or a slave given its master at startup
FOLLOWED_NEW_MASTER = "followed_new_master"   # a slave that follows another master at a newer epoch
FENCED_LEASE_LOST = "fenced_lease_lost"  # controller mode: a master without the controller's confirmation
LEASE_REGAINED = "lease_regained"        # ... confirmed again, takes writes again
SWITCH_CAUSES = (ELECTED_MASTER, BECAME_SLAVE, FOLLOWED_NEW_MASTER, FENCED_LEASE_LOST, LEASE_REGAINED)
SWITCH_HISTORY = 16


class RoleSwitchJson(TypedDict):
    """:class:`RoleSwitch` as the console and the metrics read it."""

    time_ms: int
    cause: str
    role: str
    broker_id: int
    epoch: int


class RoleSnapshot(TypedDict):
    """:meth:`RoleManager.snapshot`."""

    role: str
    brokerId: int
    epoch: int
    fenced: bool
    masterAddr: Optional[str]
    lastSwitch: Optional[RoleSwitchJson]
    switches: list[RoleSwitchJson]
    switchCounts: dict[str, int]


@dataclass(frozen=True)
class RoleSwitch:
    """One role switch: wall-clock time, cause (one of :data:`SWITCH_CAUSES`), and the state it led to."""

    time_ms: int
    cause: str
    role: str
    broker_id: int
    epoch: int

    def to_json(self) -> RoleSwitchJson:
        return {"time_ms": self.time_ms, "cause": self.cause, "role": self.role, "broker_id": self.broker_id,
                "epoch": self.epoch}


class RoleManager:
    """Role, brokerId, master addresses and epoch; see the module docstring."""

    def __init__(self, config: "BrokerConfig") -> None:
        self._config = config
        role = BrokerRole.parse(config.brokerRole)
        broker_id = int(config.brokerId)
        if role.is_master:
            if broker_id != MASTER_ID:
                log.info("brokerRole %s: brokerId %d set to 0, as Java's BrokerStartup does", role.value, broker_id)
            broker_id = MASTER_ID
        elif broker_id <= 0:
            raise ValueError("Slave's brokerId must be > 0")
        self._role = role
        self._broker_id = broker_id
        self.epoch = 0
        self.fenced = False              # controller mode: a master without a lease takes no writes
        fixed = str(config.haMasterAddress or "").strip()
        self.ha_master_address_fixed = fixed if len(fixed) >= 6 else None   # Java: length() >= 6
        self.master_addr: Optional[str] = None
        self.master_ha_addr: Optional[str] = self.ha_master_address_fixed
        self._lock = threading.Lock()
        self._listeners: list[Callable[["RoleManager"], None]] = []
        self._master_listeners: list[Callable[[Optional[str], Optional[str]], None]] = []
        self._switches: deque[RoleSwitch] = deque(maxlen=SWITCH_HISTORY)
        self.switch_counts: dict[str, int] = dict.fromkeys(SWITCH_CAUSES, 0)
        self._write_config()

    # ------------------------------------------------------------------ reads
    @property
    def role(self) -> BrokerRole:
        return self._role

    @property
    def broker_id(self) -> int:
        return self._broker_id

    @property
    def is_slave(self) -> bool:
        return self._role is BrokerRole.SLAVE

    @property
    def is_master(self) -> bool:
        return self._role is not BrokerRole.SLAVE

    @property
    def is_sync_master(self) -> bool:
        return self._role is BrokerRole.SYNC_MASTER

    @property
    def last_switch(self) -> Optional[RoleSwitch]:
        return self._switches[-1] if self._switches else None

    def snapshot(self) -> RoleSnapshot:
        """A read-only copy of the role state and the switch history (newest last) for views and metrics."""
        with self._lock:
            switches = [sw.to_json() for sw in self._switches]
            return {"role": self._role.value, "brokerId": self._broker_id, "epoch": self.epoch,
                    "fenced": self.fenced, "masterAddr": self.master_addr,
                    "lastSwitch": switches[-1] if switches else None, "switches": switches,
                    "switchCounts": dict(self.switch_counts)}

    def _record(self, cause: str) -> None:
        """Called with ``_lock`` held."""
        self._switches.append(RoleSwitch(int(time.time() * 1000), cause, self._role.value, self._broker_id,
                                         self.epoch))
        self.switch_counts[cause] += 1

    # ------------------------------------------------------------------ listeners
    def on_role_change(self, fn: Callable[["RoleManager"], None], call_now: bool = True) -> None:
        """``fn(self)`` after every role change (and now, with ``call_now``)."""
        self._listeners.append(fn)
        if call_now:
            fn(self)

    def on_master_change(self, fn: Callable[[Optional[str], Optional[str]], None]) -> None:
        """``fn(master_addr, master_ha_addr)`` when the master's addresses change."""
        self._master_listeners.append(fn)

    # ------------------------------------------------------------------ changes
    def update_master(self, master_addr: Optional[str], ha_server_addr: Optional[str]) -> None:
        """From the name server's answer to a registration (Java's doRegisterBrokerAll): the master's remoting
        address for SlaveSynchronize (None while the master is away) and, unless ``haMasterAddress`` pins it, its
        HA address (kept when the answer has none, so the slave keeps reconnecting to it)."""
        with self._lock:
            if not self.is_slave:
                return                          # a master follows nobody
            ha = self.ha_master_address_fixed or ha_server_addr or self.master_ha_addr
            master_addr = master_addr or None
            if master_addr == self.master_addr and ha == self.master_ha_addr:
                return
            self.master_addr = master_addr
            self.master_ha_addr = ha
        log.info("master of %s: %s (HA %s)", self._config.brokerName, self.master_addr, self.master_ha_addr)
        self._notify_master()

    def change_to_master(self, role: BrokerRole = BrokerRole.SYNC_MASTER) -> None:
        """Become the master (Java's ``BrokerController.changeToMaster``): brokerId 0, no master to follow."""
        if role is BrokerRole.SLAVE:
            return
        with self._lock:
            self._role = role
            self._broker_id = MASTER_ID
            self.master_addr = None
            self.master_ha_addr = None
            self._write_config()
            self._record(ELECTED_MASTER)
        log.info("%s is now %s", self._config.brokerName, role.value)
        self._notify()
        self._notify_master()

    def change_to_slave(self, broker_id: int) -> None:
        """Become a slave (Java's ``changeToSlave``: brokerId 0 becomes 1)."""
        with self._lock:
            was_master = self._role is not BrokerRole.SLAVE
            self._role = BrokerRole.SLAVE
            self._broker_id = broker_id if broker_id > 0 else 1
            self.master_ha_addr = self.ha_master_address_fixed
            self._write_config()
            last = self._switches[-1] if self._switches else None
            if was_master:
                self._record(BECAME_SLAVE)
            elif self.epoch > 0 and (last is None or last.epoch != self.epoch):    # a new master's epoch
                self._record(BECAME_SLAVE if last is None else FOLLOWED_NEW_MASTER)
        log.info("%s is now SLAVE (brokerId %d)", self._config.brokerName, self._broker_id)
        self._notify()

    def set_fenced(self, fenced: bool) -> None:
        """Controller mode: fence (or unfence) this broker's writes; the role listeners hear it."""
        if fenced == self.fenced:
            return
        with self._lock:
            self.fenced = fenced
            last = self._switches[-1] if self._switches else None
            if self.is_master and fenced:
                self._record(FENCED_LEASE_LOST)
            elif self.is_master and last is not None and last.cause == FENCED_LEASE_LOST:
                self._record(LEASE_REGAINED)
        log.warning("%s is %s", self._config.brokerName, "fenced: it refuses writes" if fenced else "unfenced")
        self._notify()

    def _write_config(self) -> None:
        """GET_BROKER_CONFIG reports what is in effect."""
        self._config.brokerRole = self._role.value
        self._config.brokerId = self._broker_id

    def _notify(self) -> None:
        for fn in list(self._listeners):
            try:
                fn(self)
            except Exception:
                log.exception("role change listener %r failed", fn)

    def _notify_master(self) -> None:
        for fn in list(self._master_listeners):
            try:
                fn(self.master_addr, self.master_ha_addr)
            except Exception:
                log.exception("master change listener %r failed", fn)
