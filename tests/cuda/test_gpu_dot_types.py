"""tf32 and fp8 dots on a real GPU against torch: f32 inputs with input_precision tf32 (wgmma m64nNk8 on
sm_90a, mma.sync m16n8k8 on sm_80), ieee (exact f32 on FMAs), tf32x3 (three tf32 products on mma.sync)
and fp8 e4m3 / e5m2 / mixed (wgmma k32 on sm_90a; on sm_80 staged as f16 for mma.sync), with ragged
sizes (masked edges) and transposed operands. The kernels are compiled for an explicit target and launched through the client's
cuda runtime on torch tensors; an sm_80 cubin does not load on Hopper (SASS runs on its own major arch
only), so the sm_80 build is loaded as its PTX (.target sm_80), which the driver compiles for the GPU
at hand: the same mma.sync code. Skips without a GPU.

Bounds are element-wise, relative to (|A| |B|)[i, j], the sum of the magnitudes of the products: tf32
keeps 10 mantissa bits of each operand (wgmma truncates, mma.sync rounds), so a product is off by at
most about 2 * 2^-10 of its magnitude; fp8 products are exact in f32 and only the accumulation rounds.
A wrong fragment, swizzle or mask gives errors of the order of the values themselves."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.cuda.gpu import gpu_reason

pytestmark = pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")

SRC = """import triton
import triton.language as tl


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ka = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * sam + ka[None, :] * sak, mask=(rm[:, None] < M) & (ka[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + ka[:, None] * sbk + rn[None, :] * sbn, mask=(ka[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc += tl.dot(a, b, input_precision=PREC)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
"""
NAMES = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn")
FP8 = {"e4m3": ("float8_e4m3fn", "*fp8e4nv"), "e5m2": ("float8_e5m2", "*fp8e5")}
RAGGED = (193, 130, 150)  # K not a multiple of 16: no ring, operands staged from registers
ALIGNED = (200, 144, 176)  # K a multiple of 16: rings where K is contiguous; masked M, N and last K block


def _operand(torch, rows: int, cols: int, trans: bool, make):
    """A rows x cols operand and its (row, column) strides: stored transposed (cols x rows) when `trans`."""
    if trans:
        store = make(cols, rows)
        return store, store.t(), (1, rows)
    store = make(rows, cols)
    return store, store, (cols, 1)


PTX_TARGETS = ("cuda:sm_80",)


def run(make, types: tuple[str, str], shape: tuple, trans: tuple[bool, bool], target: str, cfg: tuple,
        prec: str = "tf32", expect: str | None = None, src: str = SRC):  # fmt: skip
    """Compile the matmul for `target`, run it on operands made by make(rows, cols) -> torch tensor;
    (A, B, C) as float64 tensors of the values the kernel saw and the result."""
    import torch

    from tilec.compiler.artifact import CompileOptions
    from tilec.compiler.pipeline import compile_kernel
    from tilec.runtime.cuda import launch
    from tilec.runtime.launch import specialise

    m, n, k = shape
    bm, bn, bk, nw, ns = cfg
    a_store, a, (sam, sak) = _operand(torch, m, k, trans[0], lambda r, c: make(0, r, c))
    b_store, b, (sbk, sbn) = _operand(torch, k, n, trans[1], lambda r, c: make(1, r, c))
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    raw = [x.view(torch.uint8) if x.element_size() == 1 else x for x in (a_store, b_store)]
    args = [*raw, c, m, n, k, sam, sak, sbk, sbn, n, 1]
    specs = {name: specialise(name, v) for name, v in zip(NAMES, args, strict=True)}
    sig = {name: s.type for name, s in specs.items()} | {"a_ptr": types[0], "b_ptr": types[1]}
    art = compile_kernel(src.replace("PREC", repr(prec)), "mm", signature=sig, constexprs={"BM": bm, "BN": bn, "BK": bk},
                         hints={name: dict(s.hints) for name, s in specs.items() if s.hints},
                         options=CompileOptions(target=target, num_warps=nw, num_stages=ns),
                         emit="ptx" if target in PTX_TARGETS else "cubin")  # fmt: skip
    if expect is not None:
        assert expect in art.ptx, f"{target}: {expect} not in the PTX"
    if target in PTX_TARGETS:  # an sm_80 cubin does not load on sm_90: its PTX, compiled by the driver
        assert f".target {target[5:]}" in art.ptx and art.metadata["emit"] == "ptx"
        art = replace(art, target=f"cuda:sm_{_device_sm(torch)}", binary=art.ptx.encode() + b"\0")
    launch(art, args, (-(-m // bm), -(-n // bn), 1))
    torch.cuda.synchronize()
    return a.double(), b.double(), c.double()


def _device_sm(torch) -> int:
    major, minor = torch.cuda.get_device_capability()
    return 10 * major + minor


def check_bound(a, b, c, rel: float, what: str) -> float:
    """max |C - AB| / (|A||B|) element-wise must stay under `rel`; returns the norm-wise error."""
    import torch

    want = a @ b
    scale = a.abs() @ b.abs()
    assert not torch.isnan(c).any(), f"{what}: elements left unwritten"
    worst = float(((c - want).abs() / scale.clamp_min(1e-30)).max())
    assert worst <= rel, f"{what}: worst element error {worst:.3g} of |A||B| > {rel:.3g}"
    return float(torch.linalg.norm(c - want) / torch.linalg.norm(want))


TF32_CASES = [(t, s, tr, cfg) for t in ("cuda:sm_90a", "cuda:sm_80")
              for s, tr, cfg in [(ALIGNED, (False, False), (128, 128, 32, 8, 3)), (ALIGNED, (False, True), (64, 64, 32, 4, 3)),
                                 (ALIGNED, (True, False), (128, 64, 32, 4, 2)), (ALIGNED, (True, True), (128, 128, 32, 8, 3)),
                                 (RAGGED, (False, False), (64, 64, 32, 4, 3)), (RAGGED, (True, True), (128, 128, 16, 8, 2))]]  # fmt: skip


@pytest.mark.parametrize(("target", "shape", "trans", "cfg"), TF32_CASES)
def test_tf32(target: str, shape: tuple, trans: tuple, cfg: tuple) -> None:
    """f32 inputs with input_precision tf32 against float64 and against torch.matmul with allow_tf32."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(11)
    inst = "k8.f32.tf32.tf32" if target == "cuda:sm_90a" else "mma.sync.aligned.m16n8k8.row.col.f32.tf32"
    a, b, c = run(lambda i, r, cc: torch.randn(r, cc, device="cuda", generator=gen), ("*fp32", "*fp32"), shape,
                  trans, target, cfg, expect=inst)  # fmt: skip
    rel = check_bound(a, b, c, 2.5 * 2.0**-10, f"tf32 {target} {shape} {trans}")
    assert 1e-5 < rel < 2e-3, rel  # tf32's error (far above f32's ~1e-7), not an f32 product
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        t = (a.float() @ b.float()).double()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    assert float(torch.linalg.norm(c - t) / torch.linalg.norm(t)) < 3e-3  # two tf32 results, each ~5e-4 off


@pytest.mark.parametrize("target", ["cuda:sm_90a", "cuda:sm_80"])
def test_ieee_stays_exact_f32(target: str) -> None:
    """ieee accumulates exact f32 products on FMAs: f32 rounding only."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(12)
    a, b, c = run(lambda i, r, cc: torch.randn(r, cc, device="cuda", generator=gen), ("*fp32", "*fp32"), ALIGNED,
                  (False, True), target, (64, 64, 32, 4, 2), prec="ieee", expect="fma.rn.f32")  # fmt: skip
    rel = check_bound(a, b, c, 2 * ALIGNED[2] * 2.0**-24, f"ieee {target}")
    assert rel < 5e-6  # f32's error, two orders under tf32's


@pytest.mark.parametrize("target", ["cuda:sm_90a", "cuda:sm_80"])
@pytest.mark.parametrize(("shape", "trans"), [(ALIGNED, (False, False)), (RAGGED, (True, True))])
def test_tf32x3_is_near_f32(target: str, shape: tuple, trans: tuple) -> None:
    """tf32x3: three tf32 products per step (small*big + big*small + big*big) on mma.sync m16n8k8; what
    is dropped (small*small and the rounding of the small parts) is about 2^-21 of a product."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(16)
    a, b, c = run(lambda i, r, cc: torch.randn(r, cc, device="cuda", generator=gen), ("*fp32", "*fp32"), shape,
                  trans, target, (64, 64, 32, 4, 3), prec="tf32x3",
                  expect="mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")  # fmt: skip
    rel = check_bound(a, b, c, 3 * shape[2] * 2.0**-24 + 2.0**-19, f"tf32x3 {target} {shape} {trans}")
    assert rel < 5e-6  # near f32, two orders under tf32's


def _fp8_maker(torch, kinds: tuple[str, str], gen):
    def make(i: int, r: int, c: int):
        dt = getattr(torch, FP8[kinds[i]][0])
        scale = 8.0 if kinds[i] == "e4m3" else 64.0  # spread over many binades of each format
        return (torch.randn(r, c, device="cuda", generator=gen) * scale).to(dt)

    return make


FP8_CASES = [(kinds, t, s, tr) for kinds in (("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2"), ("e5m2", "e4m3"))
             for t in ("cuda:sm_90a", "cuda:sm_90", "cuda:sm_80")
             for s, tr in [(ALIGNED, (False, True)), (ALIGNED, (False, False)), (RAGGED, (True, False))]]  # fmt: skip
# sm_90 on two warps (no wgmma): mma.sync with the operands converted in hardware (and B staged N x K where it is
# loaded K-contiguous); sm_80: the integer decoding
FP8_CASES += [(("e4m3", "e4m3"), t, ALIGNED, (True, True)) for t in ("cuda:sm_90a", "cuda:sm_90", "cuda:sm_80")]
FP8_CFG = {"cuda:sm_90": (64, 64, 64, 2, 3)}  # others: 128x128x64 on 8 warps, 3 stages


@pytest.mark.parametrize(("kinds", "target", "shape", "trans"), FP8_CASES)
def test_fp8(kinds: tuple, target: str, shape: tuple, trans: tuple) -> None:
    """fp8 inputs against the fp8 tensors upcast to float64 and multiplied there: fp8 products are exact,
    so only the accumulation rounds (f32 on mma.sync; wgmma's fp8 accumulation is known to keep fewer
    bits, so its bound is looser; both are far under what a wrong layout gives)."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(13)
    types = (FP8[kinds[0]][1], FP8[kinds[1]][1])
    if target == "cuda:sm_90a":
        inst, rel = f"wgmma.mma_async.sync.aligned.m64n128k32.f32.{kinds[0]}.{kinds[1]}", 2.0**-9
    else:
        inst, rel = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 2.0**-14
    a, b, c = run(
        _fp8_maker(torch, kinds, gen), types, shape, trans, target, FP8_CFG.get(target, (128, 128, 64, 8, 3)), expect=inst
    )
    assert check_bound(a, b, c, rel, f"fp8 {kinds} {target} {shape} {trans}") < 1e-3


def test_fp8_on_one_warpgroup_with_a_deep_k_tile() -> None:
    """m64n128 per warpgroup, BK = 128 (128-byte swizzle of fp8 K rows): the K-major B ring."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(14)
    a, b, c = run(_fp8_maker(torch, ("e4m3", "e5m2"), gen), ("*fp8e4nv", "*fp8e5"), (256, 256, 512), (False, True),
                  "cuda:sm_90a", (64, 128, 128, 4, 3), expect="wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2")  # fmt: skip
    assert check_bound(a, b, c, 2.0**-9, "fp8 deep K") < 1e-3


def test_tf32_through_client_jit() -> None:
    """The user's path: client.jit on torch f32 tensors picks the device's target (sm_90 builds the dot on
    wgmma there) and the default input_precision, tf32."""
    import torch

    from tilec import client

    m, n, k = ALIGNED
    gen = torch.Generator(device="cuda").manual_seed(15)
    a = torch.randn(m, k, device="cuda", generator=gen)
    b = torch.randn(k, n, device="cuda", generator=gen)
    c = torch.full((m, n), float("nan"), device="cuda")
    kern = client.jit(SRC.replace(", input_precision=PREC", ""), "mm")
    kern[(-(-m // 64), -(-n // 64))](a, b, c, m, n, k, k, 1, n, 1, n, 1, BM=64, BN=64, BK=32, num_warps=4)
    torch.cuda.synchronize()
    rel = check_bound(a.double(), b.double(), c.double(), 2.5 * 2.0**-10, "tf32 via client.jit")
    assert 1e-5 < rel < 2e-3


F16_ACC_SRC = SRC.replace("dtype=tl.float32)", "dtype=tl.float16)").replace(
    "acc += tl.dot(a, b, input_precision=PREC)", "acc = tl.dot(a, b, acc)"
)


@pytest.mark.parametrize("target", ["cuda:sm_90a", "cuda:sm_80"])
@pytest.mark.parametrize("kinds", [("e4m3", "e4m3"), ("e4m3", "e5m2")])
def test_fp8_with_an_f16_accumulator(target: str, kinds: tuple) -> None:
    """acc = tl.dot(a, b, acc) with acc f16: wgmma's .f16 result on sm_90a (rounded to f16 after each k32
    instruction), the FMA path on sm_80 (f32 inside the dot, rounded once per K step); the stored f16
    sums against float64."""
    import torch

    assert F16_ACC_SRC.count("tl.float16") == 1 and "acc = tl.dot(a, b, acc)" in F16_ACC_SRC
    gen = torch.Generator(device="cuda").manual_seed(17)

    def make(i: int, r: int, c: int):  # small values: the sums stay far inside f16's range
        return torch.randn(r, c, device="cuda", generator=gen).to(getattr(torch, FP8[kinds[i]][0]))

    expect = f"m64n128k32.f16.{kinds[0]}.{kinds[1]}" if target == "cuda:sm_90a" else "fma.rn"
    types = (FP8[kinds[0]][1], FP8[kinds[1]][1])
    cfg = (128, 128, 64, 8, 3) if target == "cuda:sm_90a" else (64, 64, 32, 4, 3)  # FMAs: a smaller tile
    a, b, c = run(make, types, ALIGNED, (False, True), target, cfg, expect=expect, src=F16_ACC_SRC)
    k = ALIGNED[2]
    assert check_bound(a, b, c, (k // 32 + 2) * 2.0**-11, f"fp8 f16-acc {kinds} {target}") < 5e-3
