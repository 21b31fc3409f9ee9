"""Launching MPMD test jobs: every process of a job runs mpmd_worker.py,
started with jax.distributed on localhost. Used by tests/python/test_mpmd.py
(CPU devices) and tests/gpu/test_gpu_mpmd.py (one GPU per process)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
WORKER = HERE / "mpmd_worker.py"

# The rows of A each process holds in the jobs' every-op cases: the fewest
# that cuSOLVERMp's eigensolver takes on several GPUs (it fails inside the
# library below 8 rows a GPU: engine/cusolvermp/context.c, mp_supports), so
# that the same cases run on CPU devices (lapack-local) and GPUs.
ROWS_PER_PROCESS = 8


def xla_flags(devices: int | None) -> str:
    """XLA_FLAGS for a process the tests start: this process's own flags
    (scripts/test.sh's compile-time flags among them: the same code,
    compiled faster) with the CPU device count replaced by
    ``devices`` (left out where None: one device)."""
    flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "",
                   os.environ.get("XLA_FLAGS", "")).split()
    if devices is not None:
        flags.append(f"--xla_force_host_platform_device_count={devices}")
    return " ".join(flags)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def start_job(scenario: str, nproc: int, devices_per_process: int = 1,
              timeout_s: float = 30.0, platform: str = "cpu",
              extra_env: dict[str, str] | None = None) -> list[subprocess.Popen]:
    """Starts the nproc processes of one job running ``scenario``."""
    port = free_port()
    env = dict(os.environ)
    env["XLA_FLAGS"] = xla_flags(devices_per_process)
    env["JAX_PLATFORMS"] = platform
    env["JAXMG_TEST_PLATFORM"] = platform
    env["JAXMG_TEST_DEVICES_PER_PROCESS"] = str(devices_per_process)
    if platform != "cpu":
        # Every process sees every GPU (see mpmd_worker.main).
        env.pop("CUDA_VISIBLE_DEVICES", None)
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    env.update(extra_env or {})
    env["JAXMG_RENDEZVOUS_TIMEOUT"] = str(timeout_s)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    return [_start([sys.executable, str(WORKER), scenario, str(port), str(nproc), str(i)], env)
            for i in range(nproc)]


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    """One process of a job, its output (stdout and stderr) going to a file of
    its own rather than a pipe. With pipes, a launcher that reads its
    processes one after the other leaves the others' pipes unread: one that
    writes more than a pipe holds (64 KiB: XLA's warnings, JAXMG_TRACE,
    NCCL's log) then blocks in write() while the one being read waits for it
    in a collective, and the job hangs until its bound."""
    out = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    p.jaxmg_output = out  # type: ignore[attr-defined]
    return p


def _output(p: subprocess.Popen, end: float) -> str:
    """Waits for p until the monotonic time ``end`` (killing it then), and
    returns everything it wrote."""
    try:
        p.wait(timeout=max(end - time.monotonic(), 1.0))
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    out = p.jaxmg_output  # type: ignore[attr-defined]
    out.seek(0)
    text = out.read()
    out.close()
    return text


def finish_job(procs: list[subprocess.Popen], bound_s: float = 100.0) -> dict[int, dict]:
    """Each process's result line, by process id (missing for a process that
    died); kills whatever is still running after bound_s."""
    end = time.monotonic() + bound_s
    results, outputs = {}, {}
    for i, p in enumerate(procs):
        out = _output(p, end)
        outputs[i] = out
        for line in out.splitlines():
            if line.startswith("RESULT "):
                results[i] = json.loads(line[len("RESULT "):])
    results["outputs"] = outputs
    return results


def run_job(*args, bound_s: float = 100.0, **kwargs) -> dict[int, dict]:
    """start_job, then finish_job."""
    return finish_job(start_job(*args, **kwargs), bound_s)


def report_outputs(results: dict, nproc: int, expect: int | None = None,
                   tail: int = 20000) -> bool:
    """Whether every process reported, none failed and (``expect``) each made
    that many checks; if not, every process's output (its last ``tail``
    characters) goes to the real stderr at once, past pytest's capture, so
    that it reaches the log even when the run is cut before pytest's
    summary."""
    ok = all(i in results and not results[i]["failed"] and
             (expect is None or len(results[i]["done"]) == expect) for i in range(nproc))
    if not ok:
        for i in range(nproc):
            out = results["outputs"].get(i, "")
            sys.__stderr__.write(f"\n===== MPMD process {i} of {nproc}: "
                                 f"{'no RESULT line' if i not in results else 'its output'}"
                                 f" ({len(out)} characters, the last {tail}) =====\n")
            sys.__stderr__.write(out[-tail:] + "\n")
        sys.__stderr__.write(f"===== end of the {nproc} MPMD processes' output =====\n")
        sys.__stderr__.flush()
    return ok


def assert_all_passed(results: dict, nproc: int, expect: int) -> None:
    """Every process reported, with ``expect`` checks done and none failed."""
    for i in range(nproc):
        assert i in results, f"process {i} gave no result:\n{results['outputs'][i][-3000:]}"
        r = results[i]
        assert not r["failed"], f"process {i}:\n" + "\n".join(r["failed"])
        assert len(r["done"]) == expect, r["done"]


def assert_killed_job(results: dict, within_s: float, early: bool = False) -> None:
    """The "kill" scenario's outcome (``early``: "kill-early"'s): process 1
    gave no result (killed), and processes 0 and 2 each raised once, within
    within_s, process 0 naming the dead shard 1 and when it died."""
    assert 1 not in results  # killed
    for i in (0, 2):
        assert i in results, results["outputs"][i][-3000:]
        assert not results[i]["failed"], results[i]["failed"]
    when = "exited before it arrived" if early else "exited before the call was over"
    (dead,) = results[0]["done"]
    assert "jaxmg.potri" in dead and "shard 1 (pid" in dead and when in dead, dead
    assert float(dead.split("after ")[1].split(" s")[0]) < within_s, dead
    (late,) = results[2]["done"]
    assert float(late.split("after ")[1].split(" s")[0]) < within_s, late


def run_example(nproc: int, cpu: bool, bound_s: float = 120.0) -> list[str]:
    """examples/mpmd_potrs.py launched as its docstring says (one process per
    device; ``--cpu``: CPU devices), on a free port. Each process's output,
    after checking that it reported a correct solve."""
    example = HERE.parent.parent / "examples" / "mpmd_potrs.py"
    port = free_port()
    env = dict(os.environ, XLA_FLAGS=xla_flags(None))
    if not cpu:
        env.pop("CUDA_VISIBLE_DEVICES", None)  # every process sees every GPU
    procs = [_start([sys.executable, str(example), "--process-id", str(i), "--num-processes",
                     str(nproc), "--coordinator", f"localhost:{port}"] + (["--cpu"] if cpu else []),
                    env) for i in range(nproc)]
    end = time.monotonic() + bound_s
    outs = [_output(p, end) for p in procs]
    for i, out in enumerate(outs):
        assert f"process {i} of {nproc}: N={256 * nproc}, relative residual" in out, out[-2000:]
        assert "agrees with numpy.linalg.solve: ok" in out, out[-2000:]
    return outs


def shm_names(prefix: str = "jaxmg-") -> set[str]:
    """jaxmg's POSIX shared-memory segments on this machine."""
    return {n for n in os.listdir("/dev/shm") if n.startswith(prefix)}
