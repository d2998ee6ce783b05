"""Access control 2.0's settings: 5.x's ``AuthConfig``, read from the same broker.conf as everything else.

=========================================  ==========  ===========================================================
key                                        default     meaning
=========================================  ==========  ===========================================================
``authenticationEnabled``                  false       every request must be signed by a known, enabled user
``authorizationEnabled``                   false       every request is checked against its user's policies
``initAuthenticationUser``                 (none)      ``{"username":..,"password":..}``: a super user made at start
``innerClientAuthenticationCredentials``   (none)      ``{"accessKey":..,"secretKey":..}``: a super user made at
                                                       start, and what this broker signs its own requests with
                                                       (to name servers, its master, other brokers)
``authenticationWhitelist``                (none)      request codes (or gRPC request names) not authenticated
``authorizationWhitelist``                 (none)      request codes (or gRPC request names) not authorized
``migrateAuthFromV1Enabled``               false       at start, plain_acl.yml's accounts become users and ACLs
=========================================  ==========  ===========================================================

5.x also reads ``authenticationProvider``, ``authenticationMetadataProvider``, ``authenticationStrategy``,
``authorizationProvider``, ``authorizationMetadataProvider``, ``authorizationStrategy`` and the cache sizes; rmqd
accepts them (5.x's class names are what operators copy into broker.conf) and has one implementation of each: the
metadata lives in the store's config directory, whether or not a provider class is named (5.x answers "The
authenticationMetadataProvider is not configured" to everything without one), and a change is in force for the
next request (5.x's stateful strategy may cache a decision for up to a minute).
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Mapping, Optional, Union

import orjson

log = logging.getLogger(__name__)

KNOWN_PROVIDERS = {
    "authenticationProvider": ("org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",),
    "authorizationProvider": ("org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",),
    "authenticationMetadataProvider": (
        "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
        "org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider"),
    "authorizationMetadataProvider": (
        "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider",
        "org.apache.rocketmq.proxy.auth.ProxyAuthorizationMetadataProvider"),
    "authenticationStrategy": (
        "org.apache.rocketmq.auth.authentication.strategy.StatelessAuthenticationStrategy",
        "org.apache.rocketmq.auth.authentication.strategy.StatefulAuthenticationStrategy"),
    "authorizationStrategy": (
        "org.apache.rocketmq.auth.authorization.strategy.StatelessAuthorizationStrategy",
        "org.apache.rocketmq.auth.authorization.strategy.StatefulAuthorizationStrategy"),
}


@dataclass
class AuthConfig:
    """The 5.x ``AuthConfig`` keys (see the module docstring); ``clusterName`` is the broker's cluster."""

    authenticationEnabled: bool = False
    authenticationProvider: str = ""
    authenticationMetadataProvider: str = ""
    authenticationStrategy: str = ""
    authenticationWhitelist: str = ""
    initAuthenticationUser: str = ""
    innerClientAuthenticationCredentials: str = ""
    authorizationEnabled: bool = False
    authorizationProvider: str = ""
    authorizationMetadataProvider: str = ""
    authorizationStrategy: str = ""
    authorizationWhitelist: str = ""
    migrateAuthFromV1Enabled: bool = False
    userCacheMaxNum: int = 1000
    userCacheExpiredSecond: int = 600
    userCacheRefreshSecond: int = 60
    aclCacheMaxNum: int = 1000
    aclCacheExpiredSecond: int = 600
    aclCacheRefreshSecond: int = 60
    statefulAuthenticationCacheMaxNum: int = 10000
    statefulAuthenticationCacheExpiredSecond: int = 60
    statefulAuthorizationCacheMaxNum: int = 10000
    statefulAuthorizationCacheExpiredSecond: int = 60
    clusterName: str = "DefaultCluster"

    @classmethod
    def from_properties(cls, props: Mapping[str, object], cluster_name: str = "DefaultCluster") -> "AuthConfig":
        """From broker.conf's keys (Java's ``properties2Object``: a boolean is true only for ``true``)."""
        cfg = cls(clusterName=cluster_name)
        for f in dataclasses.fields(cls):
            if f.name == "clusterName" or f.name not in props or props[f.name] is None:
                continue
            raw = props[f.name]
            if f.type == "bool":
                value: Union[bool, int, str] = raw if isinstance(raw, bool) else str(raw).strip().lower() == "true"
            elif f.type == "int":
                value = int(str(raw).strip())
            else:
                value = str(raw).strip()
            setattr(cfg, f.name, value)
        for key, known in KNOWN_PROVIDERS.items():
            named = getattr(cfg, key)
            if named and named not in known:
                log.warning("%s=%s: rmqd has its own implementation and uses it (it knows %s)", key, named,
                            ", ".join(known))
        return cfg

    @property
    def enabled(self) -> bool:
        return self.authenticationEnabled or self.authorizationEnabled

    @staticmethod
    def _whitelist(text: str) -> frozenset[str]:
        return frozenset(p.strip() for p in text.split(",") if p.strip())

    @property
    def authentication_whitelist(self) -> frozenset[str]:
        return self._whitelist(self.authenticationWhitelist)

    @property
    def authorization_whitelist(self) -> frozenset[str]:
        return self._whitelist(self.authorizationWhitelist)

    def init_user(self) -> Optional[dict[str, object]]:
        """``initAuthenticationUser`` parsed (a JSON object with username, password), or None when unset."""
        return _json_object(self.initAuthenticationUser, "initAuthenticationUser")

    def inner_credentials(self) -> Optional[tuple[str, str]]:
        """(accessKey, secretKey) of ``innerClientAuthenticationCredentials``, or None when unset."""
        d = _json_object(self.innerClientAuthenticationCredentials, "innerClientAuthenticationCredentials")
        if d is None:
            return None
        ak, sk = d.get("accessKey"), d.get("secretKey")
        if not ak or not sk:
            raise ValueError("innerClientAuthenticationCredentials needs accessKey and secretKey")
        return str(ak), str(sk)


def _json_object(text: str, key: str) -> Optional[dict[str, object]]:
    if not text or not text.strip():
        return None
    try:
        d = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{key} is not JSON: {exc}") from None
    if not isinstance(d, dict):
        raise ValueError(f"{key} must be a JSON object")
    return d


def auth_config_keys() -> frozenset[str]:
    """The broker.conf keys this module reads (kept in BrokerConfig.extra, not reported as unused)."""
    return frozenset(f.name for f in dataclasses.fields(AuthConfig) if f.name != "clusterName")
