"""JAX's GPU devices, for conftest.py's skip and every GPU test file's GPUS,
and the CUDA_VISIBLE_DEVICES entry that shows one of them alone to a child
process.

jax is imported inside the functions, never at the top of this module (see
conftest.py: tests/python/conftest.py must set XLA_FLAGS before jax is first
imported)."""

from __future__ import annotations

import os
from typing import Any


def gpu_devices() -> list[Any]:
    """JAX's GPU devices, or [] when there is no GPU backend."""
    import jax

    try:
        return [d for d in jax.devices("gpu") if d.platform == "gpu"]
    except RuntimeError:  # no GPU backend: "Unknown backend gpu" or init failure
        return []


def cuda_ordinal(device: Any) -> str:
    """The CUDA_VISIBLE_DEVICES entry of a JAX GPU device (its id counts the
    GPUs this process sees): what a child process is given to see that GPU
    alone."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return visible.split(",")[device.id] if visible else str(device.id)
