"""Triton-language source through the service: kernel keys, params and autotune configs as read, the
IR when every constexpr has a default, located source errors, and compiles to cpu objects and cubins."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from tilec.server import errors as E

from .conftest import DATA

SOFTMAX = (DATA / "softmax.py").read_text()
SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32", "stride": "i32"}


async def test_source_kernel_is_read(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/kernels", json={"source": SOFTMAX})
    assert r.status_code == 200, r.text
    k = r.json()
    assert k["name"] == "softmax" and k["kind"] == "source" and k["ir"] is None
    block = next(p for p in k["params"] if p["name"] == "BLOCK")
    assert block["constexpr"] and block["has_default"] and block["default"] == 128
    assert k["autotune"]["key"] == ["n_cols"]
    assert [c["kwargs"] for c in k["autotune"]["configs"]] == [{"BLOCK": 128}, {"BLOCK": 256}]
    # comments and formatting do not change the key; a signature adds the IR
    reformatted = SOFTMAX.replace("# one row per program", "# a comment").replace("\n\n\n", "\n\n")
    again = await client.post("/v1/kernels", json={"source": reformatted, "signature": SIGNATURE})
    assert again.json()["key"] == k["key"] and "kernel @softmax" in again.json()["ir"]


async def test_source_error_is_located(client: httpx.AsyncClient) -> None:
    bad = SOFTMAX.replace("tl.exp(x - ", "tl.exp(x -- )")
    r = await client.post("/v1/kernels", json={"source": bad})
    assert r.status_code == 422
    body = r.json()
    assert body["error"] == E.COMPILE_ERROR and body["line"] == 16 and body["col"] and body["excerpt"]
    assert "server" not in body["detail"] and "Traceback" not in body["detail"]


async def test_source_budgets_are_enforced(client: httpx.AsyncClient) -> None:
    deep = "@triton.jit\ndef k(x):\n    y = " + "(" * 400 + "1" + ")" * 400 + "\n"
    r = await client.post("/v1/kernels", json={"source": "import triton\n" + deep})
    assert r.status_code == 422 and r.json()["error"] == E.COMPILE_ERROR


@pytest.mark.parametrize(("target", "form", "magic"), [("cpu", "object", b"\x7fELF"), ("cuda:sm_90", "cubin", b"\x7fELF")])
async def test_compile_source(client: httpx.AsyncClient, target: str, form: str, magic: bytes) -> None:
    body = {"source": SOFTMAX, "signature": SIGNATURE, "config": {"kwargs": {"BLOCK": 256}, "num_warps": 8},
            "target": target}
    r = await client.post("/v1/compile", json=body)
    if r.status_code == 422 and r.json()["error"] == E.COMPILE_FAILED and "nvjitlink" in r.text.lower():
        pytest.skip("no nvJitLink on this machine")
    assert r.status_code == 200, r.text
    art = r.json()
    assert art["emit"] == form and art["config"]["kwargs"] == {"BLOCK": 256} and form in art["links"]
    binary = await client.get(art["links"][form])
    assert binary.content.startswith(magic) and hashlib.sha256(binary.content).hexdigest() == art["sha256"]
    if target.startswith("cuda"):
        ptx = await client.get(art["links"]["ptx"])
        assert ".target sm_90" in ptx.text


async def test_too_many_autotune_configs(make_client) -> None:  # noqa: ANN001 - fixture factory
    async with make_client(max_configs=1) as client:
        r = await client.post("/v1/kernels", json={"source": SOFTMAX})
    assert r.status_code == 422
    assert r.json() == {"error": E.TOO_MANY_CONFIGS, "detail": E.MSG_TOO_MANY_CONFIGS.format(n=2, limit=1)}


UNROLLED = """import triton
import triton.language as tl

