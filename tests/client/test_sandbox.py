"""The sandbox that runs strangers' kernels (runtime/sandbox.py), attacked: a probe child tries what a hostile
kernel would (host files, the server's environment, sockets, fork, exec, writes, chroot escape); a bench child
started by a process holding secrets has none of them in its environment or anywhere in its memory, and no
descriptor but its socket; the CPU and memory limits stop a kernel that spins or a launch that is too big,
and the trial fails while the tuner lives on; a kernel's words reach a trial reason escaped and bounded."""

from __future__ import annotations

import os
import platform
import shutil
import sys
import time

import pytest

from tilec.compiler.tune.launch import LaunchDescription, host_arrays, resolve
from tilec.compiler.tune.stats import Timing
from tilec.runtime.bench import BenchProcess, TrialFault
from tilec.runtime.sandbox import MAX_MESSAGE_CHARS, Child, Limits, Profile, clean

from .test_bench import ADD, CONFIG, SIG, _add_launch, _compile

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.machine() != "x86_64",
    reason="the sandbox's layers are Linux x86-64",
)
CANARIES = {
    "TILEC_DATABASE_URL": "postgresql+psycopg://tilec:pw-canary-5f1e9a77c3@db.internal:5432/tilec",
    "TILEC_SIGNING_KEY": "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIKEYCANARY0e7c1b2a9d8f3e4c5b6a7d8e9f0a1b2c3\n"
    "-----END PRIVATE KEY-----\n",
}
NEEDLES = sorted([b"pw-canary-5f1e9a77c3", b"KEYCANARY0e7c1b2a9d8f3e4c5b6a7d8e9f0a1b2c3"])
SPIN = """
import triton
import triton.language as tl


@triton.jit
def spin(x_ptr, n):
    acc = tl.load(x_ptr)
    for i in range(0, n):
        acc = acc * 1.0000001 + 0.5
    tl.store(x_ptr, acc)
"""
LOUD = """
import triton
import triton.language as tl


@triton.jit
def loud(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.device_assert(x < 100, "\\x1b[2J\\x1b[31mpwned\\u202e %s")
""" % ("A" * 2000)


def _memory_holds(pid: int, needles: list[bytes]) -> list[bytes]:
    """The needles found anywhere in the readable memory of process `pid` (as root, or its owner): what a
    kernel able to read every mapped byte of its own process could find."""
    found = set()
    with open(f"/proc/{pid}/maps") as f:
        regions = [line.split() for line in f]
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for fields in regions:
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if "r" not in fields[1] or (len(fields) > 5 and fields[5] == "[vvar]"):
                continue
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            found.update(n for n in needles if n in data)
    return sorted(found)


def test_probe_finds_every_layer_shut() -> None:
    child = Child("tilec.runtime.sandbox:probe", Profile())
    try:
        assert child.poll(60), "the probe never answered"
        report = child.recv()
    finally:
        child.kill()
    layers = report["layers"]
    assert layers["exec"] and layers["seccomp"] and layers["chroot"], layers
    assert {"net", "mnt"} <= set(layers["namespaces"]), layers
    assert layers["rlimits"]["RLIMIT_AS"] == 4096 << 20 and layers["rlimits"]["RLIMIT_FSIZE"] == 0
    assert set(report["env"]) <= {"LC_CTYPE"}, "only what Python sets for itself (C locale coercion)"
    for attack in (
        "read_host_file",
        "read_parent_environ",
        "socket",
        "fork",
        "exec",
        "write_file",
        "chroot_out",
    ):
        assert report[attack] != "allowed", (attack, report)
    assert report["thread"] == report["signal_self"] == "allowed", (
        "threads (the runtime's pool) and own signals work"
    )
    assert not os.path.exists(child.tmpdir), "the private temporary directory is removed with the child"


