"""bench/match_mesh.py: its two policy versions are valid policies that differ only in `short_circuit`; its
closed loop is run against a real mesh in tests/integration/test_match_e2e.py."""

from __future__ import annotations

import yaml

from bench.match_mesh import BANK, banked_image, policy_version
from services.router.control.versions import compile_policy_text


def test_the_two_policy_versions_differ_only_in_short_circuit() -> None:
    on, off = (compile_policy_text(yaml.safe_load(policy_version(flag)), "bench", "default") for flag in (True, False))
    assert on.document.matches is not None and off.document.matches is not None
    assert on.document.matches.short_circuit and not off.document.matches.short_circuit
    assert on.document.matches.banks == off.document.matches.banks == {BANK: "block"}
    assert (on.version, off.version) == ("bench-match-on", "bench-match-off")
    assert banked_image()[:2] == b"\xff\xd8"  # a JPEG, as re-posts carry
