"""Kernel bundles read statically (compiler/frontend/bundle.py): imports between a bundle's modules, pins,
the errors a bundle gets (a module it does not contain), and the kernel key over everything reachable.
Each kernel runs on the cpu target and its result is checked against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from tilec import client
from tilec.compiler.errors import CompileError
from tilec.compiler.frontend import read_kernel
from tilec.compiler.frontend.bundle import Bundle, read_bundle

UTILS = """
import triton
import triton.language as tl


@triton.jit
def twice(x):
    return x * 2


@triton.jit
def pid():
    return tl.program_id(0)
"""

KERN = """
import triton
import triton.language as tl
from .utils import twice
from . import utils as u

SCALE = 3


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = u.pid() * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, twice(x) * SCALE, mask=m)
"""


def _bundle(**changes) -> Bundle:
    data = {
        "modules": {"pkg": "", "pkg.utils": UTILS, "pkg.kern": KERN},
        "packages": ["pkg"],
        "kernel": "pkg.kern:k",
    }
    data.update(changes)
    return Bundle.from_dict(data)


def _run(bundle: Bundle, n: int = 100) -> np.ndarray:
    k = client.JITKernel(None, bundle=bundle)
    x = np.arange(n, dtype=np.float32)
    y = np.zeros_like(x)
    k[(-(-n // 32),)](x, y, n, BLOCK=32)
    return y


def test_relative_imports_between_modules_resolve_statically() -> None:
    np.testing.assert_array_equal(_run(_bundle()), np.arange(100, dtype=np.float32) * 6)


def test_key_covers_a_helper_in_another_module() -> None:
    base = read_bundle(_bundle()).key
    changed = _bundle(modules={"pkg": "", "pkg.utils": UTILS.replace("x * 2", "x * 4"), "pkg.kern": KERN})
    assert read_bundle(changed).key != base
    unrelated = _bundle(modules={"pkg": "", "pkg.utils": UTILS + "\nOTHER = 5\n", "pkg.kern": KERN})
    assert read_bundle(unrelated).key == base  # what the kernel does not reach does not change its key
    np.testing.assert_array_equal(_run(changed), np.arange(100, dtype=np.float32) * 12)


def test_a_file_is_a_bundle_of_one_with_the_same_key() -> None:
    src = KERN.replace("from .utils import twice\nfrom . import utils as u\n", "").replace(
        "u.pid()", "tl.program_id(0)").replace("twice(x)", "x")  # fmt: skip
    one = Bundle.from_dict({"modules": {"main": src}, "kernel": "main:k"})
    assert read_bundle(one).key == read_kernel(src, "k").key


def test_pins_override_the_text_and_enter_the_key() -> None:
    pinned = _bundle(pins={"pkg.kern": {"SCALE": {"const": 5}}})
    assert read_bundle(pinned).key != read_bundle(_bundle()).key
    np.testing.assert_array_equal(_run(pinned), np.arange(100, dtype=np.float32) * 10)


def test_a_pinned_function_reference_is_called() -> None:
    src = KERN.replace(
        "from .utils import twice\n", ""
    )  # `twice` bound by the host, as a conditional import is
    pinned = _bundle(modules={"pkg": "", "pkg.utils": UTILS, "pkg.kern": src},
                     pins={"pkg.kern": {"twice": {"fn": "pkg.utils:twice"}}})  # fmt: skip
    np.testing.assert_array_equal(_run(pinned), np.arange(100, dtype=np.float32) * 6)


def test_a_missing_module_is_a_located_error() -> None:
    gone = _bundle(modules={"pkg": "", "pkg.kern": KERN})
    with pytest.raises(CompileError) as exc:
        _run(gone)
    assert "pkg.utils" in str(exc.value) and "does not contain" in str(exc.value)
    assert exc.value.filename == "<pkg.kern>" and exc.value.line is not None


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"kernel": "pkg.nope:k"}, "does not contain"),
        ({"pins": {"pkg.nope": {"x": {"const": 1}}}}, "does not contain"),
        ({"pins": {"pkg.kern": {"twice": {"fn": "pkg.nope:twice"}}}}, "does not contain"),
        ({"pins": {"pkg.kern": {"twice": {"module": "pkg.nope"}}}}, "does not contain"),
        ({"pins": {"pkg.kern": {"twice": {"eval": "1"}}}}, "must be one of"),
        ({"modules": {"not a name": ""}}, "is not a module name"),
    ],
)
def test_bad_bundles_are_compile_errors(changes: dict, words: str) -> None:
    with pytest.raises(CompileError, match=words):
        read_bundle(_bundle(**changes) if "modules" not in changes else Bundle.from_dict(
            {"modules": {**changes["modules"]}, "kernel": "not a name:k"}))  # fmt: skip


def test_conditional_import_and_module_alias_read_statically() -> None:
    src = """
import triton
import triton.language as tl
try:
    from triton.language.extra.cuda import libdevice
except ImportError:
    from triton.language.extra import libdevice
fast_sqrt = libdevice.sqrt


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, fast_sqrt(tl.load(x_ptr + offs, mask=m)), mask=m)
"""
    y = _run(Bundle.from_dict({"modules": {"m": src}, "kernel": "m:k"}))
    np.testing.assert_allclose(y, np.sqrt(np.arange(100, dtype=np.float32)), rtol=1e-6)
