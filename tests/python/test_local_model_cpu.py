"""The local model end to end on 4 CPU devices: JAXMG_ENGINE=lapack-local
runs every op through the Python layer's communicator ids and attributes,
plan_local, the local executor, Π, the grid moves onto an r x c grid, the
ops' local steps and the threads communicator (comm/comm_threads.c), with
rank 0 running LAPACK on the matrix gathered over it
(engine/lapack_local/). Results are checked against NumPy by residuals
(eigenvectors by residual and orthogonality), statuses against the leader
model's lapack engine."""

import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

import jaxmg
from jaxmg._src import _geometry, _native
import jaxmg_testing as jt

ENGINE = "lapack-local"


@pytest.fixture(autouse=True)
def local_engine(monkeypatch):
    monkeypatch.setenv("JAXMG_ENGINE", ENGINE)
    monkeypatch.setenv("JAXMG_RENDEZVOUS_TIMEOUT", "60")


# name -> (mesh shape, axis names, A's spec): the 1 x P line over 4 and 2
# devices, a 2 x 2 grid, and r x 1 grids (A's rows over two axes).
LAYOUTS = {
    "line4": ((4,), ("x",), P("x", None)),
    "line2": ((2,), ("x",), P("x", None)),
    "grid2x2": ((2, 2), ("r", "c"), P("r", "c")),
    "grid4x1": ((4, 1), ("r", "c"), P("r", "c")),
    "grid2x1": ((2, 1), ("r", "c"), P("r", "c")),
}
# (N, T_A): 24 is a multiple of T_A x devices (2 x 4); 20 is not (a shard of
# 5 or 10 rows is padded to tiles of 4).
SIZES = {"exact": (24, 2), "padded": (20, 4)}


def layout(cpu_devices, name):
    shape, axes, spec = LAYOUTS[name]
    count = int(np.prod(shape))
    mesh = Mesh(np.array(cpu_devices[:count]).reshape(shape), axes)
    return mesh, spec


def put(x, mesh, spec):
    return jax.device_put(x, NamedSharding(mesh, spec))


def rep(x, mesh):
    return jax.device_put(x, NamedSharding(mesh, P(*([None] * np.ndim(x)))))


def grid_of(name):
    shape = LAYOUTS[name][0]
    return (1, shape[0]) if len(shape) == 1 else shape


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("name", list(LAYOUTS))
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_solves(cpu_devices, rng, dtype, name, size):
    """potrs (with and without the log-determinant) and lu_solve."""
    n, T_A = SIZES[size]
    mesh, spec = layout(cpu_devices, name)
    a = jt.make_hpd(rng, n, dtype)
    g = jt.make_general(rng, n, dtype)
    b = jt.make_rhs(rng, n, 3, dtype)
    tol = jt.tol(dtype, n)
    x, status = jaxmg.potrs(put(a, mesh, spec), rep(b, mesh), T_A, mesh=mesh,
                            matrix_specs=spec, return_status=True)
    jt.assert_status_ok(status)
    assert jt.solve_backward_error(a, x, b) < tol
    x2, logdet = jaxmg.potrs(put(a, mesh, spec), rep(b, mesh), T_A, mesh=mesh,
                             matrix_specs=spec, return_logdet=True)
    assert jt.solve_backward_error(a, x2, b) < tol
    want = np.linalg.slogdet(jt.to_ref(a))[1]
    assert abs(float(logdet) - want) < 100 * tol * max(1.0, abs(want))
    x3, status = jaxmg.lu_solve(put(g, mesh, spec), rep(b, mesh), T_A, mesh=mesh,
                                matrix_specs=spec, return_status=True)
    jt.assert_status_ok(status)
    assert jt.solve_backward_error(g, x3, b) < 10 * tol


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("name", list(LAYOUTS))
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_potri_and_syevd(cpu_devices, rng, dtype, name, size):
    n, T_A = SIZES[size]
    mesh, spec = layout(cpu_devices, name)
    a = jt.make_hpd(rng, n, dtype)
    h = jt.make_hermitian(rng, n, dtype)
    tol = jt.tol(dtype, n)
    inv, status = jaxmg.potri(put(a, mesh, spec), T_A, mesh=mesh, matrix_specs=spec,
                              return_status=True)
    jt.assert_status_ok(status)
    assert inv.shape == (n, n)
    assert jt.inverse_residual(a, inv) < tol
    w, v, status = jaxmg.syevd(put(h, mesh, spec), T_A, mesh=mesh, matrix_specs=spec,
                               return_status=True)
    jt.assert_status_ok(status)
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(jt.to_ref(h)),
                               atol=tol * np.abs(np.linalg.eigvalsh(jt.to_ref(h))).max())
    assert jt.eig_residual(h, w, v) < tol
    assert jt.orthogonality(v) < tol
    w2 = jaxmg.syevd(put(h, mesh, spec), T_A, mesh=mesh, matrix_specs=spec,
                     return_eigenvectors=False)
    np.testing.assert_allclose(np.asarray(w2), np.asarray(w), atol=tol * float(np.abs(w).max()))


