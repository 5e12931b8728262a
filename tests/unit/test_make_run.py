"""Regression: `make run` once passed `--config config/mesh.yaml`, which argparse took for
`--config-dir` and which does not exist. The README's run command must parse and find its configs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from services.launcher import MODALITIES, main, parse_args

ROOT = Path(__file__).resolve().parents[2]


def test_make_run_launcher_arguments_parse_and_point_at_real_configs() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^run:.*\n\t(.+)$", makefile, re.M)
    assert recipe, "Makefile has no run target"
    words = shlex.split(recipe.group(1))
    assert words[1:3] == ["-m", "services.launcher"]
    args = parse_args(words[3:])
    config_dir = ROOT / args.config_dir
    for service in ("router", *MODALITIES):
        assert (config_dir / f"{service}.yaml").is_file(), f"{config_dir}/{service}.yaml is missing"


def test_a_bad_restart_policy_is_refused_before_anything_starts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--restart-initial-s", "5", "--restart-max-s", "1"]) == 2
    assert "max_delay_s must be >= initial_delay_s" in capsys.readouterr().err
