"""Every bad input ends in a located CompileError (never another exception, never a hang), and the
source is never executed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tilec.compiler.errors import BudgetExceededError, CompileError, UnsupportedSyntaxError
from tilec.compiler.frontend import Budgets, build_ir, read_kernel

HEAD = "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"


def compile_src(body: str, sig: dict | None = None, cx: dict | None = None, budgets: Budgets | None = None):
    src = HEAD + textwrap.dedent(body)
    ks = read_kernel(src, filename="k.py", budgets=budgets)
    return build_ir(ks, sig if sig is not None else {"x_ptr": "*fp32", "n": "i32"}, cx if cx is not None else {"BLOCK": 128})


def err(body: str, **kw) -> CompileError:
    with pytest.raises(CompileError) as info:
        compile_src(body, **kw)
    e = info.value
    assert "compiler/frontend" not in str(e) and ".py\", line" not in str(e)
    return e


def test_dot_on_1d_tile_is_located() -> None:
    e = err("""\
    def k(x_ptr, n, BLOCK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        y = tl.dot(x, x)
    """)
    assert e.message == "tl.dot needs 2-D tiles, got shape [128]"
    assert (e.filename, e.line, e.col) == ("k.py", 8, 9)
    assert "y = tl.dot(x, x)" in str(e) and "\n        ^" in str(e)


def test_non_power_of_two_arange() -> None:
    e = err("""\
    def k(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
    """, cx={"BLOCK": 100})
    assert "power of two" in e.message and (e.line, e.col) == (7, 12)


@pytest.mark.parametrize("stmt,word", [("break", "break")])  # continue compiles (control.without_continue)
def test_break_unsupported(stmt: str, word: str) -> None:
    e = err(f"""\
    def k(x_ptr, n, BLOCK: tl.constexpr):
        for i in range(n):
            {stmt}
    """)
    assert isinstance(e, UnsupportedSyntaxError) and word in e.message and (e.line, e.col) == (8, 9)


def test_unsupported_constructs() -> None:
    for body in ("with open('f') as f:\n        pass", "try:\n        pass\n    except Exception:\n        pass",
                 "x = [i for i in range(3)]", "x = lambda: 1", "x_ptr[0] = 1", "import os"):
        e = err(f"def k(x_ptr, n, BLOCK: tl.constexpr):\n    {body}\n")
        assert isinstance(e, UnsupportedSyntaxError), body
        assert e.line == 7


def test_type_and_name_errors() -> None:
    assert "not defined" in err("def k(x_ptr, n, BLOCK: tl.constexpr):\n    y = zz + 1\n").message
    assert "needs integer operands" in err(
        "def k(x_ptr, n, BLOCK: tl.constexpr):\n    y = tl.load(x_ptr) & 1\n").message
    assert "cannot broadcast" in err(
        "def k(x_ptr, n, BLOCK: tl.constexpr):\n    y = tl.arange(0, 4) + tl.arange(0, 8)\n").message
    assert "static assertion failed: too big" in err(
        "def k(x_ptr, n, BLOCK: tl.constexpr):\n    tl.static_assert(BLOCK < 64, 'too big')\n").message
    assert "is not supported" in err("def k(x_ptr, n, BLOCK: tl.constexpr):\n    tl.nonexistent(1)\n").message


def test_loop_carried_type_change_is_an_error() -> None:
    e = err("""\
    def k(x_ptr, n, BLOCK: tl.constexpr):
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for i in range(n):
            acc = tl.load(x_ptr + tl.arange(0, BLOCK)).to(tl.float16)
    """)
    assert "acc" in e.message


def test_signature_errors() -> None:
    body = "def k(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n"
    assert "needs a type for 'n'" in err(body, sig={"x_ptr": "*fp32"}).message
    assert "unknown type" in err(body, sig={"x_ptr": "*fp99", "n": "i32"}).message
    assert "no value for the constexpr" in err(body, cx={}).message


def test_truncated_source() -> None:
    with pytest.raises(CompileError) as info:
        read_kernel(HEAD + "def k(x_ptr, n):\n    x = tl.load(x_ptr +", filename="t.py")
    assert info.value.line is not None and "syntax error" in info.value.message


def test_hostile_sizes_end_in_budget_errors() -> None:
    with pytest.raises(BudgetExceededError):
        read_kernel("x = 1\n" * 2_000_000)  # 12 MB
    with pytest.raises(CompileError):
        read_kernel("x = " + "(" * 5000 + "1" + ")" * 5000)
    with pytest.raises(BudgetExceededError):
        read_kernel(HEAD + 'def k():\n    x = "x"' + ' + "+1"' * 900 + "\n")
    e = err("def k(x_ptr, n, BLOCK: tl.constexpr):\n    for i in tl.static_range(10**6):\n        pass\n")
    assert isinstance(e, BudgetExceededError)
    e = err("def k(x_ptr, n, BLOCK: tl.constexpr):\n    x = tl.zeros([1 << 24], dtype=tl.float32)\n")
    assert isinstance(e, BudgetExceededError)
    e = err("def k(x_ptr, n, BLOCK: tl.constexpr):\n    x = 2 ** 10 ** 10\n")
    assert "bits" in e.message
    e = err("def k(x_ptr, n, BLOCK: tl.constexpr):\n    x = 'a' * 10 ** 9\n")
    assert "longer" in e.message
    with pytest.raises(BudgetExceededError):
        compile_src("def k(x_ptr, n, BLOCK: tl.constexpr):\n    for i in tl.static_range(1000):\n"
                    "        x = tl.arange(0, BLOCK) + i\n", budgets=Budgets(max_ops=500))


def test_recursion_is_refused() -> None:
    src = HEAD + "def f(x):\n    return f(x)\n\n\n@triton.jit\ndef k(x_ptr):\n    f(1)\n"
    with pytest.raises(CompileError) as info:
        build_ir(read_kernel(src, "k"), {"x_ptr": "*fp32"}, {})
    assert "recursive" in info.value.message


def test_source_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    src = textwrap.dedent(f"""\
        import triton
        import triton.language as tl
        open({str(marker)!r}, "w").write("module level")

        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr = len(open({str(marker)!r}, "w").write("default"))):
            open({str(marker)!r}, "w").write("body")
            tl.store(x_ptr, 1.0)
        """)
    with pytest.raises(CompileError):
        build_ir(read_kernel(src), {"x_ptr": "*fp32"}, {})
    src2 = src.replace(f"BLOCK: tl.constexpr = len(open({str(marker)!r}, \"w\").write(\"default\"))", "BLOCK: tl.constexpr")
    with pytest.raises(CompileError) as info:
        build_ir(read_kernel(src2), {"x_ptr": "*fp32"}, {"BLOCK": 1})
    assert "open" in info.value.message and info.value.line == 7
    assert not marker.exists()


def test_a_bundle_is_never_executed(tmp_path: Path) -> None:
    """The same attack spread over a bundle's modules: module-level code in each, a helper's default and
    body, an import of a module the bundle holds, and pins naming host things."""
    from tilec.compiler.frontend.bundle import read_bundle

    marker = tmp_path / "pwned"
    write = f"open({str(marker)!r}, 'w').write"
    helper = textwrap.dedent(f"""\
        import triton
        {write}("helper module")

        @triton.jit
        def h(x, N: tl.constexpr = len({write}("default"))):
            {write}("helper body")
            return x
        """)
    kernel = textwrap.dedent(f"""\
        import triton
        import triton.language as tl
        from .helpers import h
        {write}("kernel module")

        @triton.jit
        def k(x_ptr):
            tl.store(x_ptr, h(1.0))
        """)
    bundle = {"modules": {"pkg": f"{write}('package')", "pkg.helpers": helper, "pkg.kern": kernel},
              "packages": ["pkg"], "kernel": "pkg.kern:k",
              "pins": {"pkg.kern": {"tl": {"ref": "os.system"}, "open": {"ref": "builtins.open"}}}}  # fmt: skip
    with pytest.raises(CompileError):
        build_ir(read_bundle(bundle), {"x_ptr": "*fp32"}, {})
    assert not marker.exists()


def test_internal_errors_are_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilec.compiler.frontend import semantic

    def boom(self, *a, **k):
        raise KeyError("internal")

    monkeypatch.setattr(semantic.Semantic, "truediv", boom)
    e = err("def k(x_ptr, n, BLOCK: tl.constexpr):\n    y = tl.load(x_ptr) / 2\n")
    assert "internal compiler error" in e.message and e.line == 7
    monkeypatch.setenv("TILEC_DEBUG_FRONTEND", "1")
    with pytest.raises(KeyError):
        compile_src("def k(x_ptr, n, BLOCK: tl.constexpr):\n    y = tl.load(x_ptr) / 2\n")


def test_an_int_constant_past_64_bits_is_refused_even_where_a_float_is_wanted() -> None:
    e = err("def k(x_ptr, n, BLOCK: tl.constexpr):\n    tl.store(x_ptr, 2 ** 200)\n")
    assert (e.line, e.col) == (7, 5) and "does not fit in 64 bits" in str(e)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ('x.to(tl.float16, fp_downcast_rounding="rtz")',
         "fp_downcast_rounding='rtz' (round toward zero, f32 to f16) is not supported"),
        ('tl.cast(x, tl.float64, fp_downcast_rounding="rtne")',
         "fp_downcast_rounding should be set only for truncating fp conversions (from f32 to f64)"),
        ('x.to(tl.bfloat16, fp_downcast_rounding="up")',
         "Invalid rounding mode: 'up'. Supported rounding modes are 'rtne' and 'rtz'."),
    ],
)  # fmt: skip
def test_fp_downcast_rounding_is_checked_and_rtz_refused_not_ignored(call: str, message: str) -> None:
    """Triton's checks of the rounding mode; round toward zero, which tilec's conversions do not do, is a located
    refusal (the drop-in then runs the kernel under Triton) rather than round-to-nearest bits."""
    e = err(f"""\
    def k(x_ptr, n, BLOCK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        tl.store(x_ptr + tl.arange(0, BLOCK), {call}.to(tl.float32))
    """)
    assert e.message == message and e.line == 8
    compile_src("""\
    def k(x_ptr, n, BLOCK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        tl.store(x_ptr + tl.arange(0, BLOCK), x.to(tl.float16, fp_downcast_rounding="rtne").to(tl.float32))
    """)  # round to nearest even: the conversion as tilec does it
