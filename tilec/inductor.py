"""`tilec.inductor`: torch.compile's generated Triton kernels compiled and launched by tilec (see
tilec.client.inductor): `torch.compile(model, backend=tilec.inductor.backend)` or `tilec.inductor.install()`."""

from tilec.client.inductor import TilecKernel, backend, install, installed, stats, uninstall

__all__ = ["TilecKernel", "backend", "install", "installed", "stats", "uninstall"]
