"""Two specialisations can assemble to the same bytes and still pass their arguments differently: a 32-bit
parameter that the kernel only moves around is one machine code whether it is an int32 or a float32. The
runtime keeps a loaded binary per bytes *and* argument layout (Artifact.launch_key); kept per bytes alone,
the second launch packed its argument the first one's way (2 went in as the float 2.0: 0x40000000), which is
how FlagGems' full_like filled an int32 tensor with 1073741824 under the drop-in."""

from __future__ import annotations

import numpy as np

from tilec import client
from tilec.compiler.artifact import Artifact

BITS = """
import triton
import triton.language as tl


@triton.jit
def bits(out_ptr, value, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = value.to(tl.int32, bitcast=True)
    tl.store(out_ptr + offs, tl.full([BLOCK], 0, tl.int32) + v, mask=offs < n)
"""


def test_a_binary_shared_by_an_int_and_a_float_build_is_launched_with_each_ones_arguments() -> None:
    k = client.jit(BITS, "bits")
    for first, second in ((3.5, 2), (7, -1.25)):
        k.cache.clear()
        a, b = np.zeros(64, np.int32), np.zeros(64, np.int32)
        k[(1,)](a, first, 64, BLOCK=64)
        k[(1,)](b, second, 64, BLOCK=64)
        want = [np.array([v], np.float32 if isinstance(v, float) else np.int32).view(np.int32)[0] for v in (first, second)]
        assert (a == want[0]).all() and (b == want[1]).all(), (a[0], b[0], want)
        arts = list(k.cache.values())
        assert len(arts) == 2 and arts[0].sha256 == arts[1].sha256  # the case this guards: one binary, two layouts
        assert arts[0].launch_key != arts[1].launch_key


def test_launch_key_follows_the_metadata_and_the_bytes() -> None:
    art = Artifact(target="cpu", kernel_name="k", binary=b"\x7fELF", metadata={"args": [{"dtype": "i32"}]})
    same = Artifact(target="cpu", kernel_name="k", binary=b"\x7fELF", metadata={"args": [{"dtype": "i32"}]})
    other = Artifact(target="cpu", kernel_name="k", binary=b"\x7fELF", metadata={"args": [{"dtype": "fp32"}]})
    moved = Artifact(target="cpu", kernel_name="k", binary=b"\x7fELG", metadata={"args": [{"dtype": "i32"}]})
    assert art.launch_key == same.launch_key
    assert len({art.launch_key, other.launch_key, moved.launch_key}) == 3
