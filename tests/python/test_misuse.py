"""Misuse raises TypeError/ValueError naming the argument, before anything is
traced, compiled or run.

"Before tracing" is enforced: the ``no_trace`` fixture replaces ``jax.jit``
and ``jax.ffi.ffi_call`` with functions that fail the test, so a check that
happened only after jaxmg started building its program would surface as an
AssertionError instead of the expected error.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import jaxmg

N = 24
A = np.eye(N)
B = np.ones((N, 2))
OPS = ("potrs", "potri", "syevd")


@pytest.fixture
def no_trace(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("jaxmg started tracing before rejecting its arguments")

    monkeypatch.setattr(jax, "jit", fail)
    monkeypatch.setattr(jax.ffi, "ffi_call", fail)


@pytest.fixture
def no_ffi(monkeypatch):
    """For the shard_map forms, which run while the user's function traces."""
    def fail(*args, **kwargs):
        raise AssertionError("jaxmg built its FFI call before rejecting its arguments")

    monkeypatch.setattr(jax.ffi, "ffi_call", fail)


def call(op, a, mesh, T_A=3, in_specs=(P("x", None),), b=None, **kw):
    if op == "potrs":
        return jaxmg.potrs(a, B if b is None else b, T_A, mesh, in_specs, **kw)
    return getattr(jaxmg, op)(a, T_A, mesh, in_specs, **kw)


# --- a ------------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape,match", [
    ((N, N + 4), r"a must be square"),
    ((N,), r"a must be 2-D"),
    ((2, N, N), r"a must be 2-D"),
    ((0, 0), r"a must not be empty"),
], ids=["non-square", "1-D", "3-D", "empty"])
def test_bad_a_shape(mesh, no_trace, op, shape, match):
    with pytest.raises(ValueError, match=match):
        call(op, np.zeros(shape), mesh)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.bool_, np.int64])
def test_unsupported_dtype(mesh, no_trace, op, dtype):
    a = np.eye(N, dtype=dtype)
    with pytest.raises(TypeError, match=rf"a has dtype {np.dtype(dtype).name}"):
        call(op, a, mesh, b=np.ones((N, 1), dtype))


@pytest.mark.parametrize("op", OPS)
def test_a_not_an_array(mesh, no_trace, op):
    with pytest.raises(TypeError, match=r"a must be an array"):
        call(op, [[1.0, 0.0], [0.0, 1.0]], mesh)


# --- b (potrs) ----------------------------------------------------------------------


@pytest.mark.parametrize("b,exc,match", [
    (np.ones((N - 4, 1)), ValueError, r"b has 20 rows.*N=24"),
    (np.ones(N + 1), ValueError, r"b has 25 rows"),
    (np.ones((N, 1, 1)), ValueError, r"b must be \(N,\) or \(N, NRHS\)"),
    (np.ones(()), ValueError, r"b must be \(N,\) or \(N, NRHS\)"),
    (np.ones((N, 1), np.float32), TypeError, r"b has dtype float32 but a has dtype float64"),
    (np.ones((N, 1), np.complex128), TypeError, r"b has dtype complex128"),
    ([1.0] * N, TypeError, r"b must be an array"),
], ids=["rows", "rows-1d", "3-D", "0-D", "dtype", "complex-vs-real", "list"])
def test_potrs_bad_b(mesh, no_trace, b, exc, match):
    with pytest.raises(exc, match=match):
        jaxmg.potrs(A, b, 3, mesh, (P("x", None), P(None, None)))


# --- in_specs -------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("spec", [P(None, "x"), P(None, None), P("x", "x"), P(), P(None)],
                         ids=["cols", "replicated", "both", "empty", "none"])
def test_a_spec_not_row_sharded(mesh, no_trace, op, spec):
    with pytest.raises(ValueError, match=r"in_specs\[0\]"):
        call(op, A, mesh, in_specs=(spec,))


@pytest.mark.parametrize("op", OPS)
def test_a_spec_axis_not_in_mesh(mesh, no_trace, op):
    with pytest.raises(ValueError, match=r"in_specs\[0\] names axis 'y'"):
        call(op, A, mesh, in_specs=(P("y", None),))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("in_specs", [(), "x", [P("x", None), P(None, None), P()]],
                         ids=["empty", "string", "three"])
def test_in_specs_malformed(mesh, no_trace, op, in_specs):
    with pytest.raises((ValueError, TypeError), match=r"in_specs"):
        call(op, A, mesh, in_specs=in_specs)


@pytest.mark.parametrize("spec", [P("x", None), P(None, "x"), P("x")])
def test_potrs_b_spec_not_replicated(mesh, no_trace, spec):
    with pytest.raises(ValueError, match=r"in_specs\[1\]"):
        jaxmg.potrs(A, B, 3, mesh, (P("x", None), spec))


# --- T_A, pad, N ----------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("T_A,exc", [(0, ValueError), (-3, ValueError), (2.5, TypeError),
                                     ("4", TypeError), (True, TypeError)],
                         ids=["zero", "negative", "float", "str", "bool"])
def test_bad_T_A(mesh, no_trace, op, T_A, exc):
    with pytest.raises(exc, match=r"T_A"):
        call(op, A, mesh, T_A=T_A)


@pytest.mark.parametrize("op", OPS)
def test_T_A_numpy_integer_accepted(mesh, op):
    """np.int64 is an int for T_A (not misuse)."""
    call(op, A, mesh, T_A=np.int64(3))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [10, 6, 25])
def test_n_not_divisible_by_devices(mesh, no_trace, op, n):
    with pytest.raises(ValueError, match=rf"N={n} is not divisible by the 4 devices"):
        call(op, np.eye(n), mesh, b=np.ones((n, 1)))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("T_A", [5, 4])
