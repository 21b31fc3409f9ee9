"""The local model's cases with one process per device: what
tests/python/mpmd_worker.py's scenario "local" runs in every process of a
job, with the engine the launcher names (JAXMG_ENGINE): lapack-local on CPU
devices (tests/python/test_mpmd_local.py, over the processes communicator,
comm/comm_processes.c) and cusolvermp on GPUs (tests/gpu/test_gpu_mpmd.py,
over NCCL), so that what passes on CPU is what runs when a multi-GPU machine
is lent.

Every check runs in every process on the same inputs (seeded alike) and
checks this process's blocks of the results against a float64/complex128
NumPy reference: the seeds' and JAXMg 1.x's forms, every op the local model
runs (potrs with and without the log-determinant, potri, syevd with and
without vectors, lu_solve) in every dtype, on the 1 x P line and on r x c
grids (A sharded P(r, c) over a 2D mesh of the processes), padded and not;
a numerical failure on the last rank's rows only (the same status and NaN in
every process); jit, grad and vmap; independent calls in one program; the
ctx forms at the global level and
inside a shard_map (communicator ids made by process 0); NetKet's
distributed solvers, process_grid included; polar (QDWH over qr's QRs) on
the line and a grid, its status for an exactly singular A. gesvd is not an
op of the local model (cuSOLVERMp 0.8 has no SVD) and is not here."""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

import jaxmg
import jaxmg_testing as jt
from mpmd_launch import ROWS_PER_PROCESS

DTYPES = dict(zip(jt.DTYPE_IDS, jt.DTYPES))


def global_array(x: np.ndarray, mesh: Mesh, spec: P) -> jax.Array:
    """x (the same in every process) as a global array laid out as spec."""
    return jax.make_array_from_callback(x.shape, NamedSharding(mesh, spec), lambda i: x[i])


def local_blocks(y: jax.Array):
    """(index, block) of this process's shards of y."""
    return [(s.index, np.asarray(s.data)) for s in y.addressable_shards]


def whole(y: jax.Array) -> np.ndarray:
    """A replicated result: this process's copy."""
    return local_blocks(y)[0][1]


def close_blocks(y: jax.Array, ref: np.ndarray, tol: float, what: str) -> None:
    """Every block of y this process holds against the same block of ref,
    relative to ref's norm."""
    scale = max(float(np.linalg.norm(ref)), 1e-300)
    for idx, blk in local_blocks(y):
        err = float(np.linalg.norm(jt.to_ref(blk) - ref[idx])) / scale
        assert err < tol, f"{what}: block {idx} off by {err:.3g} (tolerance {tol:.3g})"


def layouts(nproc: int) -> dict[str, tuple[tuple[int, ...], tuple[str, ...], P]]:
    """name -> (mesh shape, axis names, A's spec): the 1 x P line, and r x c
    grids of the processes (A's rows over two axes, as P(r, c) is read)."""
    out = {"line": ((nproc,), ("x",), P("x", None))}
    if nproc == 4:
        out["grid2x2"] = ((2, 2), ("r", "c"), P("r", "c"))
        out["grid4x1"] = ((4, 1), ("r", "c"), P("r", "c"))
    elif nproc == 2:
        out["grid2x1"] = ((2, 1), ("r", "c"), P("r", "c"))
    return out


def sizes(nproc: int) -> dict[str, tuple[int, int]]:
    """(N, T_A): shards of ROWS_PER_PROCESS rows in tiles of 2 (exact), or of
    5 rows padded to two tiles of 4 (padded: as many rows once padded)."""
    return {"exact": (ROWS_PER_PROCESS * nproc, 2), "padded": (5 * nproc, 4)}


def make_mesh(shape, names) -> Mesh:
    return Mesh(np.array(jax.devices()).reshape(shape), names)


def engine_named(nproc: int) -> None:
    """The engine JAXMG_ENGINE names is the one that runs these calls."""
    from jaxmg._src import _native

    engine = os.environ.get("JAXMG_ENGINE", "")
    assert engine in ("lapack-local", "cusolvermp", "cusolverdn-local"), \
        f"JAXMG_ENGINE={engine!r}"
    platform = _native.platform_of(jax.devices()[0].platform)
    got = _native.engine_check(platform, "potrs", nproc, "float64", 6 * nproc, 2)
    assert got == (True, engine), got


