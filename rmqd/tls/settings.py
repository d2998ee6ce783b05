"""What TLS a process is asked for, under Java's names.

Remoting (broker, name server, controller) uses the keys of Java's ``TlsSystemConfig`` (``tls.server.mode``,
``tls.test.mode.enable``, ``tls.server.certPath`` ...; ``tls.enable`` and ``tls.client.*`` for the connections
rmqd opens itself); the gRPC endpoint uses the 5.x proxy's ``tlsTestModeEnable``, ``tlsCertPath``,
``tlsKeyPath``, ``tlsKeyPassword`` and the same ``tls.server.mode``.

Java reads ``TlsSystemConfig`` from JVM system properties, then lets ``tls.config.file`` (default
``/etc/rocketmq/tls.properties``, when it exists) override all of them but ``tls.server.mode`` and
``tls.enable``. rmqd has no system properties: it reads the same names from the environment (upper case, dots as
underscores: ``TLS_SERVER_MODE=enforcing``, as it reads ``rocketmq.broker.*``), then from broker.conf /
namesrv.conf (where the dotted names may be written as they are), then from ``tls.config.file`` as Java does.
"""
from __future__ import annotations

import dataclasses
import enum
import logging
import os
from typing import Mapping, Optional

log = logging.getLogger(__name__)

DEFAULT_CONFIG_FILE = "/etc/rocketmq/tls.properties"
DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000       # netty's SslHandler handshake timeout, which Java keeps

#: Java's TlsSystemConfig keys (system properties) with their defaults.
REMOTING_KEYS: dict[str, Optional[str]] = {
    "tls.server.mode": "permissive",
    "tls.enable": "false",
    "tls.config.file": DEFAULT_CONFIG_FILE,
    "tls.test.mode.enable": "true",
    "tls.server.need.client.auth": "none",
    "tls.server.keyPath": None,
    "tls.server.keyPassword": None,
    "tls.server.certPath": None,
    "tls.server.authClient": "false",
    "tls.server.trustCertPath": None,
    "tls.client.keyPath": None,
    "tls.client.keyPassword": None,
    "tls.client.certPath": None,
    "tls.client.authServer": "false",
    "tls.client.trustCertPath": None,
}
#: Keys ``tls.config.file`` may not set (Java's ``extractTlsConfigFromFile`` leaves them alone).
NOT_IN_CONFIG_FILE = frozenset({"tls.server.mode", "tls.enable", "tls.config.file"})
#: The 5.x proxy's keys (rmq-proxy.json; broker.conf here, which is rmqd's proxy configuration too), and rmqd's own
#: handshake bound.
GRPC_KEYS: dict[str, Optional[str]] = {
    "tlsTestModeEnable": "true",
    "tlsKeyPath": None,
    "tlsCertPath": None,
    "tlsKeyPassword": None,
}
RMQD_KEYS: dict[str, Optional[str]] = {"tlsHandshakeTimeoutMillis": str(DEFAULT_HANDSHAKE_TIMEOUT_MS)}
ALL_KEYS = frozenset(REMOTING_KEYS) | frozenset(GRPC_KEYS) | frozenset(RMQD_KEYS)
#: Never shown by GET_BROKER_CONFIG.
SECRET_KEYS = ("tls.server.keyPassword", "tls.client.keyPassword", "tlsKeyPassword")


class TlsMode(enum.Enum):
    """``tls.server.mode``: ``disabled`` (a TLS handshake is refused), ``permissive`` (TLS and plaintext on one
    port, Java's default), ``enforcing`` (plaintext is refused)."""

    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"

    @classmethod
    def parse(cls, value: Optional[str]) -> "TlsMode":
        """Java's ``TlsMode.parse``: a mode's name, anything else is ``permissive``. rmqd ignores case (Java
        would take ``ENFORCING`` for permissive) and says when it falls back."""
        text = (value or "").strip().lower()
        for mode in cls:
            if mode.value == text:
                return mode
        log.warning("tls.server.mode=%r is not disabled, permissive or enforcing: using permissive (as Java)", value)
        return cls.PERMISSIVE


def env_name(key: str) -> str:
    """The environment variable rmqd reads for Java's system property ``key``: ``tls.server.mode`` ->
    ``TLS_SERVER_MODE``."""
    return key.replace(".", "_").upper()


def _bool(value: Optional[str]) -> bool:
    return (value or "").strip().lower() == "true"


def _path(value: Optional[str]) -> Optional[str]:
    value = (value or "").strip()
    return os.path.abspath(os.path.expanduser(value)) if value else None


def _read_properties(path: str) -> dict[str, str]:
    from rmqd.config import parse_properties
    with open(path, encoding="utf-8") as f:
        return parse_properties(f.read())


