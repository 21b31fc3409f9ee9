"""The local model with one process per CPU device: jobs of 2 and 4
processes (jax.distributed on localhost), JAXMG_ENGINE=lapack-local, whose
groups meet over the processes communicator (comm/comm_processes.c) with ids
handed through JAX's key-value store, as cuSOLVERMp's do over NCCL on GPUs.

One job runs many cases (tests/python/mpmd_local.py, process start-up
dominates on a small machine): every op and dtype against NumPy, the seeds'
and 1.x's forms, the 1 x P line and r x c grids of the processes, padded and
not, a numerical failure on one rank only, jit, grad and vmap, the ctx forms,
NetKet's distributed solvers (process_grid included). Then failures across
processes: a process that raises before a call and ends, one killed inside
it, one killed before its first call, one that never arrives; the others
fail within the timeout with an error naming it (at once where its process
is gone), and a fresh job afterwards works. Nothing is left behind: no
abstract socket of jaxmg's (/proc/net/unix) and no shared memory segment."""

from __future__ import annotations

import pytest

import mpmd_local
from mpmd_launch import assert_all_passed, report_outputs, run_job, shm_names

# The tests that start processes run one after another on one pytest-xdist
# worker (scripts/test.sh: --dist loadgroup): they look for shared memory
# segments and sockets left behind, which another worker's job would make.
pytestmark = pytest.mark.xdist_group("processes")

LOCAL = {"JAXMG_ENGINE": "lapack-local"}


def sockets_left() -> set[str]:
    """jaxmg's abstract Unix sockets on this machine (the processes
    communicator's, "@jaxmg-comm-<group>-<rank>")."""
    try:
        with open("/proc/net/unix") as f:
            return {w for line in f for w in line.split() if w.startswith("@jaxmg-comm-")}
    except OSError:
        return set()


# Cases left out of one job because the other job runs the same check
# (tests/python/mpmd_local.py names them). The 2-process job runs every
# case of its own: every op in every dtype on the line, exact in the seeds'
# form and padded in 1.x's, the 2 x 1 grid, the failures, jit/grad/vmap and
# polar on the line and the grid, independent calls, the ctx forms and
# NetKet's solvers on their default and a 1 x 2 process grid. The
# 4-process job, where each case costs twice the CPU (four processes, each
# compiling it, on a machine of two cores), runs what needs more than two
# ranks: every op on the line once in each form (exact f64 in the seeds',
# padded c128 in 1.x's), the 2 x 2 grid's cases (ops, the failure,
# jit/grad/vmap, polar), the failure on the line, independent calls, the
# ctx forms (communicator ids for four ranks) and NetKet's solvers on
# process_grid=(2, 2); not the line's other dtypes, jit/grad/vmap, polar
# and NetKet's default grid (the same rules and code paths on four ranks as
# on two), nor the 4 x 1 grid, an r x 1 grid as the 2-process job's 2 x 1.
# Every op, dtype, form, layout kind and failure case still runs in some
# job, and on four processes every op and both forms.
COVERED_BY_THE_OTHER_JOB = {
    2: (),
    4: ("ops-grid4x1-", "failure-grid4x1", "ops-line-exact-f32", "ops-line-exact-c64",
        "ops-line-exact-c128", "ops-line-padded-f32", "ops-line-padded-f64",
        "ops-line-padded-c64", "jit-grad-vmap-line", "polar-line",
        "netket-cholesky_distributed-None", "netket-pinv_smooth_distributed-None"),
}


@pytest.mark.parametrize("nproc", [2, 4])
def test_every_case_of_the_local_model_across_processes(nproc, monkeypatch):
    before_shm, before_sockets = shm_names(), sockets_left()
    # JAXMG_TEST_LOCAL_CASES: every case of mpmd_local.cases but those left
    # out above (so that a case added there runs here too).
    monkeypatch.delenv("JAXMG_TEST_LOCAL_CASES", raising=False)
    skip = COVERED_BY_THE_OTHER_JOB[nproc]
    names = [name for name, _ in mpmd_local.cases(nproc) if not name.startswith(skip)]
    only = ",".join(names)
    monkeypatch.setenv("JAXMG_TEST_LOCAL_CASES", only)  # cases() reads it, here and there
    expect = len(mpmd_local.cases(nproc))
    assert expect == len(names), (expect, names)
    results = run_job("local", nproc, timeout_s=60.0, bound_s=400.0,
                      extra_env=dict(LOCAL, JAXMG_TEST_HANG_S="390",
                                     JAXMG_TEST_LOCAL_CASES=only))
    report_outputs(results, nproc, expect=expect)
    assert_all_passed(results, nproc, expect=expect)
    assert shm_names() <= before_shm
    assert sockets_left() <= before_sockets


