"""Certificates: the test-mode self-signed one, and key files as the gRPC core wants them.

Test mode (``tls.test.mode.enable`` / ``tlsTestModeEnable``, Java's default) serves a self-signed certificate, as
Java's ``SelfSignedCertificate``. Java makes a new one in every JVM; rmqd makes one the first time a process needs
it and keeps it (key and certificate in one PEM file, mode 0600) in ``~/.rmqd/tls/test-mode.pem``
(``$RMQD_TLS_DIR``), so later starts load it without ``cryptography`` (about 15 MB and 0.2 s, imported here only).
Clients in test mode do not verify it. An ECDSA P-256 key: cheap handshakes, made in milliseconds.
"""
from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import socket
import tempfile
from typing import Optional

log = logging.getLogger(__name__)

BUNDLE_NAME = "test-mode.pem"
VALID_DAYS = 3650


def self_signed_dir() -> str:
    return os.environ.get("RMQD_TLS_DIR") or os.path.join(os.path.expanduser("~"), ".rmqd", "tls")


def split_pem(bundle: bytes) -> tuple[bytes, bytes]:
    """(private key PEM, certificate chain PEM) of a PEM file holding both."""
    key: list[bytes] = []
    certs: list[bytes] = []
    block: list[bytes] = []
    for line in bundle.splitlines(keepends=True):
        if line.startswith(b"-----BEGIN "):
            block = [line]
        elif block:
            block.append(line)
            if line.startswith(b"-----END "):
                (certs if b"CERTIFICATE" in block[0] else key).append(b"".join(block))
                block = []
    return b"".join(key), b"".join(certs)


def make_self_signed() -> bytes:
    """A new key and self-signed certificate (CN=localhost; SANs localhost, this host's name, 127.0.0.1, ::1) as
    one PEM (key first)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "rmqd TLS test mode")])
    sans: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                    x509.IPAddress(ipaddress.ip_address("::1"))]
    host = socket.gethostname()
    if host and host != "localhost":
        sans.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return (key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
            + cert.public_bytes(serialization.Encoding.PEM))


def _usable(bundle: bytes) -> bool:
    """Whether ``bundle`` holds a key and a certificate the ssl module loads and that is not about to expire."""
    import ssl
    key, cert = split_pem(bundle)
    if not key or not cert:
        return False
    with tempfile.NamedTemporaryFile("wb", suffix=".pem") as f:
        f.write(bundle)
        f.flush()
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(f.name)
            # the certificate is its own CA (CA:TRUE): the ssl module reads its dates without cryptography
            reader = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            reader.load_verify_locations(cadata=cert.decode("ascii"))
            infos = reader.get_ca_certs()
        except (ssl.SSLError, OSError, ValueError, UnicodeDecodeError):
            return False
    if not infos:
        return False
    not_after_text = infos[0]["notAfter"]
    if not isinstance(not_after_text, str):
        return False
    not_after = ssl.cert_time_to_seconds(not_after_text)
    return not_after - datetime.datetime.now().timestamp() > 7 * 86400


def self_signed_bundle() -> tuple[str, bytes]:
    """(path, PEM) of the test-mode key and certificate: the kept one, else a new one written there. Blocking (file
    I/O, maybe key generation): call it off the event loop."""
    directory = self_signed_dir()
    path = os.path.join(directory, BUNDLE_NAME)
    try:
        with open(path, "rb") as f:
            bundle = f.read()
        if _usable(bundle):
            return path, bundle
        log.info("TLS test mode: %s is unusable or expires soon; making a new self-signed certificate", path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("TLS test mode: cannot read %s (%s); making a new self-signed certificate", path, exc)
    bundle = make_self_signed()
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".test-mode-")
        with os.fdopen(fd, "wb") as f:            # mkstemp: mode 0600
            f.write(bundle)
        os.replace(tmp, path)                     # atomic: several processes may race; each file is whole
        log.info("TLS test mode: made a self-signed certificate (kept in %s)", path)
        return path, bundle
    except OSError as exc:
        log.warning("TLS test mode: cannot keep the self-signed certificate in %s (%s); it lives in this process "
                    "only", directory, exc)
        return "", bundle


def unencrypted_key_pem(key_path: str, password: Optional[str]) -> bytes:
    """The private key of ``key_path`` as unencrypted PEM (the gRPC core takes no password): the file itself when
    no password is given."""
    with open(key_path, "rb") as f:
        data = f.read()
    if not password:
        return data
    from cryptography.hazmat.primitives import serialization
    key = serialization.load_pem_private_key(data, password.encode())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