def statuses(run):
    """run() with lapack-local, then with the leader model's lapack engine."""
    local = run()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JAXMG_ENGINE", "lapack")
        leader = run()
    return local, leader


@pytest.mark.parametrize("name", ["line4", "grid2x2", "grid4x1"])
@pytest.mark.parametrize("k", [0, 5, 13, 23])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_failure_status_is_a_row_and_outputs_nan(cpu_devices, rng, dtype, name, k):
    """A not positive definite at row k (a diagonal entry made negative) and
    a singular general A (row k zero): the status names the same row as the
    lapack engine's (renumbered from H's rows to A's), the outputs are NaN,
    and nothing raises."""
    n, T_A = 24, 2
    mesh, spec = layout(cpu_devices, name)
    a = jt.make_hpd(rng, n, dtype, shift=0.0)
    a[k, k] = -1.0
    g = jt.make_general(rng, n, dtype)
    g[k, :] = 0
    b = jt.make_rhs(rng, n, 2, dtype)

    def potrs():
        x, logdet, status = jaxmg.potrs(put(a, mesh, spec), rep(b, mesh), T_A, mesh=mesh,
                                        matrix_specs=spec, return_status=True,
                                        return_logdet=True)
        assert np.isnan(np.asarray(x)).all() and np.isnan(float(logdet))
        return int(status)

    def potri():
        inv, status = jaxmg.potri(put(a, mesh, spec), T_A, mesh=mesh, matrix_specs=spec,
                                  return_status=True)
        assert np.isnan(np.asarray(inv)).all()
        return int(status)

    def lu():
        x, status = jaxmg.lu_solve(put(g, mesh, spec), rep(b, mesh), T_A, mesh=mesh,
                                   matrix_specs=spec, return_status=True)
        assert np.isnan(np.asarray(x)).all()
        return int(status)

    for run in (potrs, potri, lu):
        local, leader = statuses(run)
        assert local == leader > 0, (run.__name__, local, leader)
    assert statuses(lu)[0] == k + 1


@pytest.mark.parametrize("name", ["line4", "grid2x2"])
def test_jit_grad_vmap(cpu_devices, rng, name):
    """Under jit: grad of potrs (a and b), of lu_solve (its derivative solves
    with Aᵀ: the transposed solve) and of syevd's eigenvalues against
    jnp.linalg's; vmap over a batch of matrices."""
    n, T_A = 8, 2
    mesh, spec = layout(cpu_devices, name)
    a = jt.make_hpd(rng, n, np.float64)
    g = jt.make_general(rng, n, np.float64)
    s = jt.make_separated(rng, n, np.float64)
    b = jt.make_rhs(rng, n, None, np.float64)
    A, G, S, B = put(a, mesh, spec), put(g, mesh, spec), put(s, mesh, spec), rep(b, mesh)

    def solve_norm(A, b):
        return jnp.sum(jaxmg.potrs(A, b, T_A, mesh=mesh, matrix_specs=spec) ** 2)

    def lu_norm(G, b):
        return jnp.sum(jaxmg.lu_solve(G, b, T_A, mesh=mesh, matrix_specs=spec) ** 2)

    def eig_cubes(S):
        return jnp.sum(jaxmg.syevd(S, T_A, mesh=mesh, matrix_specs=spec,
                                   return_eigenvectors=False) ** 3)

    ga, gb = jax.jit(jax.grad(solve_norm, argnums=(0, 1)))(A, B)
    gg, gbl = jax.jit(jax.grad(lu_norm, argnums=(0, 1)))(G, B)
    gs = jax.jit(jax.grad(eig_cubes))(S)
    ra, rb = jax.grad(lambda a, b: jnp.sum(jnp.linalg.solve(jt.herm(a), b) ** 2),
                      argnums=(0, 1))(a, b)
    rg, rbl = jax.grad(lambda g, b: jnp.sum(jnp.linalg.solve(g, b) ** 2), argnums=(0, 1))(g, b)
    rs = jax.grad(lambda s: jnp.sum(jnp.linalg.eigvalsh(jt.herm(s)) ** 3))(s)
    np.testing.assert_allclose(np.asarray(ga), ra, atol=1e-11)
    np.testing.assert_allclose(np.asarray(gb), rb, atol=1e-11)
    np.testing.assert_allclose(np.asarray(gg), rg, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(gbl), rbl, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(gs), rs, atol=1e-9)
    batch = np.stack([a, 2 * a + np.eye(n)])
    xs = jax.jit(jax.vmap(lambda A: jaxmg.potrs(A, B, T_A, mesh=mesh, matrix_specs=spec)))(
        put(batch, mesh, P(None, *spec)))
    np.testing.assert_allclose(np.asarray(xs), [np.linalg.solve(m, b) for m in batch],
                               atol=1e-12)


