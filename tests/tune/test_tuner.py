"""The tuner core: compile_config on real cuda compiles (shared memory pruned after the llir stage, a normal
config a cubin with its registers), the pipeline's after_stage hook, the compilers, and the bookkeeping of
each strategy (exhaustive, random, successive halving) over real cpu artifacts and a bench that reads its
times from a table; then one whole tune of an autotuned cpu vector add in a real bench process.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tilec.compiler import backends
from tilec.compiler.artifact import Artifact, CompileOptions
from tilec.compiler.errors import CompileError
from tilec.compiler.pipeline import compile_request
from tilec.compiler.request import CompileRequest
from tilec.compiler.tune.launch import LaunchDescription
from tilec.compiler.tune.space import config_hash, normalise
from tilec.compiler.tune.stats import Timing
from tilec.compiler.tune.tuner import (
    BRIEF,
    FULL,
    Compiled,
    Effort,
    Outcome,
    Trial,
    Tuner,
    compile_config,
    config_request,
    in_process_compiler,
    process_pool_compiler,
)
from tilec.runtime.bench import TrialFault
from tilec.runtime.tune import TuneSpec, prepare, run_tune

KERNELS = Path(__file__).parents[1] / "kernels"
ADD_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}
ADD = CompileRequest(text=(KERNELS / "vector_add.py").read_text(), name="add_kernel", signature=ADD_SIG)
BLOCKS = [16, 32, 64, 128, 256, 512, 1024, 2048]
BAD_BLOCK = 3  # tl.arange of a length that is not a power of two: a real compile error

MATMUL_PARAMS = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K"] + [
    f"stride_{x}" for x in ("am", "ak", "bk", "bn", "cm", "cn")
]
MATMUL_SIG = {p: "*fp16" if p.endswith("_ptr") else "i32" for p in MATMUL_PARAMS}


def block(b: int, warps: int | None = None) -> dict:
    return normalise({"BLOCK_SIZE": b}, warps)


def trial_of(outcome: Outcome, b: int) -> Trial:
    (t,) = [t for t in outcome.trials if t.config["kwargs"]["BLOCK_SIZE"] == b]
    return t


# ---- compile_config and the pipeline's after_stage hook (real compiles) ---------------------------------


def _cuda_assembler() -> bool:
    from tilec.compiler.backends.cuda.nvptx import ptxas_path

    if ptxas_path() is not None:
        return True
    try:
        from cuda.bindings import nvjitlink  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return False
    return True


needs_assembler = pytest.mark.skipif(
    not _cuda_assembler(), reason="neither ptxas nor nvJitLink is installed here"
)


def matmul(target: str, m: int, n: int, k: int, warps: int, stages: int) -> CompileRequest:
    base = CompileRequest(
        text=(KERNELS / "matmul.py").read_text(),
        name="matmul_kernel",
        signature=MATMUL_SIG,
        options=CompileOptions(target=target),
    )
    config = normalise(
        {"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8}, warps, stages
    )
    return config_request(base, config)


@pytest.fixture
def cuda_stages_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the cuda stages that ran, through the registry's own hook for wrapping stages."""
    ran: list[str] = []

    def wrapped(name: str, stage: Any) -> Any:
        def run(ir: Any, meta: dict) -> Any:
            ran.append(name)
            return stage(ir, meta)

        return run

    real = backends.stages("cuda")
    assert real is not None
    monkeypatch.setitem(backends.STAGES, "cuda", [(n, wrapped(n, s)) for n, s in real])
    return ran


def test_config_request_binds_kwargs_warps_and_stages() -> None:
    base = replace(ADD, constexprs={"OTHER": 1}, options=CompileOptions(target="cuda:sm_90", opt_level=2))
    r = config_request(base, normalise({"BLOCK_SIZE": 64}, 8, 2))
    assert r.constexprs == {"OTHER": 1, "BLOCK_SIZE": 64}
    assert r.options == CompileOptions(target="cuda:sm_90", num_warps=8, num_stages=2, opt_level=2)
    assert r.text == base.text and r.signature == base.signature


