"""The service's settings: one pydantic-settings class, read from TILEC_* environment variables.

Nothing else in tilec reads os.environ for the service; every knob (database, limits, auth) is here.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import platformdirs
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TILEC_", extra="ignore")

    # storage
    database_url: str = ""  # empty -> a SQLite file under data_dir
    data_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_data_dir("tilec")))
    db_connect_timeout_s: float = 1.0
    db_pool_size: int = 16  # connections kept open (per process)
    db_pool_overflow: int = 16  # more, opened under load and closed after
    # how long a request waits for a free connection before it is refused as overload (503 `overloaded`): long
    # enough to queue behind a burst of batched publishes (tens of ms each), short of a client's timeout
    db_pool_timeout_s: float = 10.0
    health_timeout_s: float = 2.0  # /healthz: each of the database and broker checks (concurrent), on its own connection
    migrate_on_start: bool = True
    # http
    host: str = "127.0.0.1"
    port: int = 8000
    auth: bool | None = None  # None: on unless host is a loopback address
    access_log: bool = False  # one line per request on stdout (`tilec serve --access-log`), queries redacted
    # Host names (comma-separated) requests may carry besides the bound address: a request whose Host is
    # neither is refused (DNS rebinding). "*.example.com" allows subdomains; "*" allows any (not advised).
    allowed_hosts: str = ""
    header_timeout_s: float = 10.0  # a connection must finish sending a request's headers in this time
    body_timeout_s: float = 30.0  # and its body in this time
    max_connections: int = 512  # open connections per process; past it a request is answered 503
    revocation_poll_s: float = 0.5  # how often each process checks the database for revoked tokens
    # manifests: a PEM Ed25519 private key or a path to one; empty -> data_dir/signing_key.pem (made if
    # missing). Replicas that share a database but not a data dir need the same key given here.
    signing_key: str = Field(default="", repr=False)
    # limits
    max_body_bytes: int = 1 << 20
    max_source_bytes: int = 256 * 1024
    max_ast_nodes: int = 200_000
    max_ast_depth: int = 100
    max_unroll: int = 4096
    max_tile_elements: int = 1 << 20
    max_configs: int = 256
    max_trials: int = 1024
    compile_timeout_s: float = 60.0
    compile_memory_mb: int = 4096
    compile_workers: int = 2
    max_compiles_per_token: int = 4  # compiles one token waits on at once (per process); more is a 429
    max_jobs_per_token: int = 8  # queued or running tune jobs one token submitted; more is a 429
    # issue 27: queue the inventory's retunes when the compiler version changes (at start) or a worker of a GPU
    # model not seen before finishes a job; misses kept at most (a new specialisation past it is a 429)
    retune_on_change: bool = False
    max_misses: int = 10_000
    # tune jobs: in-process by default; Celery workers when a broker is set (redis://host:6379/0)
    broker_url: str = ""
    broker_timeout_s: float = 2.0  # a publish that cannot reach the broker in this time is a 503 (a refusal: at once)
    visibility_timeout_s: float = 3600.0  # Redis redelivers a message not acked within this
    # a running job whose worker has not beaten its heartbeat in lease_s is handed out again (a killed worker's job
    # runs elsewhere within about lease_s + reaper_interval_s); a heartbeat is one UPDATE of the job's row
    lease_s: float = 6.0
    heartbeat_s: float = 1.0
    max_deliveries: int = 3  # a job taken up this many times without finishing fails (it kills its worker)
    reaper_interval_s: float = 1.0  # how often the API looks for orphaned jobs and queued jobs whose message is lost
    # a queued job that no worker has taken this long after its message was sent is sent again (its message was
    # lost: a broker restart, a flush, a failover), then after twice as long each time, up to resend_max_s
    resend_after_s: float = 30.0
    resend_max_s: float = 600.0
    # one tensor of a launch description, and all of them: what fits the bench child's bench_memory_mb with the
    # interpreter, NumPy and LLVM (about 0.6 GB; a 2 GiB launch peaks at 2.65 GB of address space)
    max_tensor_bytes: int = 1 << 30
    max_launch_bytes: int = 1 << 31
    max_grid_programs: int = 1 << 24  # programs of one launch of a tune job, every config's grid checked at submit
    tune_compile_workers: int = 0  # processes compiling a tune's configs; 0: the CPU cores
    tune_full_seconds: float = 2.0  # the most one config's full timing takes (it stops sooner at a 1% interval)
    tune_brief_seconds: float = 0.25  # the most a brief timing (a round of successive halving) takes
    # the sandboxed bench child (runtime/sandbox.py): wall seconds per call, its address space (cpu) or data
    # segment (cuda), CPU seconds per call and over its life
    bench_timeout_s: float = 60.0
    bench_memory_mb: int = 4096
    bench_cpu_s: int = 120
    bench_life_cpu_s: int = 3600
    # bench children a `tilec worker` keeps started ahead (imports and GPU context done while the jobs before run;
    # each still serves one job): runtime/standby.py keep_standby. 0: each job starts its own when it begins. Two,
    # since a child takes longer to start (~1 s on an H100 host, more with four workers) than a short job runs
    bench_standby: int = 2
    # GPU bench children a `tilec worker` keeps after a job for the next job of the same submit token (its
    # imports and context reused; its launch's memory freed; never another token's): a host makes about two GPU
    # contexts a second whatever its number of GPUs, which a fresh child per job turns into a cap on the jobs
    # its workers run (bench/child_start.py, bench/NOTES-cluster.md). 0: a fresh child for every job
    bench_keep: int = 4
    # caches
    lookup_cache_size: int = 4096
    lookup_cache_ttl_s: float = 5.0
    binary_cache_bytes: int = 64 << 20
    token_cache_ttl_s: float = 30.0

    @cached_property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'tilec.db'}"

    @property
    def auth_enabled(self) -> bool:
        if self.auth is not None:
            return self.auth
        return self.host not in LOOPBACK_HOSTS
