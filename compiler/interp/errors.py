"""Errors the reference interpreter raises while running a kernel, located at the IR op at fault.

InterpError is a CompileError (so it prints `file:line:col: message`); MemoryFault is an unmasked
out-of-bounds or misaligned access, InterpAssertionError a failed `assert` op.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir.core import Operation, error_location


class InterpError(CompileError):
    """A kernel did something the interpreter refuses at run time (bad loop step, op budget, ...)."""


class MemoryFault(InterpError):
    """An active lane of a load, store or atomic addressed memory outside every argument buffer."""


class InterpAssertionError(InterpError):
    """An `assert` op found a false element."""


class AccessError(Exception):
    """Raised by the address space; the machine turns it into a MemoryFault located at the op."""


def located(cls: type[InterpError], op: Operation, message: str) -> InterpError:
    return cls(f"'{op.name}' {message}", **error_location(op.loc))
