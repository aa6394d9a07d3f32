"""A whole tune on this machine from a launch description: read the kernel, resolve the launch, compile
the configs in parallel and time them in a replaceable bench child. `tilec tune` without a server runs
it directly; the service's workers run it for a tune job (server/jobs/runner.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.frontend import Budgets, read_kernel
from tilec.compiler.request import CompileRequest
from tilec.compiler.tune import space
from tilec.compiler.tune.keys import TuningKey, scalar_hints, tuning_key
from tilec.compiler.tune.launch import LaunchBudgets, LaunchDescription, ResolvedLaunch, resolve
from tilec.compiler.tune.tuner import (
    BRIEF,
    FULL,
    Compiler,
    Effort,
    Outcome,
    Trial,
    Tuner,
    process_pool_compiler,
)


@dataclass
class TuneSpec:
    """What one tune needs, as plain data (a tune job's request holds the same fields)."""

    source: str
    name: str | None
    signature: dict[str, str]
    launch: LaunchDescription
    target: str = "cpu"
    constexprs: dict[str, Any] = field(default_factory=dict)
    configs: list[dict] | None = None  # normalised; None: the kernel's @triton.autotune configs
    strategy: str = "halving"
    budget: int | None = None
    seed: int = 0
    kind: str = "source"  # or "bundle" ("ir": not tunable)
    budgets: Budgets = field(default_factory=Budgets)
    launch_budgets: LaunchBudgets = field(default_factory=LaunchBudgets)
    full: Effort = FULL  # how long a config is timed in full, and briefly (successive halving's rounds)
    brief: Effort = BRIEF
    graph: bool = False  # cuda: time CUDA graph replays of the launch


@dataclass
class Prepared:
    """A tune spec read and resolved: the tuning key's parts, the configs and the base compile request."""

    spec: TuneSpec
    kernel_key: str
    params: list[str]
    resolved: ResolvedLaunch
    key: str
    dtypes: str
    configs: list[dict]
    base: CompileRequest


class TuneJobSpec(BaseModel):
    """A tune job as submit fixed it: stored with the job (tune_jobs.request, with the tuning key's parts in
    the row's columns) and run as it is by a worker (`prepare_job`), which neither reads the kernel again nor
    makes the key again. `params` are the kernel's runtime parameters in order; `configs` normalised."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str | None = None  # the source the job was sent with (None: sent by kernel key, the kernel row's)
    kind: str = "source"  # of `source`: "source", or "bundle" (its JSON text)
    name: str | None
    signature: dict[str, str]
    constexprs: dict[str, Any] = {}
    launch: LaunchDescription
    params: list[str]
    configs: list[dict[str, Any]]
    budget: int | None = None
    seed: int = 0
    cuda_graph: bool = False
    budgets: dict[str, int] = {}
    retune: bool = False  # time every config anew: no stored trial is reused (server/jobs/retune.py)


def prepare(spec: TuneSpec) -> Prepared:
    """Read the kernel (ast only), resolve the launch, and fix the configs and the tuning key's strings.
    Raises CompileError for bad source and LaunchDescriptionError for a bad launch description."""
    ks = _read(spec.source, spec.name, spec.budgets, spec.kind)
    runtime = [p.name for p in ks.params if not p.constexpr and p.name not in spec.constexprs]
    resolved = resolve(spec.launch, spec.signature, runtime, spec.launch_budgets)
    autotune = ks.autotune
    configs = spec.configs if spec.configs is not None else space.from_list(autotune.configs if autotune else [])
    if not configs:
        configs = [space.normalise({})]
    # a kernel without an autotune decorator is keyed by its launch: one launch's trials never answer another's
    tk = tuning_key(kernel_key=ks.key, key_names=list(autotune.key) if autotune else None,
                    value=lambda n: resolved.key_values([n])[n], runtime=runtime, signature=spec.signature,
                    target=spec.target, launch_key=lambda: resolved.launch_key_string())  # fmt: skip
    return _prepared(spec, ks.name, tk, runtime, resolved, configs)


def _read(source: str, name: str | None, budgets: Budgets, kind: str) -> Any:
    if kind == "bundle":  # a kernel bundle's JSON text (compiler/frontend/bundle.py)
        from tilec.compiler.pipeline import read_request

        return read_request(CompileRequest(text=source, kind="bundle", budgets=budgets))
    return read_kernel(source, name, budgets=budgets)


def source_kernel_key(source: str, name: str | None, budgets: Budgets, kind: str = "source") -> str:
    """The kernel key that `source` (of `kind`) reads as (ast only): a worker checks a stored job's source
    against its row's kernel key before building anything under it; it runs in a limited child
    (tuner.run_limited)."""
    return _read(source, name, budgets, kind).key


def prepare_job(spec: TuneSpec, key: TuningKey, params: list[str]) -> Prepared:
    """A stored job as submit prepared it: `key` its tuning key's parts, `params` its runtime parameters,
    spec.configs its configs. Only the launch is resolved here (the worker makes the inputs from it); the
    kernel is read by the compiles. Raises LaunchDescriptionError for a launch this worker's budgets refuse."""
    resolved = resolve(spec.launch, spec.signature, params, spec.launch_budgets)
    return _prepared(spec, spec.name, key, params, resolved, list(spec.configs or [space.normalise({})]))


def _prepared(spec: TuneSpec, name: str | None, tk: TuningKey, runtime: list[str], resolved: ResolvedLaunch,
              configs: list[dict]) -> Prepared:  # fmt: skip
    hints = {n: h for n, v in resolved.scalars.items() if (h := scalar_hints(v))}
    hints.update({n: {"divisibility": 16} for n in resolved.tensors})  # fresh allocations are aligned
    base = CompileRequest(
        text=spec.source,
        kind=spec.kind,  # type: ignore[arg-type]
        name=name,
        signature=dict(spec.signature),
        constexprs=dict(spec.constexprs),
        hints=hints,
        options=CompileOptions(target=spec.target),
        budgets=spec.budgets,
    )
    return Prepared(spec, tk.kernel_key, runtime, resolved, tk.key, tk.dtypes, configs, base)


def run_tune(
    prepared: Prepared,
    *,
    known: Callable[[dict], Mapping[str, Trial]] | None = None,
    on_plan: Callable[[int], None] = lambda n: None,
    on_trial: Callable[[Trial], None] = lambda t: None,
    cancelled: Callable[[], bool] = lambda: False,
    compiler: Compiler | None = None,
    bench: Any = None,
    bench_timeout_s: float = 60.0,
    bench_limits: Any = None,
    bench_owner: Any = None,
) -> tuple[Outcome, dict]:
    """Run the tune; (its outcome, the device's description: GPU model, driver, clocks). `known(device)`
    gives the trials an earlier tune on the same device model has recorded (not timed again);
    `on_plan(n)` is told how many trials the tune will record before the first one. The bench runs in a
    sandboxed child (runtime/sandbox.py) under `bench_limits`, each call bounded by `bench_timeout_s`; a GPU
    child may be one kept from `bench_owner`'s last job, and is kept for its next (runtime/standby.py)."""
    from .bench import BenchProcess, device_info

    own, outcome = bench is None, None
    # the bench child starts now and gets ready (imports, arrays, device buffers) while the configs compile
    if bench_limits is None:  # `tilec tune` here: room for the launch's arrays (a service passes its own)
        from .sandbox import Limits

        arrays_mb = sum(t.nbytes for t in prepared.resolved.tensors.values()) >> 20
        bench_limits = Limits(memory_mb=max(Limits().memory_mb, arrays_mb + 1536))
    bench = bench or BenchProcess(prepared.spec.target, prepared.resolved, seed=prepared.spec.seed,
                                  timeout_s=bench_timeout_s, limits=bench_limits, owner=bench_owner)  # fmt: skip
    try:
        device = device_info(prepared.spec.target)
        tuner = Tuner(
            base=prepared.base,
            configs=prepared.configs,
            bench=bench,
            strategy=prepared.spec.strategy,
            budget=prepared.spec.budget,
            seed=prepared.spec.seed,
            known=known(device) if known is not None else {},
            compiler=compiler or process_pool_compiler(),
            on_trial=on_trial,
            cancelled=cancelled,
            full=prepared.spec.full,
            brief=prepared.spec.brief,
            graph=prepared.spec.graph,
        )
        on_plan(tuner.planned())
        outcome = tuner.run()
        return outcome, device
    finally:
        if own:
            closing = time.perf_counter()
            bench.close()
            if outcome is not None:
                outcome.phases["close"] = round(time.perf_counter() - closing, 3)
