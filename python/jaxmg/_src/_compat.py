"""Every use of a JAX API that moved between versions, in one place.

Tested with jax 0.10.2 and 0.8.2 (CPU, PyPI; 0.8.2 is the oldest jaxmg supports) and
0.11.2 (CUDA 13).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np

try:  # jax >= 0.6
    _shard_map = jax.shard_map
    _NOCHECK = {"check_vma": False}
except AttributeError:  # pragma: no cover - older jax
    from jax.experimental.shard_map import shard_map as _shard_map

    _NOCHECK = {"check_rep": False}


def shard_map_unchecked(
    f: Callable[..., Any], mesh: Any, in_specs: Any, out_specs: Any
) -> Callable[..., Any]:
    """``jax.shard_map`` without replication checks (FFI calls cannot be checked)."""
    return _shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **_NOCHECK)


def current_manual_axes() -> dict[str, int]:
    """Inside ``shard_map``: the mesh axes being mapped over and their sizes."""
    get = getattr(jax.sharding, "get_abstract_mesh", None)
    if get is None:  # pragma: no cover - older jax
        from jax._src import mesh as mesh_lib

        get = mesh_lib.get_abstract_mesh
    mesh = get()
    if mesh is None or not getattr(mesh, "axis_names", ()):
        return {}
    manual = getattr(mesh, "manual_axes", None)
    names = [n for n in mesh.axis_names if manual is None or n in manual]
    return {n: int(mesh.shape[n]) for n in names}


def vma_checked() -> bool:
    """Whether the shard_map being traced types values by the mesh axes they
    vary over (``check_vma=True``, shard_map's default). False outside
    shard_map and under ``check_vma=False``."""
    try:
        from jax._src import config
    except ImportError:  # pragma: no cover - layout of older jax
        return False
    state = getattr(config, "_check_vma", None)
    return bool(state.value) if state is not None else False


def varying_axes(x: Any) -> frozenset[str]:
    """The mesh axes x's value may differ over inside shard_map (its "vma"),
    as JAX types it; empty when vma is not checked."""
    if not vma_checked():
        return frozenset()
    aval = jax.typeof(x)
    mat = getattr(aval, "mat", None)  # jax >= 0.10: a ManualAxisType
    if mat is not None and hasattr(mat, "varying"):
        return frozenset(mat.varying)
    return frozenset(getattr(aval, "vma", ()))


def pvary(x: Any, axes: Any) -> Any:
    """x typed as varying over ``axes`` too (no data moves); a no-op for the
    axes it already varies over and when vma is not checked."""
    missing = tuple(sorted(set(axes) - varying_axes(x))) if vma_checked() else ()
    if not missing:
        return x
    pcast = getattr(jax.lax, "pcast", None)
    if pcast is not None:
        return pcast(x, missing, to="varying")
    return jax.lax.pvary(x, missing)  # pragma: no cover - jax < 0.8.2


def typed_result(shape: Any, dtype: Any, varying: frozenset[str]) -> Any:
    """A ShapeDtypeStruct for an FFI result that varies over ``varying``
    (the FFI cannot tell JAX which of its results are the same on every
    device)."""
    # The type names the shard_map's (abstract, manual) mesh.
    get_mesh = getattr(jax.sharding, "get_abstract_mesh", None)
    sharding = (jax.sharding.NamedSharding(get_mesh(), jax.sharding.PartitionSpec())
                if get_mesh is not None else None)
    mat_type = getattr(jax.sharding, "ManualAxisType", None)
    if mat_type is not None:  # jax >= 0.10
        return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding,
                                    manual_axis_type=mat_type(varying=frozenset(varying)))
    return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding,  # pragma: no cover
                                vma=frozenset(varying))


def zero_tangent(x: Any) -> Any:
    """The tangent of an integer output (a status) in a custom_jvp rule: a
    float0 zero, typed under vma typing as varying where x does (JAX
    compares the two types)."""
    zero = np.zeros(np.shape(x), jax.dtypes.float0)
    return pvary(zero, varying_axes(x))


def _is_explicit(mesh: Any) -> bool:
    types = getattr(mesh, "axis_types", None) or ()
    explicit = getattr(getattr(jax.sharding, "AxisType", None), "Explicit", None)
    return explicit is not None and any(t == explicit for t in types)


def is_explicit(mesh: Any) -> bool:
    """Whether any of mesh's axes is Explicit (types carry its sharding)."""
    return _is_explicit(mesh)


def typed_on_no_mesh(x: Any, mesh: Any) -> Any:
    """x, laid out on mesh's devices as its type says, retyped on no mesh (as
    an array computed from NumPy inputs is): ``jax.device_put`` to the same
    layout as an XLA sharding (GSPMDSharding) rather than a NamedSharding.
    No data moves. Where this jax has no GSPMDSharding, the layout on mesh's
    axes as Auto (typed on that mesh, without its sharding)."""
    spec = getattr(jax.typeof(x).sharding, "spec", None)
    named = jax.sharding.NamedSharding(mesh, spec if spec is not None
                                       else jax.sharding.PartitionSpec())
    try:
        from jax._src.sharding_impls import GSPMDSharding

        target: Any = GSPMDSharding(tuple(mesh.devices.flat),
                                    named._to_xla_hlo_sharding(np.ndim(x)))
    except (ImportError, AttributeError):  # pragma: no cover - layout of other jax
        auto = getattr(jax.sharding.AxisType, "Auto")
        target = jax.sharding.NamedSharding(
            mesh.update(axis_types=(auto,) * len(mesh.axis_names)), named.spec)
    return jax.device_put(x, target)


def context_mesh_set() -> bool:
    """Whether a context mesh is set (``jax.set_mesh``, or an abstract one
    by ``jax.sharding.use_abstract_mesh``)."""
    if concrete_context_mesh() is not None:
        return True
    get = getattr(jax.sharding, "get_abstract_mesh", None)
    mesh = get() if get is not None else None
    return bool(mesh is not None and getattr(mesh, "axis_names", ()))


def place(x: Any, mesh: Any, spec: Any) -> Any:
    """Inside jit: lays ``x`` out as ``spec`` on ``mesh`` before shard_map.

    Meshes whose axes are Explicit (``jax.make_mesh``'s default in recent jax)
    type arrays by their sharding, and shard_map refuses a mismatch: those are
    resharded; Auto meshes take a sharding constraint.
    """
    sharding = jax.sharding.NamedSharding(mesh, spec)
    if _is_explicit(mesh) and hasattr(jax.sharding, "reshard"):
        return jax.sharding.reshard(x, sharding)
    return jax.lax.with_sharding_constraint(x, sharding)


def sharding_of(x: Any) -> Any:
    """x's NamedSharding if it is a concrete array placed on a mesh, else None
    (under jit, arrays carry no concrete mesh)."""
    sharding = getattr(x, "sharding", None)
    if isinstance(sharding, jax.sharding.NamedSharding) and isinstance(
            sharding.mesh, jax.sharding.Mesh):
        return sharding
    return None


def is_tracer(x: Any) -> bool:
    """Whether x is a traced value (under jit, grad, vmap...)."""
    return isinstance(x, jax.core.Tracer)


def concrete_value(x: Any) -> Any:
    """x's value where it is known while tracing: x itself when it is not
    traced; a tracer's value under a transformation run eagerly (``jax.grad``,
    ``jax.jvp``, ``jax.vjp`` outside ``jax.jit``: the primal's); None
    under ``jax.jit`` and wherever JAX does not know it."""
    if not is_tracer(x):
        return x
    known = getattr(x, "to_concrete_value", None)  # a private method of Tracer
    return known() if known is not None else None


def distributed_client() -> Any:
    """The ``jax.distributed`` client of this process, or None when
    ``jax.distributed.initialize`` was not called."""
    from jax._src import distributed

    return getattr(distributed.global_state, "client", None)


def coordinator_address() -> str:
    """The coordinator address every process of the job was started with."""
    from jax._src import distributed

    return str(getattr(distributed.global_state, "coordinator_address", "") or "")


def kv_set(key: str, value: str) -> None:
    """Stores ``value`` under ``key`` in the job's key-value store."""
    distributed_client().key_value_set(key, value)


def kv_get(key: str, timeout_s: float) -> str:
    """The value under ``key`` in the job's key-value store, waiting up to
    ``timeout_s`` for another process to store it."""
    return distributed_client().blocking_key_value_get(key, int(timeout_s * 1000))


def concrete_context_mesh() -> Any:
    """The concrete mesh set by ``jax.sharding.set_mesh`` (also under
    jax.jit, where jax.sharding.get_mesh refuses to answer), or None."""
    try:
        from jax._src import mesh as mesh_lib

        mesh = mesh_lib.get_concrete_mesh()
    except (ImportError, AttributeError):  # pragma: no cover - older jax
        return None
    return None if mesh is None or getattr(mesh, "empty", True) else mesh
