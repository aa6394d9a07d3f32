"""The launch description of a remote tune: the expression evaluator and its refusals, TOML and JSON
round trips of the tutorial matmul, resolution against a signature, budgets, and host arrays."""

from __future__ import annotations

import json
import operator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilec.compiler.tune.keys import tuning_key
from tilec.compiler.tune.launch import (
    LaunchBudgets,
    LaunchDescription,
    LaunchDescriptionError,
    ResolvedLaunch,
    TensorArg,
    TensorSpec,
    _bf16_bits,
    evaluate,
    host_arrays,
    resolve,
)

MATMUL_TOML = """
grid = ["cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)"]
[args]
a_ptr = "randn(M, K)"
b_ptr = "randn(K, N)"
c_ptr = "empty(M, N)"
M = 500
N = 256
K = 96
stride_am = "K"     # scalars may be expressions over other scalars
stride_ak = 1
stride_bk = "N"
stride_bn = 1
stride_cm = "N"
stride_cn = 1
"""
MATMUL_PARAMS = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K"] + [
    f"stride_{x}" for x in ("am", "ak", "bk", "bn", "cm", "cn")
]
MATMUL_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16"} | {
    p: "i32" for p in MATMUL_PARAMS if not p.endswith("_ptr")
}
CONFIG = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8, "num_warps": 4}


def matmul() -> ResolvedLaunch:
    return resolve(LaunchDescription.from_toml(MATMUL_TOML), MATMUL_SIG, MATMUL_PARAMS)


def launch(args: dict, sig: dict[str, str], budgets: LaunchBudgets = LaunchBudgets()) -> ResolvedLaunch:
    return resolve(LaunchDescription(grid=[1], args=args), sig, list(sig), budgets)


def to_toml(data: dict) -> str:
    """A small TOML writer for launch descriptions (json.dumps of an ASCII string is a TOML basic string)."""

    def value(v: object) -> str:
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items() if x is not None) + "}"
        return json.dumps(v)

    lines = [f"grid = {value(data['grid'])}", "[args]"]
    lines += [f"{name} = {value(v)}" for name, v in data["args"].items()]
    return "\n".join(lines) + "\n"


# ---- evaluator ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("M - N - 1", 3),
        ("-7 // 2", -4),
        ("-7 % 2", 1),
        ("7 % -2", -1),
        ("7 // -2", -4),
        ("7 / 2", 3.5),
        ("2 ** 10", 1024),
        ("cdiv(7, 2)", 4),
        ("cdiv(8, 4)", 2),
        ("cdiv(-7, 2)", -3),
        ("cdiv(0, 5)", 0),
        ("min(3, M, 2)", 2),
        ("max(M, N, 5)", 12),
        ("max(M)", 12),
        ("-(-M)", 12),
        ("+N", 8),
        ("1.5 * 2", 3.0),
        ("cdiv(M, BLOCK) * cdiv(N, BLOCK)", 6),
        (42, 42),
        (2.5, 2.5),
    ],
)
def test_evaluate_arithmetic(expr: str | int, expected: int | float) -> None:
    value = evaluate(expr, {"M": 12, "N": 8, "BLOCK": 4})
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("expr", "col"),
    [
        ("1 + M.real", 5),  # attribute
        ("1 + foo(2)", 5),  # call of an unknown function
        ("__import__('os')", 1),
        ("M + (lambda: 1)()", 5),
        ("lambda: 1", 1),
        ("1 + M[0]", 5),  # subscript
        ("'abc'", 1),
        ("1 + 'a'", 5),
        ("M < 2", 1),  # comparison
        ("True", 1),
        ("M if M else 1", 1),
        ("[1, 2]", 1),
        ("2 ** 100000", 6),  # huge exponent
        ("2 ** -1", 6),
        ("2 ** 0.5", 6),
        ("2 ** 63", 1),  # beyond the 64-bit range
        ("M * 2 ** 62", 1),
        ("1e308 * 10", 1),
        ("M // (M - M)", 7),  # division by zero
        ("M % 0", 5),
        ("M / 0", 5),
        ("cdiv(M, 0)", 9),
        ("cdiv(M)", 1),
        ("min()", 1),
        ("max(M, key=M)", 1),
        ("ü + foo(1)", 5),  # columns count characters, not UTF-8 bytes
        ("1 + Q", 5),  # unknown name
        ("1 + * 2", 5),  # syntax error
        ("M +\n 1", 4),  # one line only
        ("-" * 40 + "1", 33),  # nested deeper than 32
        ("max(" + ", ".join(["1"] * 250) + ")", 1),  # more than 200 nodes (depth 2)
        ("1" * 1001, 1001),  # longer than 1000 characters
    ],
)
def test_evaluate_refusals(expr: str, col: int) -> None:
    with pytest.raises(LaunchDescriptionError) as info:
        evaluate(expr, {"M": 12, "ü": 1}, field="args.x")
    assert info.value.field == "args.x"
    assert info.value.col == col
    assert str(info.value).startswith("args.x: ")
    assert f"col {col}" in str(info.value)


