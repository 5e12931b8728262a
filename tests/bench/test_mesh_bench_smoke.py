"""Smoke run of `python -m bench.mesh_bench --quick` against the real mesh, so the harness cannot rot.

One run (about 30 s: two meshes started, every scenario at a tiny scale), then checks of the JSON
report's structure and sanity: calls were answered, the unbatched baseline really ran one item per
model call, the auditmesh path batched, the ratios and targets were computed. Never timing targets:
the numbers of a smoke run mean nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from bench.loadgen import CLIENT_ERROR_PREFIX
from bench.scenarios import Plan
from services.launcher import MATCH, MODALITIES, ROOT, mesh_services

# Slow (runs the whole `bench.mesh_bench --quick` (minutes)): `make test` and `make test-slow` run it, `make test-fast` skips it.
pytestmark = pytest.mark.slow

MIXES = Plan.quick().mixes


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    if not (ROOT / "model_repository" / "toxicity_en").exists():
        pytest.fail("model repository is missing: run `make models` (make test does)")
    run = subprocess.run([sys.executable, "-m", "bench.mesh_bench", "--quick"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, f"mesh_bench --quick failed:\n{run.stderr[-6000:]}"
    parsed: dict[str, Any] = json.loads(run.stdout)  # stdout must be the JSON report and nothing else
    return parsed


def assert_well_formed(step: dict[str, Any]) -> None:
    assert step["offered_rps"] > 0 and step["sent"] > 0
    assert sum(step["status"].values()) == step["sent"]
    assert not [code for code in step["status"] if code.startswith(CLIENT_ERROR_PREFIX)], step["status"]
    ok = step["status"].get("OK", 0)
    assert step["success_ratio"] == pytest.approx(ok / step["sent"], abs=1e-5)
    assert (step["achieved_rps"] > 0) == (ok > 0)
    latency = step["latency_ms"]
    assert latency["n"] == step["sent"]
    assert 0 < latency["p50_ms"] <= latency["p95_ms"] <= latency["p99_ms"] <= latency["max_ms"]
    assert set(step["batches"]) == set(MODALITIES)


def test_report_has_every_section(report: dict[str, Any]) -> None:
    assert {"machine", "plan", "slo", "direct", "unbatched", "auditmesh", "ratios", "targets"} <= set(report)
    assert set(report["auditmesh"]) >= {"lowload", "mixes", "isolation", "client", "stream"}
    assert report["command"].startswith("python -m bench.mesh_bench")


def test_direct_baseline_measured_every_model(report: dict[str, Any]) -> None:
    direct = report["direct"]
    for modality in MODALITIES:
        assert direct[modality]["best_items_per_s"] > 0
        assert str(direct[modality]["best_batch_size"]) in direct[modality]["by_batch_size"]
    assert direct["ocr_lines_per_image"] > 0  # the bench images carry text, so OCR lines reach the text model
    assert direct["item_seconds"]["image"] > direct["item_seconds"]["text"] > 0


def test_unbatched_baseline_runs_one_item_per_model_call(report: dict[str, Any]) -> None:
    for mix in MIXES:
        steps = report["unbatched"][mix]["steps"]
        assert steps
        executions = {modality: 0 for modality in MODALITIES}
        for step in steps:
            assert_well_formed(step)
            for modality, stats in step["batches"].items():
                executions[modality] += stats["executions"]
                assert stats["executions"] == 0 or stats["mean_batch_size"] == 1.0, (mix, modality, stats)
            assert set(step["cpu"]) == {*MODALITIES, "generator"}  # no router in this baseline
        assert executions["text"] > 0, (mix, executions)  # every mix carries text (images carry OCR lines)
        assert steps[0]["success_ratio"] >= 0.5, steps[0]["status"]


def test_auditmesh_steps_go_through_the_router_and_batch(report: dict[str, Any]) -> None:
    mixes = report["auditmesh"]["mixes"]
    for mix in MIXES:
        steps = mixes[mix]["steps"]
        assert steps and steps[0]["success_ratio"] >= 0.5, steps[0]["status"]
        for step in steps:
            assert_well_formed(step)
            assert step["batches"]["text"]["inferences"] > 0
            # every router lane too; no match service: the bench's policies match no known content
            assert set(step["cpu"]) == {*mesh_services(), "generator"} - {MATCH}
        assert set(steps[0]["by_tenant"]) <= {"chat", "forum", "rescan"}
    image_steps = [s for s in mixes["mixed"]["steps"] if "image" in s["by_kind"]]
    assert image_steps, "the quick mixed search sent no image (Plan.quick().seed puts one in every step)"
    for step in image_steps:  # an image item goes through vision and OCR, and its OCR lines through text
        assert step["batches"]["vision"]["inferences"] > 0 and step["batches"]["ocr"]["inferences"] > 0


def test_low_load_reports_the_overhead(report: dict[str, Any]) -> None:
    lowload = report["auditmesh"]["lowload"]
    assert lowload["ok"] == lowload["requests"] > 0
    assert lowload["client_floor_ms"]["n"] == lowload["requests"]  # the health checks between the items
    assert lowload["text_service"]["mean_batch_size"] == 1.0  # one at a time: nothing to batch
    assert isinstance(lowload["overhead_ms"], float) and isinstance(lowload["overhead_vs_direct_ms"], float)


def test_isolation_ran_both_phases_and_the_flood(report: dict[str, Any]) -> None:
    isolation = report["auditmesh"]["isolation"]
    assert_well_formed(isolation["alone"])
    assert_well_formed(isolation["with_flood"])
    bulk = isolation["bulk"]
    assert bulk["sent"] > 0 and sum(bulk["status"].values()) == bulk["sent"]
    assert not [code for code in bulk["status"] if code.startswith(CLIENT_ERROR_PREFIX)], bulk["status"]
    assert isolation["bulk_tenant"]["offered_rps"] == pytest.approx(5 * isolation["capacity_rps"], rel=0.01)
    assert isinstance(isolation["p99_ratio"], float)


def test_ratios_and_targets_are_computed(report: dict[str, Any]) -> None:
    for mix in MIXES:
        ratios = report["ratios"][mix]
        assert ratios["direct_rps"] > 0
        for key in ("auditmesh_rps", "unbatched_rps", "auditmesh_over_direct", "auditmesh_over_unbatched"):
            assert ratios[key] is None or ratios[key] > 0, (mix, key, ratios)
    names = [t["target"] for t in report["targets"]]
    assert len(names) == 10 and any(n.startswith("mixed: worst text P99") for n in names), names
    assert any(n.startswith("image knee") for n in names), names
    assert any(n.startswith("text client/unbatched") for n in names), names
    assert all(t["met"] in (True, False, None) for t in report["targets"])


def test_batched_clients_send_many_items_per_call_and_the_text_service_batches_them(report: dict[str, Any]) -> None:
    batched = report["auditmesh"]["batched"]
    steps = batched["steps"]
    assert steps and steps[0]["success_ratio"] >= 0.5, (steps[0]["status"], batched["error_details"])
    items = batched["items_per_call"]
    for step in steps:
        assert_well_formed(step)
        text = step["batches"]["text"]
        assert text["inferences"] >= step["status"].get("OK", 0) * items  # every item of every OK call was scored
        assert text["mean_batch_size"] > 1  # 32 items of one call arrive together: never one per model call
    row = report["ratios"]["text_batched"]
    assert row["items_per_call"] == items
    assert row["auditmesh_items_per_s"] is None or row["auditmesh_items_per_s"] > 0  # None: no quick step met the SLO


@pytest.mark.parametrize("scenario", ["client", "stream"])
def test_library_scenarios_answer_every_item_through_auditmesh_client(report: dict[str, Any], scenario: str) -> None:
    library = report["auditmesh"][scenario]
    steps = library["steps"]
    assert steps and steps[0]["success_ratio"] >= 0.5, (steps[0]["status"], library["error_details"])
    for step in steps:
        assert_well_formed(step)
        assert step["batches"]["text"]["inferences"] >= step["status"].get("OK", 0)
    sent = sum(step["sent"] for step in steps)
    if scenario == "client":  # single-item callers, but never more batch calls than items (warm-up included)
        assert 0 < library["batch_calls"] <= sent + 8
    row = report["ratios"][f"text_{scenario}"]
    assert row["auditmesh_over_unbatched"] is None or row["auditmesh_over_unbatched"] > 0
