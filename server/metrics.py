"""Prometheus metrics, one registry per app: requests, latencies, cache hits/misses, compiles, sha mismatches
and stored rows that could not be read back."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
COMPILE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120)


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.requests = Counter("tilec_requests", "HTTP requests", ["method", "route", "status"], registry=r)
        self.latency = Histogram(
            "tilec_request_seconds", "HTTP request latency", ["route"], buckets=LATENCY_BUCKETS, registry=r
        )
        self.cache_hits = Counter("tilec_cache_hits", "cache hits", ["kind"], registry=r)
        self.cache_misses = Counter("tilec_cache_misses", "cache misses", ["kind"], registry=r)
        self.compiles = Counter("tilec_compiles", "compiles run (after single flight)", ["task", "outcome"], registry=r)
        self.compile_seconds = Histogram(
            "tilec_compile_seconds", "compile wall time", ["task"], buckets=COMPILE_BUCKETS, registry=r
        )
        self.compiles_waiting = Gauge("tilec_compiles_waiting", "compiles waiting for a slot", registry=r)
        self.compiles_shared = Counter("tilec_compiles_shared", "requests that joined a running compile", registry=r)
        self.sha_mismatches = Counter(
            "tilec_sha_mismatches", "stored forms (binary or text) whose sha256 no longer matched", registry=r
        )
        self.corrupt_rows = Counter(
            "tilec_corrupt_rows",
            "stored rows that could not be read back (bad JSON, text not UTF-8, not the wire model, a link to "
            "another build), served as misses",
            ["table"],
            registry=r,
        )
        self.artifact_conflicts = Counter(
            "tilec_artifact_conflicts",
            "builds that gave other bytes than the signed artifact stored under their key (which stands)",
            registry=r,
        )
        self.signature_mismatches = Counter(
            "tilec_signature_mismatches",
            "stored artifacts whose build-time signature no longer matched the row (changed behind the service)",
            registry=r,
        )
        self.db_errors = Counter("tilec_db_unavailable", "requests refused because the database was down", registry=r)
        self.active = 0  # requests in flight (MetricsMiddleware counts them; the event loop's thread only)
        self.in_flight = Gauge("tilec_requests_in_flight", "HTTP requests being answered", registry=r)
        self.in_flight.set_function(lambda: self.active)
        self.overloads = Counter(
            "tilec_overloaded", "requests refused because no database connection came free in time", registry=r
        )
