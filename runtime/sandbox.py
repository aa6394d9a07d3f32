"""The sandbox that strangers' native code runs in: a child exec'd fresh (never forked from the server),
with an empty environment, no descriptor but its socket, resource limits, a private temporary directory,
and on Linux namespaces, a chroot into that directory, dropped privileges and a seccomp filter.

The layers, in the order the child applies them, and what each stops:
- fresh exec, empty environment, only its socket (`spawn`): the server's secrets (database URL,
  signing key, tokens) are not in the child's memory to be read, and no descriptor of the server's
  (database connections, listening sockets, log files) can be used from it.
- resource limits (`_limit`): address space (RLIMIT_AS, cpu; RLIMIT_DATA, cuda, whose driver reserves
  huge address ranges), CPU seconds, file size (0: nothing can be written), open files, core dumps:
  a kernel that allocates or loops forever is stopped by the kernel, not by luck.
- namespaces (`_unshare`): a network namespace of its own (no interface but a down loopback: no
  network), and mount, IPC and UTS namespaces; a user namespace first when not root.
- chroot into the private temporary directory, then a switch to `nobody` with every capability
  dropped (`_confine`, cpu only: the CUDA driver needs /dev and /proc): no view of the host's files
  (no /proc/<server pid>/environ, no data dir, no signing key file), and no way back out.
- no_new_privs and a seccomp filter (`_seccomp`, x86-64): no new processes (fork, vfork, execve;
  clone only for threads), no sockets, no ptrace or process_vm_readv of other processes, no signal
  to another process, no mount/unshare/setns/chroot, no bpf, perf, keyctl, io_uring, kernel modules;
  cpu: no opening, creating, renaming, removing or changing a file either (what keeps the child from
  the server's files where no namespace could be made).
What the child sends back is JSON (never pickle: the parent must not unpickle a stranger's bytes),
bounded in size; the parent escapes and bounds every message (`clean`).
"""

from __future__ import annotations

import ctypes
import errno
import json
import math
import os
import platform
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from typing import Any

MAX_REPLY_BYTES = 1 << 20  # a reply longer than this is a crash of the child, not data
MAX_MESSAGE_CHARS = 300  # a kernel's words in a trial reason: this many characters, escaped
# device selection and where the driver's library is: no secret lives in these (the cuda bench needs them to
# load the same driver and see the same GPU)
CUDA_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
NOBODY = 65534


@dataclass(frozen=True)
class Limits:
    """What one sandboxed child may use. memory_mb: its address space (cpu) or data segment (cuda);
    cpu_s: CPU seconds (all threads together) of one request (`per_call`: SIGXCPU past it); life_cpu_s:
    of its whole life (SIGKILL past it); open_files: descriptors."""

    memory_mb: int = 4096
    cpu_s: int = 120
    life_cpu_s: int = 3600
    open_files: int = 64


def per_call(limits: Limits) -> None:
    """In a child: allow `limits.cpu_s` more CPU seconds from now on (the soft limit; the hard one stays)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(used.ru_utime + used.ru_stime) + limits.cpu_s
    resource.setrlimit(
        resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard)
    )


@dataclass
class Profile:
    """How a child is confined: `kind` "cpu" (every layer) or "cuda" (no chroot, no address-space limit:
    the driver needs /dev, /proc and large address reservations)."""

    kind: str = "cpu"
    limits: Limits = field(default_factory=Limits)
    tmpdir: str = ""
    device: int | None = None  # cuda: the one GPU (this process's index) the child sees, as its device 0


def cpu_seconds(pid: int) -> float:
    """The CPU seconds (user and system, all threads) a live process has used, from /proc; inf when unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14, 15)
    except (OSError, IndexError, ValueError):
        return math.inf


def one_gpu(device: int) -> str | None:
    """CUDA_VISIBLE_DEVICES for a child that sees only this process's GPU `device` (an index, an entry of
    this process's own list, a UUID included), or None where that list has no such entry."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is None:
        return str(device)
    entries = [e.strip() for e in given.split(",") if e.strip()]
    return entries[device] if 0 <= device < len(entries) else None


def clean(text: object, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A message from a sandboxed child as the service may repeat it: printable ASCII only (anything else
    escaped as \\xNN / \\uNNNN), at most `limit` characters."""
    out = []
    for ch in str(text):
        out.append(ch if " " <= ch <= "~" else ascii(ch)[1:-1])
        if sum(map(len, out)) > limit:
            break
    s = "".join(out)
    return s if len(s) <= limit else s[: limit - 3] + "..."


# ---- the parent's side ----------------------------------------------------------------------------------