def every_op(mesh: Mesh, spec: P, n: int, T_A: int, dtype, seeds_form: bool,
             rng: np.random.Generator) -> None:
    """Every op of the local model on one layout, size and dtype. The seeds'
    form passes (T_A, mesh, in_specs) positionally; 1.x's, matrix_specs and
    return_logdet."""
    a = jt.make_hpd(rng, n, dtype)
    h = jt.make_hermitian(rng, n, dtype)
    g = jt.make_general(rng, n, dtype)
    b = jt.make_rhs(rng, n, 3, dtype)
    tol = jt.tol(dtype, n)
    A, H, G = (global_array(m, mesh, spec) for m in (a, h, g))
    B = global_array(b, mesh, P(None, None))
    if seeds_form:
        specs = (spec, P(None, None))
        x, status = jaxmg.potrs(A, B, T_A, mesh, specs, return_status=True)
        inv, istatus = jaxmg.potri(A, T_A, mesh, (spec,), return_status=True)
        w, v, estatus = jaxmg.syevd(H, T_A, mesh, (spec,), return_status=True)
        w2 = jaxmg.syevd(H, T_A, mesh, (spec,), return_eigenvectors=False)
        xl, lstatus = jaxmg.lu_solve(G, B, T_A, mesh, specs, return_status=True)
        logdet = None
    else:
        kw = dict(mesh=mesh, matrix_specs=spec)
        x, status = jaxmg.potrs(A, B, T_A, return_status=True, **kw)
        _, logdet = jaxmg.potrs(A, B, T_A, return_logdet=True, **kw)
        inv, istatus = jaxmg.potri(A, T_A, return_status=True, **kw)
        w, v, estatus = jaxmg.syevd(H, T_A, return_status=True, **kw)
        w2 = jaxmg.syevd(H, T_A, return_eigenvectors=False, **kw)
        xl, lstatus = jaxmg.lu_solve(G, B, T_A, return_status=True, **kw)
    for name, s in (("potrs", status), ("potri", istatus), ("syevd", estatus),
                    ("lu_solve", lstatus)):
        assert int(whole(s)) == 0, f"{name}: status {int(whole(s))}"
    assert jt.solve_backward_error(a, whole(x), b) < tol, "potrs"
    assert jt.solve_backward_error(g, whole(xl), b) < 10 * tol, "lu_solve"
    if logdet is not None:
        want = np.linalg.slogdet(jt.to_ref(a))[1]
        got = float(whole(logdet))
        assert abs(got - want) < 100 * tol * max(1.0, abs(want)), f"logdet {got} {want}"
    close_blocks(inv, np.linalg.inv(jt.to_ref(a)), 10 * tol, "potri")
    w_ref = np.linalg.eigvalsh(jt.to_ref(h))
    scale = float(np.abs(w_ref).max())
    for got in (whole(w), whole(w2)):
        assert np.abs(jt.to_ref(got) - w_ref).max() < tol * scale, "eigenvalues"
    wl = np.asarray(whole(w), np.float64)
    for idx, vb in local_blocks(v):  # this process's columns of V, every row
        vb = jt.to_ref(vb)
        assert vb.shape[0] == n, f"V's block {idx} has {vb.shape[0]} rows"
        res = np.linalg.norm(jt.to_ref(h) @ vb - vb * wl[idx[1]]) / np.linalg.norm(h)
        orth = np.linalg.norm(vb.conj().T @ vb - np.eye(vb.shape[1]))
        assert res < tol and orth < tol, f"eigenvectors {idx}: {res:.3g} {orth:.3g}"


