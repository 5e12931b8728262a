"""Make the mesh's credentials once, for `docker compose` (the `mesh-credentials` init container) or a
first deployment: the internal shared secret, the internal admin secret, a private CA and a TLS
certificate per service (services/common/tls_certs.py). Files are 0600; existing ones are kept, so a
restart does not rotate them (delete the folder to rotate).

Run: `python -m services.common.mesh_credentials --out /run/auditmesh router text vision ocr` writes
`internal.secret`, `internal-admin.secret` and `tls/ca.crt`, `tls/<name>.crt`, `tls/<name>.key`.
"""

from __future__ import annotations

import argparse
import secrets
from pathlib import Path
from typing import Sequence

from services.common.tls_certs import write_mesh_certificates, write_private


def write_credentials(out: Path, names: Sequence[str]) -> list[str]:
    """Write what is missing under `out`; returns the names of the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ("internal.secret", "internal-admin.secret"):
        if not (out / name).exists():
            write_private(out / name, (secrets.token_urlsafe(32) + "\n").encode())
            written.append(name)
    tls = out / "tls"
    if not (tls / "ca.crt").exists() or any(not (tls / f"{n}.key").exists() for n in names):
        write_mesh_certificates(tls, names)
        written += ["tls/ca.crt", *(f"tls/{n}.crt" for n in names)]
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.common.mesh_credentials",
                                     description="Make the mesh's internal secrets, CA and service certificates.")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("names", nargs="+", help="service names that get a certificate")
    args = parser.parse_args(argv)
    written = write_credentials(args.out, args.names)
    print(f"{args.out}: wrote {', '.join(written) if written else 'nothing (all present)'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
