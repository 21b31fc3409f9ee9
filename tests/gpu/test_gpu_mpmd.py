"""MPMD on GPUs: jobs of 2 and 4 processes, one GPU each (every process sees
every GPU, ``jax.distributed.initialize(local_device_ids=[i])`` picks its
own), sharing their buffers with the leader through CUDA IPC. Every op and
dtype is checked in each process against a float64 NumPy reference (residuals,
orthogonality), and here against the SPMD result of the same inputs on as many
GPUs of this process. Also the seed tutorial's mesh ("S", "T") with 2
processes of 2 GPUs.

The job processes run tests/python/mpmd_worker.py (the CPU MPMD tests' worker)
with JAXMG_TEST_PLATFORM=cuda."""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

import jaxmg_testing as jt  # noqa: E402
from mpmd_launch import (ROWS_PER_PROCESS, assert_all_passed, assert_killed_job, finish_job, run_example, run_job,  # noqa: E402
                         start_job)
# The CPU MPMD tests' split of an "all+fresh" job's checks by scenario.
from test_mpmd import checks_named  # noqa: E402


def spmd_result(op: str, dtype, n: int, nparts: int, gpus):
    """The op on the worker's inputs (mpmd_worker.every_op_and_dtype's seeds)
    over this process's first nparts GPUs: the SPMD result."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    import jaxmg

    # Run alone (without tests/python's conftest), float64 would be float32.
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng([len(op), jt.DTYPES.index(dtype)])
    mesh = Mesh(np.array(gpus[:nparts]), ("x",))
    if op == "syevd":
        a = jt.make_hermitian(rng, n, dtype)
    else:
        a = jt.make_hpd(rng, n, dtype)
    a_dev = jax.device_put(a, NamedSharding(mesh, P("x", None)))
    if op == "potrs":
        b = jt.make_rhs(rng, n, 3, dtype)
        return np.asarray(jaxmg.potrs(a_dev, jax.device_put(b, NamedSharding(mesh, P())),
                                      T_A=2, mesh=mesh, in_specs=(P("x", None), P(None, None))))
    if op == "potri":
        return np.asarray(jaxmg.potri(a_dev, T_A=2, mesh=mesh, in_specs=(P("x", None),)))
    return np.asarray(jaxmg.syevd(a_dev, T_A=2, mesh=mesh, in_specs=(P("x", None),))[0])


@pytest.fixture(scope="module")
def all_and_fresh_job(tmp_path_factory):
    """One job of nproc processes, one GPU each, running the worker's "all"
    scenario (its results saved for the SPMD comparison) and then "fresh",
    in the same processes: one job's start-up for the two tests below. Run
    at the first test's asking; its results, and the folder of the saved
    blocks, by nproc."""
    jobs: dict[int, tuple[dict, pathlib.Path]] = {}

    def get(nproc: int) -> tuple[dict, pathlib.Path]:
        if nproc not in jobs:
            out = tmp_path_factory.mktemp(f"all_fresh_{nproc}")
            jobs[nproc] = (run_job("all+fresh", nproc, platform="cuda", timeout_s=120.0,
                                   bound_s=550.0, extra_env={"JAXMG_TEST_OUT": str(out)}),
                           out)
        return jobs[nproc]

    return get


@pytest.mark.timeout(600)
@pytest.mark.parametrize("nproc", [2, 4])
def test_gpu_mpmd_every_op_and_dtype_matches_spmd(gpus, nproc, all_and_fresh_job):
    if len(gpus) < nproc:
        pytest.skip(f"needs {nproc} GPUs")
    results, saved = all_and_fresh_job(nproc)
    assert_all_passed(checks_named(results, nproc, fresh=False), nproc, expect=15)
    n = ROWS_PER_PROCESS * nproc
    for op in ("potrs", "potri", "syevd"):
        for dtype in jt.DTYPES:
            ref = spmd_result(op, dtype, n, nproc, gpus)
            blocks = sorted(saved.glob(f"{op}-{np.dtype(dtype).name}-p*-*.npy"))
            assert blocks, f"{op} {dtype}: no MPMD result saved"
            for path in blocks:
                idx = ast.literal_eval(path.with_suffix(".idx").read_text())
                part = ref[tuple(slice(*s) for s in idx)]
                got = np.load(path)
                scale = max(np.abs(ref).max(), 1.0)
                err = np.abs(got - part).max() / scale
                assert err < jt.tol(dtype, n), f"{op} {dtype} {path.name}: {err:.3g}"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("nproc", [
    2,
    # 4 processes: the case in which cusolverMgPotrf returned wrong factors
    # (docs/gpu-notes.md); the tiled factorization replaced it.
    4,
])
def test_gpu_mpmd_back_to_back_calls_on_fresh_inputs(gpus, nproc, all_and_fresh_job):
    """40 potrs calls in a row, each on new random inputs (the compiled
    program reaches the rendezvous at once), each checked in every process
    (in the processes that ran "all" first)."""
    if len(gpus) < nproc:
        pytest.skip(f"needs {nproc} GPUs")
    results, _ = all_and_fresh_job(nproc)
    assert_all_passed(checks_named(results, nproc, fresh=True), nproc, expect=40)


def test_gpu_mpmd_mesh_2d(gpus):
    """Two processes of two GPUs, mesh ("S", "T"): rows over "T" (one solve
    per process) and over ("S", "T") (one solve across both processes)."""
    if len(gpus) < 4:
        pytest.skip("needs 4 GPUs")
    results = run_job("mesh2d", 2, devices_per_process=2, platform="cuda",
                      timeout_s=120.0, bound_s=550.0)
    assert_all_passed(results, 2, expect=4)


def test_gpu_mpmd_killed_process_fails_the_others(gpus):
    """Three processes, one GPU each: shard 1 is killed inside a call that
    waits for shard 2 (its descriptors offered, its socket gone with it).
    Shard 0 raises at once, naming the dead shard, and so does shard 2 when
    it comes; neither waits for the rendezvous timeout (30 s)."""
    if len(gpus) < 3:
        pytest.skip("needs 3 GPUs")
    results = run_job("kill", 3, platform="cuda", timeout_s=30.0, bound_s=300.0)
    assert_killed_job(results, within_s=5.0)


def test_gpu_mpmd_process_killed_before_a_call_fails_the_others(gpus):
    """Three processes, one GPU each: shard 1 dies before it reaches a call.
    The others know its pid and raise at once, naming it, instead of
    waiting out the rendezvous timeout (30 s)."""
    if len(gpus) < 3:
        pytest.skip("needs 3 GPUs")
    results = run_job("kill-early", 3, platform="cuda", timeout_s=30.0, bound_s=300.0)
    assert_killed_job(results, within_s=5.0, early=True)


def test_gpu_mpmd_two_jobs_at_once_never_meet(gpus):
    """Two jobs of two processes on the same two GPUs at the same time: their
    calls differ only in the job identity and must never mix."""
    if len(gpus) < 2:
        pytest.skip("needs 2 GPUs")
    jobs = [start_job("loop", 2, platform="cuda", timeout_s=120.0),
            start_job("loop", 2, platform="cuda", timeout_s=120.0)]
    for procs in jobs:
        assert_all_passed(finish_job(procs, bound_s=300.0), 2, expect=4)


@pytest.mark.parametrize("nproc", [2, 4])
def test_gpu_example_mpmd_potrs_runs_as_documented(gpus, nproc):
    """examples/mpmd_potrs.py, launched as its docstring says, one process per
    GPU: every process reports a correct solve."""
    if len(gpus) < nproc:
        pytest.skip(f"needs {nproc} GPUs")
    run_example(nproc, cpu=False, bound_s=300.0)