def failure_on_the_last_rank(mesh: Mesh, spec: P, n: int, T_A: int) -> None:
    """A diagonal A whose entry k, in the last rank's rows, is negative, and a
    general A whose row k is zero: every process gets status k + 1 (in A's
    numbering) and NaN outputs, and nothing raises."""
    k = n - 2
    a = np.diag(np.arange(1.0, n + 1))
    a[k, k] = -1.0
    g = jt.make_general(np.random.default_rng(3), n, np.float64) + 4 * np.eye(n)
    g[k, :] = 0
    b = np.ones((n, 2))
    A, G = global_array(a, mesh, spec), global_array(g, mesh, spec)
    B = global_array(b, mesh, P(None, None))
    kw = dict(mesh=mesh, matrix_specs=spec, return_status=True)
    x, logdet, status = jaxmg.potrs(A, B, T_A, return_logdet=True, **kw)
    inv, istatus = jaxmg.potri(A, T_A, **kw)
    xl, lstatus = jaxmg.lu_solve(G, B, T_A, **kw)
    for name, s in (("potrs", status), ("potri", istatus)):
        assert int(whole(s)) == k + 1, f"{name}: status {int(whole(s))}, expected {k + 1}"
    # LAPACK's LU (lapack-local) names row k; cuSOLVERMp's factors a
    # permutation of A, and a zero row may show as another pivot.
    lu = int(whole(lstatus))
    assert lu == k + 1 if os.environ.get("JAXMG_ENGINE") == "lapack-local" else lu > 0, \
        f"lu_solve: status {lu}, expected {k + 1}"
    assert np.isnan(whole(x)).all() and np.isnan(float(whole(logdet))), "potrs NaN"
    assert np.isnan(whole(xl)).all(), "lu_solve NaN"
    for _, blk in local_blocks(inv):
        assert np.isnan(blk).all(), "potri NaN"


def jit_grad_vmap(mesh: Mesh, spec: P) -> None:
    """Under jit: grad of potrs (a and b), of lu_solve (its derivative is a
    transposed solve) and of syevd's eigenvalues, against jnp.linalg's; vmap
    over two matrices."""
    n, T_A = ROWS_PER_PROCESS * mesh.devices.size, 2
    rng = np.random.default_rng(17)
    a = jt.make_hpd(rng, n, np.float64)
    g = jt.make_general(rng, n, np.float64) + 3 * np.sqrt(n) * np.eye(n)
    s = jt.make_separated(rng, n, np.float64)
    b = jt.make_rhs(rng, n, None, np.float64)
    A, G, S = (global_array(m, mesh, spec) for m in (a, g, s))
    B = global_array(b, mesh, P(None))
    kw = dict(mesh=mesh, matrix_specs=spec)
    ga, gb = jax.jit(jax.grad(lambda A, b: jnp.sum(jaxmg.potrs(A, b, T_A, **kw) ** 2),
                              argnums=(0, 1)))(A, B)
    gg, gbl = jax.jit(jax.grad(lambda G, b: jnp.sum(jaxmg.lu_solve(G, b, T_A, **kw) ** 2),
                               argnums=(0, 1)))(G, B)
    gs = jax.jit(jax.grad(lambda S: jnp.sum(
        jaxmg.syevd(S, T_A, return_eigenvectors=False, **kw) ** 3)))(S)
    with jax.default_device(jax.local_devices()[0]):
        ra, rb = jax.grad(lambda a, b: jnp.sum(jnp.linalg.solve(jt.herm(a), b) ** 2),
                          argnums=(0, 1))(a, b)
        rg, rbl = jax.grad(lambda g, b: jnp.sum(jnp.linalg.solve(g, b) ** 2),
                           argnums=(0, 1))(g, b)
        rs = jax.grad(lambda s: jnp.sum(jnp.linalg.eigvalsh(jt.herm(s)) ** 3))(s)
    for got, want, what in ((ga, ra, "grad potrs A"), (gb, rb, "grad potrs b"),
                            (gg, rg, "grad lu_solve A"), (gbl, rbl, "grad lu_solve b"),
                            (gs, rs, "grad syevd")):
        close_blocks(got, np.asarray(want), 1e-9, what)
    batch = np.stack([a, 2 * a + np.eye(n)])
    xs = jax.jit(jax.vmap(lambda A: jaxmg.potrs(A, B, T_A, **kw)))(
        global_array(batch, mesh, P(None, *spec)))
    close_blocks(xs, np.stack([np.linalg.solve(m, b) for m in batch]), 1e-12, "vmap potrs")


