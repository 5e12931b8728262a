"""The launcher's restart policy (services/supervise.py), with a fake clock and no processes."""

from __future__ import annotations

import pytest

from services.supervise import RestartPolicy, Supervisor, describe_exit
from tests.stubs import FakeClock


def supervisor(**policy: float) -> tuple[Supervisor, FakeClock]:
    clock = FakeClock()
    return Supervisor(RestartPolicy(**policy), clock=clock), clock


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RestartPolicy(initial_delay_s=0.5, multiplier=2.0, max_delay_s=4.0)
    assert [policy.delay(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert policy.delay(10_000) == 4.0  # no float overflow after a long crash loop


@pytest.mark.parametrize("field, value", [("initial_delay_s", -1.0), ("multiplier", 0.5), ("max_delay_s", 0.1),
                                          ("reset_after_s", 0.0)])
def test_bad_policy_values_are_refused_naming_the_field(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        RestartPolicy(**{field: value})


def test_a_crashed_child_is_due_only_after_its_delay() -> None:
    sup, clock = supervisor(initial_delay_s=0.5, reset_after_s=60)
    sup.started("text")
    clock.now += 10
    restart = sup.exited("text", -9)
    assert restart is not None and (restart.attempt, restart.delay_s, restart.uptime_s) == (1, 0.5, 10.0)
    assert restart.describe() == "text exited (killed by signal SIGKILL) after 10.0 s up: restart #1 in 0.5 s"
    assert sup.due() == []
    clock.now += 0.49
    assert sup.due() == []
    clock.now += 0.01
    assert sup.due() == ["text"]
    assert sup.due() == []  # due once


def test_consecutive_short_runs_back_off_and_a_long_run_resets() -> None:
    sup, clock = supervisor(initial_delay_s=1, multiplier=2, max_delay_s=5, reset_after_s=30)
    delays = []
    sup.started("vision")
    for _ in range(5):
        clock.now += 2  # dies 2 s after each start: not healthy
        restart = sup.exited("vision", 1)
        assert restart is not None
        delays.append(restart.delay_s)
        clock.now = restart.at
        assert sup.due() == ["vision"]
        sup.started("vision")
    assert delays == [1, 2, 4, 5, 5]
    clock.now += 30  # up for reset_after_s: the next crash is a first one again
    restart = sup.exited("vision", 1)
    assert restart is not None and (restart.attempt, restart.delay_s) == (1, 1)


def test_children_back_off_independently() -> None:
    sup, clock = supervisor(initial_delay_s=1, reset_after_s=30)
    sup.started("text")
    sup.started("ocr")
    for _ in range(3):
        first = sup.exited("text", 1)
        assert first is not None
        clock.now = first.at
        sup.due()
        sup.started("text")
    ocr = sup.exited("ocr", -9)
    assert ocr is not None and ocr.attempt == 1 and ocr.delay_s == 1


def test_due_children_come_in_exit_order() -> None:
    sup, clock = supervisor(initial_delay_s=1)
    for child in ("router", "text", "router-bulk"):
        sup.started(child)
    sup.exited("router-bulk", -9)
    sup.exited("text", -15)
    clock.now += 1
    assert sup.due() == ["router-bulk", "text"]


def test_after_stop_nothing_is_restarted() -> None:
    sup, clock = supervisor(initial_delay_s=1)
    sup.started("text")
    sup.started("ocr")
    assert sup.exited("text", -9) is not None
    sup.stop()
    assert sup.stopping and sup.waiting() == {}
    assert sup.exited("ocr", 0) is None
    clock.now += 100
    assert sup.due() == []


def test_an_exit_of_a_child_never_started_is_a_bug() -> None:
    sup, _ = supervisor()
    with pytest.raises(ValueError, match="never started"):
        sup.exited("text", 1)


def test_exit_descriptions() -> None:
    assert describe_exit(0) == "exit code 0"
    assert describe_exit(2) == "exit code 2"
    assert describe_exit(-9) == "killed by signal SIGKILL"
    assert describe_exit(-15) == "killed by signal SIGTERM"
    assert describe_exit(-200) == "killed by signal 200"


class FakeProcess:
    """A child as `supervise` sees it: poll() is None while running, then the exit code."""

    next_pid = 100

    def __init__(self) -> None:
        FakeProcess.next_pid += 1
        self.pid = FakeProcess.next_pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode


class FakeMesh:
    """The parts of `services.launcher.Mesh` that `supervise` uses, with fake processes."""

    def __init__(self, services: tuple[str, ...]) -> None:
        self.processes: dict[str, FakeProcess] = {}
        self.starts: list[str] = []
        for service in services:
            self.start_service(service)

    def start_service(self, service: str) -> FakeProcess:
        self.processes[service] = FakeProcess()
        self.starts.append(service)
        return self.processes[service]

    def command(self, service: str) -> list[str]:
        return ["python", "-m", f"services.{service}.server", "--listen", "127.0.0.1:1"]

    def address(self, service: str) -> str:
        return "127.0.0.1:1"


def test_supervise_restarts_only_the_child_that_died_and_stops_on_request(caplog: pytest.LogCaptureFixture) -> None:
    from typing import Any

    from services.launcher import supervise

    mesh = FakeMesh(("router", "text", "ocr"))
    sup, clock = supervisor(initial_delay_s=1.0)
    for service in mesh.processes:
        sup.started(service)
    first_text = mesh.processes["text"]
    rounds = iter(range(100))

    def should_stop() -> bool:
        step = next(rounds)
        if step == 1:
            first_text.returncode = -9  # kill -9 of the text service
        clock.now += 0.3  # each loop turn: 0.3 s of fake time
        return step >= 10

    caplog.set_level("INFO", logger="services.launcher")
    fake: Any = mesh  # duck-typed stand-in for Mesh
    supervise(fake, sup, should_stop, poll_s=0)
    assert mesh.starts == ["router", "text", "ocr", "text"]  # only text again, once
    assert mesh.processes["text"] is not first_text and mesh.processes["text"].poll() is None
    assert "text exited (killed by signal SIGKILL) after" in caplog.text and "restart #1 in 1.0 s" in caplog.text
    assert f"restarted text (pid {mesh.processes['text'].pid})" in caplog.text
