"""A whole tune on this machine from a launch description: read the kernel, resolve the launch, compile
the configs in parallel and time them in a replaceable bench child. `tilec tune` without a server runs
it directly; the service's workers run it for a tune job (server/jobs/runner.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.frontend import Budgets, read_kernel
from tilec.compiler.request import CompileRequest
from tilec.compiler.tune import space
from tilec.compiler.tune.keys import dtypes_string, key_string, scalar_hints
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


def prepare(spec: TuneSpec) -> Prepared:
    """Read the kernel (ast only), resolve the launch, and fix the configs and the tuning key's strings.
    Raises CompileError for bad source and LaunchError for a bad launch description."""
    if spec.kind == "bundle":  # a kernel bundle's JSON text (compiler/frontend/bundle.py)
        from tilec.compiler.pipeline import read_request

        ks = read_request(CompileRequest(text=spec.source, kind="bundle", budgets=spec.budgets))
    else:
        ks = read_kernel(spec.source, spec.name, budgets=spec.budgets)
    runtime = [p.name for p in ks.params if not p.constexpr and p.name not in spec.constexprs]
    resolved = resolve(spec.launch, spec.signature, runtime, spec.launch_budgets)
    autotune = ks.autotune
    configs = spec.configs if spec.configs is not None else space.from_list(autotune.configs if autotune else [])
    if not configs:
        configs = [space.normalise({})]
    key_names = list(autotune.key) if autotune else []
    unknown = [n for n in key_names if n not in resolved.params]
    key = key_string([n for n in key_names if n not in unknown], resolved.key_values([n for n in key_names if n not in unknown]))
    hints = {n: h for n, v in resolved.scalars.items() if (h := scalar_hints(v))}
    hints.update({n: {"divisibility": 16} for n in resolved.tensors})  # fresh allocations are aligned
    base = CompileRequest(
        text=spec.source,
        kind=spec.kind,  # type: ignore[arg-type]
        name=ks.name,
        signature=dict(spec.signature),
        constexprs=dict(spec.constexprs),
        hints=hints,
        options=CompileOptions(target=spec.target),
        budgets=spec.budgets,
    )
    return Prepared(spec, ks.key, runtime, resolved, key, dtypes_string(spec.signature, runtime), configs, base)


def run_tune(
    prepared: Prepared,
    *,
    known: Callable[[dict], Mapping[str, Trial]] | None = None,
    on_plan: Callable[[int], None] = lambda n: None,
    on_trial: Callable[[Trial], None] = lambda t: None,
    cancelled: Callable[[], bool] = lambda: False,
    compiler: Compiler | None = None,
    bench: Any = None,
) -> tuple[Outcome, dict]:
    """Run the tune; (its outcome, the device's description: GPU model, driver, clocks). `known(device)`
    gives the trials an earlier tune on the same device model has recorded (not timed again);
    `on_plan(n)` is told how many trials the tune will record before the first one."""
    from ._bench import BenchProcess, device_info

    own = bench is None
    # the bench child starts now and gets ready (imports, arrays, device buffers) while the configs compile
    bench = bench or BenchProcess(prepared.spec.target, prepared.resolved, seed=prepared.spec.seed)
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
        return tuner.run(), device
    finally:
        if own:
            bench.close()