def independent_calls(nproc: int) -> None:
    """Three solves and an eigendecomposition with no data dependence in one
    jitted program, run several times: XLA:CPU may run them in any order,
    or at once, in each process; every call site has its own communicator
    over the group's connections, so they never meet."""
    mesh = Mesh(np.array(jax.devices()), ("x",))
    n = ROWS_PER_PROCESS * nproc
    rng = np.random.default_rng(29)
    mats = [jt.make_hpd(rng, n, np.float64) * (k + 1) for k in range(3)]
    h = jt.make_hermitian(rng, n, np.float64)
    b = jt.make_rhs(rng, n, 2, np.float64)
    specs = (P("x", None), P(None, None))

    @jax.jit
    def program(a0, a1, a2, h, b):
        xs = [jaxmg.potrs(a, b, 2, mesh, specs) for a in (a0, a1, a2)]
        return xs, jaxmg.syevd(h, 2, mesh, (P("x", None),), return_eigenvectors=False)

    args = [global_array(m, mesh, P("x", None)) for m in (*mats, h)]
    args.append(global_array(b, mesh, P(None, None)))
    w_ref = np.linalg.eigvalsh(h)
    for _ in range(5):
        xs, w = program(*args)
        for a, x in zip(mats, xs):
            assert jt.solve_backward_error(a, whole(x), b) < 1e-13
        assert np.abs(whole(w) - w_ref).max() < 1e-12 * np.abs(w_ref).max()


def ctx_forms(nproc: int) -> None:
    """JAXMg 1.x's ctx forms at the global level (eagerly, and under jit on
    the context mesh), and the seeds' inside a user's shard_map, whose
    communicator ids process 0 makes for every group (the devices of a
    group are not known there)."""
    n = ROWS_PER_PROCESS * nproc
    rng = np.random.default_rng(23)
    a = jt.make_hpd(rng, n, np.float64)
    h = jt.make_hermitian(rng, n, np.float64)
    g = jt.make_general(rng, n, np.float64) + 3 * np.sqrt(n) * np.eye(n)
    b = jt.make_rhs(rng, n, None, np.float64)
    s_mesh = Mesh(np.array(jax.devices()), ("S",), axis_types=(AxisType.Auto,))
    A = global_array(a, s_mesh, P("S", None))
    B = global_array(b, s_mesh, P())
    _, x, status = jaxmg.potrs_shardmap_ctx(A, B, 2)
    assert int(whole(status)) == 0 and jt.solve_backward_error(a, whole(x), b) < 1e-13
    _, x, status = jaxmg.lu_solve_shardmap_ctx(global_array(g, s_mesh, P("S", None)), B, 2)
    assert int(whole(status)) == 0 and jt.solve_backward_error(g, whole(x), b) < 1e-12
    with jax.sharding.set_mesh(s_mesh):
        _, w, v, status = jax.jit(lambda H: jaxmg.syevd_shardmap_ctx(H, T_A=2))(
            global_array(h, s_mesh, P("S", None)))
    assert int(whole(status)) == 0
    w_ref = np.linalg.eigvalsh(h)
    assert np.abs(whole(w) - w_ref).max() < 1e-12 * np.abs(w_ref).max()
    from jax.experimental import multihost_utils
    vv = np.asarray(multihost_utils.process_allgather(v, tiled=True))  # V's rows: like A's
    assert jt.eig_residual(h, w_ref, vv) < 1e-12 and jt.orthogonality(vv) < 1e-12
    mesh = Mesh(np.array(jax.devices()), ("x",))
    for fn, m, tol in ((jaxmg.potrs_shardmap_ctx, a, 1e-13),
                       (jaxmg.lu_solve_shardmap_ctx, g, 1e-12)):
        f = jax.jit(jax.shard_map(lambda a, b, fn=fn: fn(a, b, 2, True), mesh=mesh,
                                  in_specs=(P("x", None), P()), out_specs=(P(), P())))
        x, status = f(global_array(m, mesh, P("x", None)), global_array(b, mesh, P()))
        assert int(whole(status)[0]) == 0
        assert jt.solve_backward_error(m, whole(x), b) < tol, fn.__name__
    f = jax.jit(jax.shard_map(lambda h: jaxmg.syevd_shardmap_ctx(h, 2), mesh=mesh,
                              in_specs=(P("x", None),), out_specs=(P(), P(None, "x"), P())))
    w, v, status = f(global_array(h, mesh, P("x", None)))
    assert int(whole(status)[0]) == 0
    assert np.abs(whole(w) - w_ref).max() < 1e-12 * np.abs(w_ref).max()
    for idx, vb in local_blocks(v):
        res = np.linalg.norm(h @ vb - vb * w_ref[idx[1]]) / np.linalg.norm(h)
        assert res < 1e-12, f"shard_map syevd's vectors {idx}: {res:.3g}"