def test_pad_false_needs_multiple_of_T_A(mesh, no_trace, op, T_A):
    # N = 24 over 4 devices: shards of 6 rows, not a multiple of 4 or 5.
    with pytest.raises(ValueError, match=rf"T_A={T_A}.*pad=True"):
        call(op, A, mesh, T_A=T_A, pad=False)


# --- mesh -----------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
def test_mesh_none_under_jit_without_a_layout(op):
    """Outside jit a missing mesh is inferred (test_inferred_layout.py); a
    traced array on no Explicit mesh does not say where it lives."""
    with pytest.raises(ValueError, match=r"mesh is required under jax.jit"):
        jax.jit(lambda a: call(op, a, None))(A)


@pytest.mark.parametrize("op", OPS)
def test_mesh_not_a_mesh(no_trace, op):
    with pytest.raises(TypeError, match=r"mesh must be a jax.sharding.Mesh"):
        call(op, A, "x")


# --- misuse inside a user's jit: still a clear error at trace time --------------------


def test_misuse_inside_jit(mesh):
    f = jax.jit(lambda a, b: jaxmg.potrs(a, b[:-4], 3, mesh, (P("x", None),)))
    with pytest.raises(ValueError, match=r"b has 20 rows"):
        f(jnp.eye(N), jnp.ones((N, 1)))


# --- the shard_map forms -----------------------------------------------------------------

CTX = {
    "potrs": lambda a, **kw: jaxmg.potrs_shardmap_ctx(a, jnp.ones((a.shape[1], 1), a.dtype), **kw),
    "potri": lambda a, **kw: jaxmg.potri_shardmap_ctx(a, **kw),
    "syevd": lambda a, **kw: jaxmg.syevd_shardmap_ctx(a, **kw),
}


def _in_shard_map(mesh, fn, spec=P("x", None), a=A):
    a = jax.device_put(a, NamedSharding(mesh, spec))  # shard_map wants it laid out so
    return jax.shard_map(fn, mesh=mesh, in_specs=(spec,), out_specs=P(), check_vma=False)(a)


# potrs_shardmap_ctx and syevd_shardmap_ctx at the global level are JAXMg 1.x's
# forms since issue 16 (NetKet calls them so): test_v1_api.py. potri has no
# 1.x form.
@pytest.mark.parametrize("op", ["potri"])
def test_ctx_outside_shard_map(no_trace, op):
    with pytest.raises(ValueError, match=rf"{op}_shardmap_ctx must be called inside jax.shard_map"):
        CTX[op](np.eye(8), T_A=2)


@pytest.mark.parametrize("op", OPS)
def test_ctx_axis_name_not_in_shard_map(mesh, no_ffi, op):
    with pytest.raises(ValueError, match=r"axis_name 'y' is not an axis of the shard_map"):
        _in_shard_map(mesh, lambda a: CTX[op](a, T_A=2, axis_name="y"))


@pytest.mark.parametrize("op", OPS)
def test_ctx_two_axes_need_axis_name(cpu_devices, no_ffi, op):
    mesh2 = jax.make_mesh((2, 2), ("S", "T"), devices=cpu_devices)
    with pytest.raises(ValueError, match=r"pass axis_name="):
        _in_shard_map(mesh2, lambda a: CTX[op](a, T_A=2), spec=P("T", None))


@pytest.mark.parametrize("op", OPS)
def test_ctx_a_not_a_row_shard(mesh, no_ffi, op):
    """The whole (replicated) matrix passed where this device's rows belong."""
    with pytest.raises(ValueError, match=r"a must be this device's \(N/4, N\) rows"):
        _in_shard_map(mesh, lambda a: CTX[op](a, T_A=2), spec=P(None, None))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("T_A,exc", [(0, ValueError), (1.5, TypeError)])
def test_ctx_bad_T_A(mesh, no_ffi, op, T_A, exc):
    with pytest.raises(exc, match=r"T_A"):
        _in_shard_map(mesh, lambda a: CTX[op](a, T_A=T_A))


@pytest.mark.parametrize("op", OPS)
def test_ctx_unsupported_dtype(mesh, no_ffi, op):
    with pytest.raises(TypeError, match=r"a has dtype int32"):
        _in_shard_map(mesh, lambda a: CTX[op](a, T_A=2), a=np.eye(N, dtype=np.int32))


def test_ctx_potrs_bad_b(mesh, no_ffi):
    with pytest.raises(TypeError, match=r"b has dtype float32"):
        _in_shard_map(mesh, lambda a: jaxmg.potrs_shardmap_ctx(
            a, jnp.ones((N, 1), jnp.float32), T_A=2))
    with pytest.raises(ValueError, match=r"b has 12 rows"):
        _in_shard_map(mesh, lambda a: jaxmg.potrs_shardmap_ctx(a, jnp.ones((12, 1)), T_A=2))


@pytest.mark.parametrize("op", OPS)
def test_ctx_pad_false(mesh, no_ffi, op):
    with pytest.raises(ValueError, match=r"T_A=4.*pad=True"):
        _in_shard_map(mesh, lambda a: CTX[op](a, T_A=4, pad=False))


def test_ctx_syevd_padded_eigenvectors(mesh, no_ffi):
    """Documented: inside shard_map, eigenvectors need a T_A dividing the shard size."""
    with pytest.raises(ValueError, match=r"not a multiple of T_A=4"):
        _in_shard_map(mesh, lambda a: jaxmg.syevd_shardmap_ctx(a, T_A=4))
