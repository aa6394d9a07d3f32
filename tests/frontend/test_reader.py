"""read_kernel: decorators as data, parameters, kernel choice, and a key that ignores formatting."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kernels import source
from tilec.compiler.errors import CompileError
from tilec.compiler.frontend import ConfigSpec, build_ir, evaluate_heuristic, read_kernel
from tilec.compiler.frontend.literal import FoldError

SRC = '''
import triton
import triton.language as tl

configs = [triton.Config({"BLOCK": b}, num_warps=w) for b in (64, 128) for w in (4, 8)]


@triton.autotune(configs=configs, key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def scale_kernel(x_ptr, n, alpha: float, BLOCK: tl.constexpr, EVEN: tl.constexpr = False):
    """Scales x by alpha."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # offsets
    if EVEN:
        tl.store(x_ptr + offs, tl.load(x_ptr + offs) * alpha)
    else:
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * alpha, mask=offs < n)
'''


def test_decorators_and_params_are_data() -> None:
    ks = read_kernel(SRC)
    assert ks.name == "scale_kernel"
    assert ks.autotune is not None and ks.autotune.key == ["n"]
    assert ks.autotune.configs[0] == ConfigSpec({"BLOCK": 64}, 4, None)
    assert len(ks.autotune.configs) == 4
    assert [(p.name, p.constexpr, p.has_default, p.default) for p in ks.params] == [
        ("x_ptr", False, False, None), ("n", False, False, None), ("alpha", False, False, None),
        ("BLOCK", True, False, None), ("EVEN", True, True, False)]
    assert evaluate_heuristic(ks.heuristics["EVEN"], {"n": 256, "BLOCK": 64}) is True
    json.dumps(ks.to_dict())


def test_heuristic_evaluator_refuses_code() -> None:
    for text in ("lambda args: __import__('os').system('x')", "lambda args: args.__class__", "lambda a: 9 ** 9 ** 9"):
        with pytest.raises(FoldError):
            evaluate_heuristic(text, {})


def test_autotune_from_a_config_function() -> None:
    ks = read_kernel(source("matmul"))
    assert ks.autotune is not None and len(ks.autotune.configs) == 4
    assert ks.autotune.configs[0].num_stages == 3 and ks.autotune.configs[0].kwargs["BLOCK_SIZE_K"] == 64


def test_key_ignores_comments_formatting_and_docstrings() -> None:
    base = read_kernel(SRC).key
    reformatted = SRC.replace("# offsets", "# the offsets").replace('"""Scales x by alpha."""', "").replace(
        "tl.load(x_ptr + offs) * alpha", "tl.load(x_ptr+offs)*alpha").replace("\n\n\n@triton.autotune", "\n@triton.autotune")
    assert read_kernel(reformatted).key == base
    assert read_kernel(SRC.replace("* alpha)", "* alpha + 1)")).key != base
    assert read_kernel(SRC.replace("(64, 128)", "(64, 256)")).key != base


def test_kernel_choice() -> None:
    two = SRC + "\n\n@triton.jit\ndef other(x):\n    pass\n"
    with pytest.raises(CompileError, match="several kernels"):
        read_kernel(two)
    assert read_kernel(two, "other").name == "other"
    with pytest.raises(CompileError, match="no @triton.jit function named"):
        read_kernel(SRC, "nope")
    # a helper called by the kernel is not a candidate
    assert read_kernel(source("helper_2d")).name == "relu_scale_2d_kernel"


@pytest.mark.parametrize("imports", [
    "import triton\nimport triton.language as tl",
    "import triton\nfrom triton import language as tl",
    "import tilec as triton\nimport tilec.language as tl",
])
def test_import_spellings(imports: str) -> None:
    src = imports + "\n\n@triton.jit\ndef k(x_ptr, B: tl.constexpr):\n    tl.store(x_ptr + tl.arange(0, B), 1.0)\n"
    m = build_ir(read_kernel(src), {"x_ptr": "*fp32"}, {"B": 8})
    assert m.kernels[0].name == "k"


def test_builds_with_config_values() -> None:
    ks = read_kernel(SRC)
    for cfg in ks.autotune.configs:
        even = evaluate_heuristic(ks.heuristics["EVEN"], {"n": 1000, **cfg.kwargs})
        build_ir(ks, {"x_ptr": "*fp32", "n": "i32", "alpha": "fp32"}, {**cfg.kwargs, "EVEN": even})


MUTATIONS = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 40), st.text(max_size=8)), max_size=4)


@settings(max_examples=120, deadline=None)
@given(MUTATIONS)
def test_fuzz_mutated_source_gives_module_or_compile_error(muts: list) -> None:
    """Random edits of a real kernel: the result is a Module or a CompileError, nothing else."""
    text = source("matmul")
    for pos, cut, ins in muts:
        pos %= len(text) + 1
        text = text[:pos] + ins + text[pos + cut:]
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", **{n: "i32" for n in (
        "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn")}}
    try:
        ks = read_kernel(text)
        build_ir(ks, sig, {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2})
    except CompileError:
        pass


TOKENS = st.sampled_from(["x", "1", "2.0", "+", "*", "//", "(", ")", "[", "]", ":", "None", ",", "tl.arange(0, 8)",
                          "tl.load(p)", "tl.sum(", "axis=0", "\n    ", "=", "if", "for", "i", "in", "range(",
                          "p", "-", "<", "tl.where(", ".to(tl.float16)", "y", "return", " "])


@settings(max_examples=150, deadline=None)
@given(st.lists(TOKENS, max_size=30))
def test_fuzz_random_bodies(tokens: list) -> None:
    src = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(p, n):\n    x = 1\n    " + " ".join(tokens)
    try:
        build_ir(read_kernel(src), {"p": "*fp32", "n": "i32"}, {})
    except CompileError:
        pass


def test_a_librarys_host_decorators_over_jit_are_host_code() -> None:
    """`@libentry()` / `@my_cache` above @triton.jit wrap the jit function on the host and never change its
    body (as under Triton): the kernel reads and builds; a decorator under @triton.jit (it would transform the
    function Triton compiles) is still refused."""
    body = (
        "import triton\nimport triton.language as tl\nfrom .utils import libentry\n\n\n"
        "@libentry()\n@my_cache\n@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n"
        "    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)\n"
    )
    from tilec.compiler.errors import UnsupportedSyntaxError
    from tilec.compiler.ir import print_module

    ks = read_kernel(body, "k")
    assert "kernel @k" in print_module(build_ir(ks, {"x_ptr": "*fp32"}, {"BLOCK": 16}))
    inner = body.replace("@my_cache\n@triton.jit\n", "@triton.jit\n@my_cache\n")
    with pytest.raises(UnsupportedSyntaxError, match="decorator 'my_cache' is not supported"):
        read_kernel(inner, "k")
