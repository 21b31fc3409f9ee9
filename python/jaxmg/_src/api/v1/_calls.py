"""The call-form machinery of JAXMg 1.x's forms (see jaxmg._src.api.v1):
arguments read (``matrix_specs``, a 2D grid's spec, flags), the plain
forms' donation, the two readings of a ``*_shardmap_ctx`` call (inside a
shard_map body: the seeds'; at the global level: 1.x's), and the mesh and
A's layout of a global-level call. Every op's module uses these; none of
them knows an op."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import jax
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _ffi_call, _geometry, _manual, _mode, _native, _placement
from jaxmg._src.api import _donate
from jaxmg._src._compat import current_manual_axes

# "Not given": tells a keyword left out from one given its default value.
_UNSET: Any = object()


# --- arguments ----------------------------------------------------------------------------


def _specs(op: str, in_specs: Any, matrix_specs: Any) -> Any:
    """in_specs and its 1.x name matrix_specs (one of them), A's spec
    normalized: ``P(r, c)`` over two different mesh axes (a 2D process grid,
    as NetKet's ``process_grid`` makes) is read as A's rows over both axes,
    ``P((r, c), None)``, the layout the engines take: the op's program
    reshards A to it."""
    if in_specs is not None and matrix_specs is not None:
        raise TypeError(f"jaxmg.{op}: pass in_specs or matrix_specs (its JAXMg 1.x name), "
                        "not both")
    specs = matrix_specs if matrix_specs is not None else in_specs
    if specs is None:
        return None
    single = isinstance(specs, P)
    seq = (specs,) if single else specs
    if isinstance(seq, (tuple, list)) and seq and isinstance(seq[0], P):
        first = _two_axes_as_rows(seq[0])
        if first is not seq[0]:
            seq = (first,) + tuple(seq[1:])
            return first if single else seq
    return specs


def _two_axes_as_rows(spec: P) -> P:
    """``P(r, c)`` with both entries naming different mesh axes -> ``P((r, c), None)``;
    any other spec as it is (the checks judge it)."""
    entries = tuple(spec)
    if len(entries) != 2 or entries[0] is None or entries[1] is None:
        return spec

    def names(e: Any) -> tuple[Any, ...]:
        return tuple(e) if isinstance(e, (tuple, list)) else (e,)

    rows, cols = names(entries[0]), names(entries[1])
    if set(rows) & set(cols) or len(set(rows)) != len(rows) or len(set(cols)) != len(cols):
        return spec
    return P(rows + cols, None)


def _check_flag(op: str, name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"jaxmg.{op}: {name} must be a bool, got {value!r}")
    return bool(value)




def _check_tall(op: str, m: int, n: int, hint: str = "") -> None:
    """An M x N A of an op that takes M >= N (qr, least_squares, polar): a
    wide one refused, naming the op; ``hint`` says what to do instead."""
    if m < n:
        raise ValueError(
            f"jaxmg.{op}: a is {m} x {n}, wider than tall; {op} needs M >= N (a tall or "
            f"square A){hint}")


def _resolved(op: str, a: Any, mesh: Any, specs: Any) -> tuple[Mesh, Any]:
    """mesh and specs, inferred where left out, so that a donating jit can
    take them as constants (a traced A names no mesh)."""
    if _compat.is_tracer(a):
        return mesh, specs
    return _checks.resolve_layout(op, a, mesh, specs)


def _plain(op: str, seeds_fn: Any, arrays: tuple[Any, ...], T_A: Any, mesh: Any,
           specs: Any, donate: Any, worked: Any = None, **options: Any) -> Any:
    """A plain form: the seeds' function on ``arrays`` (A first), or, with
    ``donate``, ``worked`` (the same, with the solver's work buffer in
    front) in a jit that donates them (_donate.run)."""
    donate = _check_flag(op, "donate", donate)
    if not donate:
        return seeds_fn(*arrays, T_A=T_A, mesh=mesh, in_specs=specs, **options)
    _checks.check_matrix(op, arrays[0])
    mesh, specs = _resolved(op, arrays[0], mesh, specs)

    def bound(fn: Any) -> Any:
        return fn and _donate.Hashable(
            functools.partial(fn, T_A=T_A, mesh=mesh, in_specs=specs, **options))

    return _donate.run(bound(seeds_fn), arrays, True, bound(worked))


# --- the ctx forms: which generation ------------------------------------------------------


def _inside_shard_map(op: str, positional: tuple[Any, ...], *, pad: Any, axis_name: Any,
                      mesh: Any, matrix_specs: Any, in_specs: Any,
                      extra: dict[str, Any]) -> tuple[bool, Any, Any]:
    """The seeds' reading of a ctx call inside a shard_map body: (pad,
    axis_name), refusing what only 1.x's global form takes."""
    given = [k for k, v in (("mesh", mesh), ("matrix_specs", matrix_specs),
                            ("in_specs", in_specs)) if v is not None]
    given += [k for k, v in extra.items() if v]
    if given:
        raise ValueError(
            f"jaxmg.{op} is called inside a shard_map body, where it takes this device's "
            f"rows of A (the seeds' form: {op}(a, ..., T_A, pad, axis_name)); "
            f"{', '.join(given)} belong to JAXMg 1.x's form, which takes the whole "
            "matrix and is called at the global level (eagerly or under jax.jit, outside "
            "shard_map)")

    def a_bool(pad: Any) -> None:
        if not isinstance(pad, (bool, np.bool_)):
            raise TypeError(
                f"jaxmg.{op}: inside a shard_map body the argument after T_A is pad (a "
                f"bool; the seeds' form), got {pad!r}; JAXMg 1.x's form, whose "
                "argument there is the mesh, is called at the global level")

    pad, axis_name = _after_T_A(op, positional, "pad", pad, _UNSET, a_bool,
                                "axis_name", axis_name, _UNSET)
    pad = True if pad is _UNSET else _check_flag(op, "pad", pad)
    return pad, (None if axis_name is _UNSET else axis_name), None


