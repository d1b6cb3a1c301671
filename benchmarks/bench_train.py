"""Training loop overhead on the in-repo fake service.

1. Zero latency, 64 debates × 4 agents × 3 rounds per step: client time per step, split into the time
   inside the fake service's calls (its scripted sampler and bookkeeping: the "server"), the kernel
   stages (``time/prepare``: replay, votes, rewards, returns, advantages, datums, conversion) and the rest
   (the asyncio rollout driver, rendering, parsing, planner, metrics, files).
   (The fake runs in this process, so its CPU time is on the client's clock; it is reported apart.)
2. Injected latencies (50 ms per sample, 200 ms per forward_backward): step time against the critical-path
   bound of those waits, ``max over debates(turns) × 50 ms + 200 ms`` (debates run concurrently, the turns of
   one debate in sequence; one substep). A latency runs from the request's submission, as a network
   request's does, and the in-process fake computes inside it (a real service computes within its
   latency: the fake's samples halfway to their deadline, while the client waits, not when it sends);
   overhead = (step − bound) / step, everything the waits do not explain: the client's own work
   on the critical path plus any fake CPU that did not fit inside its latency. The injector delivers
   each wait on an asyncio timer. On the default loop those fire late (epoll's timeouts are whole
   milliseconds, rounded up: about 1 ms a wait here, where a network reply wakes the loop on its
   socket), so these runs use a loop that waits with ``select`` (microsecond timeouts, see
   :func:`_precise_loop`), and the unstreamed run is repeated on the default loop for comparison. The
   benchmark also records every wait as delivered and prints the overhead against the bound of those:
   ``longest × mean delivered sample wait + mean delivered forward_backward wait``, the client's own
   share; also for the loop streamed in 4 parts (``stream_minibatches = 4``), where the kernel stages of
   the parts whose debates ended first run before the last debate ends. That row overstates the client's
   share: the fake runs each ``forward_backward`` when it is submitted (it hashes every datum, for the
   record of what it trained, and computes the logprobs: about 60 ms for a whole batch), on the client's
   loop, and a streamed step submits its first parts while the other debates are still sampling, which
   a remote service would not delay. With debates that all end together, streaming cannot help anyway.
   Goal: within 10 % of the bound, client overhead < 5 % of a step.
   A step is its wall time, ``time/total`` (from one metrics line to the next: on-policy, the next batch's
   sampling starts as soon as its sampler is ready, while the step writes its metrics). It is also split
   into its phases (``time/sample``, ``time/prepare``, ``time/train``, the rest: refreshing the sampler
   and whatever of the metrics line did not overlap the next sampling), each against its share of the
   bound (``longest × 50 ms`` for sampling, 200 ms for training, 0 otherwise).

3. Stragglers and a service that computes: each sample takes a uniform 0-100 ms (debates end at different
   times), forward_backward is computed serially at 0.25 µs a token (about 0.37 s for a whole batch) plus
   50 ms of latency (:class:`~adapters.tinker.faults.FaultPlan`'s ``compute_per_token``). Wall time per
   step unstreamed against ``stream_minibatches`` = 4 and 8 (``stream_order = "completion"``) and 8 in
   dataset order: the parts of the debates that ended are computed while the slower ones are still
   sampled.

4. Async modes in one run: on-policy (``max_steps_off_policy = 0``), paced async (k = 1: at most
   ``batch_size × (k + 1)`` groups started and not trained, the oldest finished trained first, nothing
   discarded) and the rule the loop had before, drop-stale (k = 1, a finished group more than k versions
   old is dropped when a step takes its groups and a fresh one sampled instead; re-created in
   :func:`_pacing` as a peer), with stragglers (each sample 0-100 ms) and 200 ms per forward_backward:
   wall time per step, debates sampled, debates trained, and those sampled but not trained (dropped, or
   still sampling when the run ended). At most 16 debates a step: with 64, the in-process fake's CPU
   time dominates a step on a 2-core machine and no mode can hide latency (measured: 2.2 s a step
   on-policy, 3.3 s paced, its 128 concurrent debates contending for the same cores).

Everything runs with :func:`adapters._gc.fewer_gc_passes`, as ``debate-kernel train`` runs the loop
(the default collector thresholds cost 174 ms over 12 steps of part 2, 1.7 % of a step).

``python -m benchmarks train [--quick]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import selectors
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from adapters._gc import fewer_gc_passes
from adapters.futures import DeferredFuture
from adapters.training.checkpoint import transcript_path
from benchmarks._common import print_table


def _precise_loop() -> asyncio.AbstractEventLoop:
    """An event loop whose timers fire on time, for the runs with injected latencies.

    The default loop on Linux waits with epoll, whose timeout is whole milliseconds, rounded up: each
    simulated wait then ends up to 1 ms late (0.9 ms on average here), and the latest of a debate's 12
    waits sets when it ends. A network reply wakes the loop on its socket, with no timer; ``select``
    takes its timeout in microseconds, so the waits end on time and what the step spends beyond them is
    the client's. (The benchmark also measures the unstreamed loop on the default loop.)
    """
    return asyncio.SelectorEventLoop(selectors.SelectSelector())


def _run(coro: Any, *, precise: bool = True) -> Any:
    """``asyncio.run(coro)`` on :func:`_precise_loop` (``precise``) or on the default loop."""
    with asyncio.Runner(loop_factory=_precise_loop if precise else None) as runner:
        return runner.run(coro)


class _Timed:
    """A proxy adding the wall time spent inside the wrapped object's calls (and its clients') to ``box``."""

    def __init__(self, inner: Any, box: list[float]) -> None:
        self._inner, self._box = inner, box

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr) or name in ("get_tokenizer",):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            out = attr(*args, **kwargs)
            self._box[0] += time.perf_counter() - t0
            if isinstance(out, DeferredFuture):  # the fake's samples: computed later, timed then
                return DeferredFuture(functools.partial(self._timed_result, out))
            # only futures of clients are wrapped (their calls are timed too); the others pass as they are
            return _TimedFuture(out, self._box) if name in _CLIENT_METHODS else out

        return call

    def _timed_result(self, fut: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fut.result()
        finally:
            self._box[0] += time.perf_counter() - t0


_CLIENT_METHODS = frozenset(
    {
        "create_lora_training_client",
        "create_training_client_from_state_with_optimizer",
        "save_weights_and_get_sampling_client",
        "create_sampling_client",
    }
)


class _TimedFuture:
    def __init__(self, inner: Any, box: list[float]) -> None:
        self._inner, self._box = inner, box

    async def result_async(self, timeout: float | None = None) -> Any:
        value = await self._inner
        if hasattr(value, "sample") or hasattr(value, "forward_backward"):
            return _Timed(value, self._box)
        return value

    def __await__(self) -> Any:
        return self.result_async().__await__()


def _config(out: Path, debates: int, steps: int, **keys: Any) -> Any:
    """The benchmark's training config (``keys`` set others, e.g. ``stream_minibatches``)."""
    from adapters.training.config import TrainConfig

    return TrainConfig(
        out=str(out),
        steps=steps,
        batch_size=debates,
        num_agents=4,
        max_rounds=3,
        max_tokens=256,
        eval_every=0,
        eval_questions=0,
        save_every=0,
        max_concurrent_debates=debates,
        num_substeps=1,
        **keys,
    )


