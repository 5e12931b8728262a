"""The batch cost model: least squares over recent batches, seeded by a warm run, decaying with age."""

from __future__ import annotations

import pytest

from services.router.batch_cost import BatchCost
from services.router.dispatch import parse_warmup
from tests.stubs import FakeClock


def test_fits_a_line_through_observations() -> None:
    cost = BatchCost(clock=FakeClock())
    for n, d in ((1, 0.012), (8, 0.040), (4, 0.024), (2, 0.016)):
        cost.observe(n, d)
    assert cost.predict(4) == pytest.approx(0.024, rel=0.05)


def test_no_estimate_before_anything_is_known() -> None:
    cost = BatchCost(clock=FakeClock())
    assert cost.estimate() is None and cost.predict(8) == 0.0 and not cost.seeded


def test_the_warm_seed_is_an_estimate_from_the_start() -> None:
    cost = BatchCost(clock=FakeClock())
    cost.seed(17, 1.7)  # 17 images in 1.7 s on the warm model: 0.1 s each
    assert cost.seeded
    assert cost.predict(1) == pytest.approx(0.1) and cost.predict(8) == pytest.approx(0.8)


def test_real_batches_outweigh_the_seed_at_once() -> None:
    cost = BatchCost(clock=FakeClock())
    cost.seed(1, 1.0)  # a pessimistic seed
    for _ in range(8):
        cost.observe(1, 0.2)
    assert cost.predict(1) < 0.35


def test_stale_observations_fade_back_to_the_seed() -> None:
    clock = FakeClock()
    cost = BatchCost(clock=clock, half_life_s=10.0)
    cost.seed(1, 0.2)
    for _ in range(6):  # a cold connection's slow first batches
        cost.observe(1, 2.5)
    assert cost.predict(1) > 1.5
    clock.now += 120.0  # twelve half-lives later they say nothing about now
    assert cost.predict(1) == pytest.approx(0.2, rel=0.01)
    assert cost.samples == 0


def test_recent_observations_weigh_more_than_old_ones() -> None:
    clock = FakeClock()
    cost = BatchCost(clock=clock, half_life_s=5.0)
    for _ in range(8):
        cost.observe(1, 1.0)
    clock.now += 20.0  # four half-lives
    for _ in range(8):
        cost.observe(1, 0.1)
    assert cost.predict(1) < 0.2


@pytest.mark.parametrize("value, parsed", [("items=17 seconds=0.512", (17, 0.512)), ("items=x", (0, 0.0)), ("", (0, 0.0))])
def test_parse_warmup(value: str, parsed: tuple[int, float]) -> None:
    assert parse_warmup(value) == parsed


def test_a_malformed_seed_is_ignored() -> None:
    cost = BatchCost(clock=FakeClock())
    cost.seed(*parse_warmup("garbage"))
    assert not cost.seeded


def test_observed_only_while_a_finished_batch_weighs_in() -> None:
    clock = FakeClock()
    cost = BatchCost(clock=clock, half_life_s=10.0)
    cost.seed(1, 2.9)
    assert cost.seeded and not cost.observed  # a prior is not an observation
    cost.observe(1, 0.3)
    assert cost.observed
    clock.now += 120.0  # faded away: back to the prior alone
    assert not cost.observed