def test_bench_child_holds_no_secret_and_no_descriptor(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    assert _memory_holds(os.getpid(), NEEDLES) == NEEDLES, "the scan finds the canaries where they are"
    add = _compile(ADD, "add_kernel", SIG, CONFIG)
    launch = _add_launch(4096)
    with BenchProcess("cpu", launch, seed=5, timeout_s=30) as bench:
        assert isinstance(bench.time(add, CONFIG, max_seconds=0.1), Timing)
        pid = bench.pid
        with open(f"/proc/{pid}/environ", "rb") as f:
            assert f.read() == b"", "the bench child starts with an empty environment"
        fds = os.listdir(f"/proc/{pid}/fd")
        assert len(fds) == 1 and os.readlink(f"/proc/{pid}/fd/{fds[0]}").startswith("socket:"), fds
        x = host_arrays(launch, seed=5)["x_ptr"].tobytes()[:64]
        assert _memory_holds(pid, [x]) == [x], "the scan reads the child's memory (its input array is there)"
        assert _memory_holds(pid, NEEDLES) == [], "no secret of the parent anywhere in the child's memory"


def test_cpu_limit_stops_a_spinning_kernel() -> None:
    sig = {"x_ptr": "*fp32", "n": "i64"}
    spin = _compile(SPIN, "spin", sig, {})
    desc = LaunchDescription(grid=["1"], args={"x_ptr": "randn(4)", "n": 10**15})
    with BenchProcess("cpu", resolve(desc, sig, list(sig)), timeout_s=120, limits=Limits(cpu_s=2)) as bench:
        start = time.monotonic()
        with pytest.raises(TrialFault, match="SIGXCPU while timing spin") as info:
            bench.time(spin, {})
        assert info.value.kind == "crash"
        assert time.monotonic() - start < 60, "stopped by its CPU limit, long before the call's 120 s"
        assert bench.restarts == 0
        assert bench.device_info()["arch"] == "cpu", "a fresh child answers"
        assert bench.restarts == 1


def test_memory_limit_stops_a_launch_too_big() -> None:
    desc = LaunchDescription(grid=["1"], args={"x_ptr": "randn(n_elements)", "y_ptr": "randn(n_elements)",
                                               "out_ptr": "empty(n_elements)", "n_elements": 1 << 27})  # fmt: skip
    add = _compile(ADD, "add_kernel", SIG, CONFIG)
    with BenchProcess("cpu", resolve(desc, SIG, list(SIG)), limits=Limits(memory_mb=1024)) as bench:
        with pytest.raises(TrialFault, match="MemoryError") as info:  # 3 x 512 MiB under a 1 GiB limit
            bench.time(add, CONFIG)
        assert info.value.kind == "crash"


def test_a_kernels_words_are_escaped_and_bounded() -> None:
    sig = {"x_ptr": "*i32", "n": "i32"}
    loud = _compile(LOUD, "loud", sig, {"BLOCK": 64})
    desc = LaunchDescription(grid=["cdiv(n, BLOCK)"], args={"x_ptr": "randint(200, 300, n)", "n": 256})
    with BenchProcess("cpu", resolve(desc, sig, list(sig))) as bench:
        with pytest.raises(TrialFault) as info:
            bench.time(loud, {"BLOCK": 64})
    message = info.value.message
    assert info.value.kind == "fault" and "pwned" in message
    assert len(message) <= MAX_MESSAGE_CHARS and message.isascii() and message.isprintable(), message
    assert "\\x1b[2J" in message and "\\u202e" in message


def test_clean() -> None:
    assert clean("ok: \x00\x1b\u202e\xff") == "ok: \\x00\\x1b\\u202e\\xff"
    assert len(clean("é" * 1000)) == MAX_MESSAGE_CHARS


def test_the_filter_alone_refuses_without_the_chroot() -> None:
    """The cuda profile keeps the host's files in view (the driver needs /dev and /proc) and its uid: there the
    seccomp filter and the namespaces alone refuse new processes, sockets, and signals to the server."""
    child = Child("tilec.runtime.sandbox:probe", Profile(kind="cuda"))
    try:
        assert child.poll(60), "the probe never answered"
        report = child.recv()
    finally:
        child.kill()
    assert report["layers"]["seccomp"] and "chroot" not in report["layers"], report["layers"]
    assert report["read_host_file"] == "allowed", "no chroot in this profile: the filter is what is left"
    for attack in ("socket", "fork", "exec", "signal_parent", "chroot_out"):
        assert report[attack] == "EPERM", (attack, report)


ORPHAN = """
import sys, time
sys.path.insert(0, ".")
from tests.client.test_sandbox import SPIN
from tests.client.test_bench import _compile
from tilec.runtime.bench import BenchProcess
from tilec.compiler.tune.launch import LaunchDescription, resolve
sig = {"x_ptr": "*fp32", "n": "i64"}
spin = _compile(SPIN, "spin", sig, {})
bench = BenchProcess("cpu", resolve(LaunchDescription(grid=["1"], args={"x_ptr": "randn(4)", "n": 10**15}), sig,
                     list(sig)), timeout_s=600)
bench.device_info()
print(bench.pid, flush=True)
bench.time(spin, {})
"""


def test_a_bench_child_dies_with_its_parent() -> None:
    """A worker SIGKILLed mid-trial (its bench child leads a session of its own, out of reach of a group kill):
    the child, spinning in a kernel, dies with it instead of spinning for nobody."""
    import signal
    import subprocess
    from pathlib import Path

    root = Path(__file__).parents[2]
    proc = subprocess.Popen([sys.executable, "-c", ORPHAN], cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        child = int(proc.stdout.readline())
        # spinning now: a condition (its CPU time grows by half a second past what its start-up took), not a pause
        start = _cpu_s(child)
        deadline = time.monotonic() + 120
        while _cpu_s(child) < start + 0.5:
            assert time.monotonic() < deadline and _alive(child), "the bench child never ran the kernel"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 60  # generous: the child notices its parent's death by polling
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the bench child outlived its parent"
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def _cpu_s(pid: int) -> float:
    """The CPU time (user + system) a process has used, from /proc/PID/stat; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


UNPRIVILEGED_PROBE = """
import json
from tilec.runtime.sandbox import Child, Profile
child = Child("tilec.runtime.sandbox:probe", Profile())
print(json.dumps(child.recv() if child.poll(60) else None))
child.kill()
"""


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="util-linux's setpriv is not installed")
def test_without_privileges_a_user_namespace_stands_in() -> None:
    """A service run without capabilities (not root, or root with every capability dropped, as here): the
    child makes a user namespace first and gets every other layer, and the filter alone keeps it from files."""
    import json
    import subprocess

    cmd = [
        "setpriv",
        "--bounding-set",
        "-all",
        "--inh-caps",
        "-all",
        sys.executable,
        "-c",
        UNPRIVILEGED_PROBE,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    report = json.loads(out)
    layers = report["layers"]
    assert layers["namespaces"][:2] == ["user", "net"] and layers["chroot"] and layers["seccomp"], layers
    for attack in ("read_host_file", "read_parent_environ", "socket", "fork", "exec", "write_file", "chroot_out",
                   "signal_parent"):  # fmt: skip
        assert report[attack] != "allowed", (attack, report)


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ")[1].startswith("Z"):
                    return True  # exited, not yet reaped
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_standby_bench_children_start_ahead_and_each_serves_one_bench() -> None:
    from tilec.runtime import standby as bench_mod

    def waiting() -> list[int]:
        return [c.pid for kept in bench_mod.standby.ready.values() for c in kept]

    add = _compile(ADD, "add_kernel", SIG, CONFIG)
    bench_mod.keep_standby(1)
    try:
        with BenchProcess("cpu", _add_launch(4096), seed=5, timeout_s=30) as first:
            assert isinstance(first.time(add, CONFIG, max_seconds=0.1), Timing)
            ahead = waiting()
            assert len(ahead) == 1 and first.pid not in ahead, "the next bench's child is started already"
            first_pid = first.pid
        with BenchProcess("cpu", _add_launch(1024), seed=6, timeout_s=30) as second:
            assert second.pid == ahead[0], "the child started ahead serves the next bench"
            assert isinstance(second.time(add, CONFIG, max_seconds=0.1), Timing)
            with open(f"/proc/{second.pid}/environ", "rb") as f:
                assert f.read() == b"", "a standby child starts with an empty environment too"
            assert _gone(first_pid), "the first bench's child ended with its bench (a child per bench)"
        with BenchProcess("cpu", _add_launch(1024), limits=Limits(cpu_s=7)) as other:
            assert other.pid not in ahead + waiting(), "a child is only taken by a bench of its own limits"
            assert other.device_info()["arch"] == "cpu"
    finally:
        left = waiting()
        bench_mod.keep_standby(0)
    assert waiting() == [] and all(_gone(pid) for pid in left), "keep_standby(0) ends the children waiting"


def test_a_standby_child_that_died_is_replaced_by_a_fresh_one() -> None:
    import signal as signals

    from tilec.runtime import standby as bench_mod

    add = _compile(ADD, "add_kernel", SIG, CONFIG)
    bench_mod.keep_standby(1, kind="cpu", limits=Limits())
    try:
        [dead] = [c for kept in bench_mod.standby.ready.values() for c in kept]
        os.killpg(dead.pid, signals.SIGKILL)
        assert _gone(dead.pid)
        with BenchProcess("cpu", _add_launch(1024), limits=Limits()) as bench:
            assert bench.pid != dead.pid
            assert isinstance(bench.time(add, CONFIG, max_seconds=0.1), Timing)
    finally:
        bench_mod.keep_standby(0)


def test_kept_children_are_per_owner_bounded_and_least_recently_used_go_first() -> None:
    """runtime/standby.py's keep (a GPU bench child kept for its owner's next job; its GPU side is in
    tests/cuda/test_bench_keep.py): one child an owner, at most keep_max in all, the oldest ended first; a child
    that has served keep_uses jobs, or one that died, is not handed out; a CPU bench is never kept."""
    from tilec.runtime.sandbox import cpu_seconds
    from tilec.runtime.standby import Standby

    s, limits = Standby(), Limits()
    s.set(0, keep=2)
    a, b, c, d = (Standby.spawn("cpu", 0, limits) for _ in range(4))
    fresh: list = []
    try:
        assert s.keep(a, "cuda", 0, limits, "alice") and s.keep(b, "cuda", 0, limits, "bob")
        assert not s.keep(d, "cuda", 0, limits, "alice"), "one child kept an owner"
        assert s.take("cuda", 0, limits, "bob") is b and s.keep(b, "cuda", 0, limits, "bob")  # bob: newest now
        assert s.keep(c, "cuda", 0, limits, "carol")
        assert _gone(a.pid), "alice's, the least recently used, was ended to keep carol's"
        fresh = [s.take("cuda", 0, limits, "alice"), s.take("cuda", 1, limits, "bob")]
        assert fresh[0] is not a and fresh[1] is not b, "alice's was ended; bob's is kept for one device only"
        os.killpg(c.pid, 9)
        assert _gone(c.pid)
        fresh.append(s.take("cuda", 0, limits, "carol"))
        assert fresh[-1] is not c, "a kept child that died is not handed out"
        d.jobs = s.keep_uses
        assert not s.keep(d, "cuda", 0, limits, "dave"), "a child that has served its share is not kept"
        d.jobs = 0
        deadline = time.monotonic() + 10
        while cpu_seconds(d.pid) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cpu_seconds(d.pid) > 0, "its start (imports) took CPU time"
        assert not s.keep(d, "cuda", 0, Limits(life_cpu_s=0), "dave"), "nor one past half its life's CPU"
        bench = BenchProcess("cpu", _add_launch(1024), owner="alice")
        assert bench.owner is None, "a CPU bench is never kept"
        bench.close()
    finally:
        s.set(0, keep=0)
        for child in (a, b, c, d, *fresh):
            child.kill()
    assert not s.kept and _gone(b.pid)


def test_a_gpu_bench_child_sees_its_own_gpu_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cuda child's CUDA_VISIBLE_DEVICES names only the GPU it benches (this process's index mapped through
    this process's own list, UUIDs included), and the child calls it device 0; without a list, the index."""
    from tilec.runtime.sandbox import one_gpu
    from tilec.runtime.standby import Standby

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert one_gpu(3) == "3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4, GPU-0a1b,6")
    assert (one_gpu(0), one_gpu(1), one_gpu(2), one_gpu(3)) == ("4", "GPU-0a1b", "6", None)
    child = Standby.spawn("cuda", 2, Limits())
    try:
        with open(f"/proc/{child.pid}/environ", "rb") as f:
            env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if e)
        assert env.get(b"CUDA_VISIBLE_DEVICES") == b"6", f"exit code {child.proc.poll()}"
        assert child.local(2) == 0 and child.local(1) == 1
    finally:
        child.kill()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4")
    other = Standby.spawn("cuda", 1, Limits())  # no such entry: the list is left as it is, the index too
    try:
        with open(f"/proc/{other.pid}/environ", "rb") as f:
            seen = f.read().split(b"\0")
        assert b"CUDA_VISIBLE_DEVICES=4" in seen, f"exit code {other.proc.poll()}"  # (nothing seen: it had exited)
        assert other.local(1) == 1
    finally:
        other.kill()