def _zero_latency(debates: int, steps: int) -> dict[str, float]:
    from adapters.tinker.fake import FakeServiceClient
    from adapters.training.train import run_training

    with tempfile.TemporaryDirectory() as tmp:
        box = [0.0]
        at_step_end: list[float] = []  # the fake's time so far, at each metrics line
        service = _Timed(FakeServiceClient(seed=0), box)
        t0 = time.perf_counter()
        config = _config(Path(tmp) / "run", debates, steps)
        run = run_training(config, service, progress=lambda *_: at_step_end.append(box[0]))  # type: ignore[arg-type]
        result = asyncio.run(run)
        total = time.perf_counter() - t0
    rows = result.metrics[1:] or result.metrics  # the first step pays imports and warm-up
    step = sum(m["time/total"] for m in rows) / len(rows)
    prepare = sum(m["time/prepare"] for m in rows) / len(rows)
    # the fake's time within the same steps (from one metrics line to the next, as time/total)
    server = (at_step_end[-1] - at_step_end[0]) / (len(at_step_end) - 1) if len(at_step_end) > 1 else box[0]
    turns = sum(m["env/all/total_turns"] for m in rows) / len(rows)
    return {
        "step_s": step,
        "server_s": server,
        "kernel_s": prepare,
        "driver_s": step - server - prepare,
        "turns": turns,
        "total_s": total,
    }


