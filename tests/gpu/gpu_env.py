"""JAX's GPU devices, for conftest.py's skip and every GPU test file's GPUS.

jax is imported inside the function, never at the top of this module (see
conftest.py: tests/python/conftest.py must set XLA_FLAGS before jax is first
imported)."""

from __future__ import annotations

from typing import Any


def gpu_devices() -> list[Any]:
    """JAX's GPU devices, or [] when there is no GPU backend."""
    import jax

    try:
        return [d for d in jax.devices("gpu") if d.platform == "gpu"]
    except RuntimeError:  # no GPU backend: "Unknown backend gpu" or init failure
        return []