def polar_case(mesh: Mesh, spec: P, nproc: int) -> None:
    """jaxmg.polar (QDWH, its default) on a tall and a square A, eagerly and
    under jit, against SciPy's factors (unique for these well-conditioned
    A); an A with two zero columns: status 1 (no SVD to fall back on), NaN."""
    import scipy.linalg

    rng = np.random.default_rng(11)
    for shape, dtype in (((8 * nproc, 2 * nproc), np.float64),
                         ((4 * nproc, 4 * nproc), np.complex64)):
        a = jt.random_matrix(rng, shape, dtype).astype(dtype)
        up_ref, h_ref = scipy.linalg.polar(jt.to_ref(a))
        tol = jt.tol(dtype, shape[0]) * float(np.linalg.cond(jt.to_ref(a)))
        A = global_array(a, mesh, spec)
        for fn in (lambda A: jaxmg.polar(A, mesh=mesh, matrix_specs=spec, return_status=True),
                   jax.jit(lambda A: jaxmg.polar_shardmap_ctx(A, mesh=mesh,
                                                              matrix_specs=spec))):
            up, h, status = fn(A)
            assert int(whole(status)) == 0, f"polar {shape}: status {whole(status)}"
            close_blocks(up, up_ref, tol, f"polar {shape} Up")
            close_blocks(h, h_ref, tol, f"polar {shape} H")
    a = jt.random_matrix(rng, (4 * nproc, 2 * nproc), np.float64)
    a[:, :2] = 0
    up, h, status = jaxmg.polar(global_array(a, mesh, spec), mesh=mesh, matrix_specs=spec,
                                return_status=True)
    assert int(whole(status)) == 1, f"polar of a singular A: status {whole(status)}"
    assert all(np.isnan(blk).all() for _, blk in local_blocks(up) + local_blocks(h))


def netket_solvers(nproc: int) -> list[tuple[str, Callable[[], None]]]:
    """NetKet's distributed solvers, unchanged, on its mesh (one axis "S"
    over every process's device, Auto, the context mesh): eagerly and under
    jit, with its default process grid and a 2D one (process_grid=(2, 2)
    with 4 processes, (1, 2) with 2), against NumPy."""
    if importlib.util.find_spec("netket") is None:
        return [("netket-not-installed", lambda: None)]
    n = ROWS_PER_PROCESS * nproc
    rng = np.random.default_rng(7)
    a = jt.make_hpd(rng, n, np.float64)
    b = jt.make_rhs(rng, n, None, np.float64)
    ref = np.linalg.solve(a, b)
    grids = [None] + ([(2, 2)] if nproc == 4 else [(1, nproc)] if nproc > 1 else [])
    cases = []
    for name in ("cholesky_distributed", "pinv_smooth_distributed"):
        for grid in grids:
            def run(name=name, grid=grid) -> None:
                import netket as nk

                jax.sharding.set_mesh(None)  # importing NetKet sets its own mesh
                mesh = Mesh(np.array(jax.devices()), ("S",), axis_types=(AxisType.Auto,))
                solver = getattr(nk.optimizer.solver, name)
                kw = {} if grid is None else {"process_grid": grid}
                with jax.sharding.set_mesh(mesh):
                    A, B = global_array(a, mesh, P("S", None)), global_array(b, mesh, P())
                    for fn in (lambda A, B: solver(A, B, **kw),
                               jax.jit(lambda A, B: solver(A, B, **kw))):
                        x, _ = fn(A, B)
                        close_blocks(x, ref, 1e-11, f"{name} {grid}")
            cases.append((f"netket-{name}-{grid}", run))
    return cases


