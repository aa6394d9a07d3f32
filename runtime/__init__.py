"""The runtime: what runs compiled kernels, between the compiler and both the client and the server.

Device runtimes (`cuda`: the cubin through the driver, `cpu`: the host object through an LLVM JIT) and the
ctypes driver calls (`libcuda`), launch and specialisation (`launch`), grids (`grid`), tensor descriptors and
TMA maps (`tensordesc`, `tma`), the benchmark (`bench`) and a whole tune's orchestration (`tune`). It
imports the compiler and nothing else of tilec; the client and the server's workers import it.
"""
