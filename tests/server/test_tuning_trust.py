"""Tuning results strangers share (issue 20), on SQLite and PostgreSQL: an implausible time (1e-300 ms,
negative, NaN, inf) is refused when published instead of pinning its config as the best forever; a tune
job of a kernel without an autotune key is keyed by its launch, so one launch's trials never answer
another's; and an IR integer constant too wide for any type is a located 4xx, not an internal error."""

from __future__ import annotations

import httpx
import pytest

from .conftest import ADD_IR

SOURCE = """
import triton
import triton.language as tl


@triton.jit
def plain_add(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)
"""


@pytest.mark.parametrize("time_ms", ["1e-300", "-1.0", "0", "NaN", "Infinity", "1e999", "1e300"])
async def test_an_implausible_time_is_refused_at_publish(client: httpx.AsyncClient, time_ms: str) -> None:
    kernel = (await client.post("/v1/kernels", json={"ir": ADD_IR})).json()
    trial = (
        '{"config": {}, "time_ms": ' + time_ms + "}"
    )  # written out: JSON has no NaN or Infinity of its own
    body = (
        f'{{"kernel_key": "{kernel["key"]}", "key": "", "dtypes": "", "target": "cpu", "trials": [{trial}]}}'
    )
    r = await client.post("/v1/tuning-results", content=body, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500, r.text
    assert "time_ms" in r.text
    plausible = body.replace(f'"time_ms": {time_ms}}}', '"time_ms": 0.004}')
    r = await client.post(
        "/v1/tuning-results", content=plausible, headers={"content-type": "application/json"}
    )
    assert r.status_code == 200, r.text


async def test_jobs_of_a_kernel_without_an_autotune_key_are_keyed_by_their_launch(
    client: httpx.AsyncClient,
) -> None:
    def body(n: int) -> dict:
        launch = {"grid": ["cdiv(n, BLOCK)"], "args": {"x_ptr": "randn(n)", "out_ptr": "empty(n)", "n": n}}
        return {"source": SOURCE, "signature": {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                "launch": launch, "target": "cpu", "configs": [{"kwargs": {"BLOCK": 64}}]}  # fmt: skip

    small = await client.post("/v1/tune-jobs", json=body(256))
    large = await client.post("/v1/tune-jobs", json=body(1 << 20))
    assert small.status_code == large.status_code == 202, (small.text, large.text)
    for job in (small.json(), large.json()):
        await client.post(f"/v1/tune-jobs/{job['id']}/cancel")
    assert small.json()["tuning_key"] != large.json()["tuning_key"]
    assert not large.json()["attached"]  # before: the same key, so the second job joined the first's trials
    assert '"n":1048576' in large.json()["key"]


@pytest.mark.parametrize("digits", [400, 5000])
async def test_an_ir_integer_too_wide_is_a_located_refusal(client: httpx.AsyncClient, digits: int) -> None:
    """A 400-digit i32 constant became -1, a 5000-digit one an internal compiler error: both are 4xx at their
    line and column now."""
    lines = ADD_IR.splitlines(keepends=True)
    row = next(i for i, line in enumerate(lines) if "constant {value = 1024}" in line)
    lines[row] = lines[row].replace("1024", "9" * digits)
    r = await client.post("/v1/kernels", json={"ir": "".join(lines)})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "compile_error" and "internal" not in body["detail"]
    assert (body["line"], body["col"]) == (row + 1, lines[row].index("9") + 1)