def cases(nproc: int) -> list[tuple[str, Callable[[], None]]]:
    """Every check of the scenario, by name, in the order every process runs
    them. JAXMG_TEST_LOCAL_CASES (a comma-separated list of name prefixes)
    runs some only."""
    out: list[tuple[str, Callable[[], None]]] = [("engine", lambda: engine_named(nproc))]
    for lname, (shape, names, spec) in layouts(nproc).items():
        for sname, (n, T_A) in sizes(nproc).items():
            # Every dtype on the line, exact (the seeds' form) and padded
            # (1.x's); two on each grid, and one padded.
            if lname == "line":
                dtypes = jt.DTYPE_IDS
            else:
                dtypes = ("f64", "c64") if sname == "exact" else ("c128",)
            for d in dtypes:
                def run(shape=shape, names=names, spec=spec, n=n, T_A=T_A, d=d,
                        seeds=(lname == "line" and sname == "exact")) -> None:
                    rng = np.random.default_rng([n, jt.DTYPE_IDS.index(d)])
                    every_op(make_mesh(shape, names), spec, n, T_A, DTYPES[d], seeds, rng)
                out.append((f"ops-{lname}-{sname}-{d}", run))
        out.append((f"failure-{lname}", lambda shape=shape, names=names, spec=spec:
                    failure_on_the_last_rank(make_mesh(shape, names), spec, 6 * nproc, 2)))
    grids = [name for name in layouts(nproc) if name != "line"]
    for lname in ["line"] + grids[:1]:
        shape, names, spec = layouts(nproc)[lname]
        out.append((f"jit-grad-vmap-{lname}", lambda shape=shape, names=names, spec=spec:
                    jit_grad_vmap(make_mesh(shape, names), spec)))
    for lname in ["line"] + grids[:1]:
        shape, names, spec = layouts(nproc)[lname]
        out.append((f"polar-{lname}", lambda shape=shape, names=names, spec=spec:
                    polar_case(make_mesh(shape, names), spec, nproc)))
    out.append(("independent-calls", lambda: independent_calls(nproc)))
    out.append(("ctx-forms", lambda: ctx_forms(nproc)))
    out.extend(netket_solvers(nproc))
    only = [p for p in os.environ.get("JAXMG_TEST_LOCAL_CASES", "").split(",") if p]
    if only:
        out = [(name, fn) for name, fn in out if any(name.startswith(p) for p in only)]
    return out


def fake_nodes(me: int) -> None:
    """Makes this process say it runs on a node of its own, so that the
    groups of a job on one machine span nodes, as across a cluster: the
    default choice is then the local model's (cusolverdn-local below the
    one-GPU crossover, cuSOLVERMp above). Before the first call (the job's
    node names are asked once)."""
    from jaxmg._src import _mode

    _mode.node_name = lambda: f"jaxmg-test-node-{me}"


def default_choice(nproc: int) -> None:
    """Across nodes, with JAXMG_ENGINE unset: cusolverdn-local below each
    op's crossover, never above it (where cuSOLVERMp, if installed, runs)."""
    from jaxmg._src import _native

    assert os.environ.get("JAXMG_ENGINE", "") == "", "JAXMG_ENGINE must be unset"
    platform = _native.platform_of(jax.devices()[0].platform)
    n = ROWS_PER_PROCESS * nproc
    for op in ("potrs", "potri", "syevd", "lu_solve", "eigh_generalized"):
        solver = "sygvd" if op == "eigh_generalized" else op
        got = _native.engine_check(platform, solver, nproc, "float64", n, 2, nodes=2)
        assert got == (True, "cusolverdn-local"), f"{op} N={n}: {got}"
    big = _native.engine_check(platform, "potrs", nproc, "float64", 65536, 1024, nodes=2)
    assert big is not None and big != (True, "cusolverdn-local"), f"potrs N=65536: {big}"


