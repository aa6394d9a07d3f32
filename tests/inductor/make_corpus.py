"""Write tilec's Inductor corpus: torch.compile every model of tests/inductor/models.py on a CUDA GPU with a
fresh TORCHINDUCTOR_CACHE_DIR, keep every generated Triton kernel module as Inductor wrote it, and record
how each model's compiled code launched them (arguments, config, grid) so the CPU tests can replay the
launches on tilec's cpu target and compare with torch on the CPU.

    python3 tests/inductor/make_corpus.py --out tests/inductor/corpus         # on a machine with a GPU
    python3 tests/inductor/make_corpus.py --tar $OUT/corpus.tar.gz            # on the device machine

The output folder holds kernels/<model>.<kernel>.py (the files byte for byte), output_code/<model>.py (the
wrapper Inductor wrote, to read) and manifest.json. Nothing in it is edited by hand.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

MAX_CANDIDATES = 4  # template benchmark candidates kept per model besides the kernels it launched


def kernel_names(text: str) -> list[str]:
    """Module-level functions decorated with triton.jit (a wrapper module holds kernels only as strings)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                if "triton.jit" in ast.unparse(d.func if isinstance(d, ast.Call) else d):
                    names.append(node.name)
    return names


def snapshot(cache: Path) -> set[Path]:
    return {p for p in cache.rglob("*.py") if "triton" not in p.relative_to(cache).parts[:1]}


class Recorder:
    """Wraps CachingAutotuner.run: while `launches` is a list, every launch is appended to it."""

    def __init__(self):
        from torch._inductor.runtime import triton_heuristics as th

        self.launches: list | None = None
        original = th.CachingAutotuner.run
        rec = self

        def run(self, *args, stream, **kwargs):
            result = original(self, *args, stream=stream, **kwargs)
            if rec.launches is not None:
                try:
                    rec.launches.append(rec.describe(self, args))
                except Exception as exc:  # recorded as a failed description, not a failed model
                    rec.launches.append(
                        {
                            "kernel": self.inductor_meta.get("kernel_name"),
                            "file": str(self.filename),
                            "args": [],
                            "error": f"{type(exc).__name__}: {exc}",
                        }
                    )
            return result

        th.CachingAutotuner.run = run

    @staticmethod
    def describe(autotuner, args) -> dict:
        import torch

        (launcher,) = autotuner.launchers
        cfg = launcher.config
        sig = autotuner.triton_meta.get("signature", {})
        names = [n for n, t in sig.items() if t != "constexpr" and n not in cfg.kwargs]
        names += list(autotuner.inductor_meta.get("extra_launcher_args", ()))
        try:
            _, grid = autotuner._interpret_args_grid(args, cfg)
        except Exception as exc:  # recorded, not fatal: the replay then computes the grid itself
            grid = f"unknown: {exc}"
        out_args = []
        for i, a in enumerate(args):
            name = names[i] if i < len(names) else f"arg{i}"
            if isinstance(a, torch.Tensor):
                st = a.untyped_storage()
                out_args.append(
                    {
                        "name": name,
                        "ptr": st.data_ptr(),
                        "nbytes": st.nbytes(),
                        "offset": a.storage_offset(),
                        "dtype": str(a.dtype).removeprefix("torch."),
                        "shape": list(a.shape),
                        "stride": list(a.stride()),
                    }
                )
            else:
                out_args.append(
                    {"name": name, "value": a if isinstance(a, (int, float, bool)) or a is None else repr(a)}
                )
        return {
            "kernel": autotuner.inductor_meta.get("kernel_name") or autotuner.fn.__name__,
            # a template's autotuner has no filename: the jit function's code object knows its module
            "file": autotuner.filename,  # None for a template: found by its kernel name below
            "args": out_args,
            "config": {"kwargs": dict(cfg.kwargs), "num_warps": cfg.num_warps, "num_stages": cfg.num_stages},
            "grid": list(grid) if not isinstance(grid, str) else grid,
        }


def extern_calls(wrapper: str) -> bool:
    """Whether a wrapper's call() runs anything but Triton kernels (ATen or extern kernels); comments,
    which name the ATen ops a kernel fused, do not count."""
    code = wrapper[wrapper.find("def call(") :]
    lines = [ln for ln in code.splitlines() if not ln.lstrip().startswith("#")]
    return any(s in ln for ln in lines for s in ("extern_kernels.", "torch.ops.", "aten."))