def test_ctx_forms_at_global_level_and_inside_a_shard_map(cpu_devices, rng):
    """JAXMg 1.x's ctx forms: at the global level (eager and under jit on the
    context mesh), and inside a user's shard_map, where the communicator
    ids are the ambient ones (_mode.ambient_comm_ids)."""
    n = 16
    s_mesh = jax.make_mesh((4,), ("S",), devices=cpu_devices, axis_types=(AxisType.Auto,))
    a = jt.make_hpd(rng, n, np.float64)
    h = jt.make_hermitian(rng, n, np.float64)
    b = jt.make_rhs(rng, n, None, np.float64)
    A = put(a, s_mesh, P("S", None))
    _, x, status = jaxmg.potrs_shardmap_ctx(A, rep(b, s_mesh), 4)
    jt.assert_status_ok(status)
    assert jt.solve_backward_error(a, x, b) < 1e-13
    with jax.sharding.set_mesh(s_mesh):
        _, w, v, status = jax.jit(lambda H: jaxmg.syevd_shardmap_ctx(H, T_A=2))(
            put(h, s_mesh, P("S", None)))
    jt.assert_status_ok(status)
    assert jt.eig_residual(h, w, v) < 1e-13 and jt.orthogonality(v) < 1e-13
    mesh = Mesh(np.array(cpu_devices), ("x",))
    f = jax.shard_map(lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, 4, True), mesh=mesh,
                      in_specs=(P("x", None), P()), out_specs=(P(), P()))
    x, status = jax.jit(f)(put(a, mesh, P("x", None)), rep(b, mesh))
    assert int(status[0]) == 0
    assert jt.solve_backward_error(a, x, b) < 1e-13
    g = jax.shard_map(lambda a, b: jaxmg.lu_solve_shardmap_ctx(a, b, 4, True), mesh=mesh,
                      in_specs=(P("x", None), P()), out_specs=(P(), P()))
    x, status = jax.jit(g)(put(a, mesh, P("x", None)), rep(b, mesh))
    assert int(status[0]) == 0
    assert jt.solve_backward_error(a, x, b) < 1e-13


def test_groups_of_a_mesh_solve_their_own_matrices(cpu_devices, rng):
    """A 2 x 2 mesh ("S", "T") with A's rows over "T": two groups of two
    ranks, one communicator each, solving different matrices."""
    n = 8
    mesh = Mesh(np.array(cpu_devices).reshape(2, 2), ("S", "T"))
    a = jt.make_hpd(rng, n, np.float64)
    b = jt.make_rhs(rng, n, None, np.float64)

    def body(a_local, b):
        x, status = jaxmg.potrs_shardmap_ctx(jt.second_group_shifted(a_local, n), b, T_A=2,
                                             axis_name="T")
        return x[None], status

    f = jax.shard_map(body, mesh=mesh, in_specs=(P("T", None), P()),
                      out_specs=(P("S", None), P("S")), check_vma=False)
    x, status = jax.jit(f)(put(a, mesh, P("T", None)), rep(b, mesh))
    assert np.asarray(status).tolist() == [0, 0]
    x = np.asarray(x)
    assert jt.solve_backward_error(a, x[0], b) < 1e-13
    assert jt.solve_backward_error(2 * a + np.eye(n), x[1], b) < 1e-13


