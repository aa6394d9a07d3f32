"""tilec's compiler: Triton-language source or tile IR in, verified tile IR, LLVM IR, PTX and cubins out.

It imports nothing from `server` or `client`.
"""

__version__ = "0.1.0"
