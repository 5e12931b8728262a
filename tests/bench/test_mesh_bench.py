"""The report's comparisons and target table, from synthetic results (no mesh)."""

from __future__ import annotations

from bench.mesh_bench import comparisons, parse_args, targets
from bench.scenarios import Plan


def test_ratios_compare_knees_with_the_direct_limit() -> None:
    plan = Plan.quick().with_mixes(("text",))
    direct = {"item_seconds": {"text": 0.001, "image": 0.2}}
    unbatched = {"text": {"knee_goodput_rps": 200.0}}
    auditmesh = {"mixes": {"text": {"knee_goodput_rps": 800.0}}}
    assert comparisons(plan, direct, unbatched, auditmesh) == {"text": {
        "auditmesh_rps": 800.0, "unbatched_rps": 200.0, "direct_rps": 1000.0,
        "auditmesh_over_direct": 0.8, "auditmesh_over_unbatched": 4.0}}


def test_missing_paths_give_no_ratio() -> None:
    ratios = comparisons(Plan.quick(), None, None, None)
    assert all(value is None for mix in ratios.values() for value in mix.values())


def test_targets_mark_met_unmet_and_unmeasured() -> None:
    ratios = {"text": {"auditmesh_over_direct": 0.5, "auditmesh_over_unbatched": 4.0}}
    auditmesh = {"isolation": {"p99_ratio": 1.1, "realtime_success_ratio_with_flood": 0.99,
                               "bulk": {"rejection_latency_ms": {"n": 0}}}, "lowload": {"overhead_ms": 2.0}}
    met = {row["target"]: row["met"] for row in targets(ratios, auditmesh)}
    assert {k: v for k, v in met.items() if not k.startswith(("mixed", "image"))} == {
        "text auditmesh/direct at the SLO": False, "text auditmesh/unbatched at the SLO": True,
        "realtime P99 with flood / alone": True, "realtime success with flood": False,
        "bulk rejection latency P99 ms": None, "low-load overhead ms (P50 - model compute)": True}
    assert [v for k, v in met.items() if k.startswith(("mixed", "image"))] == [None, None, None]


def test_a_ratio_whose_interval_crosses_its_target_is_not_met() -> None:
    plan = Plan.quick().with_mixes(("mixed",))
    unbatched = {"mixed": {"knee_goodput_rps": 20.0, "knee_goodput_interval_rps": [18.0, 24.0]}}
    auditmesh = {"mixes": {"mixed": {"knee_goodput_rps": 32.0, "knee_goodput_interval_rps": [30.0, 40.0]}}}
    ratios = comparisons(plan, None, unbatched, auditmesh)
    assert ratios["mixed"]["auditmesh_over_unbatched"] == 1.6
    assert ratios["mixed"]["auditmesh_over_unbatched_interval"] == [1.25, 2.222]
    row = next(r for r in targets(ratios, auditmesh) if r["target"].startswith("mixed auditmesh/unbatched"))
    assert row["measured"] == 1.6 and row["met"] is False  # 1.6 > 1.5, but the interval reaches down to 1.25
    tight = {"mixed": {"knee_goodput_rps": 20.0, "knee_goodput_interval_rps": [19.0, 20.0]}}
    ratios = comparisons(plan, None, tight, auditmesh)
    assert next(r for r in targets(ratios, auditmesh) if r["target"].startswith("mixed auditmesh/"))["met"] is True


def test_mixed_text_p99_counts_only_rates_up_to_the_image_capacity() -> None:
    def step(rate: float, text_p99: float) -> dict[str, object]:
        return {"offered_rps": rate, "by_kind": {"text": {"p99_ms": text_p99}, "image": {"p99_ms": 500.0}}}
    auditmesh = {"mixes": {"image": {"knee_goodput_rps": 6.0},
                           "mixed": {"steps": [step(20.0, 12.0), step(60.0, 40.0), step(90.0, 300.0)]}}}
    row = next(r for r in targets({}, auditmesh) if r["target"].startswith("mixed: worst text"))
    assert row["measured"] == 40.0 and row["met"] is True  # 90/s offers 9 images/s, over the 6/s capacity


def test_cli_defaults_to_every_scenario() -> None:
    args = parse_args(["--quick", "--mix", "text"])
    assert args.quick and args.scenario is None and args.mix == ["text"] and args.slo_text_ms == 50.0


def test_profile_summary_reads_each_profiles_text_knee_and_p99() -> None:
    from bench.mesh_bench import profile_summary

    by_profile = {"fast": {"mixes": {"text": {"knee_goodput_rps": 900.0, "knee_p99_ms": 30.0}},
                           "lowload": {"latency_ms": {"p50_ms": 1.5}}},
                  "accurate": {}}
    assert profile_summary(by_profile) == [
        {"profile": "fast", "text_knee_rps": 900.0, "text_p99_ms_at_knee": 30.0, "lowload_p50_ms": 1.5},
        {"profile": "accurate", "text_knee_rps": None, "text_p99_ms_at_knee": None, "lowload_p50_ms": None}]


def test_cli_takes_profiles() -> None:
    assert parse_args(["--profile", "fast", "--profile", "accurate"]).profile == ["fast", "accurate"]
