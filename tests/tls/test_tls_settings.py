"""TLS settings under Java's names: the environment stands for Java's system properties, broker.conf / namesrv.conf
come next, ``tls.config.file`` overrides all but the mode and ``tls.enable`` (Java's ``extractTlsConfigFromFile``);
``TlsMode.parse`` falls back to permissive as Java's."""
from __future__ import annotations

import pytest

from rmqd.tls.settings import (TlsMode, client_settings, env_name, grpc_server_settings, remoting_server_settings,
                               tls_properties)


def test_environment_names_of_javas_system_properties():
    assert env_name("tls.server.mode") == "TLS_SERVER_MODE"
    assert env_name("tls.server.need.client.auth") == "TLS_SERVER_NEED_CLIENT_AUTH"
    assert env_name("tls.server.keyPath") == "TLS_SERVER_KEYPATH"


def test_defaults_are_javas():
    s = remoting_server_settings(tls_properties(environ={}))
    assert (s.mode, s.test_mode, s.need_client_auth, s.auth_client, s.handshake_timeout_s) == \
        (TlsMode.PERMISSIVE, True, "none", False, 10.0)
    assert not client_settings(tls_properties(environ={})).enable
    g = grpc_server_settings(tls_properties(environ={}))
    assert (g.mode, g.test_mode, g.what) == (TlsMode.PERMISSIVE, True, "gRPC")


def test_precedence_environment_then_config_then_tls_config_file(tmp_path):
    tls_file = tmp_path / "tls.properties"
    tls_file.write_text("tls.server.mode=disabled\ntls.test.mode.enable=false\ntls.server.certPath=/from/file.pem\n"
                        "tls.enable=true\n")
    env = {"TLS_SERVER_MODE": "enforcing", "TLS_SERVER_KEYPATH": "/from/env.key", "TLS_CONFIG_FILE": str(tls_file),
           "TLS_SERVER_CERTPATH": "/from/env.pem"}
    props = tls_properties({"tls.server.keyPath": "/from/conf.key", "tlsCertPath": "/grpc.pem"}, environ=env)
    s = remoting_server_settings(props)
    assert s.mode is TlsMode.ENFORCING                 # the file may not set the mode (as Java)
    assert s.test_mode is False                        # ... but may set the rest
    assert s.cert_path == "/from/file.pem"
    assert s.key_path == "/from/conf.key"              # broker.conf over the environment
    assert client_settings(props).enable is False      # nor tls.enable
    assert grpc_server_settings(props).cert_path == "/grpc.pem"


@pytest.mark.parametrize("text, mode", [("disabled", TlsMode.DISABLED), ("enforcing", TlsMode.ENFORCING),
                                        ("permissive", TlsMode.PERMISSIVE), ("ENFORCING", TlsMode.ENFORCING),
                                        ("strict", TlsMode.PERMISSIVE), ("", TlsMode.PERMISSIVE)])
def test_mode_parse(text, mode, caplog):
    assert TlsMode.parse(text) is mode
    if text.lower() not in ("disabled", "enforcing", "permissive"):
        assert "using permissive" in caplog.text


def test_outside_test_mode_a_certificate_is_needed(tmp_path):
    s = remoting_server_settings(tls_properties({"tls.test.mode.enable": "false"}, environ={}))
    with pytest.raises(ValueError, match="tls.server.certPath is needed"):
        s.validate()
    g = grpc_server_settings(tls_properties({"tlsTestModeEnable": "false", "tlsCertPath": str(tmp_path / "no.pem"),
                                             "tlsKeyPath": str(tmp_path / "no.key")}, environ={}))
    with pytest.raises(ValueError, match="tlsCertPath .* does not exist"):
        g.validate()


def test_tls_keys_in_broker_conf_are_not_reported_unused(caplog):
    from rmqd.config import BrokerConfig
    with caplog.at_level("INFO", logger="rmqd.config"):
        BrokerConfig().update({"tls.server.mode": "enforcing", "tlsTestModeEnable": "false"}, source="broker.conf")
    assert "keeping unknown properties" not in caplog.text
