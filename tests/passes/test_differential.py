"""Every pass (and the default pipeline) keeps hand-written kernels' results, per the interpreter."""

from __future__ import annotations

import pytest

from tilec.compiler.passes import PASSES

from .diffcheck import assert_same, run_both

VECADD = """module {
  kernel @k(%x: ptr<f32> {divisibility = 16}, %y: ptr<f32>, %out: ptr<f32>, %n: i32) {
    %pid = program_id {axis = 0} : i32
    %c = constant {value = 64} : i32
    %base = mul %pid, %c : i32
    %r = make_range {end = 64, start = 0} : tile<64xi32>
    %b = splat %base : tile<64xi32>
    %offs = add %b, %r : tile<64xi32>
    %sn = splat %n : tile<64xi32>
    %mask = cmp %offs, %sn {pred = "lt"} : tile<64xi1>
    %zero = constant {value = 0} : tile<64xi32>
    %pos = cmp %offs, %zero {pred = "ge"} : tile<64xi1>
    %m2 = and %mask, %pos : tile<64xi1>
    %xs = splat %x : tile<64xptr<f32>>
    %xp = addptr %xs, %offs : tile<64xptr<f32>>
    %ys = splat %y : tile<64xptr<f32>>
    %yp = addptr %ys, %offs : tile<64xptr<f32>>
    %a = load %xp, %m2 : tile<64xf32>
    %o = constant {value = 1.5} : tile<64xf32>
    %bb = load %yp, %mask, %o : tile<64xf32>
    %one = constant {value = 1.0} : f32
    %ones = splat %one : tile<64xf32>
    %s = add %a, %bb : tile<64xf32>
    %t = mul %s, %ones : tile<64xf32>
    %os = splat %out : tile<64xptr<f32>>
    %op = addptr %os, %offs : tile<64xptr<f32>>
    store %op, %t, %mask
    return
  }
}
"""

FOLDS = """module {
  kernel @k(%out: ptr<i32>, %fout: ptr<f32>, %s: i32 {equal_to_1 = true}, %v: i32) {
    %r = make_range {end = 16, start = 0} : tile<16xi32>
    %c3 = constant {value = 3} : i32
    %c7 = constant {value = -7} : i32
    %k = div %c7, %c3 : i32
    %m = rem %c7, %c3 : i32
    %km = mul %k, %m : i32
    %kms = mul %km, %s : i32
    %big = constant {value = 2147483647} : i32
    %wrap = add %big, %s : i32
    %w2 = xor %wrap, %kms : i32
    %ws = splat %w2 : tile<16xi32>
    %vs = splat %v : tile<16xi32>
    %e = add %r, %ws : tile<16xi32>
    %e2 = sub %e, %vs : tile<16xi32>
    %sh = splat %c3 : tile<16xi32>
    %e4 = shr %e2, %sh : tile<16xi32>
    %t = constant {value = 1} : i1
    %sel = select %t, %e4, %e : tile<16xi32>
    %p = splat %out : tile<16xptr<i32>>
    %pp = addptr %p, %r : tile<16xptr<i32>>
    store %pp, %sel
    %f1 = constant {value = 0.1} : f32
    %f2 = constant {value = 3.0} : f32
    %fd = div %f1, %f2 : f32
    %fc = cast %k : f32
    %fr = rem %fc, %f2 : f32
    %fs = add %fd, %fr : f32
    %ft = cast %r : tile<16xf32>
    %fss = splat %fs : tile<16xf32>
    %fu = mul %ft, %fss : tile<16xf32>
    %fp = splat %fout : tile<16xptr<f32>>
    %fpp = addptr %fp, %r : tile<16xptr<f32>>
    store %fpp, %fu
    return
  }
}
"""