def test_budgets_are_options() -> None:
    deep = "-" * 40 + "1"
    assert evaluate(deep, {}, LaunchBudgets(max_expr_depth=64)) == 1
    with pytest.raises(LaunchDescriptionError, match="more than 3 nodes"):
        evaluate("1 + 2 + 3", {}, LaunchBudgets(max_expr_nodes=3))
    with pytest.raises(LaunchDescriptionError, match="32-bit"):
        evaluate("2 ** 40", {}, LaunchBudgets(max_int_bits=32))
    with pytest.raises(LaunchDescriptionError, match="64-bit"):
        evaluate(2**70, {})


def _combine(parts: tuple) -> tuple[str, int]:
    (left, a), op, (right, b) = parts
    return f"({left} {op} {right})", OPS[op](a, b)


OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod}
LEAF = st.integers(-20, 20).map(lambda n: (f"({n})" if n < 0 else str(n), n))
EXPRS = st.recursive(
    LEAF,
    lambda inner: (
        st.tuples(inner, st.sampled_from(sorted(OPS)), inner)
        .filter(lambda t: not (t[1] in ("//", "%") and t[2][1] == 0))
        .map(_combine)
    ),
    max_leaves=10,
)


@given(EXPRS)
def test_evaluate_agrees_with_python_ints(case: tuple[str, int]) -> None:
    text, expected = case
    assert evaluate(text, {}, LaunchBudgets(max_expr_depth=64)) == expected


# ---- the description: TOML, JSON ---------------------------------------------------------------------


def test_toml_and_json_round_trips() -> None:
    launch = LaunchDescription.from_toml(MATMUL_TOML)
    assert (
        launch.args["M"] == 500 and launch.args["stride_am"] == "K" and launch.args["a_ptr"] == "randn(M, K)"
    )
    data = launch.to_json()
    assert LaunchDescription.from_json(json.loads(json.dumps(data))) == launch
    assert LaunchDescription.from_toml(to_toml(data)) == launch


def test_tensor_tables_round_trip() -> None:
    text = MATMUL_TOML.replace(
        'a_ptr = "randn(M, K)"',
        'a_ptr = {init = "randn", shape = ["M", "K"], dtype = "fp16", strides = ["1", "M"]}',
    )
    launch = LaunchDescription.from_toml(text)
    spec = launch.args["a_ptr"]
    assert spec == TensorSpec(init="randn", shape=["M", "K"], dtype="fp16", strides=["1", "M"])
    assert LaunchDescription.from_json(json.loads(json.dumps(launch.to_json()))) == launch
    assert LaunchDescription.from_toml(to_toml(launch.to_json())) == launch
    a = resolve(launch, MATMUL_SIG, MATMUL_PARAMS).tensors["a_ptr"]
    assert a.shape == (500, 96) and a.strides == (1, 500) and a.nbytes == 500 * 96 * 2


@pytest.mark.parametrize(
    ("text", "field", "match"),
    [
        ("grid = [", "toml", r"line 1 col 9"),
        ("grid = [1]\n[args]\nM = = 2", "toml", r"line 3 col 5"),
        ("grid = [1, 1, 1, 1]\n[args]", "grid", "at most 3"),
        ("grid = []\n[args]", "grid", "at least 1"),
        ("grid = [true]\n[args]", "grid[0]", "valid"),
        ("grid = [1]\n[args]\nx = {init = 'randn', shape = [1], colour = 1}", "args.x.colour", "Extra"),
        ("grid = [1]\n[args]\nx = {init = 'normal', shape = [1]}", "args.x.init", "randn"),
        ("grid = [1]\n[args]\nx = {init = 'rand', shape = [1], low = nan}", "args.x.low", "finite"),
        ("grid = [1]\n[args]\nx = inf", "args.x", "finite"),
        ("grid = [1]\n[args]\nx = [1, 2]", "args.x", "TensorSpec"),
        ("grid = [1]", "args", "required"),
        ("grid = [1]\nblock = [1]\n[args]", "block", "Extra"),
    ],
)
def test_bad_descriptions(text: str, field: str, match: str) -> None:
    with pytest.raises(LaunchDescriptionError, match=match) as info:
        LaunchDescription.from_toml(text)
    assert info.value.field == field


