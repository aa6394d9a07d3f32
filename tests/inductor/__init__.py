"""Tests of Inductor-generated kernels (they need torch: the `inductor` extra, part of `test`)."""

import os
from types import ModuleType

import pytest


def torch_or_skip() -> ModuleType:
    """torch, which `make test` installs: under CI=true a missing torch fails the run (a lost install step
    must not pass as skipped tests); elsewhere these tests skip."""
    if os.environ.get("CI") == "true":
        import torch

        return torch
    return pytest.importorskip("torch")
