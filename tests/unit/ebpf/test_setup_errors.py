"""Missing privileges or bcc give a message saying what to do."""

from __future__ import annotations

import sys
import types

import pytest

from ebpf.bpf_program import EbpfSetupError, import_bcc, require_privileges


def test_not_root_names_the_capabilities(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(EbpfSetupError, match="CAP_BPF.*CAP_NET_ADMIN.*CAP_PERFMON"):
        require_privileges()


def test_missing_bcc_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bcc", None)  # makes `import bcc` raise ImportError
    with pytest.raises(EbpfSetupError, match="python3-bpfcc"):
        import_bcc()


def test_pypis_unrelated_bcc_is_recognised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bcc", types.ModuleType("bcc"))
    with pytest.raises(EbpfSetupError, match="not the BPF compiler collection"):
        import_bcc()
