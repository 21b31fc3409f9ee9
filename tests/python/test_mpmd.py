"""MPMD on CPU devices: jobs of 2 to 4 processes started with
``jax.distributed.initialize`` on localhost, each process with its own CPU
device(s), meeting through the process rendezvous and sharing their buffers
through POSIX shared memory (what CUDA IPC does on GPUs).

Each job runs tests/python/mpmd_worker.py in every process; the worker checks
its own shards against a float64 NumPy reference and prints its checks. Jobs
are few and small (process start-up dominates on a small machine); each one
covers several cases."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
WORKER = HERE / "mpmd_worker.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def start_job(scenario: str, nproc: int, devices_per_process: int = 1,
              timeout_s: float = 30.0) -> list[subprocess.Popen]:
    port = free_port()
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices_per_process}"
    env["JAX_PLATFORMS"] = "cpu"
    env["JAXMG_RENDEZVOUS_TIMEOUT"] = str(timeout_s)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    return [subprocess.Popen([sys.executable, str(WORKER), scenario, str(port), str(nproc),
                              str(i)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
            for i in range(nproc)]


def finish_job(procs: list[subprocess.Popen], bound_s: float = 100.0) -> dict[int, dict]:
    """Each process's result line, by process id (missing for a process that
    died); kills whatever is still running after bound_s."""
    end = time.monotonic() + bound_s
    results, outputs = {}, {}
    for i, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(end - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        outputs[i] = out
        for line in out.splitlines():
            if line.startswith("RESULT "):
                results[i] = json.loads(line[len("RESULT "):])
    results["outputs"] = outputs
    return results


def run_job(*args, **kwargs) -> dict[int, dict]:
    return finish_job(start_job(*args, **kwargs))


def assert_all_passed(results: dict, nproc: int, expect: int) -> None:
    for i in range(nproc):
        assert i in results, f"process {i} gave no result:\n{results['outputs'][i][-3000:]}"
        r = results[i]
        assert not r["failed"], f"process {i}:\n" + "\n".join(r["failed"])
        assert len(r["done"]) == expect, r["done"]


def shm_names(prefix: str = "jaxmg-") -> set[str]:
    return {n for n in os.listdir("/dev/shm") if n.startswith(prefix)}


def test_two_processes_every_op_and_dtype():
    """potrs, potri, syevd in float32/64, complex64/128; two independent calls
    in one program, run repeatedly; a failing status; the shard_map form."""
    before = shm_names()
    assert_all_passed(run_job("all", 2), 2, expect=15)
    assert shm_names() <= before  # every segment removed


def test_four_processes_every_op():
    assert_all_passed(run_job("some", 4), 4, expect=6)


def test_mesh_2d_processes_times_devices():
    """The seed tutorial's mesh ("S", "T"): 2 processes of 2 devices. Rows
    over "T" solve one copy per process (SPMD inside a multi-process job);
    rows over ("S", "T") solve one matrix across both processes, two devices
    of each (MPMD with two participants per process)."""
    assert_all_passed(run_job("mesh2d", 2, devices_per_process=2), 2, expect=4)


def test_killed_process_fails_the_others_then_its_region_is_swept():
    """Shard 1 is killed inside a call that waits for shard 2: shard 0 raises
    at once (not after the 30 s timeout), naming the dead shard, and so does
    shard 2 when it comes. Shard 1's buffer region, left in /dev/shm, is
    removed by the next job, which works."""
    results = run_job("kill", 3)
    assert 1 not in results  # killed
    for i in (0, 2):
        assert i in results, results["outputs"][i][-3000:]
        assert not results[i]["failed"], results[i]["failed"]
    (dead,) = results[0]["done"]
    assert "jaxmg.potri" in dead and "shard 1" in dead and "exited" in dead, dead
    assert float(dead.split("after ")[1].split(" s")[0]) < 3.0, dead
    (late,) = results[2]["done"]
    assert float(late.split("after ")[1].split(" s")[0]) < 3.0, late
    left = {n for n in shm_names("jaxmg-d-")}
    assert left, "shard 1's buffer region should be left behind"

    # A second job: its first MPMD call sweeps what the crashed one left.
    assert_all_passed(run_job("loop", 2), 2, expect=4)
    assert not (left & shm_names()), left & shm_names()


def test_two_jobs_at_once_never_meet():
    """Two jobs on one machine run the same program at the same time: their
    calls have equal keys but for the job identity, and must never mix."""
    jobs = [start_job("loop", 2), start_job("loop", 2)]
    for procs in jobs:
        assert_all_passed(finish_job(procs), 2, expect=4)
