"""tilec.inductor without a GPU: the hook hands Inductor's kernel sources to tilec (and leaves other devices
and other compiles to Inductor), and a TilecKernel runs a corpus model's launches as Inductor's wrapper
makes them (`run(*args, stream=...)`, grid arguments of templates included) through tilec.jit on the cpu
target, configs tuned by tilec, matching torch on the CPU. The GPU side is bench/inductor_cold.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.inductor import torch_or_skip

torch = torch_or_skip()

import tilec.client.inductor  # noqa: E402
import tilec.inductor  # noqa: E402
from tests.inductor.models import by_name, make_inputs  # noqa: E402
from tests.inductor.test_corpus import NP_DTYPES, _flat  # noqa: E402

CORPUS = Path(__file__).parent / "corpus"
MANIFEST = {e["name"]: e for e in json.loads((CORPUS / "manifest.json").read_text())["models"]}


def _source(kernel_id: str) -> str:
    return (CORPUS / "kernels" / f"{kernel_id}.py").read_text()


def test_import_tilec_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, tilec, tilec.inductor, tilec.client.inductor; print('torch' in sys.modules)"
    assert (
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "False"
    )


def test_hook_gives_inductor_kernels_to_tilec_only_when_on() -> None:
    from torch._inductor.async_compile import AsyncCompile

    rec = MANIFEST["softmax"]["launches"][0]
    source = _source(rec["file"])
    original = AsyncCompile.triton
    try:
        tilec.inductor.install(server=False)
        kernel = AsyncCompile().triton(rec["kernel"], source, device_str="cuda")
        assert isinstance(kernel, tilec.inductor.TilecKernel)
        assert kernel.spec.kind == "persistent_reduction" and kernel.runtime_names[-2:] == [
            "xnumel",
            "r0_numel",
        ]
        assert tilec.inductor.installed() and tilec.inductor.stats()["tilec"] >= 1
        tilec.inductor.uninstall()
        called = []
        tilec.client.inductor._STATE["original"] = lambda *a: called.append(a) or "inductor's"
        assert AsyncCompile().triton(rec["kernel"], source, device_str="cuda") == "inductor's" and called
    finally:
        tilec.client.inductor._STATE["original"] = original
        tilec.inductor.uninstall()


@pytest.mark.parametrize("name", ["layer_norm", "mean_cols", "transpose_add", "cumsum_sigmoid", "attention"])
def test_tilec_kernel_runs_the_wrappers_launches_on_cpu(name: str, tmp_path, monkeypatch) -> None:
    if name not in MANIFEST:
        pytest.skip(f"{name} is not in this corpus")
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path))
    entry = MANIFEST[name]
    model = by_name(name)
    inputs = make_inputs(model, seed=11)
    expected = [t for t in _flat(model.fn(*inputs)) if isinstance(t, torch.Tensor)]
    stores = {
        f"in{i}": np.frombuffer(bytearray(t.contiguous().numpy().tobytes()), np.uint8)
        for i, t in enumerate(inputs)
    }
    stores.update({role: np.full(n, 0xFF, np.uint8) for role, n in entry["buffers"].items()})
    kernels: dict[str, tilec.inductor.TilecKernel] = {}
    for rec in entry["launches"]:
        k = kernels.get(rec["file"]) or tilec.inductor.TilecKernel(
            rec["kernel"], _source(rec["file"]), False, None
        )
        kernels[rec["file"]] = k
        args = []
        for a in rec["args"]:
            if "role" not in a:
                args.append(a["value"])
                continue
            dt = np.dtype(NP_DTYPES[a["dtype"]])
            store = stores[a["role"]]
            start = a["offset"] * dt.itemsize
            args.append(np.frombuffer(store, dt, (store.nbytes - start) // dt.itemsize, start))
        k.run(*args, stream=0)
    for out, want in zip(entry["outputs"], expected, strict=True):
        dt = np.dtype(NP_DTYPES[out["dtype"]])
        base = np.frombuffer(
            stores[out["role"]],
            dt,
            offset=out["offset"] * dt.itemsize,
            count=(stores[out["role"]].nbytes - out["offset"] * dt.itemsize) // dt.itemsize,
        )
        got = np.lib.stride_tricks.as_strided(base, out["shape"], [s * dt.itemsize for s in out["stride"]])
        np.testing.assert_allclose(got, want.numpy(), rtol=entry["rtol"], atol=entry["atol"])


def test_a_graph_without_cuda_tensors_says_once_that_tilec_runs_none_of_it(monkeypatch) -> None:
    """Without a GPU Inductor writes C++ for the graph, and tilec sees no kernel: the backend says so
    once per process, and the model still runs (Inductor's own kernels)."""
    import warnings

    monkeypatch.setattr(tilec.client.inductor, "_warned_no_cuda", False)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    x = torch.randn(4, 8)
    before = tilec.inductor.stats()["tilec"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = torch.compile(model, backend=tilec.inductor.backend)
        torch.testing.assert_close(compiled(x), model(x))
        torch.compile(torch.nn.Tanh(), backend=tilec.inductor.backend)(x)  # a second graph: no second word
    said = [w for w in caught if "tilec compiles none of them" in str(w.message)]
    assert len(said) == 1 and issubclass(said[0].category, RuntimeWarning), [str(w.message) for w in caught]
    assert tilec.inductor.stats()["tilec"] == before