def _with_latency(
    debates: int, steps: int, sample_s: float, fb_s: float, minibatches: int = 0, *, precise: bool = True
) -> dict[str, float]:
    from adapters.tinker.fake import FakeServiceClient
    from adapters.tinker.faults import FaultPlan, with_faults
    from adapters.training.train import run_training

    with tempfile.TemporaryDirectory() as tmp:
        plan = FaultPlan(latency={"sample": sample_s, "forward_backward": fb_s})
        box = [0.0]
        service, faults = with_faults(_Timed(FakeServiceClient(seed=0), box), plan)  # type: ignore[arg-type]
        run = Path(tmp) / "run"
        config = _config(run, debates, steps, stream_minibatches=minibatches)
        result = _run(run_training(config, service), precise=precise)
        fake_cpu = box[0] / len(result.metrics)
        # the waits as the injector delivered them (its timers fire up to a millisecond or so late)
        sample_as_delivered = statistics.fmean(faults.delivered["sample"])
        fb_as_delivered = statistics.fmean(faults.delivered["forward_backward"])
        ratios = []
        overheads = []
        delivered_overheads = []
        steps_s = []
        parts = {
            "sample_s": 0.0,
            "sample_bound_s": 0.0,
            "prepare_s": 0.0,
            "train_s": 0.0,
            "rest_s": 0.0,
        }
        # warm-up: the first two steps (imports, first calls); the same steps as in earlier reports
        rows = result.metrics[2:] or result.metrics
        n = len(rows)
        for m in rows:
            lines = transcript_path(run, m["step"]).read_text().splitlines()
            longest = max(len(json.loads(line)["turns"]) for line in lines)
            bound = longest * sample_s + fb_s
            step = m["time/total"]  # wall time per step (the next batch's sampling overlaps the metrics)
            ratios.append(step / bound)
            overheads.append((step - bound) / step)
            delivered = longest * sample_as_delivered + fb_as_delivered
            delivered_overheads.append((step - delivered) / step)
            steps_s.append(step)
            parts["sample_s"] += m["time/sample"] / n
            parts["sample_bound_s"] += longest * sample_s / n
            parts["prepare_s"] += m["time/prepare"] / n
            parts["train_s"] += m["time/train"] / n
            parts["rest_s"] += (step - m["time/sample"] - m["time/prepare"] - m["time/train"]) / n
    return {
        "ratio": sum(ratios) / len(ratios),
        "overhead": sum(overheads) / len(overheads),
        "bound_s": bound,
        "step_s": statistics.fmean(steps_s),
        "sample_delivered_s": sample_as_delivered,
        "fb_delivered_s": fb_as_delivered,
        "overhead_vs_delivered": statistics.fmean(delivered_overheads),
        "fake_cpu_s": fake_cpu,
        "kernel_s": float(m["time/prepare"]),
        **parts,
        "train_bound_s": fb_s,
    }


PACING_MODES = ("on-policy", "paced", "drop-stale")
"""The modes part 4 compares: ``max_steps_off_policy`` 0; 1 with the loop's pacing rule; 1 with the rule
the loop had before it (a finished group sampled more than k versions before the step that would take
it is dropped and a fresh one sampled in its place), re-created here as a peer."""


