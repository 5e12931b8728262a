"""kill -9 each child of the real launcher under load, and measure what the callers saw. Prints JSON.

    python -m bench.launcher_chaos [--kill text vision ocr router router-bulk] [--settle-s 2]
                                   [--restart-initial-s 0.5]

Starts `python -m services.launcher` (the shipped config/, free ports, a temporary state folder),
sends steady load through both router lanes (text-only and image-only `Moderate` calls, as the demo
tenants: acme on the interactive lane with the default policy, globex on the bulk lane with the strict
one), then kills each named child in turn and reports, per kill:
  - `outage_s`: kill -9 to the restarted process answering SERVING on grpc.health.v1;
  - `recovery_s`: from that SERVING to the first answer that needed the service and was not degraded
    (a router lane: the first answer on that lane);
  - per lane, the answers by outcome (ok / degraded / a gRPC status) and the longest gap between
    answers, from the kill to the recovery.
The test tests/integration/test_launcher_chaos.py asserts on the same figures.

Example::

    with ChaosMesh.start(tmp_path) as chaos, Load(chaos.mesh) as load:
        result = chaos.kill_and_recover("vision", load)
        result.recovery_s, result.lanes["router"].errors
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Iterator, Sequence

import grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from grpc_health.v1 import health_pb2_grpc

from services.launcher import MODALITIES, ROOT, Mesh, free_base_port, serving
from bench.render import render_photo_like

#: The demo tenants of config/tenants.yaml (loopback only).
LANE_KEYS = {"router": "demo-acme-key", "router-bulk": "demo-globex-key"}
#: The stages each kind of call needs (an image OCR reads as empty needs no text stage).
KIND_STAGES = {"text": ("text",), "image": ("vision", "ocr")}
#: Calls per second per (lane, kind): a steady trickle that a 2-core machine carries with room to spare.
RATES = {("router", "text"): 20.0, ("router", "image"): 8.0, ("router-bulk", "text"): 10.0,
         ("router-bulk", "image"): 4.0}
CALL_TIMEOUT_S = 2.0
#: Client channels reconnect fast too: this measures the mesh, not the test client's backoff.
CLIENT_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 50), ("grpc.max_reconnect_backoff_ms", 200)]


@dataclass(frozen=True)
class Call:
    """One call as its caller saw it: `outcome` is "ok", "degraded" or a gRPC status name."""

    lane: str
    kind: str
    started: float
    ended: float
    outcome: str
    decision: str = ""
    degradations: tuple[tuple[str, str], ...] = ()  # (stage, handling)

    def needs(self, service: str) -> bool:
        """This call goes through `service` (its lane's router, or a modality stage it uses)."""
        return service == self.lane or service in KIND_STAGES[self.kind]

    def served_by(self, service: str) -> bool:
        """Answered, and (for a modality service) not degraded for want of it."""
        if self.outcome not in ("ok", "degraded"):
            return False
        return service in LANE_KEYS or all(stage != service for stage, _ in self.degradations)


@dataclass
class LaneSummary:
    """What one lane's callers saw over a window."""

    answers: int = 0
    ok: int = 0
    degraded: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    max_gap_s: float = 0.0
    #: (stage, handling) -> count, over the degraded answers.
    degradations: dict[str, int] = field(default_factory=dict)


@dataclass
class KillResult:
    service: str
    outage_s: float
    recovery_s: float
    lanes: dict[str, LaneSummary]
    #: Degraded answers whose degradation names the killed stage, with a handling other than the
    #: tenant's policy says (default policy: text closed, vision/ocr open; strict: all closed).
    off_policy: int = 0


#: failure handling per lane's tenant policy (config/policies/default.yaml, strict.yaml).
POLICY_HANDLING = {"router": {"text": "fail_closed", "vision": "fail_open", "ocr": "fail_open"},
                   "router-bulk": {"text": "fail_closed", "vision": "fail_closed", "ocr": "fail_closed"}}


class Load:
    """Threads sending RATES calls per second through the router lanes, recording every `Call`."""

    def __init__(self, mesh: Mesh) -> None:
        self.mesh = mesh
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        image = render_photo_like((96, 96), seed=3, shapes=0)  # small, and OCR reads no text in it
        self._requests = {"text": pb.ModerateRequest(item=pb.Item(id="t", parts=[pb.Part(text="see you on friday")])),
                          "image": pb.ModerateRequest(item=pb.Item(id="i", parts=[pb.Part(image=pb.Image(data=image))]))}
        self._threads = [threading.Thread(target=self._run, args=(lane, kind, rate), daemon=True, name=f"{lane}-{kind}")
                         for (lane, kind), rate in RATES.items()]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(CALL_TIMEOUT_S + 1)

    def snapshot(self) -> list[Call]:
        with self._lock:
            return list(self.calls)

    def _run(self, lane: str, kind: str, rate: float) -> None:
        period = 1.0 / rate
        metadata = [("x-api-key", LANE_KEYS[lane])]
        with grpc.insecure_channel(self.mesh.address(lane), options=CLIENT_OPTIONS) as channel:
            stub = pb_grpc.ModerationServiceStub(channel)
            while not self._stop.is_set():
                started = time.monotonic()
                call = self._call(stub, lane, kind, metadata, started)
                with self._lock:
                    self.calls.append(call)
                self._stop.wait(max(0.0, period - (time.monotonic() - started)))

    def _call(self, stub: pb_grpc.ModerationServiceStub, lane: str, kind: str, metadata: list[tuple[str, str]],
              started: float) -> Call:
        try:
            response = stub.Moderate(self._requests[kind], metadata=metadata, timeout=CALL_TIMEOUT_S)
        except grpc.RpcError as error:
            return Call(lane, kind, started, time.monotonic(), error.code().name)
        degradations = tuple((d.stage, d.handling) for d in response.degradations)
        return Call(lane, kind, started, time.monotonic(), "degraded" if response.degraded else "ok",
                    pb.Decision.Name(response.decision), degradations)


def summarise(calls: Sequence[Call], lane: str, start: float, end: float) -> LaneSummary:
    """The lane's answers that ended in [start, end], and the longest gap between answers there
    (the window's edges count as answers: a lane silent for the whole window has a gap of its length)."""
    summary = LaneSummary()
    times = [start]
    for call in calls:
        if call.lane != lane or not start <= call.ended <= end:
            continue
        if call.outcome in ("ok", "degraded"):
            summary.answers += 1
            times.append(call.ended)
            if call.outcome == "ok":
                summary.ok += 1
            else:
                summary.degraded += 1
                for stage, handling in call.degradations:
                    key = f"{stage}:{handling}"
                    summary.degradations[key] = summary.degradations.get(key, 0) + 1
        else:
            summary.errors[call.outcome] = summary.errors.get(call.outcome, 0) + 1
    times.append(end)
    times.sort()
    summary.max_gap_s = round(max(b - a for a, b in zip(times, times[1:])), 3)
    return summary


class ChaosMesh:
    """The real launcher as a process (on free ports, its state in `workdir`), and its children."""

    def __init__(self, workdir: Path, *, restart_initial_s: float = 0.5) -> None:
        self.workdir = workdir
        self.mesh = Mesh(free_base_port(), isolated_state=False)  # addresses only: the launcher starts the processes
        self.log_path = workdir / "launcher.log"
        self._log = self.log_path.open("wb")
        command = [sys.executable, "-m", "services.launcher", "--config-dir", str(ROOT / "config"),
                   "--base-port", str(self.mesh.base_port), "--metrics-base-port", "0",
                   "--state-dir", str(workdir), "--restart-initial-s", str(restart_initial_s)]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT)
        self.seen_pids: set[int] = set()
        #: Children still alive when the launcher had exited (set by `stop`; should be none).
        self.leftovers: list[int] = []

    @classmethod
    @contextlib.contextmanager
    def start(cls, workdir: Path, timeout_s: float = 120.0, **options: float) -> Iterator[ChaosMesh]:
        """Start the launcher, wait until it says the mesh serves; on exit stop it (SIGTERM) and make
        sure none of its children outlives it."""
        chaos = cls(workdir, **options)
        try:
            chaos.wait_for_log("auditmesh is serving", timeout_s)
            for service in chaos.mesh.services:
                chaos.pid_of(service)  # remembered, to check at the end that all are gone
            yield chaos
        finally:
            chaos.stop()

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_for_log(self, text: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.log_text():
            if self.process.poll() is not None:
                raise RuntimeError(f"the launcher exited with {self.process.returncode}:\n{self.log_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {text!r} in the launcher's log after {timeout_s:.0f} s:\n{self.log_text()[-4000:]}")
            time.sleep(0.1)

    def pid_of(self, service: str) -> int | None:
        """The launcher's child now running `service` (found by the `--listen` address on its command
        line), or None."""
        address = self.mesh.address(service)
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if parent == self.process.pid and b"--listen" in argv and address.encode() in argv:
                self.seen_pids.add(int(entry))
                return int(entry)
        return None

    def wait_new_serving(self, service: str, old_pid: int, timeout_s: float) -> float:
        """Block until a process other than `old_pid` runs `service` and answers SERVING; when it did."""
        deadline = time.monotonic() + timeout_s
        options = [("grpc.initial_reconnect_backoff_ms", 20), ("grpc.max_reconnect_backoff_ms", 50)]
        with grpc.insecure_channel(self.mesh.address(service), options=options) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                pid = self.pid_of(service)
                if pid is not None and pid != old_pid and serving(stub, timeout_s=0.2):
                    return time.monotonic()
                time.sleep(0.02)
        raise RuntimeError(f"{service} was not serving again {timeout_s:.0f} s after kill -9:\n{self.log_text()[-4000:]}")

    def kill_and_recover(self, service: str, load: Load, *, timeout_s: float = 60.0) -> KillResult:
        """kill -9 `service`; wait until it serves again and a call needing it is answered in full."""
        pid = self.pid_of(service)
        if pid is None:
            raise RuntimeError(f"no running {service} process:\n{self.log_text()[-4000:]}")
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        back = self.wait_new_serving(service, pid, timeout_s)
        deadline = time.monotonic() + timeout_s
        recovered = None
        while recovered is None and time.monotonic() < deadline:
            time.sleep(0.05)
            recovered = next((c.ended for c in load.snapshot()
                              if c.ended > back and c.needs(service) and c.served_by(service)), None)
        if recovered is None:
            raise RuntimeError(f"no answer served by {service} within {timeout_s:.0f} s of it serving again")
        time.sleep(0.5)  # the calls in flight at `recovered` end: the window is then complete
        calls = load.snapshot()
        lanes = {lane: summarise(calls, lane, killed, recovered) for lane in LANE_KEYS}
        off_policy = 0
        if service in MODALITIES:
            off_policy = sum(1 for c in calls if killed <= c.ended <= recovered
                             for stage, handling in c.degradations
                             if stage == service and handling != POLICY_HANDLING[c.lane][stage])
        return KillResult(service, round(back - killed, 3), round(recovered - back, 3), lanes, off_policy)

    def stop(self) -> int:
        """SIGTERM the launcher and wait for it; SIGKILL any child it left (`leftovers`: a failure)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.leftovers = [pid for pid in self.seen_pids if _alive(pid)]
        for pid in self.leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._log.close()
        return self.process.returncode


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kill", nargs="+", default=["text", "vision", "ocr", "router", "router-bulk"])
    parser.add_argument("--settle-s", type=float, default=2.0, help="steady load before each kill")
    parser.add_argument("--restart-initial-s", type=float, default=0.5,
                        help="the launcher's wait before a restart: longer = longer outages (default: 0.5)")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="auditmesh-chaos-") as tmp:
        with ChaosMesh.start(Path(tmp), restart_initial_s=args.restart_initial_s) as chaos, Load(chaos.mesh) as load:
            time.sleep(args.settle_s)
            for service in args.kill:
                results.append(chaos.kill_and_recover(service, load))
                time.sleep(args.settle_s)
    print(json.dumps({"kills": [asdict(r) for r in results]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
