"""A module PyTorch Inductor wrote compiles through the service as it is: the signature comes from the
`triton_heuristics` decorator's triton_meta (none in the request), the decorator is read as data."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

CORPUS = Path(__file__).resolve().parents[1] / "inductor" / "corpus" / "kernels"


async def test_an_inductor_module_compiles_with_no_signature(client: httpx.AsyncClient) -> None:
    source = (CORPUS / "add_relu.triton_poi_fused_add_relu_0.py").read_text()
    body = {"source": source, "name": "triton_poi_fused_add_relu_0", "constexprs": {"XBLOCK": 256}, "target": "cpu"}
    r = await client.post("/v1/compile", json=body)
    assert r.status_code == 200, r.text
    art = r.json()
    assert art["kernel_name"] == "triton_poi_fused_add_relu_0" and art["size"] > 0
    kernel = await client.get(f"/v1/kernels/{art['kernel_key']}")
    assert kernel.status_code == 200, kernel.text

    args = {a["name"]: a["dtype"] for a in art["metadata"]["args"]}
    assert args == {"in_ptr0": "f32", "in_ptr1": "f32", "out_ptr0": "f32", "xnumel": "i32"}

    # a signature in the request names the arguments it specialises otherwise; the decorator's fills the rest
    other = await client.post("/v1/compile", json={**body, "signature": {"in_ptr0": "*fp16"}})
    assert other.status_code == 200, other.text
    args = {a["name"]: a["dtype"] for a in other.json()["metadata"]["args"]}
    assert args["in_ptr0"] == "f16" and args["in_ptr1"] == "f32" and other.json()["id"] != art["id"]


async def test_an_inductor_module_tune_job_needs_no_signature(client: httpx.AsyncClient) -> None:
    source = (CORPUS / "add_relu.triton_poi_fused_add_relu_0.py").read_text()
    launch = {
        "grid": ["cdiv(xnumel, XBLOCK)"],
        "args": {"in_ptr0": "randn(xnumel)", "in_ptr1": "randn(xnumel)", "out_ptr0": "empty(xnumel)", "xnumel": 4773},
    }
    r = await client.post("/v1/tune-jobs", json={"source": source, "launch": launch, "target": "cpu"})
    assert r.status_code in (200, 202), r.text
    job = r.json()
    assert job["dtypes"] == "in_ptr0:*fp32,in_ptr1:*fp32,out_ptr0:*fp32,xnumel:i32" and job["key"] == '{"xnumel":4773}'
    assert job["trials_planned"] >= 2  # the configs tilec's space gives from the decorator's size hints
    deadline = time.monotonic() + 120
    while job["state"] not in ("done", "failed", "cancelled") and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        job = (await client.get(f"/v1/tune-jobs/{job['id']}")).json()
    assert job["state"] == "done", job
    assert "XBLOCK" in job["best_config"]["kwargs"] and job["best_time_ms"] > 0, job
