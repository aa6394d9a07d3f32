"""The interpreter's driver: binds kernel arguments, runs the kernel program by program over the grid,
and executes blocks and control flow (for, if, while, call); data ops are looked up in semantics.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from ..ir import fp8
from ..ir.core import Block, Function, Module, Operation, Param, Value
from ..ir.ops import TERMINATORS
from ..ir.types import PointerType, ScalarType, TileType, bf16, elem_type, shape_of
from ..ir.verifier import verify_module
from . import combine
from . import numerics as nx
from .errors import AccessError, InterpError, MemoryFault, located
from .memory import AddressSpace
from .semantics import SEMANTICS

DEFAULT_MAX_OPS = 20_000_000
MAX_CALL_DEPTH = 64


class Machine:
    def __init__(self, module: Module, memory: AddressSpace, grid: tuple[int, int, int], max_ops: int):
        self.module = module
        self.memory = memory
        self.grid = grid
        self.pid = (0, 0, 0)
        self.env: dict[Value, np.ndarray] = {}
        self.ops_left = max_ops
        self.max_ops = max_ops
        self.depth = 0

    # ---- functions and blocks
    def call(
        self, f: Function, args: Sequence[np.ndarray], site: Operation | None = None
    ) -> list[np.ndarray]:
        if self.depth >= MAX_CALL_DEPTH:
            assert site is not None
            raise located(InterpError, site, f"calls nest deeper than {MAX_CALL_DEPTH}")
        saved, self.env = self.env, dict(zip(f.args, args, strict=True))
        self.depth += 1
        try:
            return self.run_block(f.body.block)
        finally:
            self.env, self.depth = saved, self.depth - 1

    def run_region(self, block: Block, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.env.update(zip(block.args, args, strict=True))
        return self.run_block(block)

    def run_block(self, block: Block) -> list[np.ndarray]:
        """Run the ops of `block`; returns the operands of its terminator."""
        env = self.env
        for op in block.ops:
            if op.name in TERMINATORS:
                return [env[v] for v in op.operands]
            self.tick(op)
            xs = [env[v] for v in op.operands]
            out = self._execute(op, xs)
            if len(op.results) == 1:
                env[op.results[0]] = _fit(op, out, op.results[0].type)
            elif op.results:
                for r, v in zip(op.results, out, strict=True):
                    env[r] = _fit(op, v, r.type)
        return []

    def _execute(self, op: Operation, xs: list[np.ndarray]):
        control = _CONTROL.get(op.name)
        if control is not None:
            out = control(self, op, xs)  # always a list
            return out[0] if len(op.results) == 1 else out
        try:
            return SEMANTICS[op.name](op, xs, self)
        except AccessError as e:
            raise located(MemoryFault, op, f"{e} in program {self.pid}") from None

    # ---- control flow
    def _for(self, op: Operation, xs: list[np.ndarray]) -> list[np.ndarray]:
        lb, ub, step = (int(x) for x in xs[:3])
        dtype = xs[0].dtype
        carried = xs[3:]
        if step == 0:
            raise located(InterpError, op, f"has step 0 (program {self.pid})")
        body = op.regions[0].block
        i = lb
        while (i < ub) if step > 0 else (i > ub):  # a negative step counts down while iv > ub
            self.tick(op)
            carried = self.run_region(body, [np.asarray(i, dtype), *carried])
            i += step
        return carried

    def _if(self, op: Operation, xs: list[np.ndarray]) -> list[np.ndarray]:
        return self.run_region(op.regions[0 if bool(xs[0]) else 1].block, [])

    def _while(self, op: Operation, xs: list[np.ndarray]) -> list[np.ndarray]:
        before, after = op.regions[0].block, op.regions[1].block
        vals = xs
        while True:
            self.tick(op)
            cond, *carried = self.run_region(before, vals)
            if not bool(cond):
                return carried
            vals = self.run_region(after, carried)

    def _call(self, op: Operation, xs: list[np.ndarray]) -> list[np.ndarray]:
        callee = self.module.get(op.attrs["callee"])
        assert callee is not None  # the verifier checked it
        return self.call(callee, xs, op)

    def tick(self, op: Operation) -> None:
        self.ops_left -= 1
        if self.ops_left < 0:
            raise located(InterpError, op, f"the kernel ran more than {self.max_ops} ops (an endless loop?)")


_CONTROL = {
    "for": Machine._for,
    "if": Machine._if,
    "while": Machine._while,
    "call": Machine._call,
    "reduce_with": combine.reduce_with,
    "scan_with": combine.scan_with,
}


def _fit(op: Operation, value, t) -> np.ndarray:
    """The value as an array of the IR type's dtype and shape; bf16 rounded. A mismatch is a bug here."""
    a = np.asarray(value)
    e = elem_type(t)
    want = nx.value_dtype(e)
    if a.dtype != want or a.shape != shape_of(t):
        raise AssertionError(f"interpreter bug: '{op.name}' gave {a.dtype}{list(a.shape)} for {t}")
    if e == bf16:
        a = nx.round_bf16(a)
    elif isinstance(e, ScalarType) and e.is_fp8:
        a = fp8.round_to(a, e.name, keep_inf=True)
    return a


