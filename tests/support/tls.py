"""Certificates and stores for HTTPS tests, made the way operators make them:
``openssl`` for the keys and certificates, Java's ``keytool`` for the stores.

:func:`make_pki` writes, under one directory:

* ``ca.crt``/``ca.key``: the test CA;
* ``worker.crt``/``worker.key``: a worker certificate for ``localhost`` and
  ``127.0.0.1`` (and any ``worker_dns`` names: a Kubernetes Service's, a
  wildcard over a headless Service), signed by the CA; ``worker.p12`` (a
  keytool PKCS12 keystore), ``worker.jks`` (the same as JKS), ``worker.pem``
  (the key, encrypted, and the certificate in one PEM file);
* ``trust.p12``: a keytool PKCS12 truststore holding the CA;
* ``client.crt``/``client.key``: a client certificate signed by the CA (curl's
  ``--cert``/``--key``), and ``rogue.crt``/``rogue.key`` signed by another CA.

Every store and the encrypted key use :data:`PASSWORD`.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

PASSWORD = "st0re-pass"


def tools_missing() -> str | None:
    """Why certificates cannot be made here, or None."""
    missing = [t for t in ("openssl", "keytool") if shutil.which(t) is None]
    return f"{' and '.join(missing)} needed to make certificates" if missing else None


def make_pki(d: Path, worker_dns: Sequence[str] = ()) -> Path:
    """Write the files listed in the module doc into ``d``; returns ``d``.

    ``worker_dns``: more DNS names for the worker certificate, after
    ``localhost`` and ``127.0.0.1``."""
    d.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run(args, cwd=d, check=True, capture_output=True, timeout=120)

    def signed(name: str, cn: str, ca: str, san: bool) -> None:
        run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", f"/CN={cn}")
        ext: list[str] = []
        if san:
            names = ["DNS:localhost", "IP:127.0.0.1",
                     *(f"DNS:{n}" for n in (worker_dns if name == "worker" else ()))]
            (d / f"{name}.ext").write_text(f"subjectAltName={','.join(names)}\n")
            ext = ["-extfile", f"{name}.ext"]
        run("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey",
            f"{ca}.key", "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", *ext)

    for ca in ("ca", "rogue-ca"):
        run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key",
            "-out", f"{ca}.crt", "-days", "2", "-subj", f"/CN={ca}")
    signed("worker", "worker", "ca", san=True)
    signed("client", "client", "ca", san=False)
    signed("rogue", "rogue", "rogue-ca", san=True)
    run("openssl", "pkcs12", "-export", "-in", "worker.crt", "-inkey", "worker.key",
        "-name", "worker", "-out", "worker.openssl.p12", "-passout", f"pass:{PASSWORD}")
    for store in ("PKCS12", "JKS"):
        run("keytool", "-importkeystore", "-noprompt", "-srckeystore", "worker.openssl.p12",
            "-srcstoretype", "PKCS12", "-srcstorepass", PASSWORD,
            "-destkeystore", f"worker.{'p12' if store == 'PKCS12' else 'jks'}",
            "-deststoretype", store, "-deststorepass", PASSWORD)
    run("keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.crt",
        "-keystore", "trust.p12", "-storepass", PASSWORD, "-storetype", "PKCS12")
    run("openssl", "pkcs8", "-topk8", "-in", "worker.key", "-out", "worker.enc.key",
        "-passout", f"pass:{PASSWORD}")
    (d / "worker.pem").write_text((d / "worker.enc.key").read_text()
                                  + (d / "worker.crt").read_text())
    return d


def https_settings(pki: Path, client_auth: str = "none") -> dict[str, str]:
    """A worker's ``listeners.https.*`` keys for :func:`make_pki`'s stores."""
    return {
        "listeners.https.ssl.keystore.location": str(pki / "worker.p12"),
        "listeners.https.ssl.keystore.password": PASSWORD,
        "listeners.https.ssl.key.password": PASSWORD,
        "listeners.https.ssl.truststore.location": str(pki / "trust.p12"),
        "listeners.https.ssl.truststore.password": PASSWORD,
        "listeners.https.ssl.client.auth": client_auth,
    }