class Child:
    """A sandboxed child running `entry` ("module:function"), spoken to over one socket: the parent sends
    pickles (its own data), the child answers JSON. `kill()` ends it and removes its temporary directory."""

    def __init__(self, entry: str, profile: Profile) -> None:
        self.tmpdir = tempfile.mkdtemp(prefix="tilec-sandbox-")
        os.chmod(self.tmpdir, 0o700)
        profile.tmpdir = self.tmpdir
        mine, theirs = socket.socketpair()
        env = {k: os.environ[k] for k in CUDA_ENV if k in os.environ} if profile.kind == "cuda" else {}
        # a GPU child sees its own GPU only (another's memory and the driver's host memory for every GPU stay
        # out of reach), as its device 0: `local` maps this process's index to the child's
        visible = one_gpu(profile.device) if profile.kind == "cuda" and profile.device is not None else None
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        self.device = profile.device if visible is not None else None
        # the parent's import path goes in the arguments (a checkout found only through PYTHONPATH, as on the
        # GPU machine, is found again without handing over the environment); this file is loaded by path, not
        # through tilec.client, whose imports start threads: namespaces need a process of one thread
        boot = (
            "import sys, json, importlib.util as u; sys.path[:0] = json.loads(sys.argv[3]); "
            "s = u.spec_from_file_location('_tilec_sandbox', sys.argv[4]); m = u.module_from_spec(s); "
            f"sys.modules[s.name] = m; s.loader.exec_module(m); m.child_main({entry!r})"
        )
        paths = [p for p in sys.path if p and os.path.isdir(p)]
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-c", boot, str(theirs.fileno()), json.dumps(_profile_data(profile)),
                 json.dumps(paths), os.path.abspath(__file__)],
                env=env, cwd=self.tmpdir, close_fds=True, pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: a kill takes every thread and child with it
            )  # fmt: skip
        except BaseException:
            mine.close()
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            raise
        finally:
            theirs.close()
        self.pid = self.proc.pid
        self.conn = Connection(mine.detach())
        self.jobs = 0  # the launches it has served (a kept bench child serves several of one owner)

    def send(self, message: Any) -> None:
        self.conn.send(message)

    def local(self, device: int) -> int:
        """The child's index of this process's GPU `device` (0 where the child sees that GPU alone)."""
        return 0 if self.device is not None and device == self.device else device

    def poll(self, timeout: float) -> bool:
        return self.conn.poll(timeout)

    def recv(self) -> Any:
        """The child's next reply, decoded from JSON; OSError/EOFError/ValueError when it is not one."""
        return json.loads(self.conn.recv_bytes(MAX_REPLY_BYTES).decode("utf-8"))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self, grace_s: float = 0.0) -> int | None:
        """End the child (after `grace_s` for it to exit by itself) and its group; its exit code."""
        if grace_s:
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.returncode is None:  # not reaped: its pid (alive or a zombie) is still its group's, no other's
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            code = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            code = None
        self.conn.close()
        shutil.rmtree(self.tmpdir, ignore_errors=True)
        return code


def _profile_data(profile: Profile) -> dict:
    return {"kind": profile.kind, "limits": asdict(profile.limits), "tmpdir": profile.tmpdir}


# ---- the child's side -----------------------------------------------------------------------------------


def child_main(entry: str) -> None:
    """In the fresh child: limits and namespaces while it is still one thread, then the entry point
    (module:function) with the connection, the profile and `lockdown`, which the entry calls once it has
    imported and prepared what it needs and before it touches a stranger's code."""
    fd, data = int(sys.argv[1]), json.loads(sys.argv[2])
    parent = os.getppid()
    _die_with(parent)
    profile = Profile(kind=data["kind"], limits=Limits(**data["limits"]), tmpdir=data["tmpdir"])
    layers: dict[str, Any] = {"exec": True, "env": not os.environ or sorted(os.environ)}
    layers["rlimits"] = _limit(profile)
    layers["namespaces"] = _unshare()
    conn = Connection(fd)
    module, _, function = entry.partition(":")
    import importlib

    main = getattr(importlib.import_module(module), function)

    def lockdown() -> dict[str, Any]:
        os.closerange(0, 3)  # /dev/null: no descriptor but the socket stays
        if profile.kind == "cpu":
            layers["chroot"] = _confine(profile.tmpdir, layers["namespaces"])
            _die_with(parent)  # a change of uid clears the parent-death signal
        else:
            try:
                os.rmdir(profile.tmpdir)  # its working directory, empty: removed now, whatever happens later
            except OSError:
                pass
        layers["seccomp"] = _seccomp(files=profile.kind != "cpu")
        return layers

    main(conn, profile, lockdown)