LOOPS = """module {
  func @sq(%a: i32) -> i32 {
    %m = mul %a, %a : i32
    return %m
  }

  func @bump(%p: ptr<i32>, %i: i32) {
    %old = load %p : i32
    %new = add %old, %i : i32
    store %p, %new
    return
  }

  kernel @k(%out: ptr<i32>, %acc_out: ptr<i32>, %x: i32, %n: i32) {
    %z = constant {value = 0} : i32
    %o = constant {value = 1} : i32
    %eight = constant {value = 8} : i32
    %r = for %z, %eight, %o, %z : i32 {
    ^(%i: i32, %acc: i32):
      %xx = call %x {callee = "sq"} : i32
      %q = div %x, %n : i32
      %t = add %acc, %xx : i32
      %u = add %t, %q : i32
      %c = cmp %i, %eight {pred = "lt"} : i1
      %v = if %c : i32 {
        %w = add %u, %i : i32
        yield %w
      } {
        yield %u
      }
      call %acc_out, %i {callee = "bump"}
      yield %v
    }
    %r0 = for %eight, %z, %o, %r : i32 {
    ^(%j: i32, %a2: i32):
      store %out, %j
      yield %j
    }
    %w = while %r0 : i32 {
    ^(%wv: i32):
      %big = constant {value = 100000} : i32
      %go = cmp %wv, %big {pred = "lt"} : i1
      condition %go, %wv
    } {
    ^(%wv2: i32):
      %three = constant {value = 3} : i32
      %nx = mul %wv2, %three : i32
      %nx1 = add %nx, %o : i32
      yield %nx1
    }
    %f = constant {value = 0} : i1
    %res = if %f : i32 {
      yield %z
    } {
      yield %w
    }
    store %out, %res
    return
  }
}
"""

TILES = """module {
  kernel @k(%x: ptr<f32>, %out: ptr<f32>) {
    %r8 = make_range {end = 8, start = 0} : tile<8xi32>
    %r4 = make_range {end = 4, start = 0} : tile<4xi32>
    %rows = expand_dims %r8 {axis = 1} : tile<8x1xi32>
    %cols = expand_dims %r4 {axis = 0} : tile<1x4xi32>
    %c4 = constant {value = 4} : i32
    %c4t = splat %c4 : tile<8x1xi32>
    %ro = mul %rows, %c4t : tile<8x1xi32>
    %rob = broadcast %ro : tile<8x4xi32>
    %cob = broadcast %cols : tile<8x4xi32>
    %off = add %rob, %cob : tile<8x4xi32>
    %xs = splat %x : tile<8x4xptr<f32>>
    %xp = addptr %xs, %off : tile<8x4xptr<f32>>
    %v = load %xp : tile<8x4xf32>
    %t1 = trans %v {order = [1, 0]} : tile<4x8xf32>
    %t2 = trans %t1 {order = [1, 0]} : tile<8x4xf32>
    %re = reshape %t2 : tile<32xf32>
    %re2 = reshape %re : tile<4x8xf32>
    %t3 = trans %re2 {order = [1, 0]} : tile<8x4xf32>
    %two = constant {value = 2.0} : f32
    %twos = splat %two : tile<8x1xf32>
    %twob = broadcast %twos : tile<8x4xf32>
    %s = mul %t3, %twob : tile<8x4xf32>
    %m = maximum %s, %v : tile<8x4xf32>
    %sum = reduce %m {axis = 1, kind = "sum"} : tile<8xf32>
    %os = splat %out : tile<8x4xptr<f32>>
    %op = addptr %os, %off : tile<8x4xptr<f32>>
    store %op, %m
    %o1 = splat %out : tile<8xptr<f32>>
    %c32 = constant {value = 32} : i32
    %c32t = splat %c32 : tile<8xi32>
    %off2 = add %r8, %c32t : tile<8xi32>
    %o2 = addptr %o1, %off2 : tile<8xptr<f32>>
    store %o2, %sum
    return
  }
}
"""

