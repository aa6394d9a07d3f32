"""The tile IR: types, ops, a printer and parser with one textual form, a verifier and a builder."""

from .builder import Builder
from .core import Block, Function, Loc, Module, Operation, Param, Region, Value
from .ops import OPS
from .parser import parse_module
from .printer import print_function, print_module
from .types import PointerType, ScalarType, TileType, Type
from .verifier import verify_module

__all__ = [
    "OPS",
    "Block",
    "Builder",
    "Function",
    "Loc",
    "Module",
    "Operation",
    "Param",
    "PointerType",
    "Region",
    "ScalarType",
    "TileType",
    "Type",
    "Value",
    "parse_module",
    "print_function",
    "print_module",
    "verify_module",
]
