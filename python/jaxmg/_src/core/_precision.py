"""Products at the precision of their dtype, for the cores that compute
part of their result with JAX's own matrix products (polar's Up and H,
least_squares' Qᴴ b and its derivatives).

XLA on NVIDIA GPUs computes float32 and complex64 products in TF32 unless
told otherwise (JAX's default matmul precision), which keeps about three
decimal digits: no factorization's accuracy survives that. On one H100
(2026-11-25) polar's float32 and complex64 checks failed on the GPU while
float64, complex128 and every CPU run passed."""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import jax

F = TypeVar("F", bound=Callable[..., Any])


def full_precision(fn: F) -> F:
    """``fn`` traced with every matrix product at its dtype's own precision
    (``jax.default_matmul_precision("highest")``), whatever the caller's
    default."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with jax.default_matmul_precision("highest"):
            return fn(*args, **kwargs)

    return wrapped  # type: ignore[return-value]
