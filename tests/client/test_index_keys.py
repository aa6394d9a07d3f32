"""load_index's match of a tuned build: by the autotune key's values; a kernel without an autotune key is
keyed by its launch on the server, which a call cannot recompute, so its build fits any call."""

from __future__ import annotations

import numpy as np

from tests.tune.test_launch import matmul
from tilec.client._index import _Entry


def test_an_index_build_of_a_kernel_without_an_autotune_key_fits_any_call() -> None:
    """load_index matches a tuned build by its autotune key; a kernel without one is keyed by its launch on
    the server, which a call cannot recompute: the build fits any call, as it did when that key was ""."""
    key = matmul().launch_key_string()
    data = {"kind": "tuned", "key": key, "key_names": [], "target": "cpu", "config": {"kwargs": {}},
            "spec": {"signature": {"x_ptr": "*fp32", "n": "i32"}, "constexprs": {}, "hints": {}},
            "params": [{"name": "x_ptr"}, {"name": "n"}]}  # fmt: skip
    entry = _Entry(data, directory=None)  # type: ignore[arg-type]
    assert entry.why_not({"x_ptr": np.zeros(4, np.float32), "n": 3}, "cpu") is None
    keyed = _Entry({**data, "key": '{"n":4}', "key_names": ["n"]}, directory=None)  # type: ignore[arg-type]
    assert "the call's" in (keyed.why_not({"x_ptr": np.zeros(4, np.float32), "n": 3}, "cpu") or "")
