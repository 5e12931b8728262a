from __future__ import annotations

import os
from pathlib import Path

import pytest

from ebpf.kernel_headers import KernelHeadersError, debian_header_pairs, ensure_kernel_headers, merge_tree


def fake_debian_headers(src: Path, version: str = "6.1.0-57") -> None:
    common = src / f"linux-headers-{version}-common"
    arch = src / f"linux-headers-{version}-amd64"
    (common / "include" / "linux").mkdir(parents=True)
    (common / "include" / "linux" / "kconfig.h").write_text("/* kconfig */\n")
    (arch / "include" / "generated").mkdir(parents=True)
    (arch / "include" / "generated" / "autoconf.h").write_text("#define CONFIG_X 1\n")


def test_merge_overlays_arch_headers_on_common(tmp_path: Path) -> None:
    fake_debian_headers(tmp_path / "src")
    (common, arch), = debian_header_pairs(tmp_path / "src")
    tree = merge_tree(common, arch, tmp_path / "cache" / "tree")
    assert (tree / "include" / "linux" / "kconfig.h").read_text() == "/* kconfig */\n"
    assert (tree / "include" / "generated" / "autoconf.h").is_symlink()
    assert merge_tree(common, arch, tree) == tree  # reused


def test_ensure_sets_bcc_kernel_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_debian_headers(tmp_path / "src")
    monkeypatch.delenv("BCC_KERNEL_SOURCE", raising=False)
    monkeypatch.setattr("platform.release", lambda: "0.0.0-no-such-kernel")
    tree = ensure_kernel_headers(tmp_path / "cache", tmp_path / "src")
    assert os.environ["BCC_KERNEL_SOURCE"] == tree
    assert Path(tree, "include/linux/kconfig.h").exists()


def test_missing_headers_say_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BCC_KERNEL_SOURCE", raising=False)
    monkeypatch.setattr("platform.release", lambda: "0.0.0-no-such-kernel")
    with pytest.raises(KernelHeadersError, match="apt-get install linux-headers"):
        ensure_kernel_headers(tmp_path / "cache", tmp_path / "empty")


def test_a_preset_variable_must_name_a_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BCC_KERNEL_SOURCE", str(tmp_path))
    with pytest.raises(KernelHeadersError, match="kconfig.h"):
        ensure_kernel_headers(tmp_path / "cache", tmp_path / "src")
