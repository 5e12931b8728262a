"""CPU placement: positions resolve against the host's CPUs, bad blocks are refused naming the key,
and the launcher starts each child where its config says."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from services.common.config import ConfigError
from services.common.placement import Placement
from services.launcher import Mesh


def test_positions_resolve_against_the_usable_cpus() -> None:
    assert Placement(cpus=(1,)).cpu_set([0, 1]) == {1}
    assert Placement(cpus=(0, 1)).cpu_set([4, 6, 9]) == {4, 6}
    assert Placement(cpus=(1,)).cpu_set([3]) is None  # no second CPU: run anywhere
    assert Placement().cpu_set([0, 1]) is None


@pytest.mark.parametrize("kwargs, match", [({"cpus": (-1,)}, "positions"), ({"cpus": (0, 0)}, "twice"),
                                           ({"nice": 20}, "nice")])
def test_rejects_bad_placements(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Placement(**kwargs)  # type: ignore[arg-type]


def test_shipped_configs_let_text_preempt_images() -> None:
    """Text and the routers at full priority, the image services niced on the same CPUs (measured
    against a text/image CPU partition: docs/deployment.md "CPU placement")."""
    mesh = Mesh()
    text = mesh.placement("text")
    assert text.cpus == mesh.placement("router").cpus == mesh.placement("router-bulk").cpus
    assert text.nice == mesh.placement("router").nice == 0
    for image in ("vision", "ocr"):
        assert mesh.placement(image).nice >= text.nice + 10
        assert mesh.placement(image).cpus == text.cpus
    assert Mesh(place=False).placement("ocr") == Placement()


def test_a_bad_placement_block_names_file_and_key(tmp_path: Path) -> None:
    for name in ("router", "text", "vision", "ocr"):
        (tmp_path / f"{name}.yaml").write_text((Path("config") / f"{name}.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "ocr.yaml").write_text("service: ocr\nplacement: {cpus: [0], nise: 3}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"ocr.yaml: placement.nise"):
        Mesh(config_dir=tmp_path).placement("ocr")


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux-only")
def test_the_launcher_starts_a_child_on_its_cpus_and_niceness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mesh = Mesh()
    usable = sorted(os.sched_getaffinity(0))
    monkeypatch.setattr(mesh, "placement", lambda service: Placement(cpus=(len(usable) - 1,), nice=3))
    probe = [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)), os.nice(0))"]
    monkeypatch.setattr(mesh, "command", lambda service: probe)
    import subprocess
    mesh.output = subprocess.PIPE
    process = mesh.start_service("ocr")
    out, _ = process.communicate(timeout=30)
    mesh.processes.clear()
    assert out.decode().split("]")[0] + "]" == str([usable[-1]])
    assert int(out.decode().split()[-1]) == os.nice(0) + 3
