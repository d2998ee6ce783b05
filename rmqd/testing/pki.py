"""A throwaway certificate authority for TLS tests: a CA, a server certificate for localhost / 127.0.0.1, client
certificates (good, expired, or from another CA), written as PEM files (keys PKCS#8, as Java's netty wants them).

    pki = TestPki(tmp_path)
    pki.server            # Issued: .cert, .key (paths)
    pki.client("good"); pki.client("old", expired=True); pki.client("stranger", untrusted=True)
"""
from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec


@dataclasses.dataclass(frozen=True)
class Issued:
    cert: str
    key: str


class TestPki:
    """A CA in ``directory`` (``ca.pem``) and what it issues."""

    __test__ = False            # not a pytest test class

    def __init__(self, directory: "str | os.PathLike[str]") -> None:
        from cryptography.hazmat.primitives.asymmetric import ec

        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        self._ca_name = self._name("rmqd test CA")
        self._ca_cert = self._build(self._ca_name, self._ca_name, self._ca_key.public_key(), self._ca_key,
                                    ca=True)
        self.ca = str(self.dir / "ca.pem")
        self._write(self.ca, self._ca_cert)
        self._other_key = ec.generate_private_key(ec.SECP256R1())
        self._other_name = self._name("another CA")
        self.server = self.issue("server", "localhost", sans=("localhost", "127.0.0.1"))

    @staticmethod
    def _name(cn: str) -> x509.Name:
        from cryptography import x509
        from cryptography.x509.oid import NameOID
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    @staticmethod
    def _build(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey,
               signer: ec.EllipticCurvePrivateKey, ca: bool = False, sans: tuple[str, ...] = (),
               expired: bool = False) -> x509.Certificate:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes

        now = datetime.datetime.now(datetime.timezone.utc)
        start, end = ((now - datetime.timedelta(days=30), now - datetime.timedelta(days=1)) if expired
                      else (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30)))
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
                   .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if sans:
            names: list[x509.GeneralName] = []
            for san in sans:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(san)))
                except ValueError:
                    names.append(x509.DNSName(san))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return builder.sign(signer, hashes.SHA256())

    @staticmethod
    def _write(path: str, cert: x509.Certificate, key: Optional[ec.EllipticCurvePrivateKey] = None,
               key_path: Optional[str] = None, password: Optional[str] = None) -> None:
        from cryptography.hazmat.primitives import serialization

        with open(path, "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
        if key is not None and key_path:
            encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                          else serialization.NoEncryption())
            with open(key_path, "wb") as f:
                f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          encryption))

    def issue(self, name: str, cn: str, sans: tuple[str, ...] = (), expired: bool = False, untrusted: bool = False,
              password: Optional[str] = None) -> Issued:
        """A key and certificate ``<name>.pem`` / ``<name>.key`` signed by this CA (or, ``untrusted``, by another
        one nobody trusts); ``expired``: valid until yesterday; ``password``: the key encrypted with it."""
        from cryptography.hazmat.primitives.asymmetric import ec

        key = ec.generate_private_key(ec.SECP256R1())
        issuer, signer = (self._other_name, self._other_key) if untrusted else (self._ca_name, self._ca_key)
        cert = self._build(self._name(cn), issuer, key.public_key(), signer, sans=sans, expired=expired)
        issued = Issued(str(self.dir / f"{name}.pem"), str(self.dir / f"{name}.key"))
        self._write(issued.cert, cert, key, issued.key, password)
        return issued

    def client(self, name: str, expired: bool = False, untrusted: bool = False) -> Issued:
        return self.issue(name, f"client {name}", expired=expired, untrusted=untrusted)
