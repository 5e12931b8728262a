"""Generate the Python gRPC stubs for `protos/` with grpcio-tools (run by `make stubs` and docker/install.sh).

    python -m services.common.build_stubs [--out services/common/gen] [--install-pth]

`--install-pth` writes a .pth file into the current environment's site-packages so that
`import auditmesh.v1.moderation_pb2` works without PYTHONPATH (containers set PYTHONPATH instead).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import sysconfig
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[2]
PROTOS = ROOT / "protos"


def build(out: Path) -> list[Path]:
    """Regenerate every stub under `out` from protos/**/*.proto; returns the .proto files used."""
    protos = sorted(PROTOS.rglob("*.proto"))
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    include_google = sysconfig.get_paths()["purelib"]  # google/rpc/status.proto from googleapis-common-protos
    grpc_include = str(Path(protoc.__file__).parent / "_proto")
    args = ["grpc_tools.protoc", f"-I{PROTOS}", f"-I{include_google}", f"-I{grpc_include}", f"--python_out={out}",
            f"--grpc_python_out={out}", f"--pyi_out={out}", *map(str, protos)]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed (see the message above)")
    return protos


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "services" / "common" / "gen")
    parser.add_argument("--install-pth", action="store_true")
    args = parser.parse_args()
    protos = build(args.out)
    if args.install_pth:
        (Path(sysconfig.get_paths()["purelib"]) / "auditmesh_stubs.pth").write_text(f"{args.out.resolve()}\n")
    print(f"generated stubs for {len(protos)} proto file(s) in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