# ---- arguments ----------------------------------------------------------------------------------


def _bind(p: Param, arg, memory: AddressSpace) -> np.ndarray:
    t = p.type
    if isinstance(t, TileType):
        raise TypeError(f"kernel parameter %{p.name}: tile parameters are not supported")
    if isinstance(t, PointerType):
        return np.asarray(memory.add(f"%{p.name}", _pointer_arg(p, t, arg)), np.int64)
    return _scalar_arg(p, t, arg)


def _pointer_arg(p: Param, t: PointerType, arg) -> np.ndarray:
    if not isinstance(arg, np.ndarray):
        raise TypeError(f"kernel parameter %{p.name}: {t} needs a NumPy array, got {type(arg).__name__}")
    want = nx.storage_dtype(t.pointee)
    ok = arg.dtype == want or (t.pointee.is_bool and arg.dtype in (np.bool_, np.int8))
    if not ok:
        raise TypeError(f"kernel parameter %{p.name}: {t} needs a {want} array, got {arg.dtype}")
    return arg


def _scalar_arg(p: Param, t: ScalarType, arg) -> np.ndarray:
    if isinstance(arg, np.ndarray) and arg.ndim == 0:
        arg = arg.item()
    if isinstance(arg, np.generic):
        arg = arg.item()
    if t.is_bool:
        return np.asarray(bool(arg))
    if t.is_float:
        if not isinstance(arg, (int, float)):
            raise TypeError(f"kernel parameter %{p.name}: {t} needs a number, got {type(arg).__name__}")
        return nx.to_float(np.asarray(float(arg)), t.name)
    if not isinstance(arg, int):
        raise TypeError(f"kernel parameter %{p.name}: {t} needs an integer, got {type(arg).__name__}")
    return nx.wrap_int(arg, t.np_dtype)


def _grid(grid) -> tuple[int, int, int]:
    g = (grid,) if isinstance(grid, int) else tuple(int(x) for x in grid)
    if not 1 <= len(g) <= 3 or any(x < 0 for x in g):
        raise ValueError(f"grid must be 1 to 3 non-negative sizes, got {grid!r}")
    return (*g, *(1,) * (3 - len(g)))  # type: ignore[return-value]


def _pick_kernel(module: Module, name: str | None) -> Function:
    if name is not None:
        f = module.get(name)
        if f is None:
            raise ValueError(f"no function @{name} in the module")
        return f
    kernels = module.kernels
    if len(kernels) != 1:
        raise ValueError(f"the module has {len(kernels)} kernels: name the one to run")
    return kernels[0]


def run_kernel(
    module: Module,
    kernel_name: str | None,
    args: list,
    grid,
    *,
    max_ops: int = DEFAULT_MAX_OPS,
    verify: bool = True,
) -> None:
    """Run `kernel_name` over `grid` on NumPy arrays (modified in place); see the package docstring."""
    if verify:
        verify_module(module)
    f = _pick_kernel(module, kernel_name)
    if len(args) != len(f.params):
        raise TypeError(f"@{f.name} takes {len(f.params)} arguments, got {len(args)}")
    memory = AddressSpace()
    values = [_bind(p, a, memory) for p, a in zip(f.params, args, strict=True)]
    g = _grid(grid)
    m = Machine(module, memory, g, max_ops)
    with np.errstate(all="ignore"):
        for z, y, x in itertools.product(range(g[2]), range(g[1]), range(g[0])):
            m.pid = (x, y, z)
            try:
                m.call(f, values)
            except RecursionError:
                raise InterpError(f"regions of @{f.name} nest too deeply to interpret", filename="<ir>") from None
