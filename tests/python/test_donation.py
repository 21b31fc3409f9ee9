"""A donated A is worked on in place (issue 25): the program a donating call
runs hands A's own buffer to the solver, with no A-sized copy, for every op.

What is checked is the very program the call runs, as XLA compiled it: A's
shard aliased to an output (``compiled.memory_analysis()``, per device), and
the solver's custom call taking the program's parameter itself as its
operand, not a copy of it (the compiled HLO). Where XLA must keep A, it
copies the parameter for the in-place solver: the control case below shows
that both checks see it. The answers are checked against NumPy, and the
donated arrays are gone afterwards. Without donation A is kept, bit for bit
(test_composition.py).
"""

import functools
import re
import warnings

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import jaxmg
import jaxmg_testing as jt
from jaxmg._src.api.v1 import gesvd_forms as v1_gesvd, solve_forms as v1_solve
from jaxmg._src.api.v1 import least_squares_forms as v1_ls, qr_forms as v1_qr
from jaxmg._src.api.v1 import syevd_forms as v1_syevd

N = 64  # 16 rows a device: no padding with T_A left out
SPEC = P("x", None)


def _compiled(fn, *args, donated=None):
    """jit(fn) compiled for args, the arrays ``donated`` (all by default)."""
    donated = tuple(range(len(args))) if donated is None else donated
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*donated buffers were not usable.*")
        return jax.jit(fn, donate_argnums=donated).lower(*args).compile()


def _shard_bytes(dtype) -> int:
    return N * N // 4 * np.dtype(dtype).itemsize


def _solver_takes_parameter(compiled) -> bool:
    """Whether every jaxmg custom call's first operand (A) is a parameter of
    the program as it is, not a copy or any other value."""
    lines = compiled.as_text().splitlines()
    calls = [ln for ln in lines if 'custom_call_target="jaxmg_' in ln]
    assert calls, "no jaxmg call in the program"
    for call in calls:
        operand = re.search(r"custom-call\((%[\w.\-]+)", call).group(1)
        producer = [ln for ln in lines if ln.strip().startswith(operand + " =")]
        if len(producer) != 1 or " parameter(" not in producer[0]:
            return False
    return True


def _assert_in_place(compiled, dtype) -> None:
    mem = compiled.memory_analysis()
    assert mem.alias_size_in_bytes >= _shard_bytes(dtype), mem
    assert _solver_takes_parameter(compiled), compiled.as_text()


def _worked_forms(mesh):
    """(name, the function a donating eager call jits, its number of arrays)."""
    kw = dict(T_A=None, mesh=mesh, in_specs=(SPEC,))
    return [
        ("potrs", functools.partial(v1_solve._solve_worked, "potrs", False, **kw), 2),
        ("potrs_logdet", functools.partial(v1_solve._solve_worked, "potrs", True,
                                           return_status=True, **kw), 2),
        ("lu_solve", functools.partial(v1_solve._solve_worked, "lu_solve", False, **kw), 2),
        ("syevd", functools.partial(v1_syevd._syevd_worked, **kw), 1),
        ("syevd_values", functools.partial(v1_syevd._syevd_worked, return_eigenvectors=False,
                                           **kw), 1),
        ("potri", functools.partial(jaxmg.potri, **kw), 1),
        ("gesvd", functools.partial(v1_gesvd._gesvd_plain, T_A=None, mesh=mesh, specs=(SPEC,),
                                    full=False, want_u=True, want_vh=True,
                                    want_status=False, work=True), 1),
        ("qr", functools.partial(v1_qr._qr_plain, T_A=None, mesh=mesh, specs=(SPEC,),
                                 want_status=False), 1),
        ("least_squares", functools.partial(v1_ls._ls_plain, T_A=None, mesh=mesh,
                                            specs=(SPEC,), want_status=False, work=True), 2),
    ]


@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
@pytest.mark.parametrize("form", range(9),
                         ids=["potrs", "potrs_logdet", "lu_solve", "syevd", "syevd_values",
                              "potri", "gesvd", "qr", "least_squares"])
def test_donating_call_runs_in_place(mesh, rng, dtype, form):
    name, fn, nargs = _worked_forms(mesh)[form]
    a = jt.shard_rows(jt.make_hpd(rng, N, dtype), mesh)
    b = jt.replicate(jt.make_rhs(rng, N, 2, dtype), mesh)
    _assert_in_place(_compiled(fn, *(a, b)[:nargs]), dtype)