def test_after_stage_sees_every_stage_and_may_stop_the_compile() -> None:
    seen: list[tuple[str, list[str]]] = []
    request = config_request(ADD, block(128))
    compile_request(request, after_stage=lambda name, meta: seen.append((name, sorted(meta))))
    assert [name for name, _ in seen] == ["tir", "llir", "object"]
    assert all("options" in keys for _, keys in seen)

    class Stop(Exception):
        pass

    def stop(name: str, meta: dict) -> None:
        seen.append((name, []))
        if name == "llir":
            raise Stop

    seen.clear()
    with pytest.raises(Stop):
        compile_request(request, after_stage=stop)
    assert [name for name, _ in seen] == ["tir", "llir"]


def test_after_stage_stops_at_emit() -> None:
    seen: list[str] = []
    request = replace(config_request(ADD, block(128)), emit="llir")
    art = compile_request(request, after_stage=lambda name, meta: seen.append(name))
    assert seen == ["tir", "llir"]
    assert art.binary == b"" and "define" in art.llir


@needs_assembler
def test_compile_config_prunes_planned_shared_memory_after_llir(cuda_stages_run: list[str]) -> None:
    # 104448 bytes of shared memory (A and B staged, no ring without stride hints): an sm_80 block may have them,
    # an sm_86 block may not
    reason = compile_config(matmul("cuda:sm_86", 128, 256, 128, 8, 3))
    assert reason == "needs 104448 bytes of shared memory per block; cuda:sm_86 gives at most 101376"
    assert cuda_stages_run == ["tir", "gpu-tir", "llir"]  # neither ptx nor ptxas ran


@needs_assembler
def test_a_config_past_every_archs_shared_memory_is_pruned_not_failed(cuda_stages_run: list[str]) -> None:
    request = matmul("cuda:sm_80", 256, 256, 256, 8, 5)  # the lowering itself refuses its 264 KB
    reason = compile_config(request)
    assert isinstance(reason, str), reason
    assert "bytes of shared memory" in reason
    assert "ptx" not in cuda_stages_run and "cubin" not in cuda_stages_run
    base = replace(request, constexprs={})
    configs = [normalise({k: v for k, v in request.constexprs.items()}, 8, 5)]
    outcome = Tuner(base=base, configs=configs, bench=TableBench({}), compiler=in_process_compiler).run()
    assert [(t.status, t.reason) for t in outcome.trials] == [("pruned", reason)]


@needs_assembler
def test_compile_config_of_a_normal_config_is_a_cubin_with_registers(cuda_stages_run: list[str]) -> None:
    art = compile_config(matmul("cuda:sm_80", 32, 32, 32, 2, 3))
    assert isinstance(art, Artifact), art
    assert art.binary.startswith(b"\x7fELF")
    assert 0 < art.metadata["registers"] <= 255
    assert art.metadata["threads_per_block"] == 64
    assert art.metadata["spill_stores"] == 0
    assert cuda_stages_run == ["tir", "gpu-tir", "llir", "ptx", "cubin"]


def test_compile_config_on_cpu_is_an_artifact_and_raises_compile_errors() -> None:
    art = compile_config(config_request(ADD, block(128)))
    assert isinstance(art, Artifact) and art.binary.startswith(b"\x7fELF")
    with pytest.raises(CompileError, match="power of two"):
        compile_config(config_request(ADD, block(BAD_BLOCK)))


def test_in_process_compiler_yields_each_index_and_errors_as_values() -> None:
    requests = [config_request(ADD, block(b)) for b in (64, BAD_BLOCK, 256)]
    got = list(in_process_compiler(requests))
    assert [i for i, _ in got] == [0, 1, 2]
    assert isinstance(got[0][1], Artifact) and isinstance(got[2][1], Artifact)
    assert isinstance(got[1][1], CompileError)