def tls_properties(*configs: Mapping[str, str], environ: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """Every TLS key's value: the default, then the environment, then each of ``configs`` in turn (broker.conf /
    namesrv.conf properties), then ``tls.config.file`` for the keys Java reads from it."""
    env = os.environ if environ is None else environ
    values: dict[str, Optional[str]] = {**REMOTING_KEYS, **GRPC_KEYS, **RMQD_KEYS}
    for key in values:
        if env_name(key) in env:
            values[key] = env[env_name(key)]
    for config in configs:
        for key in ALL_KEYS:
            if key in config and config[key] is not None:
                values[key] = str(config[key])
    path = _path(values["tls.config.file"])
    if path and os.path.isfile(path):
        try:
            from_file = _read_properties(path)
        except OSError as exc:
            log.error("tls.config.file %s cannot be read (%s): TLS settings from the environment and the "
                      "configuration only", path, exc)
        else:
            for key in REMOTING_KEYS:
                if key in from_file and key not in NOT_IN_CONFIG_FILE:
                    values[key] = from_file[key]
    return {k: v for k, v in values.items() if v is not None}


@dataclasses.dataclass(frozen=True)
class ServerTlsSettings:
    """A remoting server's TLS (Java's ``TlsSystemConfig`` server side) or the gRPC endpoint's (the proxy's keys:
    test mode, certificate and key; no client authentication, as the proxy asks for none)."""

    mode: TlsMode = TlsMode.PERMISSIVE
    test_mode: bool = True
    cert_path: Optional[str] = None
    key_path: Optional[str] = None
    key_password: Optional[str] = None
    need_client_auth: str = "none"            # none | optional | require
    auth_client: bool = False
    trust_cert_path: Optional[str] = None
    handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_MS / 1000.0
    what: str = "remoting"                    # for log lines: remoting | gRPC

    @property
    def enabled(self) -> bool:
        return self.mode is not TlsMode.DISABLED

    def validate(self) -> None:
        """ValueError for a configuration that cannot make a TLS context (outside test mode: a certificate and
        its key are needed)."""
        if not self.enabled or self.test_mode:
            return
        names = ("tlsCertPath", "tlsKeyPath") if self.what == "gRPC" else ("tls.server.certPath", "tls.server.keyPath")
        for name, path in zip(names, (self.cert_path, self.key_path)):
            if not path:
                raise ValueError(f"TLS ({self.what}): {name} is needed when test mode is off")
            if not os.path.isfile(path):
                raise ValueError(f"TLS ({self.what}): {name} {path} does not exist")
        if self.need_client_auth not in ("none", "optional", "require"):
            raise ValueError(f"tls.server.need.client.auth must be none, optional or require, "
                             f"not {self.need_client_auth!r}")


@dataclasses.dataclass(frozen=True)
class ClientTlsSettings:
    """The connections rmqd opens (broker -> name server, slave -> master, controller -> broker):
    ``tls.enable`` and ``tls.client.*``, as Java's ``NettyRemotingClient``."""

    enable: bool = False
    test_mode: bool = True
    cert_path: Optional[str] = None
    key_path: Optional[str] = None
    key_password: Optional[str] = None
    auth_server: bool = False
    trust_cert_path: Optional[str] = None


def _timeout_s(props: Mapping[str, str]) -> float:
    raw = props.get("tlsHandshakeTimeoutMillis", str(DEFAULT_HANDSHAKE_TIMEOUT_MS))
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if value <= 0:
        log.error("tlsHandshakeTimeoutMillis=%r is not a positive number: using %d", raw,
                  DEFAULT_HANDSHAKE_TIMEOUT_MS)
        value = DEFAULT_HANDSHAKE_TIMEOUT_MS
    return value / 1000.0


def remoting_server_settings(props: Mapping[str, str]) -> ServerTlsSettings:
    """The remoting server's settings from :func:`tls_properties`."""
    need = str(props.get("tls.server.need.client.auth", "none")).strip().lower() or "none"
    return ServerTlsSettings(
        mode=TlsMode.parse(props.get("tls.server.mode")), test_mode=_bool(props.get("tls.test.mode.enable")),
        cert_path=_path(props.get("tls.server.certPath")), key_path=_path(props.get("tls.server.keyPath")),
        key_password=props.get("tls.server.keyPassword") or None, need_client_auth=need,
        auth_client=_bool(props.get("tls.server.authClient")),
        trust_cert_path=_path(props.get("tls.server.trustCertPath")), handshake_timeout_s=_timeout_s(props))


def grpc_server_settings(props: Mapping[str, str]) -> ServerTlsSettings:
    """The gRPC endpoint's settings from :func:`tls_properties` (the proxy's keys, the shared mode)."""
    return ServerTlsSettings(
        mode=TlsMode.parse(props.get("tls.server.mode")), test_mode=_bool(props.get("tlsTestModeEnable")),
        cert_path=_path(props.get("tlsCertPath")), key_path=_path(props.get("tlsKeyPath")),
        key_password=props.get("tlsKeyPassword") or None, handshake_timeout_s=_timeout_s(props), what="gRPC")


def client_settings(props: Mapping[str, str]) -> ClientTlsSettings:
    """The settings of the connections rmqd opens, from :func:`tls_properties`."""
    return ClientTlsSettings(
        enable=_bool(props.get("tls.enable")), test_mode=_bool(props.get("tls.test.mode.enable")),
        cert_path=_path(props.get("tls.client.certPath")), key_path=_path(props.get("tls.client.keyPath")),
        key_password=props.get("tls.client.keyPassword") or None,
        auth_server=_bool(props.get("tls.client.authServer")),
        trust_cert_path=_path(props.get("tls.client.trustCertPath")))


def tls_keys_of(props: Mapping[str, str]) -> dict[str, str]:
    """The TLS keys among ``props`` (``rmqd serve`` gives broker.conf's to its name server too: one process, as
    Java's system properties are one JVM's)."""
    return {k: str(v) for k, v in props.items() if k in ALL_KEYS}