# ---- resolution ---------------------------------------------------------------------------------------


def test_matmul_resolves_to_shapes_and_grid() -> None:
    r = matmul()
    assert r.params == tuple(MATMUL_PARAMS)
    assert r.tensors["a_ptr"] == TensorArg("a_ptr", (500, 96), "fp16", "randn", None, None, (96, 1))
    assert r.tensors["b_ptr"].shape == (96, 256) and r.tensors["c_ptr"].shape == (500, 256)
    assert r.tensors["c_ptr"].init == "empty" and r.tensors["c_ptr"].nbytes == 500 * 256 * 2
    assert r.scalars["stride_am"] == 96 and r.scalars["stride_bk"] == 256 and r.scalars["stride_ak"] == 1
    assert r.grid(CONFIG) == (4 * 4, 1, 1)
    assert r.grid(CONFIG | {"BLOCK_SIZE_M": 32}) == (16 * 4, 1, 1)
    assert r.values("M") == 500 and r.values("a_ptr") is r.tensors["a_ptr"]


def test_grid_axes() -> None:
    args = {"x": "zeros(N)", "N": 1000}
    sig = {"x": "*fp32", "N": "i64"}
    r = resolve(LaunchDescription(grid=["cdiv(N, BLOCK)", 2, "num_warps"], args=args), sig, list(sig))
    assert r.grid({"BLOCK": 256, "num_warps": 4}) == (4, 2, 4)
    bad = [(["N - N"], "grid[0]", "1.."), ([1, 70000], "grid[1]", "65535"), (["N / 3"], "grid[0]", "integer")]
    bad += [([1, 1, "BLOCK"], "grid[2]", "unknown name"), (["2 ** 31"], "grid[0]", "2147483647")]
    for grid, field, match in bad:
        r = resolve(LaunchDescription(grid=grid, args=args), sig, list(sig))
        with pytest.raises(LaunchDescriptionError, match=match) as info:
            r.grid({"num_warps": 4})
        assert info.value.field == field
    with pytest.raises(LaunchDescriptionError) as info:  # a grid that cannot parse fails at resolve
        resolve(LaunchDescription(grid=[1, "N + * 2"], args=args), sig, list(sig))
    assert info.value.field == "grid[1]" and info.value.col == 5


def test_scalars_resolve_in_dependency_order() -> None:
    sig = {"A": "i32", "B": "i32", "C": "i64", "D": "fp32", "x": "*fp32"}
    r = launch({"A": "B * 2", "B": "C + 1", "C": 3, "D": "A / 4", "x": "zeros(A, B)"}, sig)
    assert r.scalars == {"A": 8, "B": 4, "C": 3, "D": 2.0}
    assert list(r.scalars) == ["A", "B", "C", "D"]  # kernel order, whatever the evaluation order
    assert r.tensors["x"].shape == (8, 4)


@pytest.mark.parametrize(
    ("args", "cycle"),
    [({"A": "B", "B": "A + 1", "C": 1}, "A -> B -> A"), ({"A": 1, "B": "B * 2", "C": 1}, "B -> B")],
)
def test_scalar_cycle(args: dict, cycle: str) -> None:
    with pytest.raises(LaunchDescriptionError, match=f"cycle: {cycle}") as info:
        launch(args, {"A": "i32", "B": "i32", "C": "i32"})
    assert info.value.field in {"args.A", "args.B"}


def test_byte_budgets() -> None:
    sig = {"a": "*fp32", "b": "*fp32", "M": "i32"}
    args = {"a": "randn(M, M)", "b": "zeros(M, M)", "M": 4096}
    with pytest.raises(LaunchDescriptionError) as info:
        launch(args, sig, LaunchBudgets(max_tensor_bytes=1 << 20))
    assert str(info.value) == "args.a: tensor of 67108864 bytes exceeds the limit of 1048576 bytes"
    with pytest.raises(
        LaunchDescriptionError, match="134217728 bytes in all exceed the limit of 100000000"
    ) as info:
        launch(args, sig, LaunchBudgets(max_total_bytes=100_000_000))
    assert info.value.field == "args"
    with pytest.raises(LaunchDescriptionError, match="exceeds the limit of 4294967296"):
        launch(args | {"M": "2 ** 20"}, sig)  # 4 TiB: refused before anything is allocated
    with pytest.raises(LaunchDescriptionError, match="over the limit of 2"):
        launch(args, sig, LaunchBudgets(max_args=2))


