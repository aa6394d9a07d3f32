"""tl.atomic_add / max / min / xchg / and / or / xor and tl.atomic_cas: each builds one atomic op of the tile IR,
with the memory order (`sem`) and scope Triton's calls take (registered in LIB; the backends lower them).
"""

from __future__ import annotations

from typing import Any

from ..ir.ops import ATOMIC_KINDS, ATOMIC_SCOPES, ATOMIC_SEMS
from .library import LIB, _mask, _ptr, api
from .semantic import Semantic, Tensor, describe


def _sem_attr(sem: Semantic, s: Any, scope: Any = None) -> dict:
    if s is not None and s not in ATOMIC_SEMS:
        raise sem.error(f"sem must be one of {', '.join(ATOMIC_SEMS)}, got {s!r}")
    if scope is not None and scope not in ATOMIC_SCOPES:
        raise sem.error(f"scope must be one of {', '.join(ATOMIC_SCOPES)}, got {scope!r}")
    return {k: v for k, v in (("sem", s), ("scope", scope)) if v is not None}


def _atomic(kind: str):
    def fn(sem: Semantic, pointer: Any, val: Any, mask: Any = None, sem_: Any = None, scope: Any = None,
           **kw: Any) -> Tensor:
        order = kw.pop("sem", sem_)
        if kw:
            raise sem.error(f"tl.atomic_{kind} got unknown arguments {sorted(kw)}")
        p = _ptr(sem, pointer, f"tl.atomic_{kind}")
        v = sem.to_tensor(val, p.elem.pointee)
        if kind in ("and", "or", "xor") and v.elem.is_float:
            raise sem.error(f"tl.atomic_{kind} needs integer values, got {describe(v)}")
        m = _mask(sem, mask)
        ops = sem.broadcast_all(p, v, *([m] if m is not None else []))
        attrs = {"kind": kind, **_sem_attr(sem, order, scope)}
        return Tensor(sem.b.op1("atomic_rmw", [x.value for x in ops], ops[1].type, **attrs))

    return fn


for _k in ATOMIC_KINDS:
    LIB[f"atomic_{_k}"] = _atomic(_k)


@api("atomic_cas")
def _atomic_cas(sem: Semantic, pointer: Any, cmp: Any, val: Any, sem_: Any = None, scope: Any = None,
                **kw: Any) -> Tensor:
    order = kw.pop("sem", sem_)
    p = _ptr(sem, pointer, "tl.atomic_cas")
    c, v = sem.to_tensor(cmp, p.elem.pointee), sem.to_tensor(val, p.elem.pointee)
    p, c, v = sem.broadcast_all(p, c, v)
    return Tensor(sem.b.op1("atomic_cas", [p.value, c.value, v.value], v.type, **_sem_attr(sem, order, scope)))