def test_process_pool_compiler_yields_every_index_once() -> None:
    requests = [config_request(ADD, block(b)) for b in (64, BAD_BLOCK, 256)]
    got = dict(process_pool_compiler(2)(requests))
    assert sorted(got) == [0, 1, 2]
    assert isinstance(got[0], Artifact) and "end = 64," in got[0].tir
    assert isinstance(got[2], Artifact) and "end = 256," in got[2].tir
    assert isinstance(got[1], CompileError) and "power of two" in str(got[1])
    assert list(process_pool_compiler(2)([])) == []


def test_a_compile_error_from_the_pool_reads_as_in_process() -> None:
    request = config_request(ADD, block(BAD_BLOCK))
    with pytest.raises(CompileError) as here:
        compile_config(request)
    ((_, there),) = process_pool_compiler(1)([request])
    assert isinstance(there, CompileError)
    assert (str(there), there.line, there.col) == (str(here.value), here.value.line, here.value.col)


# ---- the strategies, over real cpu artifacts and a table of times -------------------------------------

_BUILT: dict[str, Artifact] = {}  # cpu compiles shared by the tests of this module


def _build(request: CompileRequest) -> Artifact | str:
    key = json.dumps(
        [request.constexprs, request.options.num_warps, request.options.num_stages], sort_keys=True
    )
    if key not in _BUILT:
        art = compile_config(request)  # raises for a config that does not compile
        assert isinstance(art, Artifact)
        _BUILT[key] = art
    return _BUILT[key]


class Compiles:
    """A Compiler of real cpu artifacts that finishes them in reverse order (as a pool may), records which
    BLOCK_SIZEs it was asked for, and makes the configs in `spill` look as if ptxas spilled 8 bytes."""

    def __init__(self, spill: tuple[int, ...] = ()) -> None:
        self.spill = spill
        self.asked: list[int] = []

    def __call__(self, requests: list[CompileRequest]) -> Iterator[tuple[int, Compiled]]:
        self.asked += [r.constexprs["BLOCK_SIZE"] for r in requests]
        for i in reversed(range(len(requests))):
            try:
                result = _build(requests[i])
            except CompileError as exc:
                yield i, exc
                continue
            if requests[i].constexprs["BLOCK_SIZE"] in self.spill and isinstance(result, Artifact):
                result = replace(result, metadata={**result.metadata, "spill_stores": 8})
            yield i, result


class TableBench:
    """A bench whose median for a BLOCK_SIZE comes from `brief` (any effort but FULL) or `full` (the FULL
    effort; default: the brief table). It records (BLOCK_SIZE, effort) per call, checks that the artifact
    is the config's own, and raises the exception that `faults` gives a BLOCK_SIZE."""

    def __init__(
        self,
        brief: dict[int, float],
        full: dict[int, float] | None = None,
        faults: dict[int, Exception] | None = None,
        full_effort: Effort = FULL,
    ) -> None:
        self.brief, self.full, self.faults = brief, full or brief, faults or {}
        self.full_effort = full_effort
        self.calls: list[tuple[int, dict]] = []

    def time(self, art: Artifact, config: dict, **effort: Any) -> Timing:
        b = config["kwargs"]["BLOCK_SIZE"]
        assert f"make_range {{end = {b}, start = 0}}" in art.tir, (
            "the tuner paired a config with another's binary"
        )
        self.calls.append((b, effort))
        if b in self.faults:
            raise self.faults[b]
        is_full = {k: effort[k] for k in self.full_effort.kwargs()} == self.full_effort.kwargs()
        ms = (self.full if is_full else self.brief)[b]
        reps = effort["min_reps"]
        return Timing(ms, ms * 0.99, ms * 1.01, reps, converged=True)

    def timed(self) -> list[int]:
        return [b for b, _ in self.calls]


def tuner(configs: list[dict], bench: TableBench, compiler: Any = None, **kw: Any) -> Tuner:
    return Tuner(base=ADD, configs=configs, bench=bench, compiler=compiler or Compiles(), **kw)