@pytest.mark.parametrize(
    ("change", "field", "match"),
    [
        ({"M": None}, "args.M", "missing"),
        ({"X": 1}, "args.X", "unknown argument"),
        ({"BLOCK": 64}, "args.BLOCK", "unknown argument"),  # constexprs come from the config
        ({"a": 5}, "args.a", "pointer parameter needs a tensor"),
        ({"a": "M * 2"}, "args.a", "pointer parameter needs a tensor"),
        ({"M": "randn(4)"}, "args.M", "scalar parameter needs a scalar"),
        ({"M": {"init": "zeros", "shape": [4]}}, "args.M", "scalar parameter needs a scalar"),
        ({"M": 1.5}, "args.M", "needs an integer"),
        ({"M": True}, "args.M", "needs an integer"),
        ({"M": "8 / 2"}, "args.M", "needs an integer"),
        ({"M": 2**40}, "args.M", r"does not fit i32"),
        ({"u": -1}, "args.u", r"does not fit u8"),
        ({"f": 1e6}, "args.f", "not a fp16 value"),
        ({"f": True}, "args.f", "not a fp16 value"),
        ({"flag": 2}, "args.flag", "does not fit i1"),
        ({"a": "randn(M, -1)"}, "args.a", "non-negative integer, got -1"),
        ({"a": "randn(M, 2.5)"}, "args.a", "non-negative integer"),
        ({"a": "randn(M, a)"}, "args.a", "unknown name 'a'"),
        ({"a": "randn(M, dtype=M)"}, "args.a", "positional"),
        ({"a": "randint(1)"}, "args.a", "randint takes"),
        ({"a": "randint(5, 5, M)"}, "args.a", "low < high"),
        ({"a": "randint(0, 100000, M)"}, "args.a", "do not fit fp16"),
        ({"a": {"init": "randint", "shape": ["M"]}}, "args.a", "needs low and high"),
        ({"a": {"init": "randn", "shape": ["M"], "dtype": "fp32"}}, "args.a.dtype", "differs"),
        ({"a": {"init": "randn", "shape": ["M", -3]}}, "args.a.shape[1]", "got -3"),
        ({"a": {"init": "randn", "shape": ["M"], "strides": [1, 1]}}, "args.a.strides", "2 strides for 1"),
        ({"a": {"init": "randn", "shape": ["M"], "strides": ["-1"]}}, "args.a.strides[0]", "stride"),
        ({"M": "M + Q"}, "args.M", "cycle"),
    ],
)
def test_bad_arguments(change: dict, field: str, match: str) -> None:
    sig = {"a": "*fp16", "M": "i32", "u": "u8", "f": "fp16", "flag": "i1"}
    args = {"a": "randn(M)", "M": 4, "u": 3, "f": 0.5, "flag": True} | change
    args = {k: v for k, v in args.items() if v is not None}
    with pytest.raises(LaunchDescriptionError, match=match) as info:
        resolve(LaunchDescription.from_json({"grid": [1], "args": args}), sig, list(sig))
    assert info.value.field == field


def test_expression_errors_in_args_carry_the_column() -> None:
    sig = {"a": "*fp16", "M": "i32"}
    with pytest.raises(LaunchDescriptionError) as info:
        launch({"a": "randn(M, M.x)", "M": 4}, sig)
    assert info.value.field == "args.a" and info.value.col == 10
    with pytest.raises(LaunchDescriptionError) as info:
        launch({"a": "randn(M, -M)", "M": 4}, sig)
    assert info.value.col == 10
    with pytest.raises(LaunchDescriptionError) as info:
        launch({"a": {"init": "zeros", "shape": ["M // 0"]}, "M": 4}, sig)
    assert info.value.field == "args.a.shape[0]" and info.value.col == 6


def test_signature_problems() -> None:
    with pytest.raises(LaunchDescriptionError) as info:
        resolve(LaunchDescription(grid=[1], args={"n": 1}), {}, ["n"])
    assert info.value.field == "signature.n"
    with pytest.raises(LaunchDescriptionError, match="unsupported or missing type") as info:
        resolve(LaunchDescription(grid=[1], args={"x": "zeros(1)"}), {"x": "*fp8e4nv"}, ["x"])


