"""The kernel key covers the whole closure of what a kernel reaches: a property test generates sources
from one template, changes one thing a kernel reaches two steps away (a constant named by a constant, a
helper of a helper, a decorator's or a default's constant), checks with the compiler that the meaning
changed (its tile IR or its autotune/heuristics data), and requires another key; formatting, comments,
docstrings and unrelated module-level code must keep the key."""

from __future__ import annotations

import ast
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tilec.compiler.frontend import read_kernel
from tilec.compiler.pipeline import compile_kernel

TEMPLATE = """
import triton
import triton.language as tl

SCALE = {scale}
FACTOR = SCALE * {mult}
C_BASE = {c}
C_INNER = C_BASE + 1
HBASE = {hbase}
HMOD = HBASE * 2
BLK_BASE = {blk}
CONFIGS = [triton.Config({{"BLOCK": BLK_BASE * 2}}, num_warps={warps})]
K_BASE = {kbase}
K_DEFAULT = K_BASE + 1


@triton.jit
def inner(x):
    return x * FACTOR {op} C_INNER


@triton.jit
def helper(x, k):
    return inner(x) + k


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.heuristics({{"EVEN": lambda args: args["n"] % HMOD == 0}})
@triton.jit
def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr, K: tl.constexpr = K_DEFAULT):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out_ptr + i, helper(tl.load(x_ptr + i, mask=m), K), mask=m)
"""

FIELDS = {
    "scale": st.integers(1, 50),  # a constant named by a constant the kernel's helper's helper names
    "mult": st.integers(2, 9),
    "c": st.integers(0, 50),  # a helper's helper's constant, two steps from the helper
    "op": st.sampled_from(["+", "-"]),  # a helper's helper's body
    "hbase": st.integers(1, 50),  # a heuristics decorator's constant's constant
    "blk": st.sampled_from([8, 16, 32]),  # an autotune decorator's config list's constant
    "warps": st.sampled_from([1, 2, 4]),
    "kbase": st.integers(0, 50),  # a default's constant's constant
}
SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}


def _meaning(source: str) -> tuple[str, str]:
    """What the compiler makes of a source: its tile IR for the first config (the default of K applied)
    and the data the reader takes from its decorators and parameters."""
    ks = read_kernel(source)
    data = ks.to_dict()
    del data["key"]
    assert ks.autotune is not None
    constexprs = {**ks.autotune.configs[0].kwargs, "EVEN": False}
    tir = compile_kernel(source, "kernel", signature=SIGNATURE, constexprs=constexprs, emit="tir").tir
    return tir, json.dumps(data, sort_keys=True, default=str)


@settings(max_examples=40)
@given(base=st.fixed_dictionaries(FIELDS), field=st.sampled_from(sorted(FIELDS)), data=st.data())
def test_a_change_of_meaning_anywhere_in_the_closure_changes_the_key(base: dict, field: str, data) -> None:
    other = data.draw(FIELDS[field].filter(lambda v: v != base[field]), label="other")
    a, b = TEMPLATE.format(**base), TEMPLATE.format(**{**base, field: other})
    if _meaning(a) == _meaning(b):  # the two values mean the same (none of these fields do, as it happens)
        return
    assert read_kernel(a).key != read_kernel(b).key, f"{field}: {base[field]} -> {other} kept the key"


def _reformat(source: str, comments: bool, docstrings: bool, unrelated: bool) -> str:
    tree = ast.parse(source)
    if docstrings:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                node.body.insert(0, ast.Expr(ast.Constant(f"What {node.name} does.")))
    text = ast.unparse(tree)  # other spacing, quotes and parentheses
    if comments:
        text = "\n".join(f"{line}  # note" if line.strip() and not line.rstrip().endswith(":") else line + "\n"
                         for line in text.splitlines())  # fmt: skip
    if unrelated:
        text += "\n\nUNUSED = 12345\n\n\n@triton.jit\ndef unused_helper(x):\n    return x * UNUSED\n"
    return "# a header comment\n" + text


@settings(max_examples=25)
@given(
    base=st.fixed_dictionaries(FIELDS),
    comments=st.booleans(),
    docstrings=st.booleans(),
    unrelated=st.booleans(),
)
def test_formatting_comments_and_unrelated_code_keep_the_key(
    base: dict, comments: bool, docstrings: bool, unrelated: bool
) -> None:
    source = TEMPLATE.format(**base)
    changed = _reformat(source, comments, docstrings, unrelated)
    assert changed != source
    assert read_kernel(changed, "kernel").key == read_kernel(source, "kernel").key


def test_the_poisoning_pair_gets_two_keys() -> None:
    """The issue's attack: FACTOR = SCALE * 2 with only SCALE changed (x*2 against x*2000)."""
    victim = TEMPLATE.format(scale=1, mult=2, c=0, op="+", hbase=1, blk=16, warps=4, kbase=0)
    attacker = victim.replace("SCALE = 1\n", "SCALE = 1000\n")
    assert _meaning(victim) != _meaning(attacker)
    assert read_kernel(victim).key != read_kernel(attacker).key


def test_every_kind_of_binding_counts() -> None:
    """Bindings the reader does not read (a second assignment, `+=`, a subscript store, one inside an `if`)
    still count: the key never depends on which binding the compiler picks."""
    victim = TEMPLATE.format(scale=1, mult=2, c=0, op="+", hbase=1, blk=16, warps=4, kbase=0)
    key = read_kernel(victim).key
    for extra in ("SCALE = 3", "SCALE += 1", "if True:\n    SCALE = 3", "CONFIGS[0] = None", "del C_BASE",
                  "from triton.language import *", "import numpy as tl"):  # fmt: skip
        changed = victim.replace("\n\n@triton.jit\ndef inner", f"\n{extra}\n\n@triton.jit\ndef inner", 1)
        assert changed != victim
        assert read_kernel(changed).key != key, extra
