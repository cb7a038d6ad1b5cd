#!/usr/bin/env python3
"""Generate a throw-away CA and a server certificate for localhost / 127.0.0.1 / ::1.

Writes into DIR:
  ca.pem    - self-signed CA certificate (trust anchor for clients: --ca ca.pem)
  cert.pem  - server leaf certificate followed by the CA certificate (chain)
  leaf.pem  - server leaf certificate alone
  key.pem   - server private key (PKCS#8, ECDSA P-256, unencrypted)

Both certificates follow the rules strict verifiers (rustls/webpki, Go crypto/x509,
OpenSSL) apply: v3, CA has basicConstraints CA:TRUE + keyCertSign, the leaf is an
end-entity with serverAuth EKU and subjectAltName DNS:localhost, IP:127.0.0.1, IP:::1.

Usage: python certs.py DIR
"""
from __future__ import annotations

import datetime
import ipaddress
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "mpq interop"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def generate(out_dir: str | Path, san_padding: int = 0) -> dict[str, Path]:
    """A CA and a leaf certificate for localhost, 127.0.0.1 and ::1 in out_dir. With
    `san_padding` N the leaf also names N made-up 250-character DNS names, as the interop
    runner inflates its certificates for amplificationlimit (N=60: a leaf of about 16 kB, so
    a server's first flight exceeds three times a ClientHello of two 1280-byte datagrams)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    not_before = now - datetime.timedelta(days=1)
    not_after = now + datetime.timedelta(days=30)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("mpq interop test CA")
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("::1")),
                ]
                # 250-character names of 60-character labels (DNS allows 63 per label).
                + [x509.DNSName(f"pad{i:02}." + ".".join(["x" * 60] * 4)) for i in range(san_padding)]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    pem = serialization.Encoding.PEM
    paths = {
        "ca": out / "ca.pem",
        "cert": out / "cert.pem",
        "leaf": out / "leaf.pem",
        "key": out / "key.pem",
    }
    paths["ca"].write_bytes(ca_cert.public_bytes(pem))
    paths["leaf"].write_bytes(leaf.public_bytes(pem))
    paths["cert"].write_bytes(leaf.public_bytes(pem) + ca_cert.public_bytes(pem))
    paths["key"].write_bytes(
        key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    for kind, path in generate(sys.argv[1]).items():
        print(f"{kind}: {path}")
