"""The time of one call of a step with no host time in it: the step captured `per_graph` times in a CUDA graph
(after one run on a side stream, which a capture needs for lazily made state), the graph replayed and timed
with events. Shared by the benches that time kernels alone (bench/dropin_host.py, bench/tutorial03_configs.py,
bench/t03_variants.py)."""

from __future__ import annotations


def graph_us(step, per_graph: int = 20, replays: int = 10, best: bool = False) -> float:  # type: ignore[no-untyped-def]
    """Microseconds per step: the mean over `replays` replays, or with `best` the fastest replay."""
    import torch

    g = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(g):
        for _ in range(per_graph):
            step()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays if best else 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(1 if best else replays):
            g.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / (per_graph * (1 if best else replays)))
    return min(times)
