"""Donation for the plain forms called eagerly with ``donate=True``.

A donated jit parameter can give its buffer only to an output of the jitted
program (XLA's input/output aliasing): a program that returns only x (a
solve's result, b's shape) keeps the donated A alive and copies it for the
in-place solver, so that one GPU holds half the matrix its memory allows
(measured 2026-11-24 on one H200: potrs of N = 98,304 float64 asked for a
second 72 GiB buffer). So a donating call runs the op's *worked* form, a
program that also returns the solver's work buffer (the FFI call's output
aliased to A, sharded like A): XLA then hands A's own buffer to the solver.
The work buffer is deleted after the call, and so is every donated input,
as JAXMg 1.x's donation promises.

Under a trace (the call inside the user's ``jax.jit``) donation is the outer
jit's business: its ``donate_argnums``, and a program that returns the work
buffer (the 1.x ctx forms' ``a_work``) for XLA to alias.
"""

from __future__ import annotations

import functools
import os
import warnings
from typing import Any, Callable

import jax

from jaxmg._src import _compat


class _Keyed:
    """A callable compared by a key of its own (equal only to one of its
    own class with an equal key), so that JAX's traces and ``_donating``'s
    cache are shared by equal calls and never by different ones."""

    def __init__(self, fn: Any, key: Any) -> None:
        self.fn, self.key = fn, key

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.key == other.key


class Hashable(_Keyed):
    """A functools.partial compared by its function and arguments, so that
    the donating jit of equal calls is built once (``_donating``'s cache)."""

    def __init__(self, fn: functools.partial) -> None:
        super().__init__(fn, (fn.func, fn.args,
                              tuple(sorted((k, _key(v)) for k, v in fn.keywords.items()))))


def _key(v: Any) -> Any:
    return tuple(map(_key, v)) if isinstance(v, list) else v


class _UnderEngine(_Keyed):
    """``fn`` as the program of one JAXMG_ENGINE setting: equal only to the
    same function under the same setting. The engine is chosen when the
    program is traced (the C library's engine check), and JAX keeps traces
    by the function (its hash and equality), so a program traced under one
    setting must not serve a call made under another: lapack's program has
    no communicator for lapack-local, which the C library then picks."""

    def __init__(self, fn: Any, engine: str) -> None:
        super().__init__(fn, (fn, engine))


@functools.lru_cache(maxsize=64)
def _donating(fn: Any, nargs: int) -> Any:
    """``fn`` (positional array arguments only) jitted with its arrays donated."""
    return jax.jit(fn, donate_argnums=tuple(range(nargs)))


def run(fn: Callable[..., Any], arrays: tuple[Any, ...], donate: bool,
        worked: Callable[..., Any] | None = None) -> Any:
    """``fn(*arrays)``; with ``donate``, called eagerly, the arrays donated
    to XLA: ``worked(*arrays)``, which returns ``(work, result)`` (``work``
    the solver's work buffer in A's shape, or None where the op has none of
    A's shape), in a jit that donates the arrays, and ``result``. Without
    ``worked``, ``fn`` itself in that jit (an op whose result is the work
    buffer, potri's inverse). Every donated jax.Array is deleted after the
    call, whether XLA could reuse it or not (that some inputs, b, cannot be
    reused is no news to the caller)."""
    if not donate or any(_compat.is_tracer(x) for x in arrays):
        return fn(*arrays)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*donated buffers were not usable.*")
        program = _UnderEngine(worked or fn, os.environ.get("JAXMG_ENGINE", ""))
        out = _donating(program, len(arrays))(*arrays)
    jax.block_until_ready(out)
    if worked is not None:
        work, out = out
        # The work buffer, or several (sygvd's A and B): deleted all.
        for buf in jax.tree_util.tree_leaves(work):
            buf.delete()
    for x in arrays:
        if isinstance(x, jax.Array) and not x.is_deleted():
            x.delete()
    return out
