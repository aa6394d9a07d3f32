"""LLVM IR helpers shared by the backends (llvmlite): types and constants, loops, (op, dtype) tables."""