def test_two_processes_of_two_devices_each():
    """The seed tutorial's mesh ("S", "T"), 2 processes of 2 devices: rows
    over "T" run in each process over the threads communicator; rows over
    ("S", "T") over the processes communicator, two ranks in each process."""
    assert_all_passed(run_job("mesh2d", 2, devices_per_process=2, extra_env=LOCAL), 2,
                      expect=4)


def _failed_within(results, i: int, bound_s: float, *says: str) -> str:
    assert i in results, results["outputs"][i][-3000:]
    assert not results[i]["failed"], results[i]["failed"]
    (line,) = results[i]["done"]
    assert line.startswith("raised after "), line
    took = float(line.split("after ")[1].split(" s")[0])
    assert took < bound_s, line
    for text in says:
        assert text in line, (text, line)
    return line


def test_a_process_that_raises_before_a_call_and_ends():
    """The others fail at once (not after the 30 s timeout): the connection
    to rank 1 closed."""
    results = run_job("local-raise", 3, timeout_s=30.0, bound_s=120.0, extra_env=LOCAL)
    assert results[1]["done"] == ["raised: process 1 fails before the call"], results[1]
    for i in (0, 2):
        _failed_within(results, i, 5.0, "jaxmg.potri", "rank 1 (pid", "exited or was killed")


def test_a_process_killed_inside_a_call():
    """Process 1 is killed 1 s into a call that waits for process 2 (3 s
    late): process 0 fails as soon as it needs rank 1 (once process 2 has
    come), process 2 at once, both naming rank 1, long before the 30 s
    timeout."""
    before = sockets_left()
    results = run_job("local-kill", 3, timeout_s=30.0, bound_s=120.0, extra_env=LOCAL)
    assert 1 not in results  # killed
    _failed_within(results, 0, 10.0, "jaxmg.potri", "rank 1 (pid")
    _failed_within(results, 2, 5.0, "jaxmg.potri", "rank 1 (pid")
    assert sockets_left() <= before


def test_a_process_killed_before_its_first_call_in_the_local_model():
    """While the others set the communicator up (after a call in the leader
    model, in which every process published its pid): each call names
    every shard's process, so they fail at once, naming rank 1's pid as
    gone, instead of waiting out the 30 s timeout."""
    results = run_job("local-kill-first", 3, timeout_s=30.0, bound_s=120.0, extra_env=LOCAL)
    assert 1 not in results
    for i in (0, 2):
        _failed_within(results, i, 5.0, "jaxmg.potri", "rank 1 (pid", "is gone")


def test_a_process_that_never_arrives_then_a_fresh_job_works():
    """Process 1 comes JAXMG_RENDEZVOUS_TIMEOUT + 2 s late: the others fail
    after the timeout saying that rank 1 never came; process 1 then fails
    at once (the call site's communicator failed, and it was told why).
    The next job on the machine works. The timeout is short, since the job
    lasts about twice it (the others' wait, then process 0's stay for the
    late one: mpmd_worker.main), and long enough for the first call, which
    all three make together, to meet."""
    timeout = 5.0
    results = run_job("local-absent", 3, timeout_s=timeout, bound_s=120.0, extra_env=LOCAL)
    lines = [_failed_within(results, i, timeout + 4.0, "jaxmg.potri") for i in (0, 2)]
    assert any("never came" in line and "rank 1" in line for line in lines), lines
    late = _failed_within(results, 1, 1.0, "failed earlier", "never came")
    assert "rank 1" in late, late
    assert_all_passed(run_job("loop", 2, extra_env=LOCAL), 2, expect=4)
