"""The config space of a tune: normalised configs and their hashes, configs from a list (dicts or the
frontend's ConfigSpec) and from a grid, and the resource checks that prune a config before its compile,
after the shared-memory plan, and after ptxas (registers, spills)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilec.compiler.frontend import read_kernel
from tilec.compiler.frontend.reader import ConfigSpec
from tilec.compiler.tune.space import (
    REGISTERS_PER_SM,
    config_hash,
    from_grid,
    from_list,
    normalise,
    prune_after_compile,
    prune_before_compile,
    prune_shared,
    shared_limit,
    spills,
)

MATMUL = Path(__file__).parents[1] / "kernels" / "matmul.py"


def test_normalise_defaults_to_four_warps_and_three_stages() -> None:
    assert normalise({}) == {"kwargs": {}, "num_warps": 4, "num_stages": 3}
    assert normalise({"B": 1}, num_warps=8, num_stages=5) == {
        "kwargs": {"B": 1},
        "num_warps": 8,
        "num_stages": 5,
    }


def test_normalise_sorts_the_kwargs() -> None:
    config = normalise({"b": 2, "c": 3, "a": 1})
    assert list(config["kwargs"]) == ["a", "b", "c"]
    assert list(config) == ["kwargs", "num_warps", "num_stages"]


def test_config_hash_ignores_key_order_but_not_values() -> None:
    a = {"num_stages": 3, "kwargs": {"X": 1, "Y": 2}, "num_warps": 4}
    b = {"kwargs": {"Y": 2, "X": 1}, "num_warps": 4, "num_stages": 3}
    assert config_hash(a) == config_hash(b) == config_hash(normalise({"Y": 2, "X": 1}))
    assert len(config_hash(a)) == 64
    assert config_hash(a) != config_hash(normalise({"X": 1, "Y": 2}, num_warps=8))
    assert config_hash(a) != config_hash(normalise({"X": 1, "Y": 3}))


def test_from_list_accepts_dicts_and_drops_duplicates_keeping_order() -> None:
    got = from_list(
        [
            {"kwargs": {"B": 64}},
            {"kwargs": {"B": 128}, "num_warps": 8},
            # the first one again, its defaults spelled out
            {"kwargs": {"B": 64}, "num_warps": 4, "num_stages": 3},
            {"kwargs": {"B": 128}, "num_warps": 8, "num_stages": 2},
            {},
        ]
    )
    assert got == [normalise({"B": 64}), normalise({"B": 128}, 8), normalise({"B": 128}, 8, 2), normalise({})]


def test_from_list_accepts_the_frontends_config_specs() -> None:
    specs = read_kernel(MATMUL.read_text(), "matmul_kernel").autotune.configs
    assert all(isinstance(s, ConfigSpec) for s in specs)
    got = from_list(specs)
    assert len(got) == 4
    assert got[0] == normalise(
        {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}, 8, 3
    )
    assert got[3] == normalise(
        {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 4}, 2, 5
    )
    # a spec and a dict of the same config are one config
    mixed = from_list([ConfigSpec({"B": 1}), {"kwargs": {"B": 1}, "num_warps": 4}, ConfigSpec({"B": 1}, 2)])
    assert mixed == [normalise({"B": 1}), normalise({"B": 1}, 2)]


def test_from_grid_makes_every_combination() -> None:
    got = from_grid({"B": [16, 32], "A": [1, 2, 3]}, num_warps=(2, 4), num_stages=(2,))
    assert len(got) == 12
    want = {(a, b, w) for a, b, w in itertools.product([1, 2, 3], [16, 32], [2, 4])}
    assert {(c["kwargs"]["A"], c["kwargs"]["B"], c["num_warps"]) for c in got} == want
    assert all(list(c["kwargs"]) == ["A", "B"] and c["num_stages"] == 2 for c in got)


def test_from_grid_refuses_past_its_limit() -> None:
    grid = {"A": [1, 2, 3], "B": [1, 2]}
    assert len(from_grid(grid, num_warps=(2, 4), limit=12)) == 12
    with pytest.raises(ValueError, match="12 combinations; the limit is 11"):
        from_grid(grid, num_warps=(2, 4), limit=11)


def test_from_grid_counts_before_it_builds() -> None:
    huge = {f"P{i}": list(range(10)) for i in range(12)}  # 10**12 combinations: refused, not enumerated
    with pytest.raises(ValueError, match=f"{10**12} combinations; the limit is 4096"):
        from_grid(huge)


@given(st.dictionaries(st.sampled_from("ABCD"), st.lists(st.integers(0, 5), min_size=1, max_size=3), max_size=3),
       st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=3))  # fmt: skip
def test_from_grid_has_one_config_per_distinct_combination(grid: dict, warps: list[int]) -> None:
    got = from_grid(grid, num_warps=warps)
    want = len(set(warps))
    for values in grid.values():
        want *= len(set(values))
    assert len(got) == want
    assert len({config_hash(c) for c in got}) == want


def test_prune_before_compile_threads_per_block() -> None:
    reason = prune_before_compile(normalise({}, num_warps=64), "cuda:sm_90")
    assert reason is not None
    assert "2048 threads" in reason and "1024" in reason
    assert prune_before_compile(normalise({}, num_warps=32), "cuda:sm_90") is None  # exactly 1024 threads


def test_prune_before_compile_power_of_two_warps() -> None:
    reason = prune_before_compile(normalise({}, num_warps=3), "cuda:sm_80")
    assert reason is not None and "power of two" in reason and "3" in reason
    for warps in (1, 2, 4, 8, 16):
        assert prune_before_compile(normalise({}, num_warps=warps), "cuda:sm_80") is None


def test_prune_before_compile_leaves_cpu_configs_alone() -> None:
    assert prune_before_compile(normalise({}, num_warps=64), "cpu") is None
    assert prune_before_compile(normalise({}, num_warps=3), "cpu") is None


def test_shared_limit_by_arch() -> None:
    assert shared_limit("cuda:sm_80") == 166912
    assert shared_limit("cuda:sm_90") == 232448
    assert shared_limit("cuda:sm_86") == 101376
    assert shared_limit("cpu") is None


def test_shared_limit_of_an_unknown_arch_is_the_nearest_known_below() -> None:
    assert shared_limit("cuda:sm_84") == shared_limit("cuda:sm_80")
    assert shared_limit("cuda:sm_95") == shared_limit("cuda:sm_90")
    assert shared_limit("cuda:sm_130") == shared_limit("cuda:sm_120")


def test_prune_shared() -> None:
    assert prune_shared({"shared_bytes": 166912}, "cuda:sm_80") is None
    reason = prune_shared({"shared_bytes": 166913}, "cuda:sm_80")
    assert reason == "needs 166913 bytes of shared memory per block; cuda:sm_80 gives at most 166912"
    assert prune_shared({"shared_bytes": 166913}, "cuda:sm_90") is None
    assert prune_shared({}, "cuda:sm_86") is None
    assert prune_shared({"shared_bytes": 10**9}, "cpu") is None


def test_prune_after_compile_registers_times_threads() -> None:
    assert REGISTERS_PER_SM == 65536
    assert prune_after_compile({"registers": 256, "threads_per_block": 256}) is None  # exactly 65536
    reason = prune_after_compile({"registers": 255, "threads_per_block": 512})
    assert reason is not None and "255 registers x 512 threads" in reason and "65536" in reason
    assert prune_after_compile({"registers": 255}) is None  # cpu artifacts have neither
    assert prune_after_compile({}) is None


def test_spills_adds_stores_and_loads() -> None:
    assert spills({}) == 0
    assert spills({"spill_stores": None, "spill_loads": 0}) == 0
    assert spills({"spill_stores": 8}) == 8
    assert spills({"spill_stores": 8, "spill_loads": 4}) == 12