def full_kwargs(graph: bool = False) -> dict:
    return {**FULL.kwargs(), "graph": graph}


def test_unknown_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown strategy 'grid'"):
        tuner([block(64)], TableBench({}), strategy="grid")


def test_exhaustive_times_every_config_in_full_and_picks_the_fastest() -> None:
    times = {64: 3.0, 128: 1.5, 256: 0.7, 512: 2.0}
    bench = TableBench(times)
    recorded: list[Trial] = []
    t = tuner([block(b) for b in times], bench, compiler=in_process_compiler, strategy="exhaustive",
              on_trial=recorded.append, graph=True)  # fmt: skip
    assert t.planned() == 4
    outcome = t.run()
    assert not outcome.cancelled
    assert sorted(bench.timed()) == sorted(times)
    assert all(effort == full_kwargs(graph=True) for _, effort in bench.calls)
    assert {tr.config["kwargs"]["BLOCK_SIZE"]: (tr.status, tr.time_ms) for tr in outcome.trials} == {
        b: ("ok", ms) for b, ms in times.items()
    }
    assert outcome.best is trial_of(outcome, 256)
    assert recorded == outcome.trials and len(recorded) == 4
    best = outcome.best
    assert best.reps == FULL.min_reps and best.lo_ms < best.time_ms < best.hi_ms
    assert isinstance(best.artifact, Artifact)
    assert "artifact" not in best.public() and best.public()["config"] == block(256)
    assert best.hash == config_hash(block(256))


def test_random_times_exactly_its_budget_seeded() -> None:
    configs = [block(b) for b in BLOCKS]
    times = {b: float(i + 1) for i, b in enumerate(BLOCKS)}

    def sample(seed: int) -> tuple[list[int], Outcome, Compiles]:
        bench, compiles = TableBench(times), Compiles()
        t = tuner(configs, bench, compiles, strategy="random", budget=3, seed=seed)
        assert t.planned() == 3
        outcome = t.run()
        chosen = sorted(tr.config["kwargs"]["BLOCK_SIZE"] for tr in outcome.trials)
        # the configs left out are neither compiled nor timed
        assert sorted(compiles.asked) == sorted(bench.timed()) == chosen
        return chosen, outcome, compiles

    chosen, outcome, _ = sample(seed=7)
    assert len(chosen) == 3 and len(set(chosen)) == 3
    assert all(tr.status == "ok" for tr in outcome.trials)
    assert outcome.best is trial_of(outcome, min(chosen))  # times grow with BLOCK_SIZE
    assert sample(seed=7)[0] == chosen
    assert any(sample(seed)[0] != chosen for seed in (1, 2, 3))


def test_random_with_a_budget_past_the_configs_times_them_all() -> None:
    bench = TableBench({64: 2.0, 128: 1.0})
    outcome = tuner([block(64), block(128)], bench, strategy="random", budget=5).run()
    assert sorted(bench.timed()) == [64, 128] and outcome.best is trial_of(outcome, 128)


