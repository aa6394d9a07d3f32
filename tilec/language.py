"""`import tilec.language as tl`: Triton's language names for kernels written against tilec without Triton
installed. Each name is a stand-in that only says which `triton.language` name it is (the resolver and the
reader take it as that name); kernels run through tilec's compiler, never as Python.
"""

from __future__ import annotations

from typing import Any


class constexpr:  # noqa: N801 - Triton's spelling
    """`tl.constexpr` as an annotation, or `tl.constexpr(value)` for a module-level constant."""

    _tilec_name = "triton.language.constexpr"

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"


class _Name:
    __slots__ = ("_tilec_name",)

    def __init__(self, name: str) -> None:
        self._tilec_name = name

    def __getattr__(self, attr: str) -> _Name:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Name(f"{self._tilec_name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self._tilec_name} runs only inside a kernel launched through tilec")

    def __repr__(self) -> str:
        return self._tilec_name


def __getattr__(name: str) -> _Name:
    if name.startswith("__"):
        raise AttributeError(name)
    return _Name(f"triton.language.{name}")