@triton.jit
def unrolled(x_ptr, out_ptr, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.static_range(STEPS):
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, acc, mask=offs < n)
"""


@pytest.mark.parametrize(
    ("setting", "constexprs", "word"),
    [({"max_unroll": 8}, {"BLOCK": 64, "STEPS": 16}, "unroll"), ({"max_tile_elements": 1024}, {"BLOCK": 4096, "STEPS": 1}, "elements")],
)
async def test_compile_worker_honours_the_frontend_budgets_of_the_settings(
    make_client, setting: dict, constexprs: dict, word: str  # noqa: ANN001 - fixture factory
) -> None:
    body = {"source": UNROLLED, "signature": {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
            "constexprs": constexprs, "target": "cpu", "emit": "tir"}
    control = {**body, "constexprs": {k: v * 2 for k, v in constexprs.items()}}  # another artifact key
    async with make_client() as client:  # the default budgets allow it
        assert (await client.post("/v1/compile", json=control)).status_code == 200
    async with make_client(**setting) as client:
        r = await client.post("/v1/compile", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == E.COMPILE_ERROR and word in r.json()["detail"]


async def test_a_new_source_is_read_once_per_compile(client: httpx.AsyncClient) -> None:
    """A compile of source the service has not seen runs one child, which reads the source once to
    describe the kernel and to compile it; the kernel is registered from that same reading."""
    from .test_cache import metric

    body = {"source": SOFTMAX, "signature": SIGNATURE, "config": {"kwargs": {"BLOCK": 128}}, "target": "cpu", "emit": "tir"}
    answers = [await client.post("/v1/compile", json=body) for _ in range(2)]
    assert [r.status_code for r in answers] == [200, 200], answers[0].text
    assert [r.json()["cached"] for r in answers] == [False, True]
    m = (await client.get("/metrics")).text
    assert metric(m, 'tilec_compiles_total{outcome="ok",task="compile"}') == 1
    assert metric(m, 'tilec_compiles_total{outcome="ok",task="analyze"}') == 0
    kernel = (await client.get(f"/v1/kernels/{answers[0].json()['kernel_key']}")).json()
    assert kernel["name"] == "softmax" and kernel["autotune"]["key"] == ["n_cols"]


@pytest.mark.parametrize("target", ["cpu", "cuda:sm_90"])
async def test_a_long_static_range_compiles_through_the_service(client: httpx.AsyncClient, target: str) -> None:
    """The issue's 200-step accumulation: a RecursionError became a 422 "nests too deeply" on cuda."""
    body = {"source": UNROLLED, "signature": {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
            "constexprs": {"BLOCK": 128, "STEPS": 200}, "target": target}
    r = await client.post("/v1/compile", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["size"] > 0


@pytest.mark.parametrize("route", ["/v1/kernels", "/v1/compile"])
async def test_a_kernel_name_past_the_column_is_refused(client: httpx.AsyncClient, route: str) -> None:
    name = "k" * 201
    source = f"import triton\nimport triton.language as tl\n\n@triton.jit\ndef {name}(x_ptr):\n    tl.store(x_ptr, 1.0)\n"
    r = await client.post(route, json={"source": source, "signature": {"x_ptr": "*fp32"}})
    assert r.status_code == 422, r.text
    assert r.json() == {"error": E.INVALID_REQUEST, "detail": E.MSG_KERNEL_NAME_TOO_LONG.format(limit=200)}


BUNDLE = {
    "modules": {
        "pkg": "",
        "pkg.utils": "import triton\n\n@triton.jit\ndef twice(x):\n    return x * 2\n",
        "pkg.kern": SOFTMAX.replace("import triton.language as tl\n", "import triton.language as tl\nfrom .utils import twice\n", 1)
        .replace("tl.exp(x - ", "tl.exp(twice(x) - "),
    },
    "packages": ["pkg"],
    "kernel": "pkg.kern:softmax",
}


async def test_a_bundle_is_read_and_compiled(client: httpx.AsyncClient) -> None:
    assert "twice(x)" in BUNDLE["modules"]["pkg.kern"]
    r = await client.post("/v1/kernels", json={"bundle": BUNDLE, "signature": SIGNATURE})
    assert r.status_code == 200, r.text
    k = r.json()
    assert k["kind"] == "bundle" and k["name"] == "softmax" and "func @twice" in k["ir"]
    body = {"bundle": BUNDLE, "signature": SIGNATURE, "config": {"kwargs": {"BLOCK": 128}}, "target": "cpu"}
    art = await client.post("/v1/compile", json=body)
    assert art.status_code == 200, art.text
    assert art.json()["kernel_key"] == k["key"]
    again = await client.post("/v1/compile", json={**body, "kernel_key": k["key"], "bundle": None})
    assert again.status_code == 200 and again.json()["cached"] and again.json()["id"] == art.json()["id"]


async def test_a_bundle_that_names_a_module_it_does_not_contain_is_a_422(client: httpx.AsyncClient) -> None:
    missing = {**BUNDLE, "modules": {k: v for k, v in BUNDLE["modules"].items() if k != "pkg.utils"}}
    for signature in (SIGNATURE, None):  # read alone, or built
        r = await client.post("/v1/kernels", json={"bundle": missing, "signature": signature})
        assert r.status_code == 422, r.text
        assert r.json()["error"] == E.COMPILE_ERROR and "pkg.utils" in r.json()["detail"]
        assert r.json()["line"] is not None
    r = await client.post("/v1/kernels", json={"bundle": {**BUNDLE, "kernel": "pkg.gone:softmax"}})
    assert r.status_code == 422 and "does not contain" in r.json()["detail"]
    r = await client.post("/v1/kernels", json={"bundle": BUNDLE, "source": SOFTMAX})
    assert r.status_code == 422
