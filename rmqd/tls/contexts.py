"""SSL contexts for rmqd's servers and clients, from :mod:`rmqd.tls.settings`.

Building one reads files and may make the test-mode certificate (:mod:`rmqd.tls.certificates`): a server's is made
on its first TLS connection (or at start in enforcing mode) in the loop's default executor, once.
"""
from __future__ import annotations

import asyncio
import logging
import os
import ssl
import tempfile
from typing import Mapping, Optional

from rmqd.tls.certificates import split_pem, self_signed_bundle, unencrypted_key_pem
from rmqd.tls.settings import (ClientTlsSettings, ServerTlsSettings, TlsMode, client_settings, remoting_server_settings,
                               tls_properties)

log = logging.getLogger(__name__)

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}


def _configured(path: Optional[str], name: str) -> str:
    """A certificate or key path the settings must hold outside test mode (``validate()`` checked it)."""
    if not path:
        raise ValueError(f"TLS: {name} is needed when test mode is off")
    return path


def _load_bundle(ctx: ssl.SSLContext, path: str, bundle: bytes) -> None:
    if path:
        ctx.load_cert_chain(path)
        return
    fd, tmp = tempfile.mkstemp(suffix=".pem")      # the ssl module loads from files only
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(bundle)
        ctx.load_cert_chain(tmp)
    finally:
        os.unlink(tmp)


def server_context(settings: ServerTlsSettings, alpn: Optional[list[str]] = None) -> ssl.SSLContext:
    """The server side (blocking). Test mode: the self-signed certificate, no client certificate asked for.
    Otherwise the certificate and key (with ``keyPassword``), and client certificates as
    ``tls.server.need.client.auth`` says, verified against ``tls.server.trustCertPath`` (else the system's CAs)."""
    settings.validate()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if alpn:
        ctx.set_alpn_protocols(alpn)
    if settings.test_mode:
        _load_bundle(ctx, *self_signed_bundle())
        return ctx
    ctx.load_cert_chain(_configured(settings.cert_path, "certificate"), settings.key_path, settings.key_password)
    ctx.verify_mode = _CLIENT_AUTH[settings.need_client_auth]
    if ctx.verify_mode != ssl.CERT_NONE:
        if settings.trust_cert_path:
            ctx.load_verify_locations(settings.trust_cert_path)
        else:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        if not settings.auth_client:
            log.info("TLS (%s): tls.server.authClient=false, but rmqd verifies the client certificates it asks for "
                     "(tls.server.need.client.auth=%s) against %s", settings.what, settings.need_client_auth,
                     settings.trust_cert_path or "the system's CAs")
    return ctx


def client_context(settings: ClientTlsSettings) -> ssl.SSLContext:
    """The client side (blocking), as Java's ``TlsHelper`` for clients: the server's certificate is not checked in
    test mode or without ``tls.client.authServer``; no host-name check (Java's client makes none)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    if settings.test_mode or not settings.auth_server:
        ctx.verify_mode = ssl.CERT_NONE
    elif settings.trust_cert_path:
        ctx.load_verify_locations(settings.trust_cert_path)
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if not settings.test_mode and settings.cert_path:
        ctx.load_cert_chain(settings.cert_path, settings.key_path, settings.key_password)
    return ctx


def grpc_key_and_chain(settings: ServerTlsSettings) -> tuple[bytes, bytes]:
    """(private key PEM, certificate chain PEM) for ``grpc.ssl_server_credentials`` (blocking)."""
    settings.validate()
    if settings.test_mode:
        _, bundle = self_signed_bundle()
        return split_pem(bundle)
    with open(_configured(settings.cert_path, "certificate"), "rb") as f:
        chain = f.read()
    return unencrypted_key_pem(_configured(settings.key_path, "key"), settings.key_password), chain


class ServerTls:
    """One server's TLS: its settings and its SSL context, built once, off the loop, when first needed."""

    def __init__(self, settings: ServerTlsSettings, alpn: Optional[list[str]] = None) -> None:
        self.settings = settings
        self.alpn = alpn
        self._context: Optional[ssl.SSLContext] = None
        self._building: Optional[asyncio.Future[ssl.SSLContext]] = None

    @property
    def mode(self) -> TlsMode:
        return self.settings.mode

    async def context(self) -> ssl.SSLContext:
        """The SSL context (made in the default executor the first time; concurrent callers share that)."""
        if self._context is not None:
            return self._context
        if self._building is None:
            loop = asyncio.get_running_loop()
            self._building = loop.run_in_executor(None, server_context, self.settings, self.alpn)
        try:
            context = await asyncio.shield(self._building)
        except Exception:
            self._building = None               # a later connection tries again (a fixed file, say)
            raise
        self._context = context
        return context


def remoting_server_tls(*configs: Mapping[str, str]) -> ServerTls:
    """A remoting server's TLS from the environment, ``configs`` (broker.conf / namesrv.conf properties, later ones
    winning) and ``tls.config.file``."""
    return ServerTls(remoting_server_settings(tls_properties(*configs)))


class ClientTls:
    """The TLS of the connections a process opens (``tls.enable``): the client SSL context, built once off the
    loop; ``None`` from :meth:`context` when TLS is off."""

    def __init__(self, settings: ClientTlsSettings) -> None:
        self.settings = settings
        self._context: Optional[ssl.SSLContext] = None

    async def context(self) -> Optional[ssl.SSLContext]:
        if not self.settings.enable:
            return None
        if self._context is None:
            self._context = await asyncio.get_running_loop().run_in_executor(None, client_context, self.settings)
        return self._context


def remoting_client_tls(*configs: Mapping[str, str]) -> ClientTls:
    """The outgoing connections' TLS (``tls.enable``, ``tls.client.*``) from the same sources as
    :func:`remoting_server_tls`."""
    return ClientTls(client_settings(tls_properties(*configs)))


_process_client_contexts: dict[ClientTlsSettings, ssl.SSLContext] = {}


def process_client_context() -> Optional[ssl.SSLContext]:
    """The client SSL context of this process's blocking remoting clients (``rmqd admin``, the console): from the
    environment and ``tls.config.file`` (``TLS_ENABLE=true``, as mqadmin's ``-Dtls.enable=true``); None when TLS is
    off. One context per distinct setting."""
    settings = client_settings(tls_properties())
    if not settings.enable:
        return None
    context = _process_client_contexts.get(settings)
    if context is None:
        context = _process_client_contexts[settings] = client_context(settings)
    return context