TRANSLOAD = """module {
  kernel @k(%x: ptr<f32>, %out: ptr<f32>, %n: i32) {
    %r8 = make_range {end = 8, start = 0} : tile<8xi32>
    %r4 = make_range {end = 4, start = 0} : tile<4xi32>
    %rows = expand_dims %r8 {axis = 1} : tile<8x1xi32>
    %cols = expand_dims %r4 {axis = 0} : tile<1x4xi32>
    %c4 = constant {value = 4} : i32
    %c4t = splat %c4 : tile<8x1xi32>
    %ro = mul %rows, %c4t : tile<8x1xi32>
    %rob = broadcast %ro : tile<8x4xi32>
    %cob = broadcast %cols : tile<8x4xi32>
    %off = add %rob, %cob : tile<8x4xi32>
    %xs = splat %x : tile<8x4xptr<f32>>
    %xp = addptr %xs, %off : tile<8x4xptr<f32>>
    %ns = splat %n : tile<8x4xi32>
    %m = cmp %cob, %ns {pred = "lt"} : tile<8x4xi1>
    %other = constant {value = 1.5} : tile<8x4xf32>
    %z = constant {value = 0} : i32
    %one = constant {value = 1} : i32
    %three = constant {value = 3} : i32
    %init = constant {value = 0.0} : tile<4x8xf32>
    %acc = for %z, %three, %one, %init : tile<4x8xf32> {
    ^(%i: i32, %a: tile<4x8xf32>):
      %is = splat %i : tile<8x4xi32>
      %xpi = addptr %xp, %is : tile<8x4xptr<f32>>
      %v = load %xpi, %m, %other : tile<8x4xf32>
      %t = trans %v {order = [1, 0]} : tile<4x8xf32>
      %a2 = add %a, %t : tile<4x8xf32>
      yield %a2
    }
    %r4c = expand_dims %r4 {axis = 1} : tile<4x1xi32>
    %r8c = expand_dims %r8 {axis = 0} : tile<1x8xi32>
    %c8 = constant {value = 8} : i32
    %c8t = splat %c8 : tile<4x1xi32>
    %oro = mul %r4c, %c8t : tile<4x1xi32>
    %orob = broadcast %oro : tile<4x8xi32>
    %ocob = broadcast %r8c : tile<4x8xi32>
    %ooff = add %orob, %ocob : tile<4x8xi32>
    %os = splat %out : tile<4x8xptr<f32>>
    %op = addptr %os, %ooff : tile<4x8xptr<f32>>
    store %op, %acc
    return
  }
}
"""

CASES = {
    "vecadd": (VECADD, (5,), {"n": 250}),
    "folds": (FOLDS, (1,), {"v": 12345}),
    "loops": (LOOPS, (2,), {"x": 7, "n": 3}),
    "tiles": (TILES, (1,), {}),
    "transload": (TRANSLOAD, (1,), {"n": 3}),
}
PASS_LISTS = [[p] for p in sorted(PASSES)] + [["default"], ["inline", "licm", "mask-simplify", "canonicalize", "dce"]]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("passes", PASS_LISTS, ids=lambda p: "+".join(p))
def test_pass_keeps_results(case: str, passes: list[str], capsys) -> None:
    text, grid, scalars = CASES[case]
    for seed in range(2):
        before, after, _ = run_both(text, passes, kernel="k", grid=grid, scalars=scalars, seed=seed)
        assert_same(before, after)


def test_default_pipeline_simplifies() -> None:
    """Not only equal: the default pipeline really removes the foldable work."""
    _, _, ir = run_both(FOLDS, ["default"], kernel="k", grid=(1,), scalars={"v": 1})
    assert "div" not in ir.replace("div =", "") and "select" not in ir and "rem" not in ir
    _, _, ir = run_both(LOOPS, ["default"], kernel="k", grid=(1,), scalars={"x": 1, "n": 1})
    assert "call" not in ir and "func @" not in ir and ir.count("for ") == 1
    _, _, ir = run_both(VECADD, ["default"], kernel="k", grid=(1,), scalars={"n": 64})
    assert ir.count(" mul ") == 1  # x * 1.0 went; pid * 64 stays (and so does `offs >= 0`: it may wrap)