def test_halving_rounds() -> None:
    # brief: 16 < 32 < 64 < the rest; in full 32 beats 16, and both are slower than 64's brief time (64 is
    # dropped in round 2, so that time must not win)
    brief = {16: 1.0, 32: 1.1, 64: 1.2, 128: 2.0, 256: 3.0, 512: 4.0, 1024: 5.0, 2048: 6.0}
    full = {16: 2.0, 32: 1.5, 64: 0.1, 128: 0.1, 256: 0.1, 512: 0.1, 1024: 0.1, 2048: 0.1}
    bench = TableBench(brief, full)
    recorded: list[Trial] = []
    t = tuner([block(b) for b in BLOCKS], bench, on_trial=recorded.append)
    assert t.strategy == "halving" and t.planned() == 8
    outcome = t.run()

    # round 1: every config briefly
    assert sorted(bench.timed()[:8]) == BLOCKS
    assert all(effort == {**BRIEF.kwargs(), "graph": False} for _, effort in bench.calls[:8])
    # round 2: the fastest third (3 of 8), a little longer; then the 2 fastest of those in full
    round2 = bench.calls[8:11]
    assert sorted(b for b, _ in round2) == [16, 32, 64]
    assert all(effort == {**BRIEF.kwargs(), "max_seconds": BRIEF.max_seconds * 2, "graph": False}
               for _, effort in round2)  # fmt: skip
    final = bench.calls[11:]
    assert sorted(b for b, _ in final) == [16, 32]
    assert all(effort == full_kwargs() for _, effort in final)

    status = {tr.config["kwargs"]["BLOCK_SIZE"]: tr.status for tr in outcome.trials}
    assert status == {16: "ok", 32: "ok", 64: "stopped"} | {b: "stopped" for b in BLOCKS[3:]}
    for b in BLOCKS[3:]:
        tr = trial_of(outcome, b)
        assert tr.reason == "stopped after round 1: not among the 3 fastest of 8"
        assert tr.time_ms == brief[b]  # a stopped config keeps its brief time
    assert trial_of(outcome, 64).reason == "stopped after round 2: not among the 2 fastest of 3"
    assert trial_of(outcome, 16).time_ms == 2.0 and trial_of(outcome, 32).time_ms == 1.5
    assert outcome.best is trial_of(outcome, 32)  # the fastest of the final round, not a stopped one
    assert recorded == outcome.trials and len(outcome.trials) == 8


def test_halving_with_two_configs_goes_straight_to_full() -> None:
    bench = TableBench({64: 1.0, 128: 2.0}, {64: 3.0, 128: 2.5})
    outcome = tuner([block(64), block(128)], bench).run()
    assert [e for _, e in bench.calls[:2]] == [{**BRIEF.kwargs(), "graph": False}] * 2
    assert [e for _, e in bench.calls[2:]] == [full_kwargs()] * 2
    assert outcome.best is trial_of(outcome, 128)


@pytest.mark.parametrize("strategy", ["exhaustive", "halving"])
def test_known_configs_are_neither_compiled_nor_timed(strategy: str) -> None:
    cached = Trial(block(64), "cached", "timed by an earlier tune", 0.5, 0.49, 0.51, 100)
    stopped = Trial(block(128), "stopped", "stopped by an earlier tune", 0.2, 0.19, 0.21, 5)
    known = {config_hash(cached.config): cached, config_hash(stopped.config): stopped}
    bench, compiles = TableBench({256: 1.0, 512: 2.0}), Compiles()
    t = tuner([block(b) for b in (64, 128, 256, 512)], bench, compiles, strategy=strategy, known=known)
    assert t.planned() == 4
    outcome = t.run()
    assert sorted(compiles.asked) == sorted(set(bench.timed())) == [256, 512]
    got64, got128 = trial_of(outcome, 64), trial_of(outcome, 128)
    assert (got64.status, got64.reason, got64.time_ms) == ("cached", "timed by an earlier tune", 0.5)
    assert got64.reps == 100
    assert (got128.status, got128.time_ms) == ("stopped", 0.2)
    assert got64.artifact is None
    assert outcome.best is got64  # a stopped config's brief time never wins
    assert len(outcome.trials) == 4


def test_a_config_that_fails_to_compile_fails_alone() -> None:
    bench = TableBench({64: 2.0, 256: 1.0})
    for compiler in (in_process_compiler, Compiles()):
        outcome = tuner(
            [block(64), block(BAD_BLOCK), block(256)], bench, compiler, strategy="exhaustive"
        ).run()
        bad = trial_of(outcome, BAD_BLOCK)
        assert bad.status == "failed" and bad.reason is not None
        assert bad.reason.startswith("compile: ") and "power of two" in bad.reason
        assert BAD_BLOCK not in bench.timed()
        assert outcome.best is trial_of(outcome, 256) and trial_of(outcome, 64).status == "ok"


