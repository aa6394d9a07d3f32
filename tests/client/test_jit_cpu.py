"""client.jit on the cpu target: launching, the specialisation cache, autotuning, argument errors, asserts,
loading a serialised Artifact without recompiling, and the honesty of client.__all__."""

from __future__ import annotations

import numpy as np
import pytest

from tilec import client
from tilec.compiler.artifact import Artifact
from tilec.compiler.errors import StaticAssertionError
from tilec.runtime.cpu import load

ADD = """
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""

TUNED = """
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256})], key=["n"])
@triton.jit
def scale_inplace(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)
"""

ASSERTING = """
import triton
import triton.language as tl


@triton.jit
def positive(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=1)
    tl.device_assert(x > 0, "x must be positive")
"""


def _add_args(n: int = 1000):
    rng = np.random.default_rng(0)
    return rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32), np.zeros(n, np.float32)


def test_add_and_cache_counts_compiles() -> None:
    k = client.jit(ADD, "add_kernel")
    x, y, out = _add_args()
    k[lambda m: (-(-1000 // m["BLOCK"]),)](x, y, out, 1000, BLOCK=256)
    np.testing.assert_array_equal(out, x + y)
    assert k.compile_count == 1
    k[(4,)](x, y, out, 1000, BLOCK=256)
    assert k.compile_count == 1, "same specialisation compiles nothing"
    k[(8,)](x, y, out, 1000, BLOCK=128)
    assert k.compile_count == 2, "a new constexpr is a new specialisation"
    k[(62,)](x, y, out, 992, BLOCK=16)  # 992 % 16 == 0: a divisibility hint, a new specialisation
    assert k.compile_count == 3
    np.testing.assert_array_equal(out, x + y)


def test_jit_from_a_path(tmp_path) -> None:
    p = tmp_path / "add.py"
    p.write_text(ADD)
    k = client.jit(str(p), "add_kernel")
    x, y, out = _add_args(10)
    k[(1,)](x, y, out, 10, BLOCK=16)
    np.testing.assert_array_equal(out, x + y)


def test_autotune_restores_outputs_and_keeps_winner() -> None:
    k = client.jit(TUNED)
    x = np.arange(1000, dtype=np.float32)
    k[lambda m: (-(-1000 // m["BLOCK"]),)](x, 1000)
    (
        np.testing.assert_array_equal(x, np.arange(1000, dtype=np.float32) * 2),
        "trials must not leak into the output",
    )
    assert len(k.best_configs) == 1
    compiles = k.compile_count
    k[lambda m: (-(-1000 // m["BLOCK"]),)](x, 1000)
    assert k.compile_count == compiles
    np.testing.assert_array_equal(x, np.arange(1000, dtype=np.float32) * 4)


REFUSED_CONFIG = """
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 512}), triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 1024})],
                 key=["n"])
@triton.jit
def double_small(x_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 256, "this kernel takes blocks of at most 256")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
"""


def test_autotune_leaves_out_a_config_that_cannot_build() -> None:
    """As Triton's autotuner: a config the compiler refuses (a failed static_assert, too much shared memory)
    is left out of the timing; the others are timed and the launch takes the best of them."""
    k = client.jit(REFUSED_CONFIG)
    x = np.arange(1000, dtype=np.float32)
    k[lambda m: (-(-1000 // m["BLOCK"]),)](x, 1000)
    np.testing.assert_array_equal(x, np.arange(1000, dtype=np.float32) * 2)
    (cfg,) = k.best_configs.values()
    assert cfg.kwargs == {"BLOCK": 64}
    (trials,) = k.trials.values()
    assert [c for c, _ in trials] == [{"BLOCK": 64}]
    only_refused = client.jit(REFUSED_CONFIG.replace('triton.Config({"BLOCK": 64}), ', ""))
    with pytest.raises(StaticAssertionError, match="at most 256"):
        only_refused[lambda m: (-(-1000 // m["BLOCK"]),)](x, 1000)


@pytest.mark.parametrize(
    ("call", "exc", "needle"),
    [
        (lambda k, x, y, o: k[(1,)](x, y, o), client.ArgumentError, "'n'"),
        (lambda k, x, y, o: k[(1,)](x, y, o, 10, 16, 99), client.ArgumentError, "6 positional"),
        (
            lambda k, x, y, o: k[(1,)](x.astype(np.complex64), y, o, 10, BLOCK=16),
            client.ArgumentError,
            "'x_ptr'",
        ),
        (lambda k, x, y, o: k[(-1,)](x, y, o, 10, BLOCK=16), client.GridError, "axis 0"),
        (lambda k, x, y, o: k[(2, -1)](x, y, o, 10, BLOCK=16), client.GridError, "axis 1"),
        (lambda k, x, y, o: k[(1,)](x, y, o, "ten", BLOCK=16), client.ArgumentError, "'n'"),
        (lambda k, x, y, o: k[(1,)](x, y, o, 10, BLOCK=16, nope=1), client.ArgumentError, "'nope'"),
    ],
)
def test_clear_errors(call, exc, needle) -> None:
    k = client.jit(ADD, "add_kernel")
    x, y, o = _add_args(20)
    with pytest.raises(exc, match=needle):
        call(k, x, y, o)


STRIDED = """
import triton
import triton.language as tl


