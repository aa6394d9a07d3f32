"""The tuning key is made by one function (compiler/tune/keys.py tuning_key) for every writer and reader:
its name selection (the autotune key's names that are runtime arguments, in the decorator's order), its
strings, and the digest the service stores results under. No other module picks the names or joins the
strings itself."""

from __future__ import annotations

import ast
from pathlib import Path

from tilec.compiler.tune.keys import TuningKey, tuning_key
from tilec.server.db import crud

ROOT = Path(__file__).resolve().parents[2]


def test_names_are_runtime_arguments_in_the_decorators_order() -> None:
    values = {"N": 4096, "M": 128, "x_ptr": {"shape": [4096], "dtype": "fp32"}}
    tk = tuning_key(kernel_key="k" * 64, key_names=["N", "BLOCK", "x_ptr", "M", "gone"], value=values.__getitem__,
                    runtime=["x_ptr", "M", "N"], signature={"x_ptr": "*fp32", "M": "i32", "N": "i32"},
                    target="cpu")  # fmt: skip
    assert tk.key == '{"N":4096,"x_ptr":{"shape":[4096],"dtype":"fp32"},"M":128}'
    assert tk.dtypes == "x_ptr:*fp32,M:i32,N:i32"
    empty = tuning_key(kernel_key="k" * 64, key_names=["BLOCK"], value=values.__getitem__, runtime=["x_ptr"],
                       signature={"x_ptr": "*fp32"}, target="cpu")  # fmt: skip
    assert empty.key == ""


def test_the_service_digest_is_the_one_formula() -> None:
    tk = TuningKey("k" * 64, '{"N":1}', "x:*fp32", "cuda:sm_90")
    assert (
        crud.tuning_key(kernel_key=tk.kernel_key, key=tk.key, dtypes=tk.dtypes, target=tk.target) == tk.digest
    )
    assert tk.digest != TuningKey("k" * 64, '{"N":2}', "x:*fp32", "cuda:sm_90").digest
    # the stored keys of existing rows: sha256 of this JSON, compact, keys sorted
    assert (
        crud.stable_hash({"kernel": "k" * 64, "key": '{"N":1}', "dtypes": "x:*fp32", "target": "cuda:sm_90"})
        == tk.digest
    )


def _calls(name: str, keyword: str | None = None) -> list[str]:
    hits = []
    for part in ("compiler", "runtime", "server", "client", "tilec"):
        for path in sorted((ROOT / part).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "id", getattr(node.func, "attr", None)) == name
                ):
                    continue
                if keyword is None or any(k.arg == keyword for k in node.keywords):
                    hits.append(str(path.relative_to(ROOT)))
    return sorted(set(hits))


def test_one_function_makes_the_key() -> None:
    """key_string (the autotune key's values) is called only by tuning_key; the five callers (the
    service's submit, a tune's prepare, tilec.jit's shared results, a pulled index, tilec pull through
    prepare) call tuning_key (crud.tuning_key, the digest of given parts, is TuningKey.digest)."""
    assert _calls("key_string") == ["compiler/tune/keys.py"]
    assert _calls("tuning_key", "key_names") == sorted(["client/_index.py", "client/_jit.py", "runtime/tune.py",
                                           "server/jobs/service.py"])  # fmt: skip