def test_scalar_coercions() -> None:
    sig = {"f": "fp32", "d": "fp64", "flag": "i1", "one": "i1", "big": "u64", "neg": "i8"}
    r = launch(
        {"f": 2, "d": "1 / 3", "flag": False, "one": 1, "big": "2 ** 62 + (2 ** 62 - 1)", "neg": -128}, sig
    )
    assert r.scalars == {"f": 2.0, "d": 1 / 3, "flag": False, "one": True, "big": 2**63 - 1, "neg": -128}
    assert type(r.scalars["f"]) is float and r.scalars["one"] is True


def test_key_values() -> None:
    r = matmul()
    assert r.key_values(["M", "N", "K", "a_ptr"]) == {
        "M": 500,
        "N": 256,
        "K": 96,
        "a_ptr": {"shape": [500, 96], "dtype": "fp16"},
    }
    with pytest.raises(LaunchDescriptionError) as info:
        r.key_values(["BLOCK_SIZE_M"])
    assert info.value.field == "args.BLOCK_SIZE_M"


def test_a_tuning_key_without_an_autotune_key_is_the_launch() -> None:
    """With an autotune decorator the key is its arguments' values; without one it is what was timed
    (every argument, strides and the grid), so that one launch's trials never answer another launch."""
    r = matmul()

    def key(names: list[str] | None) -> str:
        return tuning_key(kernel_key="k", key_names=names, value=lambda n: r.key_values([n])[n], runtime=r.params,
                          signature=MATMUL_SIG, target="cpu", launch_key=r.launch_key_string).key  # fmt: skip

    assert key(["M", "N", "K"]) == '{"M":500,"N":256,"K":96}'
    assert key([]) == ""  # @autotune(key=[]): one result for every launch, as Triton does
    plain = key(None)
    assert json.loads(plain)["launch"]["args"]["a_ptr"] == {
        "shape": [500, 96],
        "dtype": "fp16",
        "strides": [96, 1],
    }
    others = [
        resolve(LaunchDescription.from_toml(MATMUL_TOML.replace("M = 500", "M = 4096")), MATMUL_SIG, MATMUL_PARAMS),
        resolve(LaunchDescription.from_toml(MATMUL_TOML.replace('grid = ["cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)"]',
                'grid = ["cdiv(M, BLOCK_SIZE_M)", "cdiv(N, BLOCK_SIZE_N)"]')), MATMUL_SIG, MATMUL_PARAMS),
    ]  # fmt: skip
    keys = {plain, *(o.launch_key_string() for o in others)}
    assert len(keys) == 3
    wide = ResolvedLaunch(tuple(f"s{i}" for i in range(200)), {}, {f"s{i}": i for i in range(200)})
    long_key = wide.launch_key_string()
    assert len(long_key) < 1000 and "launch_sha256" in long_key  # the column holds 1000 characters


# ---- host arrays --------------------------------------------------------------------------------------


DTYPES = {
    "fp16": np.float16,
    "bf16": np.uint16,
    "fp32": np.float32,
    "fp64": np.float64,
    "i1": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "u8": np.uint8,
    "u16": np.uint16,
    "u32": np.uint32,
    "u64": np.uint64,
}


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("init", ["randn", "rand", "zeros", "empty"])
def test_host_arrays_dtypes_and_shapes(dtype: str, init: str) -> None:
    r = launch({"x": f"{init}(M, 3)", "M": 50}, {"x": f"*{dtype}", "M": "i32"})
    x = host_arrays(r)["x"]
    assert x.dtype == DTYPES[dtype] and x.shape == (50, 3) and x.flags.c_contiguous
    if init == "zeros":
        assert not x.any()
    if init in ("randn", "rand"):
        assert x.any()
        assert len(np.unique(x)) > 1
        assert np.array_equal(host_arrays(r, seed=7)["x"], host_arrays(r, seed=7)["x"])
        assert not np.array_equal(host_arrays(r, seed=1)["x"], host_arrays(r, seed=2)["x"])


def test_random_inputs_are_never_all_zero() -> None:
    sig = {"x": "*i32", "y": "*fp32", "z": "*i1"}
    for seed in range(20):  # one element in {0, 1}, or rand drawing exactly 0.0: forced nonzero
        r = launch({"x": "randint(0, 2, 1)", "y": "rand(1)", "z": "rand(1)"}, sig)
        arrays = host_arrays(r, seed)
        assert arrays["x"].tolist() in ([1],) and arrays["y"][0] != 0 and arrays["z"][0]