@pytest.mark.parametrize("strategy", ["exhaustive", "halving"])
def test_a_faulting_kernel_fails_only_its_trial(strategy: str) -> None:
    faults = {128: TrialFault("fault", "an illegal memory access"), 256: RuntimeError("no kind here")}
    bench = TableBench({64: 2.0, 128: 0.1, 256: 0.1, 512: 1.0}, faults=faults)
    outcome = tuner([block(b) for b in (64, 128, 256, 512)], bench, strategy=strategy).run()
    assert trial_of(outcome, 128).status == "failed"
    assert trial_of(outcome, 128).reason == "fault: an illegal memory access"
    assert trial_of(outcome, 128).time_ms is None
    assert (trial_of(outcome, 256).status, trial_of(outcome, 256).reason) == ("failed", "error: no kind here")
    assert outcome.best is trial_of(outcome, 512)
    assert len(outcome.trials) == 4


def test_a_spilling_config_is_pruned_when_another_compiles_clean() -> None:
    bench = TableBench({64: 2.0, 128: 0.1, 256: 1.0})
    outcome = tuner(
        [block(b) for b in (64, 128, 256)], bench, Compiles(spill=(128,)), strategy="exhaustive"
    ).run()
    spilled = trial_of(outcome, 128)
    assert spilled.status == "pruned"
    assert spilled.reason == "spills 8 bytes of registers where other configs do not"
    assert 128 not in bench.timed()
    assert outcome.best is trial_of(outcome, 256)


def test_spilling_configs_are_timed_when_every_config_spills() -> None:
    bench = TableBench({64: 2.0, 128: 0.1})
    outcome = tuner([block(64), block(128)], bench, Compiles(spill=(64, 128)), strategy="exhaustive").run()
    assert sorted(bench.timed()) == [64, 128]
    assert outcome.best is trial_of(outcome, 128)


@pytest.mark.parametrize("strategy", ["exhaustive", "halving"])
def test_cancelled_stops_the_run(strategy: str) -> None:
    bench = TableBench({b: float(i + 1) for i, b in enumerate(BLOCKS)})
    recorded: list[Trial] = []
    t = tuner([block(b) for b in BLOCKS], bench, strategy=strategy, on_trial=recorded.append,
              cancelled=lambda: len(bench.calls) >= 2)  # fmt: skip
    outcome = t.run()
    assert outcome.cancelled
    assert len(bench.calls) == 2  # nothing is timed once cancelled() says so
    assert recorded == outcome.trials


def test_exhaustive_keeps_the_trials_timed_before_a_cancel() -> None:
    bench = TableBench({b: float(i + 1) for i, b in enumerate(BLOCKS)})
    recorded: list[Trial] = []
    t = tuner([block(b) for b in BLOCKS], bench, strategy="exhaustive", on_trial=recorded.append,
              cancelled=lambda: len(bench.calls) >= 2)  # fmt: skip
    outcome = t.run()
    assert outcome.cancelled
    assert sorted(tr.config["kwargs"]["BLOCK_SIZE"] for tr in outcome.trials) == sorted(bench.timed())
    assert all(tr.status == "ok" and tr.time_ms is not None for tr in outcome.trials)
    assert recorded == outcome.trials


def test_exhaustive_reports_each_trial_as_it_is_timed() -> None:
    bench = TableBench({64: 1.0, 128: 2.0, 256: 3.0})
    seen: list[tuple[int, int]] = []  # (BLOCK_SIZE recorded, bench calls made so far)
    t = tuner([block(b) for b in (64, 128, 256)], bench, strategy="exhaustive",
              on_trial=lambda tr: seen.append((tr.config["kwargs"]["BLOCK_SIZE"], len(bench.calls))))  # fmt: skip
    t.run()
    assert [calls for _, calls in seen] == [1, 2, 3]


