"""The Inductor corpus (tests/inductor/corpus, written by make_corpus.py on a GPU from torch.compile of the
models in models.py): every kernel module compiles as Inductor wrote it, with no signature given, to an
sm_90 cubin (ptxas checks the PTX); and every model whose compiled code is Triton kernels only is replayed
on the cpu target, launch by launch as Inductor's wrapper made them (same configs, same grids, buffers
named by the pointers the wrapper passed), against torch's own CPU result on fresh random inputs.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

from tests.inductor import torch_or_skip
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.frontend import read_kernel
from tilec.compiler.frontend.inductor import launch_grid
from tilec.compiler.pipeline import compile_kernel
from tilec.runtime.launch import launch

torch = torch_or_skip()

from tests.inductor.make_corpus import extern_calls  # noqa: E402
from tests.inductor.models import by_name, make_inputs  # noqa: E402

CORPUS = Path(__file__).parent / "corpus"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
KERNEL_FILES = sorted((CORPUS / "kernels").glob("*.py"))


def _triton_only(entry: dict) -> bool:
    """The wrapper launches Triton kernels only (read again from its output code where the corpus has it)."""
    code = CORPUS / "output_code" / f"{entry['name']}.py"
    return not (extern_calls(code.read_text()) if code.exists() else entry["extern_calls"])


# a launch the corpus script could not describe (an "error" entry) leaves its model out of the replay
MODELS = [
    e
    for e in MANIFEST["models"]
    if e["launches"] and _triton_only(e) and all("grid" in r for r in e["launches"])
]
NP_DTYPES = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "int64": np.int64,
             "int32": np.int32, "bool": np.bool_, "int8": np.int8, "uint8": np.uint8}  # fmt: skip


def test_corpus_covers_the_issue() -> None:
    kinds = {k: 0 for k in ("pointwise", "reduction", "persistent_reduction", "template")}
    for path in KERNEL_FILES:
        text = path.read_text()
        for kind in kinds:
            kinds[kind] += f"@triton_heuristics.{kind}(" in text
    assert len(MANIFEST["models"]) >= 20 and all(kinds.values()), kinds
    assert sum("tl.associative_scan" in p.read_text() for p in KERNEL_FILES) >= 2  # scans
    assert len(MODELS) >= 20


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.stem)
def test_compiles_to_sm90_as_written(path: Path) -> None:
    source = path.read_text()
    ks = read_kernel(source, filename=path.name)
    assert ks.inductor is not None and ks.autotune is not None
    cfg = ks.autotune.configs[0]
    options = CompileOptions(
        target="cuda:sm_90", num_warps=cfg.num_warps or 4, num_stages=cfg.num_stages or 1
    )
    art = compile_kernel(source, ks.name, constexprs=dict(cfg.kwargs), options=options, emit="cubin")
    assert f".entry {ks.name}" in art.ptx and art.binary


@functools.cache
def _cpu_build(kernel_id: str, name: str, kwargs: tuple, num_warps: int):
    source = (CORPUS / "kernels" / f"{kernel_id}.py").read_text()
    ks = read_kernel(source, name, filename=f"{kernel_id}.py")
    params = {p.name for p in ks.params}
    constexprs = {k: v for k, v in kwargs if k in params}
    art = compile_kernel(source, name, constexprs=constexprs, options=CompileOptions(target="cpu", num_warps=num_warps),
                         emit="object")  # fmt: skip
    return ks, art


def _view(store: np.ndarray, arg: dict) -> np.ndarray:
    """A 1-D array that starts where the recorded tensor started in its buffer."""
    dt = np.dtype(NP_DTYPES[arg["dtype"]])
    start = arg["offset"] * dt.itemsize
    return np.frombuffer(store, dtype=dt, count=(store.nbytes - start) // dt.itemsize, offset=start)


@pytest.mark.parametrize("entry", MODELS, ids=lambda e: e["name"])
def test_replays_on_cpu_against_torch(entry: dict) -> None:
    model = by_name(entry["name"])
    inputs = make_inputs(model, seed=7)  # not the inputs the corpus was made with
    expected = [t for t in _flat(model.fn(*inputs)) if isinstance(t, torch.Tensor)]
    stores = {
        f"in{i}": np.frombuffer(bytearray(t.contiguous().numpy().tobytes()), np.uint8)
        for i, t in enumerate(inputs)
    }
    for role, nbytes in entry["buffers"].items():
        stores[role] = np.full(nbytes, 0xFF, np.uint8)  # poisoned: NaN as floats, -1 as integers
    for rec in entry["launches"]:
        cfg = rec["config"]
        ks, art = _cpu_build(
            rec["file"], rec["kernel"], tuple(sorted(cfg["kwargs"].items())), cfg["num_warps"]
        )
        extra = set(ks.inductor.extra_launcher_args)
        values = {a["name"]: a["value"] for a in rec["args"] if "value" in a}
        grid = launch_grid(ks.inductor, cfg["kwargs"], values)
        assert list(grid) == rec["grid"], (
            f"{rec['kernel']}: tilec's grid {grid}, Inductor launched {rec['grid']}"
        )
        args = [
            _view(stores[a["role"]], a) if "role" in a else a["value"]
            for a in rec["args"]
            if a["name"] not in extra
        ]
        launch("cpu", art, args, grid)
    assert len(entry["outputs"]) == len(expected)
    for out, want in zip(entry["outputs"], expected, strict=True):
        base = _view(stores[out["role"]], out)
        got = np.lib.stride_tricks.as_strided(base, out["shape"], [s * base.itemsize for s in out["stride"]])
        ref = want.numpy()
        assert got.shape == ref.shape and got.dtype == ref.dtype
        if ref.dtype.kind in "biu":
            np.testing.assert_array_equal(got, ref)
        else:
            np.testing.assert_allclose(got, ref, rtol=entry["rtol"], atol=entry["atol"])


def _flat(out) -> list:
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]
