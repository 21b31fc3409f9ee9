"""MPMD on CPU devices: jobs of 2 to 4 processes started with
``jax.distributed.initialize`` on localhost, each process with its own CPU
device(s), meeting through the process rendezvous and sharing their buffers
through POSIX shared memory (what CUDA IPC does on GPUs).

Each job runs tests/python/mpmd_worker.py in every process; the worker checks
its own shards against a float64 NumPy reference and prints its checks. Jobs
are few and small (process start-up dominates on a small machine); each one
covers several cases."""

from __future__ import annotations

import pytest

from mpmd_launch import (assert_all_passed, assert_killed_job, finish_job, run_example, run_job,
                         shm_names, start_job)

# The tests that start processes run one after another on one pytest-xdist
# worker (scripts/test.sh: --dist loadgroup): they look for shared memory
# segments and sockets left behind, which another worker's job would make.
pytestmark = pytest.mark.xdist_group("processes")


def test_two_processes_every_op_and_dtype():
    """potrs, potri, syevd in float32/64, complex64/128; two independent calls
    in one program, run repeatedly; a failing status; the shard_map form."""
    before = shm_names()
    assert_all_passed(run_job("all", 2), 2, expect=15)
    assert shm_names() <= before  # every segment removed


@pytest.fixture(scope="module")
def four_process_job():
    """One job of four processes runs "all", then "fresh" (a job's start-up
    is four JAX processes on two cores): its results, and whether every
    shared memory segment it made was removed."""
    before = shm_names()
    results = run_job("all+fresh", 4, bound_s=200.0, extra_env={"JAXMG_TEST_HANG_S": "190"})
    return results, shm_names() <= before


def checks_named(results: dict, nproc: int, fresh: bool) -> dict:
    """results with each process's done checks narrowed to the "fresh"
    scenario's (or to the others'); failures are kept whole."""
    out = dict(results)
    for i in range(nproc):
        if i in results:
            done = [d for d in results[i]["done"] if d.startswith("fresh-") == fresh]
            out[i] = dict(results[i], done=done)
    return out


def test_four_processes_every_op_and_dtype(four_process_job):
    """As with two processes, with four."""
    results, swept = four_process_job
    assert_all_passed(checks_named(results, 4, fresh=False), 4, expect=15)
    assert swept  # every segment removed


def test_back_to_back_calls_on_fresh_inputs_with_four_processes(four_process_job):
    """40 potrs calls in a row, each on new random inputs, each checked in
    every process: no shard is ever read before its process wrote it (in
    the processes that ran "all" first)."""
    results, _ = four_process_job
    assert_all_passed(checks_named(results, 4, fresh=True), 4, expect=40)


def test_mesh_2d_processes_times_devices():
    """The seed tutorial's mesh ("S", "T"): 2 processes of 2 devices. Rows
    over "T" solve one copy per process (SPMD inside a multi-process job);
    rows over ("S", "T") solve one matrix across both processes, two devices
    of each (MPMD with two participants per process)."""
    assert_all_passed(run_job("mesh2d", 2, devices_per_process=2), 2, expect=4)


def test_calls_across_nodes_are_refused_in_every_process():
    """Two processes that each pretend to be a node of their own: a call over
    devices of both (plain form and shard_map form) raises ValueError saying
    the group spans 2 nodes and naming the extra (cuSOLVERMp, GPUs only),
    at trace time in both processes; a call over each process's own devices
    still solves."""
    assert_all_passed(run_job("nodes", 2, devices_per_process=2), 2, expect=3)


def test_killed_process_fails_the_others_then_its_region_is_swept():
    """Shard 1 is killed inside a call that waits for shard 2: shard 0 raises
    at once (not after the 30 s timeout), naming the dead shard, and so does
    shard 2 when it comes. Shard 1's buffer region, left in /dev/shm, is
    removed by the next job, which works."""
    assert_killed_job(run_job("kill", 3), within_s=3.0)
    left = {n for n in shm_names("jaxmg-d-")}
    assert left, "shard 1's buffer region should be left behind"

    # A second job: its first MPMD call sweeps what the crashed one left.
    assert_all_passed(run_job("loop", 2), 2, expect=4)
    assert not (left & shm_names()), left & shm_names()


def test_process_killed_before_a_call_fails_the_others_at_once():
    """Shard 1 dies before it reaches a call: the others know its pid (each
    process publishes it), so they raise at once, naming it, instead of
    waiting out the 30 s rendezvous timeout."""
    assert_killed_job(run_job("kill-early", 3), within_s=3.0, early=True)


def test_two_jobs_at_once_never_meet():
    """Two jobs on one machine run the same program at the same time: their
    calls have equal keys but for the job identity, and must never mix."""
    jobs = [start_job("loop", 2), start_job("loop", 2)]
    for procs in jobs:
        assert_all_passed(finish_job(procs), 2, expect=4)


def test_example_mpmd_potrs_runs_as_documented():
    """examples/mpmd_potrs.py, launched as its docstring says (with --cpu)."""
    run_example(2, cpu=True)


def test_communicator_ids_reach_every_process_of_their_group():
    """_mode.share_comm_ids through JAX's key-value store in a job of two
    processes: each group's id is made once, by its maker, and every
    process of the group holds the same bytes; a process outside a group
    holds zeros for it."""
    results = run_job("comm_ids", 2)
    assert_all_passed(results, 2, expect=4)
    ids = {i: results[i]["done"][0].split()[1:] for i in (0, 1)}
    made = {i: results[i]["done"][1].split()[1:] for i in (0, 1)}
    assert made[0] == [ids[0][0]] and made[1] == ids[1][1:]
    assert ids[0][:2] == ids[1][:2]
    assert ids[0][2] == "00" * 128 and ids[1][2] not in ids[1][:2]
