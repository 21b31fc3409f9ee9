"""One process of an MPMD test job (launched by test_mpmd.py and
tests/gpu/test_gpu_mpmd.py, never collected by pytest):
``python mpmd_worker.py SCENARIO PORT NPROC PROCESS_ID``.

Every process joins ``jax.distributed`` on localhost with its own CPU
device(s) (XLA_FLAGS from the launcher), builds the same global inputs from a
shared seed, runs the scenario, checks its own shards of the results against a
float64 NumPy reference, and prints one line ``RESULT <json>``: the checks it
made and any error, as text. An exception in a check is a failed check, never
a crash, so that the launcher always learns what went wrong."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import faulthandler
import time
import traceback

import jax

jax.config.update("jax_enable_x64", True)
# CPU devices unless the launcher asks for GPUs (tests/gpu/test_gpu_mpmd.py).
PLATFORM = os.environ.get("JAXMG_TEST_PLATFORM", "cpu")
jax.config.update("jax_platforms", PLATFORM)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402
import jaxmg_testing as jt  # noqa: E402
import mpmd_local  # noqa: E402
from mpmd_launch import ROWS_PER_PROCESS  # noqa: E402
from mpmd_local import global_array, local_blocks  # noqa: E402

DTYPES = dict(zip(jt.DTYPE_IDS, jt.DTYPES))
FRESH_CALLS = 40  # the "fresh" scenario's calls


class Checks:
    def __init__(self) -> None:
        self.done: list[str] = []
        self.failed: list[str] = []

    def run(self, name: str, fn) -> None:
        try:
            fn()
            self.done.append(name)
        except Exception:  # noqa: BLE001 - reported, never swallowed
            self.failed.append(f"{name}: {traceback.format_exc(limit=6)}")


def save(name: str, y: jax.Array) -> None:
    """With JAXMG_TEST_OUT set, stores this process's blocks of a result for
    the launcher to compare with the SPMD result."""
    out = os.environ.get("JAXMG_TEST_OUT")
    if out:
        for k, (idx, blk) in enumerate(local_blocks(y)):
            np.save(os.path.join(out, f"{name}-p{jax.process_index()}-{k}.npy"), blk)
            with open(os.path.join(out, f"{name}-p{jax.process_index()}-{k}.idx"), "w") as f:
                f.write(repr(tuple((s.start, s.stop) for s in idx)))


def check_potrs(mesh: Mesh, spec: P, n: int, dtype, rng) -> None:
    a = jt.make_hpd(rng, n, dtype)
    b = jt.make_rhs(rng, n, 3, dtype)
    x = jaxmg.potrs(global_array(a, mesh, spec), global_array(b, mesh, P(None, None)),
                    T_A=2, mesh=mesh, in_specs=(spec, P(None, None)))
    save(f"potrs-{np.dtype(dtype).name}", x)
    for _, xb in local_blocks(x):
        res = np.linalg.norm(jt.to_ref(a) @ jt.to_ref(xb) - jt.to_ref(b))
        res /= np.linalg.norm(jt.to_ref(a)) * np.linalg.norm(jt.to_ref(xb))
        assert res < jt.tol(dtype, n), f"potrs residual {res:.3g}"
    # The log-determinant: the optional result crosses processes too.
    _, logdet = jaxmg.potrs(global_array(a, mesh, spec), global_array(b, mesh, P(None, None)),
                            T_A=2, mesh=mesh, in_specs=(spec, P(None, None)),
                            return_logdet=True)
    want = np.linalg.slogdet(jt.to_ref(a))[1]
    for _, lb in local_blocks(logdet):
        assert abs(float(lb) - want) <= 10 * jt.eps(dtype) * n * abs(want), \
            f"potrs logdet {float(lb)!r}, expected {want!r}"


def check_potri(mesh: Mesh, spec: P, n: int, dtype, rng) -> None:
    a = jt.make_hpd(rng, n, dtype)
    inv = jaxmg.potri(global_array(a, mesh, spec), T_A=2, mesh=mesh, in_specs=(spec,))
    save(f"potri-{np.dtype(dtype).name}", inv)
    ref = np.linalg.inv(jt.to_ref(a))
    for idx, blk in local_blocks(inv):
        err = np.linalg.norm(jt.to_ref(blk) - ref[idx]) / np.linalg.norm(ref)
        assert err < jt.tol(dtype, n) * 10, f"potri error {err:.3g}"


def check_syevd(mesh: Mesh, spec: P, n: int, dtype, rng) -> None:
    a = jt.make_hermitian(rng, n, dtype)
    w, v = jaxmg.syevd(global_array(a, mesh, spec), T_A=2, mesh=mesh, in_specs=(spec,))
    save(f"syevd-{np.dtype(dtype).name}", w)
    w_ref = np.linalg.eigvalsh(jt.to_ref(a))
    scale = np.linalg.norm(w_ref, np.inf)
    for _, wb in local_blocks(w):
        err = np.max(np.abs(jt.to_ref(wb) - w_ref)) / scale
        assert err < jt.tol(dtype, n), f"eigenvalue error {err:.3g}"
    wl = jt.to_ref(local_blocks(w)[0][1])
    for idx, vb in local_blocks(v):  # this process's columns of V
        vb = jt.to_ref(vb)
        cols = wl[idx[1]]
        res = np.linalg.norm(jt.to_ref(a) @ vb - vb * cols) / (scale * n)
        orth = np.linalg.norm(vb.conj().T @ vb - np.eye(vb.shape[1]))
        assert res < jt.tol(dtype, n), f"eigenvector residual {res:.3g}"
        assert orth < jt.tol(dtype, n), f"orthogonality {orth:.3g}"


def check_fresh_potrs(mesh: Mesh, n: int, rng) -> None:
    """potrs on new random inputs, checked by its residual."""
    a = jt.make_hpd(rng, n, np.float64)
    b = jt.make_rhs(rng, n, 2, np.float64)
    x = jaxmg.potrs(global_array(a, mesh, P("x", None)), global_array(b, mesh, P(None, None)),
                    T_A=2, mesh=mesh, in_specs=(P("x", None), P(None, None)))
    xb = local_blocks(x)[0][1]
    res = np.linalg.norm(a @ xb - b) / (np.linalg.norm(a) * np.linalg.norm(xb))
    assert res < jt.tol(np.float64, n), f"potrs residual {res:.3g}"


OPS = {"potrs": check_potrs, "potri": check_potri, "syevd": check_syevd}


def every_op_and_dtype(mesh: Mesh, spec: P, checks: Checks, dtypes, n: int) -> None:
    for op, fn in OPS.items():
        for name in dtypes:
            rng = np.random.default_rng([len(op), jt.DTYPE_IDS.index(name)])
            checks.run(f"{op}-{name}", lambda: fn(mesh, spec, n, DTYPES[name], rng))


def two_independent_calls(mesh: Mesh, checks: Checks) -> None:
    """Two solves with no data dependence in one program: each process may run
    them in either order; the call sites keep them apart."""
    def run() -> None:
        rng = np.random.default_rng(7)
        a1, a2 = jt.make_hpd(rng, 8, np.float64), jt.make_hpd(rng, 8, np.float64)
        b = jt.make_rhs(rng, 8, 2, np.float64)
        spec = P("x", None)

        @jax.jit
        def both(a1, a2, b):
            solve = lambda a: jaxmg.potrs(a, b, T_A=2, mesh=mesh, in_specs=(spec, P(None, None)))
            return solve(a1), solve(a2)

        g = lambda x: global_array(x, mesh, spec)
        for _ in range(3):  # repeated executions: sequence numbers
            x1, x2 = both(g(a1), g(a2), global_array(b, mesh, P(None, None)))
            for a, x in ((a1, x1), (a2, x2)):
                xb = local_blocks(x)[0][1]
                assert np.linalg.norm(a @ xb - b) < 1e-10 * np.linalg.norm(b)
    checks.run("two-independent-calls", run)


def status_on_failure(mesh: Mesh, checks: Checks) -> None:
    def run() -> None:
        a = np.eye(8)
        a[5, 5] = -1.0
        x, status = jaxmg.potrs(global_array(a, mesh, P("x", None)),
                                global_array(np.ones((8, 1)), mesh, P(None, None)),
                                T_A=2, mesh=mesh, in_specs=(P("x", None), P(None, None)),
                                return_status=True)
        assert int(np.asarray(local_blocks(status)[0][1])) == 6
        assert np.all(np.isnan(local_blocks(x)[0][1]))
    checks.run("status-on-failure", run)


def shardmap_ctx(mesh: Mesh, checks: Checks) -> None:
    def run() -> None:
        rng = np.random.default_rng(11)
        a = jt.make_hpd(rng, 8, np.float64)
        b = jt.make_rhs(rng, 8, 2, np.float64)
        f = jax.shard_map(lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, T_A=2), mesh=mesh,
                          in_specs=(P("x", None), P(None, None)),
                          out_specs=(P(None, None), P(None)), check_vma=False)
        x, status = jax.jit(f)(global_array(a, mesh, P("x", None)),
                               global_array(b, mesh, P(None, None)))
        assert int(local_blocks(status)[0][1][0]) == 0
        xb = local_blocks(x)[0][1]
        assert np.linalg.norm(a @ xb - b) < 1e-10 * np.linalg.norm(b)
    checks.run("shardmap-ctx", run)


def netket_solvers(checks: Checks) -> None:
    """NetKet's distributed solvers, unchanged, on its mesh (one axis "S"
    over every process's devices, Auto, set with jax.sharding.set_mesh),
    eagerly and under jit, against NumPy (every process checks its blocks
    of x: NetKet leaves x's layout to XLA under Auto axes)."""
    import netket as nk
    from jax.sharding import AxisType

    mesh = Mesh(np.array(jax.devices()), ("S",), axis_types=(AxisType.Auto,))
    n = ROWS_PER_PROCESS * len(jax.devices())
    rng = np.random.default_rng(7)
    a = jt.make_hpd(rng, n, np.float64)
    b = jt.make_rhs(rng, n, None, np.float64)
    ref = np.linalg.solve(a, b)
    with jax.sharding.set_mesh(mesh):
        A, B = global_array(a, mesh, P("S", None)), global_array(b, mesh, P())
        for name in ("cholesky_distributed", "pinv_smooth_distributed"):
            solver = getattr(nk.optimizer.solver, name)
            for how, fn in (("eager", solver), ("jit", jax.jit(solver))):
                def run(fn=fn) -> None:
                    x, _ = fn(A, B)
                    for idx, blk in local_blocks(x):
                        np.testing.assert_allclose(blk, ref[idx], atol=1e-11)
                checks.run(f"{name}-{how}", run)


def comm_ids(checks: Checks, me: int) -> None:
    """Communicator ids through the job's real key-value store
    (_mode.share_comm_ids): group "g0" made by process 0, "g1" by process 1,
    "g2" (process 1's alone) by process 1 and never fetched by process 0.
    Each process reports the ids it holds and the ones it made (random bytes
    stand in for NCCL's ids: on CPU there is no NCCL); the launcher compares
    them across processes. Asked again with the cache, nothing is made and
    nothing waited for."""
    from jaxmg._src import _mode

    made: list[bytes] = []

    def make() -> bytes:
        made.append(os.urandom(128))
        return made[-1]

    tags = ["g0", "g1", "g2" if me == 1 else None]
    cache: dict = {}
    job = _mode.job_id()
    ids = _mode.share_comm_ids(tags, [0, 1, 1], me, job, make, cache)
    checks.done.append("ids " + " ".join(i.hex() for i in ids))
    checks.done.append("made " + " ".join(m.hex() for m in made))
    attr = _mode.comm_id_attr(ids)
    checks.run("attr", lambda: _check(len(attr) == 48 and
                                      np.asarray(attr, np.int64).tobytes() == b"".join(ids)))
    again = _mode.share_comm_ids(tags, [0, 1, 1], me, job, make, cache)
    checks.run("cached", lambda: _check(again == ids and len(made) == (1 if me == 0 else 2)))
    # Process 0 holds the key-value store: it stays until process 1 is done.
    from jaxmg._src import _compat
    _compat.kv_set(f"test/comm_ids/done/{me}", "1")
    _compat.kv_get(f"test/comm_ids/done/{1 - me}", 60.0)
    if me == 0:  # and until process 1 has printed its result
        time.sleep(3.0)


# Failures across the processes of a local-model job (3 processes, one
# device each; the launcher sets JAXMG_ENGINE): after a first call together
# (which sets the communicator up and compiles the program), process 1
# raises before the second call and its process ends ("local-raise"), is
# killed inside it ("local-kill": 1 s in, while process 2 comes 3 s late),
# or never arrives ("local-absent": it comes JAXMG_RENDEZVOUS_TIMEOUT + 2 s
# late); or it is killed before the first call in the local model, while the
# others set its communicator up ("local-kill-first"). The others record how long the call
# took to fail and why; the late process too.
LOCAL_FAILURES = ("local-raise", "local-kill", "local-absent", "local-kill-first")


def local_failure(name: str, checks: Checks, me: int) -> None:
    mesh = Mesh(np.array(jax.devices()), ("x",))
    a = global_array(jt.make_hpd(np.random.default_rng(1), 12, np.float64), mesh,
                     P("x", None))

    def potri() -> jax.Array:
        return jax.block_until_ready(jaxmg.potri(a, T_A=2, mesh=mesh, in_specs=(P("x", None),)))

    if name == "local-kill-first":
        # A first call in the leader model (engine lapack; on GPUs
        # JAXMG_TEST_LEADER_ENGINE's) publishes every process's pid; the
        # next, the first in the local model (the job's JAXMG_ENGINE), sets
        # its communicator up, and process 1 is dead by then.
        local_engine = os.environ.get("JAXMG_ENGINE", "lapack-local")
        os.environ["JAXMG_ENGINE"] = os.environ.get("JAXMG_TEST_LEADER_ENGINE", "lapack")
        potri()
        os.environ["JAXMG_ENGINE"] = local_engine
        if me == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        t0 = time.monotonic()
        try:
            potri()
            checks.failed.append(f"{name}: the call succeeded without its peers")
        except Exception as e:  # noqa: BLE001
            checks.done.append(f"raised after {time.monotonic() - t0:.2f} s: {e}")
        return
    potri()
    if me == 1 and name == "local-raise":
        try:
            raise ValueError("process 1 fails before the call")
        except ValueError as e:
            checks.done.append(f"raised: {e}")
            return  # and the process ends (main)
    if me == 1 and name == "local-kill":
        threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
    # "local-kill": the process that comes 3 s late, so that the others wait
    # inside the call when process 1 dies: process 2, or with 2 processes
    # process 1 itself (killed while the other waits for it).
    if me == (2 if jax.process_count() > 2 else 1) and name == "local-kill":
        time.sleep(3.0)
    if me == 1 and name == "local-absent":
        late_s = float(os.environ["JAXMG_RENDEZVOUS_TIMEOUT"])
        time.sleep(late_s + 2.0)
        if jax.devices()[0].platform != "cpu":
            # Its call should fail by its own timeout; past twice that, say
            # where it waits (every thread's stack; replaces the hang dump).
            faulthandler.dump_traceback_later(2 * late_s + 4.0, exit=False)
    t0 = time.monotonic()
    try:
        potri()
        checks.failed.append(f"{name}: the call succeeded without its peers")
    except Exception as e:  # noqa: BLE001
        checks.done.append(f"raised after {time.monotonic() - t0:.2f} s: {e}")
    if name == "local-absent" and me != 1 and jax.devices()[0].platform != "cpu":
        # On NCCL the late process learns that the others gave up only by
        # its own timeout (the CPU communicator tells it at once); process
        # 0 holds jax.distributed's coordination service, whose end kills
        # every process still in the job, so the others stay until it has
        # failed (on 2 H200, 11-27, process 1 was killed this way before it
        # could report).
        timeout = float(os.environ["JAXMG_RENDEZVOUS_TIMEOUT"])
        time.sleep(max(0.0, 2 * timeout + 6.0 - (time.monotonic() - t0)))


def _check(ok: bool) -> None:
    if not ok:
        raise AssertionError("check failed")


def scenario(name: str, checks: Checks, me: int) -> None:
    devices = np.array(jax.devices())
    if name == "all":
        mesh = Mesh(devices, ("x",))
        every_op_and_dtype(mesh, P("x", None), checks, jt.DTYPE_IDS,
                           n=ROWS_PER_PROCESS * len(devices))
        two_independent_calls(mesh, checks)
        status_on_failure(mesh, checks)
        shardmap_ctx(mesh, checks)
    elif name == "mesh2d":
        # The seed tutorial's pattern: "S" across processes, "T" within.
        by_proc: dict[int, list] = {}
        for d in jax.devices():
            by_proc.setdefault(d.process_index, []).append(d)
        grid = np.array([by_proc[p] for p in sorted(by_proc)])
        mesh = Mesh(grid, ("S", "T"))
        for spec in (P("T", None), P(("S", "T"), None)):
            for op in ("potrs", "syevd"):
                rng = np.random.default_rng(3)
                checks.run(f"{op}-{spec}", lambda: OPS[op](mesh, spec, 8, np.float64, rng))
    elif name == "nodes":
        # Each process pretends to be its own node: calls whose devices span
        # processes must be refused at trace time (the leader engines drive
        # one node; cuSOLVERMp, which would not, is GPUs only), in every
        # process, while calls within a process still work.
        from jaxmg._src import _mode
        _mode.node_name = lambda: f"fake-node-{me}"
        by_proc = {}
        for d in jax.devices():
            by_proc.setdefault(d.process_index, []).append(d)
        mesh = Mesh(np.array([by_proc[p] for p in sorted(by_proc)]), ("S", "T"))
        rng = np.random.default_rng(5)
        checks.run("within-a-node", lambda: check_potrs(mesh, P("T", None), 8, np.float64, rng))
        a = global_array(np.eye(8), mesh, P(("S", "T"), None))
        b = global_array(np.ones((8, 1)), mesh, P(None, None))
        ctx = jax.jit(jax.shard_map(lambda a, b: jaxmg.potrs_shardmap_ctx(
                                        a, b, T_A=2, axis_name=("S", "T")),
                                    mesh=mesh, in_specs=(P(("S", "T"), None), P(None, None)),
                                    out_specs=(P(None, None), P(None)), check_vma=False))
        plain = lambda: jaxmg.potrs(a, b, T_A=2, mesh=mesh,  # noqa: E731
                                    in_specs=(P(("S", "T"), None), P(None, None)))
        for what, call in (("plain", plain), ("shardmap_ctx", lambda: ctx(a, b))):
            try:
                call()
                checks.failed.append(f"{what}: a call across two nodes was not refused")
            except ValueError as e:
                if "spans 2 nodes" in str(e) and 'pip install "jaxmg[cuda13]"' in str(e):
                    checks.done.append(f"{what} refused: {e}")
                else:
                    checks.failed.append(f"{what}: refused for another reason: {e}")
    elif name == "comm_ids":
        comm_ids(checks, me)
    elif name in ("kill", "kill-early"):
        # After a first call together (which compiles the program, so that
        # the second call reaches the rendezvous at once), shard 1 is killed:
        # inside the second call, 1 s in, while shard 0 waits for shard 2,
        # which comes 3 s late ("kill"); or before it reaches the second call
        # ("kill-early"). Shards 0 and 2 must raise, naming shard 1.
        mesh = Mesh(devices, ("x",))
        a = global_array(jt.make_hpd(np.random.default_rng(1), 6, np.float64), mesh,
                         P("x", None))

        def potri() -> jax.Array:
            # Errors of a dispatched call surface when its result is awaited.
            return jax.block_until_ready(
                jaxmg.potri(a, T_A=2, mesh=mesh, in_specs=(P("x", None),)))

        potri()
        if me == 1 and name == "kill-early":
            os.kill(os.getpid(), signal.SIGKILL)
        if me == 1:
            threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
        if me == 2:
            time.sleep(3.0)
        t0 = time.monotonic()
        try:
            potri()
            checks.failed.append(f"{name}: the call succeeded without its peers")
        except Exception as e:  # noqa: BLE001
            checks.done.append(f"raised after {time.monotonic() - t0:.2f} s: {e}")
    elif name == "fresh":
        # Calls back to back, each on fresh random inputs (a compiled program
        # reaches the rendezvous at once), two tiles per device: the case in
        # which 4 GPU processes got wrong factors (docs/gpu-notes.md).
        mesh = Mesh(devices, ("x",))
        rng = np.random.default_rng(21)
        for i in range(FRESH_CALLS):
            checks.run(f"fresh-{i}", lambda: check_fresh_potrs(mesh, 4 * len(devices), rng))
    elif name == "netket":
        netket_solvers(checks)
    elif name == "local":
        # The local model (JAXMG_ENGINE from the launcher: lapack-local on
        # CPU devices, cusolvermp on GPUs): tests/python/mpmd_local.py.
        mpmd_local.run_cases(checks, len(devices))
    elif name == "local-default":
        # The local model chosen by default: every process on a "node" of
        # its own (tests/python/mpmd_local.py, default_cases).
        mpmd_local.run_default_cases(checks, len(devices), me)
    elif name in LOCAL_FAILURES:
        local_failure(name, checks, me)
    elif name == "loop":
        mesh = Mesh(devices, ("x",))
        for i in range(4):
            rng = np.random.default_rng(100 + i)
            checks.run(f"loop-{i}", lambda: check_potrs(mesh, P("x", None), 8, np.float64, rng))
    else:
        raise ValueError(f"unknown scenario {name}")


def main() -> None:
    name, port, nproc, me = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    failing = name.startswith("kill") or name in LOCAL_FAILURES
    if failing:
        # Without it, jax.distributed brings every process down when one dies.
        jax.config.update("jax_enable_recoverability", True)
    # On GPUs each process drives one GPU but sees them all (the leader opens
    # the others' memory through CUDA IPC): local_device_ids, not
    # CUDA_VISIBLE_DEVICES, picks its GPU.
    per = int(os.environ.get("JAXMG_TEST_DEVICES_PER_PROCESS", "1"))
    local = list(range(me * per, (me + 1) * per)) if PLATFORM != "cpu" else None
    jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=nproc,
                               process_id=me, local_device_ids=local)
    checks = Checks()
    # A hang shows where it hangs (before the launcher's bound kills it).
    # JAXMG_TEST_HANG_S: sooner, for a launcher whose own bound is shorter.
    hang_s = float(os.environ.get("JAXMG_TEST_HANG_S", "80" if PLATFORM == "cpu" else "500"))
    faulthandler.dump_traceback_later(hang_s, exit=True)
    try:
        # "a+b": the scenarios one after another in the same processes (one
        # job's start-up for several scenarios).
        for part in name.split("+"):
            scenario(part, checks, me)
    except Exception:  # noqa: BLE001
        checks.failed.append(traceback.format_exc())
    print("RESULT " + json.dumps({"process": me, "done": checks.done,
                                  "failed": checks.failed}), flush=True)
    if failing and me == 0:
        # The coordination service lives in process 0 ("local-absent": until
        # the late process has made its call).
        late = float(os.environ.get("JAXMG_RENDEZVOUS_TIMEOUT", "0")) + 2.0
        time.sleep(4.0 + (late if name == "local-absent" else 0.0))
    elif not failing:
        # The coordination service lives in process 0: it leaves only after
        # every process has printed its result (in scenarios whose last
        # steps need no peer, such as "nodes", process 0 may finish first).
        from jaxmg._src import _compat
        try:
            _compat.kv_set(f"jaxmg-test-done/{name}/{me}", "1")
            if me == 0:
                for p in range(1, nproc):
                    _compat.kv_get(f"jaxmg-test-done/{name}/{p}", 60.0)
        except Exception as e:  # noqa: BLE001  (the results are printed already)
            print(f"process {me}: waiting for the others to finish: {e}", flush=True)
    # Skip jax.distributed's shutdown barrier: in the failure scenarios some
    # processes are gone and it would wait for them.
    os._exit(0)


if __name__ == "__main__":
    main()