def mp_eigensolver_small(nproc: int) -> None:
    """JAXMG_ENGINE=cusolvermp: syevd and eigh_generalized below their
    crossover run on rank 0's gathered copy (cuSOLVERMp's eigensolver is
    slower than one GPU there, and fails inside below 8 rows a GPU): right
    at the sizes that broke cuSOLVERMp's (2 rows a GPU) and at 8 and 64 rows
    a GPU; eigenvectors by residual and orthogonality."""
    old = os.environ.get("JAXMG_ENGINE")
    os.environ["JAXMG_ENGINE"] = "cusolvermp"
    try:
        mesh = make_mesh((nproc,), ("x",))
        for rows in (2, 8, 64):
            n = rows * nproc
            rng = np.random.default_rng([n, 7])
            h = jt.make_hermitian(rng, n, np.float64)
            s = jt.make_hpd(rng, n, np.float64)
            tol = jt.tol(np.float64, n)
            H = global_array(h, mesh, P("x", None))
            w, v, status = jaxmg.syevd(H, 2, mesh, (P("x", None),), return_status=True)
            assert int(whole(status)) == 0, f"syevd N={n}: status {int(whole(status))}"
            w_ref = np.linalg.eigvalsh(h)
            scale = float(np.abs(w_ref).max())
            assert np.abs(whole(w) - w_ref).max() < tol * scale, f"syevd N={n}: eigenvalues"
            wl = np.asarray(whole(w), np.float64)
            for idx, vb in local_blocks(v):
                res = np.linalg.norm(h @ vb - vb * wl[idx[1]]) / np.linalg.norm(h)
                orth = np.linalg.norm(vb.T @ vb - np.eye(vb.shape[1]))
                assert res < tol and orth < tol, f"syevd N={n} {idx}: {res:.3g} {orth:.3g}"
            S = global_array(s, mesh, P("x", None))
            wg = jaxmg.eigh_generalized(H, S, mesh=mesh, in_specs=(P("x", None), P("x", None)),
                                        return_eigenvectors=False)
            wg_ref = np.sort(np.linalg.eigvals(np.linalg.solve(s, h)).real)
            assert np.abs(whole(wg) - wg_ref).max() < 100 * tol * max(1.0, np.abs(wg_ref).max()), \
                f"eigh_generalized N={n}"
    finally:
        if old is None:
            os.environ.pop("JAXMG_ENGINE", None)
        else:
            os.environ["JAXMG_ENGINE"] = old


def default_cases(nproc: int) -> list[tuple[str, Callable[[], None]]]:
    """The local model chosen by default (fake_nodes first): the choice,
    every op on the line in two dtypes at small N (cusolverdn-local), and
    the eigensolvers under JAXMG_ENGINE=cusolvermp at small N."""
    out: list[tuple[str, Callable[[], None]]] = [("default-engine", lambda: default_choice(nproc))]
    shape, names, spec = layouts(nproc)["line"]
    for sname, (n, T_A) in sizes(nproc).items():
        for d in ("f64", "c64"):
            def run(n=n, T_A=T_A, d=d) -> None:
                rng = np.random.default_rng([n, jt.DTYPE_IDS.index(d), 1])
                every_op(make_mesh(shape, names), spec, n, T_A, DTYPES[d], False, rng)
            out.append((f"default-ops-line-{sname}-{d}", run))
    if os.environ.get("JAXMG_TEST_NO_CUSOLVERMP", "") == "":
        out.append(("mp-eigensolvers-small", lambda: mp_eigensolver_small(nproc)))
    return out


def run_default_cases(checks: Any, nproc: int, me: int) -> None:
    """default_cases, each as one check, in a process that says it is on a
    node of its own."""
    fake_nodes(me)
    for name, fn in default_cases(nproc):
        checks.run(name, fn)


def run_cases(checks: Any, nproc: int) -> None:
    """Runs every case as one check of the worker's ``Checks``."""
    for name, fn in cases(nproc):
        checks.run(name, fn)