def test_control_a_program_returning_only_x_copies_a(mesh, rng):
    """The measure sees a copy where there is one: under the caller's jit,
    potrs returning only x leaves XLA nothing to give the donated A to."""
    a = jt.shard_rows(jt.make_hpd(rng, N, np.float64), mesh)
    b = jt.replicate(jt.make_rhs(rng, N, 2, np.float64), mesh)
    compiled = _compiled(lambda a, b: jaxmg.potrs(a, b, None, mesh, (SPEC,)), a, b)
    assert compiled.memory_analysis().temp_size_in_bytes >= _shard_bytes(np.float64)
    assert not _solver_takes_parameter(compiled)


@pytest.mark.parametrize("op", ["potrs", "lu_solve", "syevd", "gesvd", "qr",
                                "least_squares"])
def test_ctx_forms_under_a_donating_jit_run_in_place(mesh, rng, op):
    """JAXMg 1.x's way: a_work returned from the caller's jit, A donated."""
    dtype = np.float64
    a = jt.shard_rows(jt.make_hpd(rng, N, dtype), mesh)
    b = jt.replicate(jt.make_rhs(rng, N, 2, dtype), mesh)
    fn = {
        "potrs": lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, mesh=mesh, matrix_specs=SPEC),
        "lu_solve": lambda a, b: jaxmg.lu_solve_shardmap_ctx(a, b, mesh=mesh,
                                                             matrix_specs=SPEC),
        "syevd": lambda a, b: jaxmg.syevd_shardmap_ctx(a, mesh=mesh, matrix_specs=SPEC,
                                                       return_eigenvectors=False),
        "gesvd": lambda a, b: jaxmg.gesvd_shardmap_ctx(a, mesh=mesh, matrix_specs=SPEC),
        "qr": lambda a, b: jaxmg.qr_shardmap_ctx(a, mesh=mesh, matrix_specs=SPEC),
        "least_squares": lambda a, b: jaxmg.least_squares_shardmap_ctx(
            a, b, mesh=mesh, matrix_specs=SPEC),
    }[op]
    _assert_in_place(_compiled(fn, a, b, donated=(0,)), dtype)


def test_syevd_ctx_with_vectors_aliases_a(mesh, rng):
    """With eigenvectors too (1.x's V, sharded like A, is a reshard of the
    column-sharded V the solver leaves: temporaries of V's size)."""
    a = jt.shard_rows(jt.make_hermitian(rng, N, np.float64), mesh)
    fn = lambda a: jaxmg.syevd_shardmap_ctx(a, mesh=mesh, matrix_specs=SPEC)  # noqa: E731
    _assert_in_place(_compiled(fn, a), np.float64)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_one_device_syevd_gives_a_to_v(one_device_mesh, rng, dtype):
    """On one device the C library leaves V itself in A's buffer: the
    program a donating call runs returns no work buffer, V is the output
    aliased to A (all of it), nothing of A's size beside it, and the
    solver takes the parameter itself;
    so does a caller's jit donating A that returns V (1.x's ctx form,
    a_work left out)."""
    mesh = one_device_mesh
    a = jt.shard_rows(jt.make_hermitian(rng, N, dtype), mesh)
    worked = functools.partial(v1_syevd._syevd_worked, T_A=None, mesh=mesh,
                               in_specs=(SPEC,))
    ctx = lambda a: jaxmg.syevd_shardmap_ctx(a, mesh=mesh, matrix_specs=SPEC)[1:]  # noqa: E731
    for fn in (worked, ctx):
        compiled = _compiled(fn, a)
        mem = compiled.memory_analysis()
        a_bytes = N * N * np.dtype(dtype).itemsize
        assert mem.alias_size_in_bytes == a_bytes, mem
        # Beside A: the eigenvalues, no second matrix (V^H was one).
        beside_a = (mem.output_size_in_bytes - mem.alias_size_in_bytes
                    + mem.temp_size_in_bytes)
        assert beside_a < a_bytes, mem
        assert _solver_takes_parameter(compiled), compiled.as_text()


