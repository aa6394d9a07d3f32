"""The exceptions the client raises. Compile errors from the compiler pass through unchanged.

Exception
├── compiler.errors.CompileError     bad source or IR (file:line:col)
├── compiler.errors.ToolError        LLVM / ptxas / nvJitLink failed
└── TilecError                       anything the launch API refuses or meets at run time
    ├── LaunchError                  a launch that cannot run
    │   ├── ArgumentError            wrong count, dtype, layout of an argument (names it)
    │   ├── GridError                a grid of zero or negative size, or of the wrong rank
    │   └── TargetError              arrays of no supported target, or of mixed targets
    └── KernelAssertionError         a tl.device_assert failed while the kernel ran
"""

from __future__ import annotations


class TilecError(Exception):
    """Base of the client's own errors."""


class LaunchError(TilecError):
    """A launch that cannot run."""


class ArgumentError(LaunchError):
    """An argument of the wrong count, dtype or layout; the message names it."""


class GridError(LaunchError):
    """A grid of zero or negative size, or with more than three axes."""


class TargetError(LaunchError):
    """The arguments select no supported target (or several)."""


class KernelAssertionError(TilecError):
    """A device assertion failed while the kernel ran."""