def test_planned_counts_settled_and_sampled_configs() -> None:
    # on cuda, 64 and 3 warps are pruned before compiling; one config is known; nothing compiles here
    base = replace(ADD, options=CompileOptions(target="cuda:sm_90"))
    configs = [block(64, 64), block(64, 3), block(16), block(32), block(128), block(256)]
    known = {config_hash(block(16)): Trial(block(16), "cached", time_ms=1.0)}
    exhaustive = Tuner(base=base, configs=configs, bench=TableBench({}), known=known, strategy="exhaustive")
    assert exhaustive.planned() == 6
    settled, todo = exhaustive.plan()
    assert [tr.status for tr in settled] == ["pruned", "pruned", "cached"]
    assert "1024" in (settled[0].reason or "") and "power of two" in (settled[1].reason or "")
    assert todo == [block(32), block(128), block(256)]
    sampled = replace(exhaustive, strategy="random", budget=2)
    assert sampled.planned() == 5


def test_a_cuda_tune_prunes_before_compiling_and_counts_what_it_records() -> None:
    base = replace(ADD, options=CompileOptions(target="cuda:sm_90"))
    configs = [block(64, 64), block(64, 3), block(128)]
    compiles: list[list[dict]] = []

    def compiler(requests: list[CompileRequest]) -> Iterator[tuple[int, Compiled]]:
        compiles.append([r.constexprs for r in requests])
        yield from ((i, CompileError("no cuda compile in this test")) for i in range(len(requests)))

    t = Tuner(base=base, configs=configs, bench=TableBench({}), compiler=compiler, strategy="exhaustive")
    outcome = t.run()
    assert compiles == [[{"BLOCK_SIZE": 128}]]
    assert [tr.status for tr in outcome.trials] == ["pruned", "pruned", "failed"]
    assert len(outcome.trials) == t.planned() and outcome.best is None


# ---- one whole tune: prepare + run_tune on the cpu, in a real bench process ----------------------------

AUTOTUNED_ADD = """
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 1024}), triton.Config({"BLOCK": 8192})],
    key=["n"],
)
@triton.jit
def vadd(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""

AUTOTUNED_LAUNCH = """
grid = ["cdiv(n, BLOCK)"]
[args]
x_ptr = "randn(n)"
y_ptr = "randn(n)"
out_ptr = "empty(n)"
n = 100000
"""


def test_a_whole_cpu_tune_records_every_config_and_picks_the_fastest() -> None:
    spec = TuneSpec(
        source=AUTOTUNED_ADD,
        name=None,
        signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
        launch=LaunchDescription.from_toml(AUTOTUNED_LAUNCH),
        full=Effort(rel=0.05, min_reps=5, max_reps=40, max_seconds=0.3),
        brief=Effort(rel=0.2, min_reps=3, max_reps=10, max_seconds=0.1),
    )
    prepared = prepare(spec)
    assert [c["kwargs"]["BLOCK"] for c in prepared.configs] == [64, 1024, 8192]
    assert prepared.key == '{"n":100000}'
    planned: list[int] = []
    recorded: list[Trial] = []
    outcome, device = run_tune(prepared, on_plan=planned.append, on_trial=recorded.append,
                               compiler=in_process_compiler)  # fmt: skip
    assert planned == [3] and recorded == outcome.trials and isinstance(device, dict)
    assert sorted(t.config["kwargs"]["BLOCK"] for t in outcome.trials) == [64, 1024, 8192]
    # successive halving over 3 configs: the slowest stops after the brief round, two are timed in full
    assert sorted(t.status for t in outcome.trials) == ["ok", "ok", "stopped"]
    ok = [t for t in outcome.trials if t.status == "ok"]
    assert all(t.time_ms is not None and t.time_ms > 0 and t.reps and t.reps >= 5 for t in ok)
    assert all(t.lo_ms is not None and t.hi_ms is not None and t.lo_ms <= t.time_ms <= t.hi_ms for t in ok)
    assert outcome.best is min(ok, key=lambda t: t.time_ms or math.inf)