def _die_with(parent: int) -> None:
    """SIGKILL this child when the process that started it dies (a worker SIGKILLed mid-trial must not leave
    a kernel spinning for nobody: the child leads a session of its own, so no group kill reaches it). Linux
    sends it when the *thread* that started the child ends: start a Child from a thread that outlives it."""
    if sys.platform.startswith("linux"):
        _c().prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the line above
        os._exit(1)


def _limit(profile: Profile) -> dict[str, int]:
    lim = profile.limits
    wanted = {
        "RLIMIT_CPU": lim.life_cpu_s,
        "RLIMIT_FSIZE": 0,
        # the CUDA driver keeps a descriptor per device node, event and stream
        "RLIMIT_NOFILE": lim.open_files if profile.kind == "cpu" else max(lim.open_files, 1024),
        "RLIMIT_CORE": 0,
    }
    if lim.memory_mb > 0:  # 0: no memory limit (a GPU whose driver will not start under one)
        wanted["RLIMIT_AS" if profile.kind == "cpu" else "RLIMIT_DATA"] = lim.memory_mb << 20
    done = {}
    for name, value in wanted.items():
        which = getattr(resource, name)
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))  # soft == hard: the child cannot raise it again
        done[name] = value
    return done


_libc = None


def _c() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWNET = (
    0x00020000, 0x04000000, 0x08000000, 0x10000000, 0x40000000,
)  # fmt: skip


def _unshare() -> list[str]:
    """New network, mount, IPC and UTS namespaces (and a user namespace first when that is what it takes);
    the names of those made, [] where the kernel refuses."""
    if not sys.platform.startswith("linux"):
        return []
    flags = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS
    libc = _c()
    made = ["net", "mnt", "ipc", "uts"]
    if libc.unshare(flags) != 0:
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(flags | CLONE_NEWUSER) != 0:
            return []
        for path, text in (("uid_map", f"0 {uid} 1"), ("setgroups", "deny"), ("gid_map", f"0 {gid} 1")):
            try:
                with open(f"/proc/self/{path}", "w") as f:
                    f.write(text)
            except OSError:
                pass
        made.insert(0, "user")
    # mounts made from here on stay in this namespace
    libc.mount(b"none", b"/", None, 0x40000 | 0x4000, None)  # MS_PRIVATE | MS_REC
    return made


def _confine(root: str, namespaces: list[str]) -> bool:
    """chroot into `root` (empty, private), then become nobody with no capabilities: True when done."""
    try:
        os.chdir(root)
        os.rmdir(root)  # gone from the host now, whatever happens to the parent; still this child's root
        os.chroot(".")
        os.chdir("/")
    except OSError:
        return False
    if os.getuid() == 0 and "user" not in namespaces:
        try:
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)  # drops every capability of root
        except OSError:
            return False
    libc = _c()
    for cap in range(64):  # and out of the bounding set, so that nothing regains them
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP (EPERM once nobody: nothing left to drop)
    return True


# x86-64 system call numbers the filter refuses (EPERM); clone is allowed for threads only, clone3 is ENOSYS
# (glibc then falls back to clone, which the filter can inspect)
_DENY_X86_64 = {
    "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "socketpair": 53, "fork": 57,
    "vfork": 58, "execve": 59, "ptrace": 101, "syslog": 103, "setuid": 105, "setgid": 106, "setreuid": 113,
    "setregid": 114, "setgroups": 116, "setresuid": 117, "setresgid": 119, "capset": 126, "mknod": 133,
    "uselib": 134, "personality": 135, "pivot_root": 155, "chroot": 161, "acct": 163, "mount": 165,
    "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "sethostname": 170, "iopl": 172,
    "ioperm": 173, "init_module": 175, "delete_module": 176, "quotactl": 179, "kexec_load": 246,
    "add_key": 248, "request_key": 249, "keyctl": 250, "mknodat": 259, "unshare": 272,
    "perf_event_open": 298, "name_to_handle_at": 303, "open_by_handle_at": 304, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313,
    "kexec_file_load": 320, "bpf": 321, "execveat": 322, "userfaultfd": 323, "pidfd_send_signal": 424,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "pidfd_open": 434,
    "pidfd_getfd": 438, "process_madvise": 440, "tkill": 200, "rt_sigqueueinfo": 129,
    "rt_tgsigqueueinfo": 297,
}  # fmt: skip
_KILL, _TGKILL = 62, 234  # signals: to this process (or its own group, 0) only
# and for a cpu child, which needs no file once it has loaded its pieces: no opening a file, and no changing
# one (where no namespace or chroot could be made, this is what keeps it from the server's files)
_DENY_FILES_X86_64 = {
    "open": 2, "truncate": 76, "rename": 82, "mkdir": 83, "rmdir": 84, "creat": 85, "link": 86, "unlink": 87,
    "symlink": 88, "chmod": 90, "fchmod": 91, "chown": 92, "fchown": 93, "lchown": 94, "utime": 132,
    "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197, "lremovexattr": 198,
    "fremovexattr": 199, "utimes": 235, "openat": 257, "mkdirat": 258, "fchownat": 260, "futimesat": 261,
    "unlinkat": 263, "renameat": 264, "linkat": 265, "symlinkat": 266, "fchmodat": 268, "utimensat": 280,
    "renameat2": 316, "openat2": 437, "fchmodat2": 452,
}  # fmt: skip
_CLONE, _CLONE3 = 56, 435
_CLONE_THREAD = 0x00010000
_AUDIT_ARCH_X86_64 = 0xC000003E


