"""Finds kernel headers for bcc, which compiles `tenant_tc.c` at load time and otherwise fails with
`chdir(/lib/modules/<release>/build)` on machines without the running kernel's headers.

Order: `BCC_KERNEL_SOURCE` if the caller set it; `/lib/modules/$(uname -r)/build` if present; else
Debian's `linux-headers-<version>-common` and `linux-headers-<version>-<arch>` merged (symlinks, well
under a second) into one tree under `cache_dir`. Headers of another kernel release are fine for a
SCHED_CLS program: it only uses UAPI structs, which are stable.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

ENV_VAR = "BCC_KERNEL_SOURCE"
SRC_ROOT = Path("/usr/src")
DEFAULT_CACHE = Path("/var/cache/auditmesh/kernel-headers")


class KernelHeadersError(RuntimeError):
    """No usable kernel headers: the message says which package installs them."""


def _has_kconfig(tree: Path) -> bool:
    return (tree / "include" / "linux" / "kconfig.h").is_file()


def debian_header_pairs(src_root: Path = SRC_ROOT) -> list[tuple[Path, Path]]:
    """(common, arch) folder pairs of installed Debian header packages, newest version last."""
    pairs = []
    for common in sorted(src_root.glob("linux-headers-*-common")):
        version = common.name[len("linux-headers-"):-len("-common")]
        for arch in sorted(src_root.glob(f"linux-headers-{version}-*")):
            if arch != common and not arch.name.endswith("-common") and (arch / "include").is_dir():
                pairs.append((common, arch))
    return pairs


def merge_tree(common: Path, arch: Path, destination: Path) -> Path:
    """`destination` holding symlinks to `common` overlaid with `arch` (made once, then reused)."""
    if _has_kconfig(destination):
        return destination
    staging = destination.with_name(destination.name + f".tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for tree in (common, arch):
        subprocess.run(["cp", "-rsf", f"{tree}/.", str(staging)], check=True, timeout=60)
    if not _has_kconfig(staging):
        shutil.rmtree(staging, ignore_errors=True)
        raise KernelHeadersError(f"{common} + {arch} merged into no include/linux/kconfig.h")
    try:
        staging.rename(destination)
    except OSError:  # another process finished the same merge first
        shutil.rmtree(staging, ignore_errors=True)
    return destination


def ensure_kernel_headers(cache_dir: Path = DEFAULT_CACHE, src_root: Path = SRC_ROOT) -> str:
    """Make bcc find headers (setting BCC_KERNEL_SOURCE when needed) and return the tree used."""
    preset = os.environ.get(ENV_VAR)
    if preset:
        if not _has_kconfig(Path(preset)):
            raise KernelHeadersError(f"{ENV_VAR}={preset} has no include/linux/kconfig.h")
        return preset
    build = Path("/lib/modules") / platform.release() / "build"
    if _has_kconfig(build):
        return str(build)
    pairs = debian_header_pairs(src_root)
    if not pairs:
        raise KernelHeadersError(
            f"no kernel headers: neither {build} nor Debian's headers under {src_root} exist; "
            "install them with `apt-get install linux-headers-amd64` (make system-deps does), "
            f"or point {ENV_VAR} at a kernel source tree")
    common, arch = pairs[-1]
    tree = merge_tree(common, arch, cache_dir / arch.name.removeprefix("linux-headers-"))
    os.environ[ENV_VAR] = str(tree)
    return str(tree)
