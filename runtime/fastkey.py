"""FastPath's key, written out for one pattern of argument classes (Triton builds its binder the same way: a
function made from the kernel's signature). The general key (FastPath._key_any) loops over the arguments and
asks each one's class in turn; a launch that repeats a pattern (every launch of a library's wrapper does) gets
the same key from one function with no loop: the classes are checked in one expression, then each argument
is read as its class needs. The key and the raw values are exactly those of the general key (a test checks
it); a call of another pattern gets None here and takes the general key.
"""

from __future__ import annotations

from typing import Any

# what the general key makes of an int (Triton's classes: equal to 1, else (divisible by 16, fits in i32))
_INT = "1 if {a} == 1 else ({a} & 15 == 0, -2147483648 <= {a} < 2147483648)"


def make_keyer(fast: Any, args: tuple) -> Any:
    """A function (args, kwargs) -> (key, raw) or None for calls of `args`' arity and classes, for FastPath
    `fast` (its tensor class known); None where a class here has no written-out form (a duck-typed tensor,
    anything the general key refuses)."""
    tensor = fast.tensor
    if tensor is None:
        return None
    names = [f"a{i}" for i in range(len(args))]
    guards, reads, keys, raws = [], [], [], []
    device = None
    for a, name in zip(args, names, strict=True):
        t = type(a)
        if t is tensor:
            guards.append(f"type({name}) is T")
            reads.append(f"p{name} = {name}.data_ptr()")
            keys.append(f"({name}.dtype, p{name} & 15 == 0)")
            raws.append(f"p{name}")
            if device is None:
                device = f"{name}.get_device()" if fast.multi_gpu else f"{name}.is_cuda"
        elif t is int:
            guards.append(f"type({name}) is int")
            keys.append(_INT.format(a=name))
            raws.append(name)
        elif t is float:
            guards.append(f"type({name}) is float")
            keys.append("float")
            raws.append(name)
        elif t is bool:
            guards.append(f"type({name}) is bool")
            keys.append(f"(bool, {name})")
            raws.append(f"int({name})")
        elif a is None:
            guards.append(f"{name} is None")
            keys.append("(N, None)")
            raws.append("None")
        elif t is str:
            guards.append(f"type({name}) is str")
            keys.append(f"(str, {name})")
            raws.append(name)
        else:
            return None
    keys.append(device or "None")
    n = len(args)
    if fast.const_pos:
        if n >= fast.const_need:
            got = [names[i] for i in fast.const_pos]
            keys.append(got[0] if len(got) == 1 else f"({', '.join(got)},)")  # as itemgetter gives them
        elif fast.const_pos[0] < n:
            keys.append(f"({''.join(names[i] + ', ' for i in fast.const_pos if i < n)})")
    if fast.value_pos and fast.value_pos[0] < n:
        given = [f"{names[i]}.shape" if type(args[i]) is tensor else names[i] for i in fast.value_pos if i < n]
        keys.append(f"({''.join(g + ', ' for g in given)})")
    unpack = f"    ({''.join(nm + ', ' for nm in names)}) = args\n" if names else ""
    guard = f"    if not ({' and '.join(guards)}):\n        return None\n" if guards else ""
    body = "".join(f"    {r}\n" for r in reads)
    source = (
        "def keyer(args, kwargs):\n"
        f"{unpack}{guard}{body}"
        f"    return (tuple(kwargs.items()) if kwargs else None, {''.join(k + ', ' for k in keys)}), "
        f"[{', '.join(raws)}]\n"
    )
    scope: dict[str, Any] = {"T": tensor, "N": type(None)}
    exec(compile(source, f"<FastPath key of {n} arguments>", "exec"), scope)  # noqa: S102 - our own text
    fn = scope["keyer"]
    fn.source = source
    return fn