@contextlib.contextmanager
def _pacing(mode: str, counts: dict[str, int]) -> Iterator[None]:
    """Counts the groups the planner starts (``counts["sampled"]``) and, for ``"drop-stale"``, drops the
    finished groups older than k versions when a step is about to take its groups
    (``counts["dropped"]``): the planner patched for the duration, the loop's own code otherwise."""
    from adapters.training import planner as pl

    start, step, advance = pl.start, pl.step, pl._advance

    def counted(out: tuple[Any, tuple[Any, ...]]) -> tuple[Any, tuple[Any, ...]]:
        counts["sampled"] += sum(len(r.groups) for r in out[1] if isinstance(r, pl.Sample))
        return out

    def dropping(config: Any, s: Any, out: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
        if s.phase == "idle" and s.step >= config.warm_start_steps:
            fresh = tuple(x for x in s.ready if s.step - x[1] <= config.max_steps_off_policy)
            counts["dropped"] += len(s.ready) - len(fresh)
            s = replace(s, ready=fresh)  # not counted as trained: the run samples others in their place
        return advance(config, s, out)

    pl.start = lambda *a, **k: counted(start(*a, **k))  # type: ignore[assignment]
    pl.step = lambda *a, **k: counted(step(*a, **k))  # type: ignore[assignment]
    if mode == "drop-stale":
        pl._advance = dropping  # type: ignore[assignment]
    try:
        yield
    finally:
        pl.start, pl.step, pl._advance = start, step, advance  # type: ignore[assignment]


def _async_modes(debates: int, steps: int, fb_s: float) -> dict[str, dict[str, float]]:
    """Part 4: per mode, wall time per step, debates sampled and trained, staleness, with stragglers
    (each sample waits a uniform 0-100 ms) and ``fb_s`` per forward_backward; one group = one debate."""
    from adapters.tinker.fake import FakeServiceClient
    from adapters.tinker.faults import FaultPlan, with_faults
    from adapters.training.train import run_training

    out: dict[str, dict[str, float]] = {}
    for mode in PACING_MODES:
        counts = {"sampled": 0, "dropped": 0}
        with tempfile.TemporaryDirectory() as tmp, _pacing(mode, counts):
            plan = FaultPlan(seed=1, rates={"delay": 1.0}, max_delay=0.1, latency={"forward_backward": fb_s})
            service, _ = with_faults(FakeServiceClient(seed=0), plan)
            k = 0 if mode == "on-policy" else 1
            config = _config(Path(tmp) / "run", debates, steps, max_steps_off_policy=k)
            t0 = time.perf_counter()
            result = _run(run_training(config, service))
            wall = time.perf_counter() - t0
        rows = result.metrics
        trained = sum(m["env/all/total_episodes"] for m in rows)
        out[mode] = {
            "wall_per_step_s": wall / steps,
            "debates_sampled": float(counts["sampled"] * config.group_size),
            "debates_trained": float(trained),
            "debates_dropped": float(counts["dropped"] * config.group_size),
            "staleness_mean": statistics.fmean(m["async/staleness_mean"] for m in rows),
            "staleness_max": float(max(m["async/staleness_max"] for m in rows)),
        }
    return out


def _stragglers(debates: int, steps: int, minibatches: int, order: str = "completion") -> float:
    """Mean wall time per step (steps 2..) with random sample delays and a computing service."""

    from adapters.tinker.fake import FakeServiceClient
    from adapters.tinker.faults import FaultPlan, with_faults
    from adapters.training.train import run_training

    with tempfile.TemporaryDirectory() as tmp:
        plan = FaultPlan(
            seed=1,
            rates={"delay": 1.0},
            max_delay=0.1,
            latency={"forward_backward": 0.05},
            compute_per_token={"forward_backward": 0.25e-6},
        )
        service, _ = with_faults(FakeServiceClient(seed=0), plan)
        keys = {"stream_minibatches": minibatches, "stream_order": order}
        result = _run(run_training(_config(Path(tmp) / "run", debates, steps, **keys), service))
    rows = result.metrics[1:] or result.metrics
    return statistics.fmean(m["time/total"] for m in rows)


def main(argv: list[str]) -> int:
    with fewer_gc_passes():  # as `debate-kernel train` runs the loop
        return _main(argv)


def _main(argv: list[str]) -> int:
    quick = "--quick" in argv
    debates, steps = (8, 2) if quick else (64, 4)
    zero = _zero_latency(debates, steps)
    print_table(
        f"train: zero latency, {debates} debates x 4 agents x 3 rounds per step (mean of steps 2..)",
        ["part", "seconds/step", "share"],
        [
            ["step (client + fake)", zero["step_s"], 1.0],
            ["fake service calls", zero["server_s"], zero["server_s"] / zero["step_s"]],
            [
                "kernel stages (prepare)",
                zero["kernel_s"],
                zero["kernel_s"] / zero["step_s"],
            ],
            [
                "asyncio driver + rest",
                zero["driver_s"],
                zero["driver_s"] / zero["step_s"],
            ],
        ],
    )
    lat = _with_latency(debates, 3 if quick else 13, 0.05, 0.2)  # 11 measured steps: the host is noisy
    print_table(
        "train: 50 ms per sample, 200 ms per forward_backward",
        [
            "step s",
            "critical-path bound s",
            "step / bound",
            "fake CPU s",
            "kernel s",
            "overhead (step - bound) / step",
        ],
        [
            [
                lat["step_s"],
                lat["bound_s"],
                lat["ratio"],
                lat["fake_cpu_s"],
                lat["kernel_s"],
                lat["overhead"],
            ]
        ],
    )
    streamed = _with_latency(debates, 3 if quick else 13, 0.05, 0.2, minibatches=4)
    epoll = _with_latency(debates, 3 if quick else 13, 0.05, 0.2, precise=False)
    print_table(
        "train: the same step against the waits as delivered (timers fire late, most on the default loop)",
        [
            "loop",
            "sample wait s",
            "fb wait s",
            "(step - bound) / step",
            "client overhead (step - delivered bound) / step",
        ],
        [
            [name, r["sample_delivered_s"], r["fb_delivered_s"], r["overhead"], r["overhead_vs_delivered"]]
            for name, r in (
                ("unstreamed", lat),
                ("unstreamed, default loop (epoll: ms timeouts)", epoll),
                ("stream_minibatches = 4", streamed),
            )
        ],
    )
    print_table(
        "train: where the synchronous step goes (mean over steps), against its share of the bound",
        ["phase", "seconds", "bound s", "over bound s"],
        [
            [
                "sample (rollouts)",
                lat["sample_s"],
                lat["sample_bound_s"],
                lat["sample_s"] - lat["sample_bound_s"],
            ],
            ["prepare (kernel stages)", lat["prepare_s"], 0.0, lat["prepare_s"]],
            [
                "train (forward_backward + optim)",
                lat["train_s"],
                lat["train_bound_s"],
                lat["train_s"] - lat["train_bound_s"],
            ],
            ["rest (refresh, metrics not overlapped)", lat["rest_s"], 0.0, lat["rest_s"]],
        ],
    )
    # latency-bound: with 64 debates a step the fake's CPU time on 2 cores dominates
    paced_debates = min(debates, 16)
    modes = _async_modes(paced_debates, 3 if quick else 8, 0.2)
    base = modes["on-policy"]["wall_per_step_s"]
    print_table(
        f"train: async modes, {paced_debates} debates a step, stragglers (samples 0-100 ms), 200 ms per "
        "forward_backward, in one run (paced: at most batch x (k + 1) started and not trained; drop-stale: "
        "the old rule, a peer)",
        [
            "mode (k)",
            "wall s per step",
            "on-policy / mode",
            "debates sampled",
            "debates trained",
            "sampled, not trained",
            "staleness mean",
            "staleness max",
        ],
        [
            [
                f"{mode} ({0 if mode == 'on-policy' else 1})",
                r["wall_per_step_s"],
                base / r["wall_per_step_s"],
                r["debates_sampled"],
                r["debates_trained"],
                r["debates_sampled"] - r["debates_trained"],
                r["staleness_mean"],
                r["staleness_max"],
            ]
            for mode, r in modes.items()
        ],
    )
    asy = {f"{mode.replace('-', '_')}_{k}": v for mode, r in modes.items() for k, v in r.items()}
    stream_steps = 2 if quick else 5
    whole = _stragglers(debates, stream_steps, 0)
    cases = [(4, "completion"), (8, "completion"), (8, "dataset")]
    stragglers = {f"{m}_{order}": _stragglers(debates, stream_steps, m, order) for m, order in cases}
    print_table(
        "train: stragglers (samples 0-100 ms), forward_backward computed at 0.25 us/token + 50 ms",
        ["stream_minibatches, stream_order", "wall s per step", "unstreamed / streamed"],
        [["0 (off)", whole, 1.0], *([k.replace("_", ", "), t, whole / t] for k, t in stragglers.items())],
    )
    print(
        json.dumps(
            {
                "bench": "train",
                "stragglers_step_s": round(whole, 5),
                **{f"stragglers_stream{m}_step_s": round(t, 5) for m, t in stragglers.items()},
                **{f"zero_{k}": round(v, 5) for k, v in zero.items()},
                **{f"latency_{k}": round(v, 5) for k, v in lat.items()},
                **{f"async_{k}": round(v, 5) for k, v in asy.items()},
                **{f"streamed_{k}": round(v, 5) for k, v in streamed.items()},
                **{f"epoll_{k}": round(v, 5) for k, v in epoll.items()},
            }
        )
    )
    return 0
