"""Edges that point one way (issue 37): nothing outside `tests/` imports `tests` (the services, the
benchmarks, the eBPF tools and the client are usable without the test suite)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("services", "bench", "ebpf", "auditmesh")


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports by name (`import a.b`, `from a.b import c`; relative imports left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_the_scanner_sees_plain_and_nested_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("import os\nfrom tests.stubs import x\ndef f():\n    import tests.servers as s\nfrom . import y\n")
    assert imported_modules(source) == {"os", "tests.stubs", "tests.servers"}


def test_nothing_outside_tests_imports_tests() -> None:
    offending = sorted(f"{path.relative_to(ROOT)}: {module}"
                       for package in PACKAGES for path in (ROOT / package).rglob("*.py")
                       if "gen" not in path.relative_to(ROOT).parts
                       for module in imported_modules(path) if module == "tests" or module.startswith("tests."))
    assert offending == []