def test_host_arrays_values() -> None:
    sig = {"a": "*fp32", "b": "*fp16", "c": "*i16", "d": "*u8", "M": "i32"}
    r = launch(
        {"a": "randn(M, M)", "b": "rand(M)", "c": "randint(-5, 5, M)", "d": "randn(M)", "M": 1000}, sig
    )
    arrays = host_arrays(r)
    assert abs(arrays["a"].mean()) < 0.01 and abs(arrays["a"].std() - 1) < 0.01
    assert 0 <= arrays["b"].min() and arrays["b"].max() < 1
    assert set(np.unique(arrays["c"]).tolist()) == set(range(-5, 5))
    assert arrays["d"].max() < 16 and not np.array_equal(arrays["a"][0], arrays["a"][1])


def test_bf16_bits() -> None:
    assert _bf16_bits(np.array([1.0, -2.0, 0.0], np.float32)).tolist() == [0x3F80, 0xC000, 0]
    halfway = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20], np.float32)
    assert _bf16_bits(halfway).tolist() == [0x3F80, 0x3F82, 0x3F81]  # ties to even, else nearest
    fp32 = launch({"x": "randn(M)", "M": 4096}, {"x": "*fp32", "M": "i32"})
    bf16 = launch({"x": "randn(M)", "M": 4096}, {"x": "*bf16", "M": "i32"})
    bits = host_arrays(bf16, seed=3)["x"]
    decoded = (bits.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_allclose(decoded, host_arrays(fp32, seed=3)["x"], rtol=2**-8)


def test_strided_tensors_are_flat_storage() -> None:
    sig = {"a": "*fp16", "b": "*fp32", "M": "i32"}
    r = launch(
        {
            "a": {"init": "randn", "shape": ["M", 3], "strides": [1, "M"]},
            "b": {"init": "zeros", "shape": [4, 3], "strides": [8, 1]},
            "M": 5,
        },
        sig,
    )
    assert r.tensors["a"].nbytes == 15 * 2 and r.tensors["b"].nbytes == (1 + 3 * 8 + 2) * 4
    arrays = host_arrays(r)
    assert arrays["a"].shape == (15,) and arrays["a"].dtype == np.float16
    assert arrays["b"].shape == (27,) and not arrays["b"].any()


def test_empty_and_zero_sized_tensors() -> None:
    r = launch({"x": "randn(0, M)", "y": "zeros()", "M": 7}, {"x": "*fp32", "y": "*i64", "M": "i32"})
    assert r.tensors["x"].nbytes == 0 and r.tensors["y"].nbytes == 8
    arrays = host_arrays(r)
    assert arrays["x"].shape == (0, 7) and arrays["y"].shape == () and arrays["y"] == 0


def test_large_fp16_matmul_inputs() -> None:
    text = (
        MATMUL_TOML.replace("M = 500", "M = 4096")
        .replace("N = 256", "N = 4096")
        .replace("K = 96", "K = 4096")
    )
    arrays = host_arrays(resolve(LaunchDescription.from_toml(text), MATMUL_SIG, MATMUL_PARAMS))
    assert arrays["a_ptr"].shape == (4096, 4096) and arrays["a_ptr"].dtype == np.float16
    assert abs(float(arrays["b_ptr"].astype(np.float32).std()) - 1) < 0.01


PEAK = """
import resource
from tilec.compiler.tune.launch import LaunchDescription, host_arrays, resolve
desc = LaunchDescription(grid=["1"], args={"x": {"init": "randn", "shape": [1 << 28], "dtype": "bf16"}})
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
x = host_arrays(resolve(desc, {"x": "*bf16"}, ["x"]))["x"]
print(x.nbytes >> 20, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10)
"""


def test_a_large_input_costs_about_its_size() -> None:
    """A 512 MiB bf16 randn: the generator's peak is the array plus a few MiB (it was 3.6 GB: float64 draws,
    a float32 copy and the bits of the whole tensor at once)."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", PEAK], capture_output=True, text=True, timeout=300, check=True
    )
    size_mb, grew_mb = map(int, out.stdout.split())
    assert size_mb == 512
    assert grew_mb < size_mb + 64, f"generating {size_mb} MiB grew the process by {grew_mb} MiB"