@triton.jit
def copy2d(x_ptr, out_ptr, M, N, stride_xm, stride_xn, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.arange(0, BM)[:, None]
    rn = tl.arange(0, BN)[None, :]
    mask = (rm < M) & (rn < N)
    tl.store(out_ptr + rm * N + rn, tl.load(x_ptr + rm * stride_xm + rn * stride_xn, mask=mask), mask=mask)
"""


def test_a_view_passes_its_first_elements_address_as_in_triton() -> None:
    """A transposed or sliced view is not refused: the kernel gets the address of its first element and
    indexes it with the strides it is passed (Triton's contract; Inductor's kernels pass views)."""
    k = client.jit(STRIDED, "copy2d")
    base = np.arange(7 * 12, dtype=np.float32).reshape(7, 12)
    for view in (base.T, base[1:, 2::3], base[::-1]):
        out = np.zeros(view.shape, np.float32)
        sm, sn = (s // base.itemsize for s in view.strides)
        k[(1,)](view, out, view.shape[0], view.shape[1], sm, sn, BM=16, BN=16)
        np.testing.assert_array_equal(out, view)


def test_device_assert_raises() -> None:
    k = client.jit(ASSERTING)
    k[(1,)](np.ones(8, np.int32), 8, BLOCK=8)
    with pytest.raises(client.KernelAssertionError, match="x must be positive"):
        k[(1,)](np.array([1, 2, -3, 4], np.int32), 4, BLOCK=8)


def test_artifact_json_loads_without_recompiling(monkeypatch) -> None:
    k = client.jit(ADD, "add_kernel")
    x, y, out = _add_args(100)
    k[(1,)](x, y, out, 100, BLOCK=128)
    art = Artifact.from_json(next(iter(k.cache.values())).to_json())
    import tilec.compiler.backends.cpu.target as cpu

    def boom(*a, **kw):
        raise AssertionError("loading an artifact must not recompile")

    monkeypatch.setattr(cpu, "optimise", boom)
    monkeypatch.setattr(cpu, "emit_object", boom)
    out2 = np.zeros_like(out)
    load(art).launch([x.ctypes.data, y.ctypes.data, out2.ctypes.data, 100], (1, 1, 1))
    np.testing.assert_array_equal(out2, x + y)


def test_all_is_sorted_and_honest() -> None:
    assert client.__all__ == sorted(client.__all__)
    for name in client.__all__:
        assert hasattr(client, name), name
    public = {n for n in dir(client) if not n.startswith("_")}
    # besides __all__, only the public submodules once imported: the CLI and the torch.compile integration
    assert public - set(client.__all__) <= {"cli", "inductor"}, public - set(client.__all__)


def test_a_grid_of_no_programs_launches_nothing() -> None:
    """As in Triton: an empty input's grid (cdiv(0, BLOCK) == 0) is no launch, not an error."""
    k = client.jit(ADD, "add_kernel")
    x, y, o = _add_args(20)
    o[:] = 7
    k[(0,)](x, y, o, 0, BLOCK=16)
    k[lambda meta: (0, 3)](x, y, o, 0, BLOCK=16)
    assert (o == 7).all()


def test_static_print_prints_once_per_specialisation(capsys: pytest.CaptureFixture) -> None:
    src = ADD.replace("    mask = offs < n\n", "    mask = offs < n\n    tl.static_print('BLOCK', BLOCK, offs)\n")
    k = client.jit(src, "add_kernel")
    x, y, o = _add_args(20)
    for _ in range(2):
        k[(1,)](x, y, o, 20, BLOCK=32)
    k[(1,)](x, y, o, 20, BLOCK=64)
    assert capsys.readouterr().out.splitlines() == ["BLOCK 32 i32 tile of shape [32]", "BLOCK 64 i32 tile of shape [64]"]


PRINTING = """
import triton
import triton.language as tl


@triton.jit
def show(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.device_print("x", x)
    grid2d = offs[:, None] * 100 + tl.arange(0, 32)[None, :]  # 4 x 32: a big tile on the cpu target
    print("g", grid2d)
    tl.device_print("bits", (x > 1.5).to(tl.int32), hex=True)
"""


def _print_lines(pid: int, x: np.ndarray) -> list[str]:
    lines = [f"pid ({pid}, 0, 0) idx ({i}) x: {float(v):f}" for i, v in enumerate(x)]
    lines += [f"pid ({pid}, 0, 0) idx ({i}, {j}) g: {i * 100 + j}" for i in range(4) for j in range(32)]
    lines += [f"pid ({pid}, 0, 0) idx ({i}) bits: 0x{int(v > 1.5):x}" for i, v in enumerate(x)]
    return lines


def test_device_print_prints_every_element_on_cpu_as_the_interpreter_does(capfd: pytest.CaptureFixture) -> None:
    from tilec.compiler.frontend import build_ir, read_kernel
    from tilec.compiler.interp import run_kernel

    x = np.array([0.5, 1.5, 2.5, -3.0], np.float32)
    want = _print_lines(0, x) + _print_lines(1, x)
    client.jit(PRINTING, "show")[(2,)](x, 4, BLOCK=4)
    assert capfd.readouterr().out.splitlines() == want
    module = build_ir(read_kernel(PRINTING, "show"), {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 4})
    run_kernel(module, "show", [x, np.int32(4)], (2, 1, 1))
    assert capfd.readouterr().out.splitlines() == want