@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_eager_donated_calls_answer_and_consume(mesh, rng, dtype):
    """Every op called eagerly with donate=True: right answers, and the
    donated arrays deleted."""
    n = N
    tol = jt.tol(dtype, n)
    a_hpd = jt.make_hpd(rng, n, dtype)
    a_herm = jt.make_hermitian(rng, n, dtype)
    a_gen = jt.make_general(rng, n, dtype)
    b_np = jt.make_rhs(rng, n, 3, dtype)

    def donated(a_np, b=False):
        arrays = (jt.shard_rows(a_np, mesh),) + ((jt.replicate(b_np, mesh),) if b else ())
        return arrays

    arrays = donated(a_hpd, True)
    x, logdet, status = jaxmg.potrs(*arrays, return_logdet=True, return_status=True,
                                    donate=True)
    assert all(arr.is_deleted() for arr in arrays)
    jt.assert_status_ok(status)
    assert jt.solve_backward_error(a_hpd, x, b_np) < tol
    ref = np.linalg.slogdet(jt.to_ref(a_hpd))[1]
    assert abs(float(logdet) - ref) <= tol * max(1.0, abs(ref)) * n

    arrays = donated(a_gen, True)
    x = jaxmg.lu_solve(*arrays, donate=True)
    assert all(arr.is_deleted() for arr in arrays)
    assert jt.solve_backward_error(a_gen, x, b_np) < tol

    arrays = donated(a_hpd)
    inv = jaxmg.potri(*arrays, donate=True)
    assert arrays[0].is_deleted()
    assert jt.inverse_residual(a_hpd, inv) < tol

    arrays = donated(a_herm)
    w, v = jaxmg.syevd(*arrays, donate=True)
    assert arrays[0].is_deleted()
    assert jt.eig_residual(a_herm, w, v) < tol
    assert jt.orthogonality(v) < tol

    arrays = donated(a_herm)
    w_only = jaxmg.syevd(*arrays, return_eigenvectors=False, donate=True)
    assert arrays[0].is_deleted()
    np.testing.assert_allclose(np.asarray(w_only), np.asarray(w), rtol=0,
                               atol=tol * np.abs(np.asarray(w)).max())

    arrays = donated(a_gen)
    u, s, vh = jaxmg.gesvd(*arrays, donate=True)
    assert arrays[0].is_deleted()
    ref = jt.to_ref(a_gen)
    recon = jt.to_ref(u) * jt.to_ref(s)[None, :] @ jt.to_ref(vh)
    assert jt.fro(recon - ref) / jt.fro(ref) < tol
    np.testing.assert_allclose(jt.to_ref(s), np.linalg.svd(ref, compute_uv=False),
                               rtol=0, atol=tol * float(jt.to_ref(s)[0]))


def test_eager_donated_padded_call_answers(mesh, rng):
    """A padded call (T_A not dividing the shard) cannot work in A's buffer
    (the padded matrix is larger): it copies, and answers right."""
    a_np = jt.make_hermitian(rng, N, np.float64)
    w, v, status = jaxmg.syevd(jt.shard_rows(a_np, mesh), 5, return_status=True,
                               donate=True)
    jt.assert_status_ok(status)
    assert jt.eig_residual(a_np, w, v) < jt.tol(np.float64, N)


def test_eager_donated_calls_follow_jaxmg_engine(mesh, rng, monkeypatch, capfd):
    """An eager donated call's program is cached, but never across engines:
    the same call under JAXMG_ENGINE=lapack and then lapack-local runs each
    engine (JAXMG_TRACE names it) and answers; before the engine was part of
    the cache's key the second reused lapack's program and failed for want
    of a communicator."""
    n, dtype = N, np.float64
    a = jt.make_hpd(rng, n, dtype)
    b = jt.make_rhs(rng, n, 1, dtype)
    monkeypatch.setenv("JAXMG_TRACE", "1")
    for engine in ("lapack", "lapack-local", "lapack"):
        monkeypatch.setenv("JAXMG_ENGINE", engine)
        arrays = (jt.shard_rows(a, mesh), jt.replicate(b, mesh))
        x = jaxmg.potrs(*arrays, 8, mesh, (SPEC, P()), donate=True)
        assert all(arr.is_deleted() for arr in arrays)
        assert jt.solve_backward_error(a, x, b) < jt.tol(dtype, n)
        err = capfd.readouterr().err
        lines = [l for l in err.splitlines() if "jaxmg trace" in l and "potrs" in l]
        assert lines and all(f"engine {engine}," in l for l in lines), (engine, lines)
