"""A private CA and certificates for the mesh's TLS and mTLS (tests, `docker compose`, a first deployment).

Each certificate is valid for server and client use (one per service: the router presents its own as a
client of the modality services), names `localhost`, 127.0.0.1, ::1 and the service name, and is
signed by one CA whose certificate every service trusts. Keys are EC P-256, written 0600.

Run: `python -m services.common.tls_certs --out var/tls router text vision ocr` writes `ca.crt`, and
`<name>.crt` / `<name>.key` for each name (the CA key stays in `ca.key`, 0600; move it offline).

Example::

    ca = make_ca("auditmesh test CA")
    cert_pem, key_pem = issue(ca, "text")
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 365


@dataclass(frozen=True)
class Authority:
    """A CA: its certificate and key."""

    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _key_pem(self.key)


def make_ca(common_name: str = "auditmesh mesh CA", *, days: int = VALID_DAYS) -> Authority:
    """A new self-signed CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                content_commitment=False, key_encipherment=False, data_encipherment=False,
                                                key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
                   .sign(key, hashes.SHA256()))
    return Authority(certificate, key)


def issue(ca: Authority, name: str, *, extra_names: Sequence[str] = (), days: int = VALID_DAYS) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) for `name`, usable as a TLS server and client certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in dict.fromkeys([name, "localhost", *extra_names])]
    alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", "::1")]
    certificate = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                   .issuer_name(ca.certificate.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
                   .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                                  critical=False)
                   .sign(ca.key, hashes.SHA256()))
    return certificate.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path`, readable by its owner only (created 0600, never world-readable)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    os.chmod(path, 0o600)


def write_mesh_certificates(out: Path, names: Sequence[str]) -> Authority:
    """ca.crt, ca.key and <name>.crt / <name>.key for every name, in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    ca = make_ca()
    (out / "ca.crt").write_bytes(ca.certificate_pem)
    write_private(out / "ca.key", ca.key_pem)
    for name in names:
        cert, key = issue(ca, name)
        (out / f"{name}.crt").write_bytes(cert)
        write_private(out / f"{name}.key", key)
    return ca


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.common.tls_certs",
                                     description="Make a private CA and a TLS certificate per mesh service.")
    parser.add_argument("--out", type=Path, required=True, help="folder to write ca.crt, <name>.crt, <name>.key to")
    parser.add_argument("names", nargs="+", help="service names (each also gets localhost, 127.0.0.1 and ::1)")
    args = parser.parse_args(argv)
    write_mesh_certificates(args.out, args.names)
    print(f"wrote a CA and {len(args.names)} certificates to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
