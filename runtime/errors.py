"""The errors the runtime raises when a launch cannot run or a kernel fails while it runs. The client
re-exports them (client/_exceptions.py draws the whole tree); the server's workers meet them in trials.
"""

from __future__ import annotations

from tilec.compiler.errors import TilecError


class LaunchError(TilecError):
    """A launch that cannot run."""


class ArgumentError(LaunchError):
    """An argument of the wrong count, dtype or layout; the message names it."""


class GridError(LaunchError):
    """A grid of zero or negative size, or with more than three axes."""


class TargetError(LaunchError):
    """The arguments select no supported target (or several)."""


class ArchMismatchError(TargetError):
    """A binary this GPU or its driver cannot load: a cubin built for another arch (sm_90 on an sm_80
    card), or code the driver refuses (PTX newer than it). The message names the device, the artifact's
    target and the driver's CUDA version; `device_target` is the target to rebuild for."""

    def __init__(
        self,
        *,
        artifact_target: str,
        device_target: str,
        device_name: str,
        driver_version: str,
        reason: str,
        device: int = 0,
    ) -> None:
        self.artifact_target = artifact_target
        self.device_target = device_target
        self.device_name = device_name
        self.driver_version = driver_version
        self.reason = reason
        self.device = device
        gpu = f"GPU {device} ({device_name}, {device_target.removeprefix('cuda:')}, CUDA driver {driver_version})"
        advice = (
            f"rebuild it for {device_target}"
            if artifact_target != device_target
            else "update the driver, or rebuild it with a toolkit (PTX ISA) this driver supports"
        )
        super().__init__(f"cannot load a binary built for {artifact_target} on {gpu}: {reason}; {advice}")

    def __reduce__(self) -> tuple:  # keyword-only fields: pickled (e.g. from a bench child) by name
        fields = ("artifact_target", "device_target", "device_name", "driver_version", "reason", "device")
        return _rebuild_arch_mismatch, ({f: getattr(self, f) for f in fields},)


def _rebuild_arch_mismatch(fields: dict) -> ArchMismatchError:
    return ArchMismatchError(**fields)


class KernelAssertionError(TilecError):
    """A device assertion failed while the kernel ran."""