def _at_global_level(op: str, positional: tuple[Any, ...], *, pad: Any, axis_name: Any,
                     mesh: Any, matrix_specs: Any, in_specs: Any) -> tuple[bool, Any, Any]:
    """1.x's reading of a ctx call at the global level: (pad, mesh, specs),
    refusing the seeds' shard_map-only arguments."""
    if axis_name is not _UNSET:
        raise ValueError(
            f"jaxmg.{op}: axis_name is the seeds' form's, for calls inside a shard_map "
            "body; this call is at the global level (no shard_map), where jaxmg takes the "
            "whole matrix and reads its sharding from it or from the context mesh "
            "(JAXMg 1.x's form)")

    def not_a_bool(mesh: Any) -> None:
        if isinstance(mesh, (bool, np.bool_)):
            raise TypeError(
                f"jaxmg.{op}: at the global level (outside shard_map) the argument after "
                f"T_A is the mesh (JAXMg 1.x's form), got {mesh!r}; pad= is a keyword "
                "there. The seeds' form, whose argument there is pad, is called inside "
                "a shard_map body on this device's rows")

    mesh, matrix_specs = _after_T_A(op, positional, "mesh", mesh, None, not_a_bool,
                                    "matrix_specs", matrix_specs, None)
    if mesh is not None:
        _checks.check_mesh(op, mesh)
    specs = _specs(op, in_specs, matrix_specs)
    pad = True if pad is _UNSET else _check_flag(op, "pad", pad)
    return pad, mesh, specs


def _after_T_A(op: str, positional: tuple[Any, ...], first: str, first_value: Any,
               first_unset: Any, check_first: Callable[[Any], None], second: str,
               second_value: Any, second_unset: Any) -> tuple[Any, Any]:
    """The two arguments a ctx form may take positionally after T_A (its
    ``*positional``), ``first`` and ``second`` by name: each taken from
    ``positional`` where it is there (``check_first`` judging the first),
    else its keyword's value; refusing more than two, and one given both
    ways (its keyword's value not its ``*_unset``)."""
    if len(positional) > 2:
        raise TypeError(f"jaxmg.{op}: too many positional arguments")
    if positional:
        if first_value is not first_unset:
            raise TypeError(f"jaxmg.{op}: {first} given twice")
        first_value = positional[0]
        check_first(first_value)
    if len(positional) > 1:
        if second_value is not second_unset:
            raise TypeError(f"jaxmg.{op}: {second} given twice")
        second_value = positional[1]
    return first_value, second_value


# --- the ctx forms at the global level: the mesh and A's layout ---------------------------