def flat_outputs(out) -> list:
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat_outputs(o)]
    return [out]


def roles_for(launches: list[dict], inputs: list, outputs: list) -> tuple[list[dict], list[dict], dict]:
    """Name every pointer a launch used: in<i> for model inputs, buf<k> for the rest (sized by its largest use)."""
    names: dict[int, str] = {t.untyped_storage().data_ptr(): f"in{i}" for i, t in enumerate(inputs)}
    sizes: dict[str, int] = {}
    for launch in launches:
        for a in launch["args"]:
            if "ptr" not in a:
                continue
            role = names.setdefault(a.pop("ptr"), f"buf{len(names) - len(inputs)}")
            a["role"] = role
            if role.startswith("buf"):
                sizes[role] = max(sizes.get(role, 0), a.pop("nbytes"))
            else:
                a.pop("nbytes")
    outs = []
    for t in outputs:
        st = t.untyped_storage()
        outs.append(
            {
                "role": names.get(st.data_ptr(), "unknown"),
                "offset": t.storage_offset(),
                "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape),
                "stride": list(t.stride()),
            }
        )
    return launches, outs, sizes


def compile_model(model, cache: Path, rec: Recorder, dest: Path, seen: dict[str, str]) -> dict:
    import torch

    from tests.inductor.models import make_inputs

    torch._dynamo.reset()
    before = snapshot(cache)
    cpu_inputs = make_inputs(model, seed=0)
    inputs = [t.cuda() for t in cpu_inputs]
    compiled = torch.compile(model.fn, options=dict(model.options) or None, dynamic=False)
    t0 = time.perf_counter()
    first = compiled(*inputs)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    rec.launches = []
    try:
        out = compiled(*inputs)
        torch.cuda.synchronize()
    finally:
        launches, rec.launches = rec.launches, None
    outputs = [t for t in flat_outputs(out) if isinstance(t, torch.Tensor)]
    launches, outs, sizes = roles_for(launches, inputs, outputs)
    eager = [t for t in flat_outputs(model.fn(*inputs)) if isinstance(t, torch.Tensor)]
    err = max(
        (
            (float((a.double() - b.double()).abs().max()) if a.numel() else 0.0)
            for a, b in zip(outputs, eager, strict=False)
        ),
        default=0.0,
    )
    del first

    new_files = sorted(snapshot(cache) - before)
    for launch in launches:  # a template's autotuner has no filename: the newest module defining the kernel
        if launch.get("file") in (None, "None"):
            hits = [str(p) for p in new_files if launch["kernel"] in kernel_names(p.read_text())]
            launch["file"] = hits[-1] if hits else "?"
    launched_files = {launch["file"] for launch in launches}
    wrappers, kernels = [], []
    candidates = 0
    for path in new_files:
        text = path.read_text()
        if "async_compile" in text and "def call(" in text:
            wrappers.append(text)
            continue
        names = kernel_names(text)
        if not names:
            continue
        launched = str(path) in launched_files
        if not launched:
            if candidates >= MAX_CANDIDATES:
                continue
            candidates += 1
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest in seen:
            kid = seen[digest]
        else:
            kid = f"{model.name}.{names[-1]}"
            seen[digest] = kid
            (dest / "kernels" / f"{kid}.py").write_text(text)
            kernels.append({"id": kid, "kernels": names, "sha256": digest, "launched": launched})
        for launch in launches:
            if launch["file"] == str(path):
                launch["file"] = kid
    for launch in launches:
        if launch["file"].startswith("/"):  # a module that was loaded from an earlier model's file
            launch["file"] = seen.get(
                hashlib.sha256(Path(launch["file"]).read_text().encode()).hexdigest(), "?"
            )
    for i, text in enumerate(wrappers):
        (dest / "output_code" / f"{model.name}{'' if i == 0 else f'.{i}'}.py").write_text(text)
    calls = "".join(w[w.find("def call(") :] for w in wrappers)
    return {
        "name": model.name,
        "covers": model.covers,
        "options": model.options,
        "inputs": [
            {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)} for t in cpu_inputs
        ],
        "kernels": kernels,
        "launches": launches,
        "buffers": sizes,
        "outputs": outs,
        "extern_calls": extern_calls(calls),
        "compile_s": round(compile_s, 2),
        "max_abs_err_vs_eager": err,
        "rtol": model.rtol,
        "atol": model.atol,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="folder to write (e.g. tests/inductor/corpus)")
    ap.add_argument("--tar", type=Path, help="write the folder as one .tar.gz instead")
    ap.add_argument("--budget-s", type=float, default=240.0, help="stop starting new models after this long")
    ap.add_argument("--only", nargs="*", help="model names")
    ap.add_argument("--merge", type=Path, help="an earlier corpus folder: keep its other models, redo --only")
    ap.add_argument("--torch-src", action="store_true", help="also keep Inductor's runtime sources (to read)")
    ns = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tilec-corpus-"))
    cache = work / "inductor-cache"
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    os.environ["TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE"] = "0"
    dest = ns.out if ns.out is not None else work / "corpus"
    if dest.exists():
        shutil.rmtree(dest)
    earlier: list[dict] = []
    if ns.merge is not None:  # the other models' files and entries as the earlier run wrote them
        shutil.copytree(ns.merge, dest, ignore=shutil.ignore_patterns("torch_src"))
        old = json.loads((dest / "manifest.json").read_text())
        redo = set(ns.only or ())
        earlier = [e for e in old["models"] if e["name"] not in redo]
        for name in redo:  # files an earlier (even failed) run of these models wrote
            for path in (dest / "kernels").glob(f"{name}.*.py"):
                path.unlink()
    (dest / "kernels").mkdir(parents=True, exist_ok=True)
    (dest / "output_code").mkdir(exist_ok=True)

    import torch
    import triton

    from tests.inductor.models import models

    cache.mkdir(parents=True, exist_ok=True)
    rec = Recorder()
    seen: dict[str, str] = {k["sha256"]: k["id"] for e in earlier for k in e["kernels"]}
    entries, skipped, failed = [], [], {}
    start = time.perf_counter()
    order = {m.name: i for i, m in enumerate(models())}
    for model in models():
        if ns.only and model.name not in ns.only:
            continue
        if time.perf_counter() - start > ns.budget_s:
            skipped.append(model.name)
            continue
        t0 = time.perf_counter()
        try:
            entries.append(compile_model(model, cache, rec, dest, seen))
        except Exception as exc:  # one model's failure is data, not the end of the run
            failed[model.name] = f"{type(exc).__name__}: {exc}"[:2000]
            print(f"{model.name}: FAILED {failed[model.name][:300]}", flush=True)
            continue
        e = entries[-1]
        print(
            f"{model.name:20s} {time.perf_counter() - t0:6.1f} s  kernels {len(e['kernels'])}  "
            f"launches {len(e['launches'])}  extern {e['extern_calls']}  err {e['max_abs_err_vs_eager']:.2e}",
            flush=True,
        )
    manifest = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "device": torch.cuda.get_device_name(),
        "capability": list(torch.cuda.get_device_capability()),
        "models": sorted(earlier + entries, key=lambda e: order.get(e["name"], 1 << 30)),
        "skipped": skipped,
        "failed": failed,
        "seconds": round(time.perf_counter() - start, 1),
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    if ns.torch_src:
        import torch._inductor as ind

        src = dest / "torch_src"
        src.mkdir()
        root = Path(ind.__file__).parent
        for rel in (
            "runtime/triton_heuristics.py",
            "runtime/triton_helpers.py",
            "runtime/hints.py",
            "async_compile.py",
            "codecache.py",
            "runtime/static_triton_launcher.py",
        ):
            if (root / rel).exists():
                shutil.copy(root / rel, src / rel.replace("/", "__"))
    n_kernels = sum(len(e["kernels"]) for e in entries)
    print(
        f"{len(entries)} models, {n_kernels} kernel files, {len(failed)} failed, {len(skipped)} skipped, "
        f"{manifest['seconds']} s",
        flush=True,
    )
    if ns.tar is not None:
        with tarfile.open(ns.tar, "w:gz") as tf:
            tf.add(dest, arcname="corpus")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