class _Filter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def _bpf_program(pid: int, files: bool) -> list[tuple[int, int, int, int]]:
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JGE, JSET, RET|K
    allow, kill = 0x7FFF0000, 0x80000000  # SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS
    eperm, enosys = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS  # SECCOMP_RET_ERRNO
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, _AUDIT_ARCH_X86_64), (ret, 0, 0, kill), (ld, 0, 0, 0)]
    prog += [(jge, 0, 1, 0x40000000), (ret, 0, 0, eperm)]  # the x32 ABI's numbers
    denied = {**_DENY_X86_64, **({} if files else _DENY_FILES_X86_64)}
    for nr in sorted(denied.values()):
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, eperm)]
    prog += [(jeq, 0, 1, _CLONE3), (ret, 0, 0, enosys)]
    for nr in (_KILL, _TGKILL):  # another process's pid (a neighbour sandbox, the server) is refused
        prog += [
            (jeq, 0, 5, nr),  # not this call: past the block
            (ld, 0, 0, 16),
            (jeq, 2, 0, pid),
            (jeq, 1, 0, 0),
            (ret, 0, 0, eperm),
            (ret, 0, 0, allow),
        ]
    prog += [(jeq, 0, 3, _CLONE), (ld, 0, 0, 16), (jset, 1, 0, _CLONE_THREAD), (ret, 0, 0, eperm)]
    prog += [(ret, 0, 0, allow)]
    return prog


def _seccomp(files: bool) -> bool:
    """no_new_privs, then the filter on every thread of the process (TSYNC); True when installed. `files`:
    whether the child may still open and change files (cuda: its driver opens device nodes and /proc)."""
    if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
        return False
    libc = _c()
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return False
    insns = _bpf_program(os.getpid(), files)
    array = (_Filter * len(insns))(*[_Filter(*i) for i in insns])
    prog = _Prog(len(insns), ctypes.cast(array, ctypes.POINTER(_Filter)))
    # seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog): threads started by imports too
    return libc.syscall(317, 1, 1, ctypes.byref(prog)) == 0


def probe(conn: Connection, profile: Profile, lockdown: Any) -> None:
    """A child that locks itself down and then tries what a hostile kernel would, reporting what each try
    got: the sandbox checking itself (tests; `python -m tilec.runtime.sandbox` prints it)."""
    import threading

    report: dict[str, Any] = {"layers": lockdown(), "uid": os.getuid(), "env": dict(os.environ)}

    def attempt(name: str, fn: Any) -> None:
        try:
            fn()
            report[name] = "allowed"
        except OSError as exc:
            report[name] = errno.errorcode.get(exc.errno or 0, str(exc.errno))

    attempt("read_host_file", lambda: open("/etc/passwd").close())
    attempt("read_parent_environ", lambda: open(f"/proc/{os.getppid()}/environ").close())
    attempt("socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
    attempt("fork", lambda: os.waitpid(pid, 0) if (pid := os.fork()) else os._exit(0))
    attempt("exec", lambda: os.execv("/bin/true", ["true"]))
    attempt("write_file", lambda: open("/x", "w").close())
    attempt("chroot_out", lambda: os.chroot(".."))
    attempt("signal_parent", lambda: os.kill(os.getppid(), 0))
    attempt("signal_self", lambda: os.kill(os.getpid(), 0))
    thread = threading.Thread(target=lambda: None)
    attempt("thread", thread.start)
    conn.send_bytes(json.dumps(report).encode())


if __name__ == "__main__":
    child = Child("tilec.runtime.sandbox:probe", Profile())
    print(json.dumps(child.recv() if child.poll(30) else "no answer", indent=1))
    child.kill()