def _context_mesh(op: str) -> Mesh:
    """The concrete mesh of the context (jax.sharding.set_mesh, or
    use_abstract_mesh over a mesh of the process's devices): the
    abstract mesh's names, sizes and axis types over concrete devices.

    Devices: the concrete context mesh's (set_mesh sets one) when it has the
    abstract mesh's shape; else, with as many devices, its devices in order
    laid out in the abstract mesh's shape (a mesh that jax.make_mesh built
    on the same devices, as NetKet does for its process grids); else all
    devices, in order, when the abstract mesh has as many."""
    abstract = jax.sharding.get_abstract_mesh()
    if abstract is None or abstract.empty:
        raise ValueError(
            f"jaxmg.{op}: a traced A names no mesh: pass mesh= and matrix_specs=, or set "
            "a context mesh (jax.sharding.set_mesh)")
    names = tuple(abstract.axis_names)
    sizes = tuple(int(abstract.shape[n]) for n in names)
    types = tuple(abstract.axis_types)
    concrete = _compat.concrete_context_mesh()
    if concrete is not None:
        if tuple(concrete.axis_names) == names and tuple(
                int(concrete.shape[n]) for n in names) == sizes:
            return concrete
        devices = np.asarray(concrete.devices).reshape(-1)
    else:
        devices = np.asarray(jax.devices())
    if devices.size != int(np.prod(sizes)):
        raise ValueError(
            f"jaxmg.{op}: the context mesh {dict(zip(names, sizes))} has "
            f"{int(np.prod(sizes))} devices, but no concrete mesh of as many devices is "
            "known; pass mesh=")
    return Mesh(devices.reshape(sizes), names, axis_types=types)


def _global_layout(op: str, a: Any, mesh: Any, specs: Any) -> tuple[Mesh, Any]:
    """The mesh and specs of a global-level ctx call: given, else read from a
    concrete ``a``'s sharding, else from a traced ``a``'s type (Explicit
    axes) over the context mesh, else A's rows over all the mesh's axes."""
    if not _compat.is_tracer(a):
        return _checks.resolve_layout(op, a, mesh, specs)
    if mesh is None:
        mesh = _context_mesh(op)
    if specs is None:
        sharding = getattr(jax.typeof(a), "sharding", None)
        spec = getattr(sharding, "spec", None)
        entries = tuple(spec) if spec is not None else ()
        if entries and entries[0] is not None:
            first = _two_axes_as_rows(P(*entries))
            specs = (P(entries[0], None) if len(entries) < 2 or entries[1] is None
                     else first,)
        else:
            axes = tuple(mesh.axis_names)
            specs = (P(axes[0] if len(axes) == 1 else axes, None),)
    return mesh, specs


def _prepare_global(op: str, a: Any, T_A: Any, mesh: Any, specs: Any, n_specs: int,
                    pad: bool) -> tuple[Any, Mesh, Any, Any]:
    n, _ = _checks.check_matrix(op, a)
    mesh, specs = _global_layout(op, a, mesh, specs)
    return _placement.prepare(op, a, n, T_A, mesh, specs, n_specs, pad)


# The solves' cores by op: each has local_work, (work rows, x, status).


# --- a ctx form on an M x N A inside a shard_map body ---------------------------------------


def _local_shard(op: str, a: Any, positional: tuple[Any, ...], *, pad: Any, axis_name: Any,
                 mesh: Any, matrix_specs: Any, in_specs: Any,
                 check_rows: Callable[[int, int, int], None]) -> tuple[Any, ...]:
    """A ctx form on an M x N A (gesvd's, polar's, qr's, least_squares')
    inside a shard_map body:
    the seeds' reading of its arguments, this device's rows a of A, every
    output's rows against the group (``check_rows(M, N, nparts)``). Returns
    (rows, M, N, dtype, pad, platform, nodes)."""
    pad, axis_name, _ = _inside_shard_map(
        op, positional, pad=pad, axis_name=axis_name, mesh=mesh,
        matrix_specs=matrix_specs, in_specs=in_specs, extra={})
    rows, n, dtype = _checks.check_local_shard(op, a, current_manual_axes(), axis_name,
                                               square=False)
    m = int(a.shape[0]) * rows.nparts
    check_rows(m, n, rows.nparts)
    platform = _native.platform_of(jax.default_backend())
    return rows, m, n, dtype, pad, platform, _mode.ambient_nodes(rows.nparts)


def _local_call(op: str, rows: Any, a: Any, T_A: Any, pad: bool,
                g: _geometry.Geometry) -> _manual.Call:
    """The Call of one FFI program of geometry ``g`` inside a shard_map body
    (``a`` this device's rows of the op's input)."""
    call = _manual.make_call(op, rows, g.n, a, T_A, pad, geometry=g)
    # A rectangular shard does not tell the group's size (_ffi_call.ffi_call).
    call = dataclasses.replace(call, job=_mode.ambient_job_id(op, rows.nparts))
    _native.load()
    return call
