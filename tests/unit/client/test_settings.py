"""auditmesh.client.settings: validated settings, the API key from the environment, round robin."""

from __future__ import annotations

import pytest

from auditmesh.client.settings import API_KEY_ENV, ClientConfig, RoundRobin, api_key_from


def test_the_api_key_comes_from_the_argument_first_then_the_environment() -> None:
    assert api_key_from("explicit", {API_KEY_ENV: "env"}) == "explicit"
    assert api_key_from(None, {API_KEY_ENV: " env-key \n"}) == "env-key"
    with pytest.raises(ValueError, match=API_KEY_ENV):
        api_key_from(None, {})


@pytest.mark.parametrize("kwargs,field", [
    ({"addresses": ()}, "addresses"), ({"addresses": ("nohost",)}, "addresses"), ({"addresses": "a:1"}, "addresses"),
    ({"timeout_s": 0}, "timeout_s"), ({"linger_ms": -1}, "linger_ms"), ({"max_batch_items": 0}, "max_batch_items"),
    ({"max_batch_items": 129}, "max_batch_items"), ({"api_key": ""}, "api_key")])
def test_bad_settings_are_refused_naming_the_field(kwargs: dict[str, object], field: str) -> None:
    settings: dict[str, object] = {"addresses": ("127.0.0.1:8100",), "api_key": "k", **kwargs}
    with pytest.raises((ValueError, TypeError), match=field):
        ClientConfig(**settings)  # type: ignore[arg-type]


def test_round_robin_visits_every_address_in_turn() -> None:
    picker = RoundRobin(2)
    assert [picker.next() for _ in range(5)] == [0, 1, 0, 1, 0]
