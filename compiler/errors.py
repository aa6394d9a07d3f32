"""The root of tilec's errors, and the compiler's: CompileError, located in the user's source or IR text,
and ToolError, an external tool that failed.

A CompileError prints `file:line:col: message`, the source line and a caret under the column. TilecError is
the public root (`tilec.TilecError`): the runtime's launch errors and the client's service and verification
errors derive from it too (the tree is drawn in client/_exceptions.py). It lives here, at the bottom of the
layers, so the compiler's own errors can stand under it.
"""

from __future__ import annotations


class TilecError(Exception):
    """The root of every error tilec raises on purpose."""


class CompileError(TilecError):
    """An error in the user's input: bad source, bad IR, a type error, a budget exceeded."""

    def __init__(
        self,
        message: str,
        *,
        filename: str = "<source>",
        line: int | None = None,
        col: int | None = None,
        source_line: str | None = None,
    ) -> None:
        self.message = message
        self.filename = filename
        self.line = line
        self.col = col
        self.source_line = source_line
        super().__init__(self.render())

    def render(self) -> str:
        if self.line is None:
            return f"{self.filename}: {self.message}"
        col = self.col if self.col is not None else 1
        out = f"{self.filename}:{self.line}:{col}: {self.message}"
        if self.source_line is not None:
            text = self.source_line.rstrip("\n")
            if len(text) > 200:
                start = max(0, col - 100)
                text, col = text[start : start + 200], col - start
            out += f"\n{text}\n{' ' * max(col - 1, 0)}^"
        return out

    def __reduce__(self):  # noqa: ANN204 - pickled (a compile worker's error) with its fields, not its text
        return _rebuild, (type(self), self.message, self.filename, self.line, self.col, self.source_line)

    def to_dict(self) -> dict:
        return {
            "message": self.message,
            "file": self.filename,
            "line": self.line,
            "col": self.col,
            "excerpt": self.render().split("\n", 1)[1] if self.source_line is not None else None,
        }


def _rebuild(cls: type, message: str, filename: str, line: int | None, col: int | None, source_line: str | None):  # noqa: ANN202
    return cls(message, filename=filename, line=line, col=col, source_line=source_line)


class UnsupportedSyntaxError(CompileError):
    """Python syntax that the Triton language (or tilec's subset of it) does not accept."""


class BudgetExceededError(CompileError):
    """The input is over one of the compile budgets (size, depth, unroll count, tile elements)."""


class OutOfResourcesError(CompileError):
    """A kernel (a config of it) needs more of a block's resources than the target has: `required` and
    `limit` in `resource`'s unit. Under the drop-in it becomes Triton's OutOfResources, so that Triton's
    autotuner prunes the config as it prunes its own."""

    def __init__(self, message: str, *, required: int | None = None, limit: int | None = None,
                 resource: str = "shared memory", **where: object) -> None:  # fmt: skip
        self.required, self.limit, self.resource = required, limit, resource
        super().__init__(message, **where)  # type: ignore[arg-type]


class StaticAssertionError(CompileError):
    """A `tl.static_assert` failed for this specialisation (a config). Under the drop-in it becomes Triton's
    CompileTimeAssertionFailure, which Triton's autotuner prunes as it prunes its own configs."""


class VerifyError(CompileError):
    """The IR is malformed: an op's operands, attributes or types break its rules."""


class ToolError(TilecError):
    """An external tool (LLVM, ptxas, nvJitLink) failed; carries its stderr and a repro command."""

    def __init__(self, tool: str, stderr: str, repro: str = "") -> None:
        self.tool = tool
        self.stderr = stderr
        self.repro = repro
        super().__init__(f"{tool} failed:\n{stderr}" + (f"\nrepro: {repro}" if repro else ""))
