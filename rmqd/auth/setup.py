"""Access control 2.0 for one broker: its settings, store, admin operations, guard and request hook."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Optional

from rmqd.auth.config import AuthConfig
from rmqd.auth.guard import AuthGuard
from rmqd.auth.hook import AuthRequestHook, auth_request_hook
from rmqd.auth.metadata import AuthMetadataManager
from rmqd.auth.store import AuthStore

if TYPE_CHECKING:
    from rmqd.remoting.command import RemotingCommand

log = logging.getLogger(__name__)

#: Signs a request this broker sends (a RemotingClient's ``signer``).
Signer = Callable[["RemotingCommand"], None]


@dataclass
class BrokerAuth:
    """``guard`` and ``hook`` are None when neither authentication nor authorization is on (the users and ACLs
    are kept and administered all the same, as 5.x does)."""

    config: AuthConfig
    store: AuthStore
    manager: AuthMetadataManager
    guard: Optional[AuthGuard]
    hook: Optional[AuthRequestHook]

    def load(self, acl_file: Optional[str] = None) -> None:
        """Blocking, before the broker serves: read the store, make the start-up users, migrate plain_acl.yml
        when asked (5.x's order: the users first)."""
        self.store.load()
        self.manager.init_users(self.config)
        if self.config.migrateAuthFromV1Enabled:
            from rmqd.auth.migration import migrate, plain_acl_accounts
            migrate(self.manager, plain_acl_accounts(acl_file))

    def request_signer(self) -> Optional[Signer]:
        """The RemotingClient ``signer`` of this broker's own requests (to name servers, its master, other brokers):
        ``innerClientAuthenticationCredentials``, as 5.x's BrokerOuterAPI signs; None without them."""
        return request_signer(self.config.inner_credentials())


def build_auth(broker_properties: Mapping[str, object], cluster_name: str, config_dir: str) -> BrokerAuth:
    cfg = AuthConfig.from_properties(broker_properties, cluster_name)
    store = AuthStore(config_dir)
    manager = AuthMetadataManager(store)
    guard = AuthGuard(cfg, store) if cfg.enabled else None
    if guard is not None:
        log.info("auth: authentication %s, authorization %s", "on" if cfg.authenticationEnabled else "off",
                 "on" if cfg.authorizationEnabled else "off")
    return BrokerAuth(cfg, store, manager, guard, auth_request_hook(guard) if guard is not None else None)


def request_signer(credentials: Optional[tuple[str, str]]) -> Optional[Signer]:
    """A RemotingClient ``signer`` for the broker's own requests, or None without credentials."""
    if credentials is None:
        return None
    from rmqd.acl.signer import sign_command
    ak, sk = credentials
    return lambda cmd: sign_command(cmd, ak, sk)