def test_independent_calls_in_one_program_keep_their_own_messages(cpu_devices, rng):
    """XLA:CPU may run a program's independent jaxmg calls in different
    orders on different devices; each call site has its own communicator
    (comm/comm.h, per_call_site; the C test
    ffi_local_model_opens_one_communicator_per_call_site_where_asked checks
    the ids), so the calls never meet. Here: three independent solves and
    an eigendecomposition in one jit, run several times, each right (the
    reordering itself was not provoked on this machine, with or without
    per-site communicators)."""
    mesh = Mesh(np.array(cpu_devices), ("x",))
    n = 16
    mats = [jt.make_hpd(rng, n, np.float64) * (k + 1) for k in range(3)]
    h = jt.make_hermitian(rng, n, np.float64)
    b = jt.make_rhs(rng, n, 2, np.float64)

    @jax.jit
    def program(a0, a1, a2, h, b):
        xs = [jaxmg.potrs(a, b, 2, mesh, (P("x", None), P(None, None))) for a in (a0, a1, a2)]
        return xs, jaxmg.syevd(h, 2, mesh, (P("x", None),))

    args = [put(a, mesh, P("x", None)) for a in (*mats, h)] + [rep(b, mesh)]
    for _ in range(5):
        xs, (w, v) = program(*args)
        for a, x in zip(mats, xs):
            assert jt.solve_backward_error(a, np.asarray(x), b) < 1e-13
        assert jt.eig_residual(h, np.asarray(w), np.asarray(v)) < 1e-12


def test_a_group_of_one_device(cpu_devices, rng):
    n = 10
    mesh = Mesh(np.array(cpu_devices[:1]), ("x",))
    a = jt.make_hpd(rng, n, np.complex128)
    b = jt.make_rhs(rng, n, 2, np.complex128)
    x = jaxmg.potrs(put(a, mesh, P("x", None)), rep(b, mesh), 4, mesh=mesh,
                    matrix_specs=P("x", None))
    assert jt.solve_backward_error(a, x, b) < 1e-13
    w, v = jaxmg.syevd(put(a, mesh, P("x", None)), 4, mesh=mesh, matrix_specs=P("x", None))
    assert jt.eig_residual(a, w, v) < 1e-13 and jt.orthogonality(v) < 1e-13


def test_trace_names_the_engine_and_the_grid(cpu_devices, rng, capfd, monkeypatch):
    monkeypatch.setenv("JAXMG_TRACE", "1")
    n = 8
    mesh, spec = layout(cpu_devices, "grid2x2")
    a = jt.make_hpd(rng, n, np.float64)
    jax.block_until_ready(jaxmg.potri(put(a, mesh, spec), 2, mesh=mesh, matrix_specs=spec))
    lines = [line for line in capfd.readouterr().err.splitlines() if "jaxmg trace potri" in line]
    assert len(lines) == 4, lines  # one per rank
    for line in lines:
        assert "(grid 2 x 2)" in line and "engine lapack-local" in line, line
        assert "onto the grid" in line and "off the grid" in line, line
    assert sorted(line.split("rank ")[1].split(":")[0] for line in lines) == ["0", "1", "2", "3"]


def test_the_engine_runs_only_where_named(monkeypatch):
    assert _native.engine_check("cpu", "potrs", 4, "float64", 16, 4) == (True, ENGINE)
    monkeypatch.delenv("JAXMG_ENGINE")
    assert _native.engine_check("cpu", "potrs", 4, "float64", 16, 4) == (True, "lapack")
    monkeypatch.setenv("JAXMG_ENGINE", ENGINE)
    ok, why = _native.engine_check("cpu", "potrs", 4, "float64", 16, 4, nodes=2)
    assert not ok and "threads and processes of one node" in why, why


