"""Where an op's arrays are and how its results come back: inputs moved
onto the mesh where the program cannot do it (``onto``), the steps every
plain form takes before its program (``prepare``: layout, checks,
geometry, placement), an op's local core mapped over a mesh with its
inputs laid out (``mapped``), and its results typed for the caller's
program and, on CPU devices, waited for (``hand_back``).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh

from jaxmg._src import _checks, _compat, _mode, _native
from jaxmg._src._compat import is_tracer as _compat_is_tracer
from jaxmg._src._compat import place, shard_map_unchecked
from jaxmg._src._geometry import Geometry, choose_geometry


def onto(x: Any, mesh: Mesh, spec: Any) -> Any:
    """x moved onto mesh as spec says where the op's program cannot do it
    or its cotangent would come back laid out otherwise than x; else x as
    it is (host arrays, arrays on mesh's devices, values traced under
    ``jax.jit``: the program lays them out).

    - A concrete array committed to other devices than mesh's is moved (jit
      refuses arguments on other devices).
    - Under autodiff run eagerly (``jax.grad`` or ``jax.vjp`` outside
      ``jax.jit``), x is a tracer whose value is known: it is put on mesh
      here, naming its value's own placement as the source, so that JAX
      moves its cotangent back there. Left to the program, the cotangent
      would come back as XLA lays it out (A's rows sharded, for A), typed
      so on a mesh of Explicit axes, and the cotangent of an unsharded A's
      other uses (``(A + A^H) / 2``) could not be added to it (issue 29).
      Under ``jax.jit`` the program's own placement (``_compat.place``)
      types the cotangent like x."""
    if _compat_is_tracer(x):
        value = _compat.concrete_value(x)
        if value is None:
            return x
        src = getattr(value, "sharding", None)
        if not isinstance(src, jax.sharding.Sharding):  # a host array: one device
            local = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
            src = jax.sharding.SingleDeviceSharding(local[0] if local else jax.devices()[0])
        return jax.device_put(x, jax.sharding.NamedSharding(mesh, spec), src=src)
    sharding = getattr(x, "sharding", None)
    if sharding is None:
        return x
    if set(sharding.device_set) == set(mesh.devices.flat):
        return x
    return jax.device_put(x, jax.sharding.NamedSharding(mesh, spec))


class Prepared(NamedTuple):
    """What ``prepare`` returns: A on the mesh, the mesh, A's row sharding
    (_checks.RowSharding) and the call's geometry."""

    a: Any
    mesh: Mesh
    rows: Any
    g: Geometry


def prepare(op: str, a: Any, n: int, T_A: Any, mesh: Any, in_specs: Any,
            n_specs: int, pad: bool, precision: str = "exact") -> Prepared:
    """The steps every op takes before its program runs, in order: mesh and
    in_specs (inferred when left out), their checks, N against the device
    count, T_A (chosen when left out) and the engine (for a solve's
    ``precision``), A moved onto the mesh, the padding geometry, the native
    library loaded."""
    mesh, in_specs = _checks.resolve_layout(op, a, mesh, in_specs)
    rows = _checks.check_specs(op, mesh, in_specs, n_specs)
    _checks.check_divisible(op, n, rows.nparts)
    platform = _native.platform_of(np.asarray(mesh.devices).flat[0].platform)
    nodes = _mode.call_nodes(mesh, rows.axes, rows.others)
    g = choose_geometry(op, n, rows.nparts, np.dtype(a.dtype), T_A, pad, platform, nodes,
                        precision)
    return Prepared(onto(a, mesh, rows.spec), mesh, rows, g)


def hand_back(outputs: Any, mesh: Mesh) -> Any:
    """An op's results as its plain and global-level forms return them:
    typed for the program around the call (``eagerly_typed``), then, on
    CPU devices, waited for (``settle_on_cpu``)."""
    return settle_on_cpu(eagerly_typed(outputs, mesh), mesh)


def eagerly_typed(outputs: Any, mesh: Mesh) -> Any:
    """``outputs`` typed on no mesh where an autodiff transformation runs them
    eagerly outside any context mesh (``jax.grad``, ``jax.jvp``, ``jax.vjp``
    outside ``jax.jit`` and ``jax.set_mesh``) on a mesh with Explicit axes;
    elsewhere as they are. No data moves: the same devices and layout, only
    the type changes (``_compat.typed_on_no_mesh``).

    Why (issue 36). The program runs over ``mesh``, so its results are typed
    by the mesh's axis types: on Explicit axes, every value the caller
    computes from them, the loss included, is typed on that mesh. JAX's
    reverse mode makes the loss's cotangent (1) by a reshard to the loss's
    type, which eagerly needs the concrete mesh that only ``jax.set_mesh``
    provides: ``jax.grad`` failed ("Length of device assignment 1 is not
    equal to the size of the mesh"), where ``jnp.linalg`` on the same NumPy
    inputs, whose results are typed on no mesh, differentiates. Typed on no
    mesh, jaxmg's results combine as ``jnp.linalg``'s do, with values typed
    on no mesh and with values the caller lays out on the Explicit mesh
    (``jax.sharding.reshard``); the transpose of the same ``device_put``
    types their cotangents on the mesh again for the program's own rules.
    Under ``jax.jit`` and inside ``jax.set_mesh`` (or ``use_abstract_mesh``)
    the cotangent is made against the context, and results stay typed as
    the mesh says."""
    leaves = jax.tree_util.tree_leaves(outputs)
    eager_ad = any(_compat_is_tracer(x) and _compat.concrete_value(x) is not None
                   for x in leaves)
    if not eager_ad or not _compat.is_explicit(mesh) or _compat.context_mesh_set():
        return outputs
    return jax.tree_util.tree_map(lambda x: _compat.typed_on_no_mesh(x, mesh), outputs)


def settle_on_cpu(outputs: Any, mesh: Mesh) -> Any:
    """Waits for an eager call's results on CPU devices.

    XLA:CPU runs each device's part of a multi-device program on a pool thread
    and holds that thread until the part completes. With many programs in
    flight, parts of different programs can fill the pool while each waits for
    its own missing parts (a jaxmg call needs all of them), and nothing moves
    again: seen after about 50 asynchronously dispatched calls on a 2-core
    machine. Waiting here keeps one eager jaxmg call in flight. Under tracing
    there is nothing to wait for."""
    leaves = jax.tree_util.tree_leaves(outputs)
    if any(_compat_is_tracer(x) for x in leaves):
        return outputs
    if next(iter(mesh.devices.flat)).platform == "cpu":
        jax.block_until_ready(outputs)
    return outputs


def mapped(
    local_fn: Callable[..., Any],
    mesh: Mesh,
    in_specs: tuple[Any, ...],
    out_specs: Any,
) -> Callable[..., Any]:
    """``local_fn`` (an op's local core: this device's rows in, this
    device's part of the results out, derivative rules included) mapped
    over ``mesh``, its inputs laid out as ``in_specs`` say first.

    Why the derivatives live inside the shard_map. Differentiated there,
    every value is one device's part and JAX's own rules for shard_map
    type the cotangents at its boundary from in_specs and out_specs, for
    Auto and Explicit axes alike. Derivative arithmetic on the whole
    arrays outside it would be typed by the mesh's axis types instead:
    under Explicit axes every intermediate carries a sharding that each
    cotangent must match, which products of row- and column-sharded
    matrices do not (issue 15)."""
    mapped_fn = shard_map_unchecked(local_fn, mesh=mesh, in_specs=in_specs,
                                    out_specs=out_specs)

    def run(*args: jax.Array) -> Any:
        return mapped_fn(*(place(x, mesh, spec) for x, spec in zip(args, in_specs)))

    return run