def test_comm_ids_are_the_platforms():
    """In one process the threads communicator's; for a group that spans
    processes (MPMD, tests/python/test_mpmd_local.py) the processes
    communicator's (comm/comm_processes.c)."""
    first, second = _native.comm_new_id("cpu"), _native.comm_new_id("cpu")
    assert len(first) == _native.COMM_ID_BYTES and first != second
    assert first.startswith(b"jaxmg-threads-comm")
    third = _native.comm_new_id("cpu", processes=True)
    assert len(third) == _native.COMM_ID_BYTES and third.startswith(b"jaxmg-procs-comm")
    assert third[48:] == bytes(_native.COMM_ID_BYTES - 48)  # the call site goes at the end



def _eig_check(a, w, v, dtype):
    n = a.shape[0]
    ref = np.linalg.eigvalsh(jt.to_ref(a))
    scale = max(1.0, float(np.abs(ref).max()))
    assert np.abs(np.asarray(w) - ref).max() < jt.tol(dtype, n) * scale
    v = jt.to_ref(v)
    assert np.abs(jt.to_ref(a) @ v - v * np.asarray(w)).max() < jt.tol(dtype, n) * scale
    assert np.abs(v.conj().T @ v - np.eye(n)).max() < jt.tol(dtype, n)


@pytest.mark.parametrize("T_A", [None, 300, 96])
def test_syevd_blocks_are_powers_of_two_whatever_t_a(cpu_devices, rng, T_A):
    """The local engines lay syevd's A out in power-of-two blocks that divide
    the shard (cuSOLVERMp's stedc needs powers of two; lapack-local takes
    the same blocks): N = 600 on 2 devices, a shard of 300 rows. T_A left
    out pads the shards to 384 (tiles of 128) rather than run in blocks of 4;
    an explicit T_A runs as given (300: blocks of 4; 96: the shard padded
    to 384, blocks of 64).
    Eigenvalues and eigenvectors checked against NumPy."""
    n = 600
    mesh, spec = layout(cpu_devices, "line2")
    if T_A is None:
        g = _geometry.choose_geometry("syevd", n, 2, np.dtype(np.float64), None, True,
                                      "cpu")
        assert (g.tile, g.rp, g.engine) == (128, 384, ENGINE)
    a = jt.make_hermitian(rng, n, np.float64)
    w, v, status = jaxmg.syevd(put(a, mesh, spec), T_A, mesh=mesh, in_specs=(spec,),
                               return_status=True)
    jt.assert_status_ok(status)
    _eig_check(a, w, v, np.float64)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_syevd_on_one_device_takes_any_t_a(cpu_devices, rng, dtype):
    """On one device the engine's blocks need divide nothing: N = 300 with
    T_A left out (300, blocks of 256) and T_A = 150 (blocks of 128), no
    padding in either. There the local steps leave V itself in A's buffer
    (syevd's vectors_in_a: conjugate-transposed in place after the
    solver); T_A = 7 pads (to 301) and makes V from Vᴴ as several ranks do."""
    n = 300
    mesh = Mesh(np.array(cpu_devices[:1]), ("x",))
    spec = P("x", None)
    g = _geometry.choose_geometry("syevd", n, 1, np.dtype(dtype), None, True, "cpu")
    assert (g.tile, g.rp) == (300, 300)
    a = jt.make_hermitian(rng, n, dtype)
    for T_A in (None, 150, 7):
        w, v, status = jaxmg.syevd(put(a, mesh, spec), T_A, mesh=mesh, in_specs=(spec,),
                                   return_status=True)
        jt.assert_status_ok(status)
        _eig_check(a, w, v, dtype)


@pytest.mark.parametrize("name", ["line4", "grid2x2", "grid4x1"])
def test_syevd_blocks_other_than_t_a_on_every_grid(cpu_devices, rng, name):
    """Blocks that differ from T_A through Π and the grid moves: N = 48 on 4
    devices, shards of 12, T_A = 6 gives blocks of 4 (the largest power of
    two at most 6 dividing 12). Values and vectors against NumPy."""
    n, T_A = 48, 6
    mesh, spec = layout(cpu_devices, name)
    for dtype in (np.float64, np.complex64):
        a = jt.make_hermitian(rng, n, dtype)
        w, v, status = jaxmg.syevd(put(a, mesh, spec), T_A, mesh=mesh, matrix_specs=spec,
                                   return_status=True)
        jt.assert_status_ok(status)
        _eig_check(a, w, v, dtype)
