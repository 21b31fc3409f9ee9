"""The scaling benchmark (issue 37, item 1): for every op, N doubling from
8192 while the time budget lasts, on 1, 2 and 4 GPUs (the first k devices,
as many as the machine has), with every engine that can run the case, each
row set beside JAX's own routine on one GPU of the same machine, measured
in the same run.

    python bench/scaling.py [--budget-s 330] [--ops potrs,lu_solve,potri,syevd,syevd_values,gesvd]
                            [--sizes 8192,16384,32768,65536,131072] [--gpus 1,2,4]
                            [--engines default,cusolvermg,cusolvermp,cusolvermp-mpmd]
                            [--repeats 3] [--case-timeout-s 240] [--peak-tflops 67]
                            [--platform gpu|cpu] [--out DIR | --out-root ROOT]
    python bench/scaling.py --table DIR/results.csv     # the markdown table alone

On a GPU machine, in one command (build, cuSOLVERMp's wheel from .whl/ when
carried, the benchmark under a timeout; ~8 minutes on 2 GPUs):

    JAXMG_BENCH_TIMEOUT=380 scripts/device-bench.sh $OUT/scaling --scaling --budget-s 330

On 4 CPU devices, as a smoke test (tests/python/test_bench_scaling.py):

    python bench/scaling.py --platform cpu --sizes 32,64 --budget-s 60 --out /tmp/scaling

What is measured. Ops (JAX's routine on one device beside them): potrs
(cho_factor + cho_solve), lu_solve (jnp.linalg.solve), potri
(jnp.linalg.inv), syevd (jnp.linalg.eigh), syevd_values (jaxmg.syevd(...,
return_eigenvectors=False) against jnp.linalg.eigvalsh) and gesvd
(jnp.linalg.svd(full_matrices=False)); float64; A random Hermitian positive
definite, general for lu_solve and gesvd (bench/inputs.py; one A per op and
N, the same for every engine); one right-hand side; T_A left out; under
jax.jit; a warm-up, then the median of --repeats (at least 3) timed runs,
every run checked against the input (bench/measure.py: backward error for
the solves and potri, ||AV - VW|| and orthogonality for eigenvectors and
singular vectors, the spectrum's first two moments for eigenvalues alone).
A check that fails makes the row's status FAIL; its time stays in the CSV
but is not used for speeds, tables or plots.

Engines (the ``engine`` column; ``gpus`` counts devices): on GPUs
``default`` (JAXMG_ENGINE unset: the library's choice; the engine that ran
is read from the warm-up's JAXMG_TRACE line into ``engine_ran``),
``cusolvermg`` (cuSOLVERMg with jaxmg's tiled factorizations),
``cusolvermp`` (cuSOLVERMp, one process driving the k GPUs) and
``cusolvermp-mpmd`` (cuSOLVERMp, one process per GPU: k processes joined by
jax.distributed on localhost, each with ``local_device_ids=[i]``; on one GPU
it is ``cusolvermp`` and is not run again); ``eig-mgpu`` (jaxmg's own
multi-GPU eigensolver, engine/eig_mgpu/: syevd and syevd_values float64,
every other op n/a) only where --engines names it. On CPU devices the same four
models are ``default``, ``lapack``, ``lapack-local`` and
``lapack-local-mpmd``. ``jax`` is JAX's routine on the first device
(gpus 1). An engine that does not run an op says so (status ``n/a: ...``,
the library's own refusal).

How it runs. The parent process never touches a device: it asks a probe
process for the devices, then runs one lane after another. A lane is one
engine on one device count (``jax`` first, then the engines on the most
devices, then fewer), run by a worker process (a job of k for the
one-process-per-GPU engine) that measures its cases from the cheapest to
the dearest (REF_S, scaled by N^3) and reports each on a line of its
stdout; only one lane holds the GPUs at a time, so each has all their
memory. Each lane gets its share of what is left of --budget-s (JAX's lane
1.5 parts, an engine on one of several GPUs 0.6, the others 1; what a lane
leaves goes to the next); inside it a case is skipped ("skipped: budget")
when its predicted time (the same op's smaller N, scaled by N^3; on GPUs,
for an op's first N, REF_S) does not fit what is left of the share, and ("skipped: memory") when its matrices
would not fit (bench/one_gpu.py's rules). A case that runs past
--case-timeout-s, or whose worker dies, is killed with its worker; its row
says so, the lane's larger N of that op are skipped, and a fresh worker goes
on with the rest: a crash or hang of one engine never loses another's rows.
SIGTERM (from `timeout`) stops the run and writes what was measured.

Output in DIR (default bench/results/<date>-<machine>-scaling; --out-root
ROOT: ROOT/<date>-<machine>-scaling): results.csv (one row per op, N,
device count and engine, appended as each case finishes), README.md (the
command, the machine, the markdown table made from results.csv by
``markdown_table``), table.md (the table alone), <op>.png (time and
efficiency against N), meta.json, and raw/ (each worker's log, JAXMG_TRACE
lines included).

Columns: speed_vs_jax1 is JAX's one-GPU median over the row's (above 1:
faster); tflops is cases.standard_flops over the median; efficiency is
tflops / (gpus x --peak-tflops), the per-GPU float64 peak (default 67,
H100/H200 SXM FP64 tensor cores; written into every row). peak_bytes is XLA's
``peak_bytes_in_use`` after the case, the largest over the lane's devices
(one-process-per-GPU: the first process's GPU). XLA cannot reset that
counter, so it is the worker's peak so far: the case's own peak where
peak_is_case is 1 (the case raised it), an upper bound on it where 0.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import pathlib
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any, Callable

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cases  # noqa: E402  (no jax)
from shared import Interrupted, commit, csv_cell, on_sigterm  # noqa: E402  (no jax)

OPS = ("potrs", "lu_solve", "potri", "syevd", "syevd_values", "gesvd")
# bench/measure.py's name of an op, where it differs.
MEASURE_OP = {"syevd_values": "eigvals"}
JAX_ROUTINE = {"potrs": "cho_factor + cho_solve", "lu_solve": "jnp.linalg.solve",
               "potri": "jnp.linalg.inv", "syevd": "jnp.linalg.eigh",
               "syevd_values": "jnp.linalg.eigvalsh", "gesvd": "jnp.linalg.svd"}
DTYPE = "float64"
SIZES = (8192, 16384, 32768, 65536, 131072)
# The order of the work only: about one-GPU seconds at N = 32768 on an H200
# (DESIGN.md's facts; potri float64 a quarter of complex128's; eigenvalues
# alone and gesvd guesses).
REF_S = {"potrs": 0.28, "lu_solve": 0.66, "potri": 2.0, "syevd": 22.5,
         "syevd_values": 6.0, "gesvd": 60.0}
MARK = "SCALING "  # a worker's event lines start with it


@dataclass(frozen=True)
class EngineSpec:
    name: str  # the engine column
    jaxmg_engine: str | None  # JAXMG_ENGINE (None: unset, the library's choice)
    mpmd: bool = False  # one process per device
    by_default: bool = True  # in the run when --engines is left out


ENGINES = {
    "gpu": (EngineSpec("default", None), EngineSpec("cusolvermg", "cusolvermg"),
            EngineSpec("cusolvermp", "cusolvermp"),
            EngineSpec("cusolvermp-mpmd", "cusolvermp", mpmd=True),
            # jaxmg's own multi-GPU eigensolver (syevd float64 only; every
            # other op is n/a), named with --engines (issue 37).
            EngineSpec("eig-mgpu", "eig-mgpu", by_default=False)),
    "cpu": (EngineSpec("default", None), EngineSpec("lapack", "lapack"),
            EngineSpec("lapack-local", "lapack-local"),
            EngineSpec("lapack-local-mpmd", "lapack-local", mpmd=True)),
}
JAX = EngineSpec("jax", None)


@dataclass(frozen=True)
class Lane:
    """One worker's work: an engine on the first ``gpus`` devices."""

    engine: EngineSpec
    gpus: int
    weight: float = 1.0  # its share of the budget, against the others'

    @property
    def label(self) -> str:
        return f"{self.engine.name}-{self.gpus}"


FIELDS = ("op", "dtype", "n", "gpus", "engine", "status", "median_s", "min_s", "max_s", "runs",
          "jax1_median_s", "jax1_status", "speed_vs_jax1", "tflops", "efficiency",
          "jax1_tflops", "peak_tflops", "residual", "tolerance", "compile_s", "engine_ran",
          "tile", "peak_bytes", "peak_is_case", "processes", "lane_s")


# ---- the worker: one lane's cases, in this process (or k of them) --------------------


def _emit(event: dict[str, Any]) -> None:
    print(MARK + json.dumps(event), flush=True)


def _platform_env(platform: str, devices_per_process: int) -> None:
    """JAX's platform and, for CPU, the device count: before jax is imported."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if platform == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
        flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "",
                       os.environ.get("XLA_FLAGS", ""))
        os.environ["XLA_FLAGS"] = (
            f"{flags} --xla_force_host_platform_device_count={devices_per_process}").strip()


def probe(platform: str) -> dict[str, Any]:
    """What the parent needs to plan, from a process that may touch devices."""
    _platform_env(platform, 4)
    import jax

    import jaxmg

    devices = jax.devices(platform)
    limit = None
    try:
        limit = (devices[0].memory_stats() or {}).get("bytes_limit")
    except Exception:  # noqa: BLE001  (CPU: no stats)
        pass
    mp = jaxmg.cusolvermp_available() if platform == "gpu" else (True, "")
    import jaxlib

    return {"devices": len(devices), "kind": devices[0].device_kind,
            "platform": devices[0].platform, "bytes_limit": limit, "jax": jax.__version__,
            "jaxlib": jaxlib.__version__, "jaxmg": getattr(jaxmg, "__version__", "?"),
            "jaxmg_path": str(pathlib.Path(jaxmg.__file__).parent),
            "cusolvermp": list(mp), "python": sys.version.split()[0]}


def _peak(devices: list) -> int | None:
    """The largest peak_bytes_in_use over devices (None without stats)."""
    peaks = []
    for d in devices:
        try:
            stats = d.memory_stats() or {}
        except Exception:  # noqa: BLE001
            stats = {}
        if "peak_bytes_in_use" in stats:
            peaks.append(int(stats["peak_bytes_in_use"]))
    return max(peaks) if peaks else None


def _classify(e: BaseException) -> str:
    """A row's status for an exception: n/a where the library says the
    engine does not run the case, else error; type and first line."""
    import engines  # its _error_status; imports jax, which a worker has

    status = engines._error_status(e)
    if re.search(r"cannot run|no engine runs|is not an engine|has no \w+", str(e)):
        return "n/a: " + status[len("error: "):]
    return status


def predict(times: dict, op: str, n: int, repeats: int) -> float | None:
    """Seconds a case of op at n will take, from its largest smaller N
    measured (median t, wall time w for r runs): what was not the runs
    (compilation, inputs, checks) as it was, plus a warm-up and the runs at
    t scaled by N^3. None before any."""
    smaller = [(m, v) for (o, m), v in times.items() if o == op and m < n]
    if not smaller:
        return None
    m, (t, wall, runs) = max(smaller)
    return max(wall - (runs + 1) * t, 0.0) + (repeats + 1) * t * (n / m) ** 3


def worker(args: argparse.Namespace) -> int:
    """Measures the cases of --cases-file on a mesh of --gpus devices with
    --engine, printing a MARK line per event (process 0 of a job only)."""
    mpmd = args.num_processes > 1
    _platform_env(args.platform, 1 if mpmd else max(args.gpus, 4))
    import jax

    jax.config.update("jax_enable_x64", True)
    if mpmd:
        jax.distributed.initialize(
            coordinator_address=args.coordinator, num_processes=args.num_processes,
            process_id=args.process_id,
            local_device_ids=[args.process_id] if args.platform == "gpu" else None)
    import numpy as np
    from jax.sharding import Mesh

    import inputs
    import measure
    import one_gpu

    lead = jax.process_index() == 0
    say = _emit if lead else (lambda event: print(json.dumps(event), flush=True))
    devices = jax.devices() if mpmd else jax.devices(args.platform)[:args.gpus]
    mesh = Mesh(np.array(devices), (inputs.AXIS,))
    local = [d for d in devices if d.process_index == jax.process_index()]
    limit = one_gpu.device_bytes(local[0])
    todo = json.loads(pathlib.Path(args.cases_file).read_text())
    say({"event": "ready", "devices": len(devices), "kind": devices[0].device_kind})
    times: dict = {}
    stopped: dict[str, str] = {}  # op -> why its larger N are not run
    is_jax = args.engine == "jax"
    for case in todo:
        op, n = case["op"], case["n"]
        mop = MEASURE_OP.get(op, op)
        per_device = 1 if is_jax else args.gpus
        need = one_gpu.COPIES[mop] * float(n) * n * np.dtype(DTYPE).itemsize / per_device
        guess = predict(times, op, n, args.repeats)
        if guess is None and args.platform == "gpu":  # the first N of an op
            guess = (args.repeats + 1) * REF_S[op] * (n / 32768) ** 3
        why = stopped.get(op) or one_gpu.skip_reason(need, limit, args.deadline - time.time(),
                                                     guess)
        if mpmd:  # every process must take process 0's decision
            from jax.experimental import multihost_utils

            run_it = bool(multihost_utils.broadcast_one_to_all(np.int32(why is None)))
            why = None if run_it else (why or "skipped: process 0's decision")
        row: dict[str, Any] = {"op": op, "n": n}
        if why:
            row["status"] = why
            say({"event": "row", **row})
            continue
        say({"event": "start", "op": op, "n": n})
        seed = zlib.crc32(f"{op} {DTYPE} {n}".encode()) % 2 ** 31  # one A per op and N
        before, began = _peak(local), time.time()
        try:
            if is_jax:
                m = measure.measure(mop, DTYPE, n, mesh, measure.jax_fn(mop), seed,
                                    args.repeats, 0.0, print)
            else:
                m = measure.measure(mop, DTYPE, n, mesh, measure.jaxmg_fn(mop, None, mesh),
                                    seed, args.repeats, 0.0, print, trace=True)
        except Exception as e:  # noqa: BLE001  (a row, not a crash)
            m = measure.Measured(status=_classify(e))
        after = _peak(local)
        row.update(status=m.status, median_s=m.median_s, min_s=m.min_s, max_s=m.max_s,
                   runs=m.runs, residual=m.residual, compile_s=m.compile_s,
                   engine_ran=m.engine, tile=m.tile, peak_bytes=after,
                   peak_is_case=(None if after is None else int(before is None or after > before)))
        if m.median_s is not None:
            times[(op, n)] = (m.median_s, time.time() - began, m.runs)
        if not (m.ok or m.status == "FAIL"):
            stopped[op] = f"skipped: {m.status.split(':')[0]} at N={n}"
        say({"event": "row", **row})
    say({"event": "done"})
    if mpmd:
        # Every process leaves together (the coordination service lives in
        # process 0), without jax.distributed's shutdown barrier.
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("scaling-done")
        sys.stdout.flush()
        os._exit(0)
    return 0


# ---- the parent: lanes, workers, rows -------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


class Job:
    """A running worker (one process, or one per device): process 0's MARK
    lines on a queue; every process's output in raw/<lane>[-pI].log."""

    def __init__(self, lane: Lane, todo: list[dict], deadline: float, args: argparse.Namespace,
                 raw: pathlib.Path, attempt: int) -> None:
        self.events: queue.Queue = queue.Queue()
        cases_file = raw / f"{lane.label}-cases-{attempt}.json"
        cases_file.write_text(json.dumps(todo))
        nproc = lane.gpus if lane.engine.mpmd else 1
        env = dict(os.environ)
        env.pop("JAXMG_POTRF", None)
        if lane.engine.jaxmg_engine is None:
            env.pop("JAXMG_ENGINE", None)
        else:
            env["JAXMG_ENGINE"] = lane.engine.jaxmg_engine
        if lane.engine.mpmd and args.platform == "gpu":
            env.pop("CUDA_VISIBLE_DEVICES", None)  # each process sees every GPU
        cmd = [sys.executable, str(HERE / "scaling.py"), "--worker", "--platform",
               args.platform, "--engine", lane.engine.name, "--gpus", str(lane.gpus),
               "--cases-file", str(cases_file), "--deadline", f"{deadline:.3f}",
               "--repeats", str(args.repeats)]
        if nproc > 1:
            cmd += ["--num-processes", str(nproc), "--coordinator",
                    f"localhost:{_free_port()}"]
        self.procs: list[subprocess.Popen] = []
        self.logs = []
        for i in range(nproc):
            log = open(raw / f"{lane.label}{'' if nproc == 1 else f'-p{i}'}.log", "a")
            log.write(f"$ {' '.join(cmd)}\n")
            log.flush()
            self.logs.append(log)
            argv = cmd + (["--process-id", str(i)] if nproc > 1 else [])
            # Process 0 through a pipe (read continuously by a thread), the
            # others straight to their files: no pipe is ever left unread.
            self.procs.append(subprocess.Popen(
                argv, env=env, stdin=subprocess.DEVNULL, text=True, cwd=HERE.parent,
                stdout=subprocess.PIPE if i == 0 else log, stderr=subprocess.STDOUT))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        p, log = self.procs[0], self.logs[0]
        for line in p.stdout:  # type: ignore[union-attr]
            log.write(line)
            log.flush()
            if line.startswith(MARK):
                self.events.put(json.loads(line[len(MARK):]))
        self.events.put(None)  # end of output

    def next(self, timeout: float) -> dict | None | str:
        """The next event; None when process 0's output ended; "timeout"."""
        try:
            return self.events.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return "timeout"

    def returncode(self) -> int | None:
        try:
            return self.procs[0].wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        for log in self.logs:
            log.close()


class Results:
    """results.csv, appended row by row, and the rows in memory."""

    def __init__(self, path: pathlib.Path, peak_tflops: float) -> None:
        self.path, self.peak = path, peak_tflops
        self.rows: list[dict[str, Any]] = []
        self.jax1: dict[tuple[str, int], dict[str, Any]] = {}
        with path.open("w", newline="") as f:
            csv.DictWriter(f, fieldnames=FIELDS).writeheader()

    def add(self, lane: Lane, row: dict[str, Any], lane_s: float) -> dict[str, Any]:
        r = {"dtype": DTYPE, "gpus": lane.gpus, "engine": lane.engine.name,
             "peak_tflops": self.peak, "tolerance": cases.tolerance(DTYPE, row["n"]),
             "processes": lane.gpus if lane.engine.mpmd else 1, "lane_s": round(lane_s, 1),
             **{k: v for k, v in row.items() if k != "event"}}
        flop = cases.standard_flops(r["op"], DTYPE, r["n"])
        ok = r["status"] == "ok" and r.get("median_s")
        if ok:
            r["tflops"] = flop / r["median_s"] / 1e12
            r["efficiency"] = r["tflops"] / (r["gpus"] * self.peak) if self.peak > 0 else None
        if lane.engine.name == "jax":
            self.jax1[(r["op"], r["n"])] = r
        base = self.jax1.get((r["op"], r["n"]))
        if base is not None:
            r["jax1_median_s"], r["jax1_status"] = base.get("median_s"), base["status"]
            if base["status"] == "ok" and base.get("median_s"):
                r["jax1_tflops"] = flop / base["median_s"] / 1e12
                if ok:
                    r["speed_vs_jax1"] = base["median_s"] / r["median_s"]
        self.rows.append(r)
        with self.path.open("a", newline="") as f:
            csv.DictWriter(f, fieldnames=FIELDS).writerow(
                {k: csv_cell(r.get(k)) for k in FIELDS})
        return r


def plan_lanes(platform: str, engines: list[str], gpus: list[int], ndev: int,
               mpmd_gpus: list[int] | None = None) -> list[Lane]:
    """JAX on one device first, then each engine on the most devices, then on
    fewer (a budget that runs out drops the one-GPU lanes first); the
    one-process-per-device engine on mpmd_gpus (default: gpus)."""
    lanes = [Lane(JAX, 1, weight=1.5)]
    mpmd_gpus = gpus if mpmd_gpus is None else mpmd_gpus
    for k in sorted({g for g in gpus + mpmd_gpus if g <= ndev}, reverse=True):
        for spec in ENGINES[platform]:
            if spec.name in engines and k in (mpmd_gpus if spec.mpmd else gpus):
                # One GPU matters less (its default is JAX's cuSOLVERDn).
                lanes.append(Lane(spec, k, weight=0.6 if k == 1 and ndev > 1 else 1.0))
    return lanes


def plan_cases(ops: list[str], sizes: list[int]) -> list[dict]:
    """(op, N) from the cheapest to the dearest; within an op N increases."""
    todo = [{"op": op, "n": n} for op in ops for n in sizes]
    return sorted(todo, key=lambda c: (REF_S[c["op"]] * (c["n"] / 32768) ** 3, c["n"], c["op"]))


def static_reason(lane: Lane, n: int, info: dict[str, Any]) -> str | None:
    """Why a lane's case is not run at all, known before any worker starts."""
    if lane.engine.mpmd and lane.gpus == 1:
        return "n/a: one process on one device is the one-process engine's row"
    if lane.engine.jaxmg_engine == "cusolvermp" and not info["cusolvermp"][0]:
        return f"skipped: cuSOLVERMp not available: {info['cusolvermp'][1]}"[:300]
    if n % lane.gpus:
        return f"n/a: N not a multiple of {lane.gpus} devices"
    return None


def run_lane(lane: Lane, todo: list[dict], share_s: float, hard_end: float,
             args: argparse.Namespace, raw: pathlib.Path, results: Results,
             log: Callable[[str], None]) -> None:
    """Runs one lane's cases in workers (a fresh one after a crash or a
    timeout), adding every case's row to results."""
    start = time.time()
    deadline = min(start + share_s, hard_end)
    left = list(todo)
    attempt = 0

    def add(row: dict[str, Any]) -> None:
        r = results.add(lane, row, time.time() - start)
        log(_line(r))

    while left:
        if time.time() >= deadline:
            for c in left:
                add({**c, "status": "skipped: budget"})
            return
        attempt += 1
        job = Job(lane, left, deadline, args, raw, attempt)
        current: dict | None = None
        limit = time.time() + args.startup_timeout_s
        try:
            while True:
                ev = job.next(limit - time.time())
                if ev == "timeout" or ev is None:
                    now = time.time()
                    if ev == "timeout":
                        job.kill()
                    code = job.returncode()
                    if current is None and ev == "timeout":
                        why = f"error: the worker did not start within {args.startup_timeout_s:g} s"
                    elif current is None:
                        why = f"crash: the worker exited (code {code}) between cases"
                    elif ev == "timeout" and now >= hard_end:
                        why = "skipped: budget (cut while running)"
                    elif ev == "timeout":
                        why = f"timeout: killed after {args.case_timeout_s:g} s"
                    else:
                        why = f"crash: the worker exited (code {code})"
                    if current is None and ev == "timeout":
                        for c in left:
                            add({**c, "status": why})
                        left = []
                    elif current is not None:
                        add({**current, "status": why})
                        left.remove(current)
                        word = why.split(":")[0].split(" ")[0]
                        for c in [c for c in left if c["op"] == current["op"]]:
                            add({**c, "status": f"skipped: {word} at N={current['n']}"})
                            left.remove(c)
                    # A worker that died between cases without a row: drop
                    # the next case, so that the loop always advances.
                    elif left:
                        add({**left[0], "status": why})
                        left.pop(0)
                    break
                if ev["event"] == "ready":
                    limit = hard_end + 30.0
                elif ev["event"] == "start":
                    current = next(c for c in left if c["op"] == ev["op"] and c["n"] == ev["n"])
                    limit = min(time.time() + args.case_timeout_s, hard_end)
                elif ev["event"] == "row":
                    case = next(c for c in left if c["op"] == ev["op"] and c["n"] == ev["n"])
                    left.remove(case)
                    current = None
                    add(ev)
                    limit = hard_end + 30.0
                elif ev["event"] == "done":
                    break
        finally:
            job.kill()


def _line(r: dict[str, Any]) -> str:
    t, speed, ran = r.get("median_s"), r.get("speed_vs_jax1"), r.get("engine_ran")
    return (f"{r['op']:12s} N={r['n']:6d} {r['gpus']} x {r['engine']:18s} "
            f"{str(r['status'])[:70]:70s} {'' if t is None else format(t, '.4f') + ' s':>10s}"
            f"{'' if speed is None else ' x' + format(speed, '.2f')}"
            f"{'' if r.get('efficiency') is None else ' ' + format(r['efficiency'], '.0%')}"
            f"{'' if not ran else ' [' + ran + ']'}")


# ---- tables, plots, README --------------------------------------------------------


def read_csv(path: pathlib.Path) -> list[dict[str, Any]]:
    """results.csv's rows, numbers as numbers."""
    rows = []
    for r in csv.DictReader(open(path)):
        d: dict[str, Any] = dict(r)
        for k in ("n", "gpus", "runs", "processes"):
            d[k] = int(r[k]) if r.get(k) else None
        for k in ("median_s", "jax1_median_s", "speed_vs_jax1", "tflops", "efficiency"):
            d[k] = float(r[k]) if r.get(k) else None
        rows.append(d)
    return rows


def _cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return ""
    if r["status"] == "ok":
        text = f"{r['median_s']:.3f} s"
        if r.get("speed_vs_jax1") is not None:
            text += f", {r['speed_vs_jax1']:.2f}x"
        if r.get("efficiency") is not None:
            text += f", {r['efficiency']:.0%}"
        return text
    return r["status"].split(":")[0].split(" ")[0]  # FAIL, error, timeout, skipped, n/a


def markdown_table(rows_or_path: list[dict[str, Any]] | pathlib.Path | str) -> str:
    """results.csv as a markdown table: one line per op, N and device count,
    JAX's one-GPU seconds, then per engine its median seconds, speed against
    JAX on one GPU and efficiency (of gpus x peak). Cells of cases that did
    not pass say why in one word (FAIL, error, timeout, crash, skipped, n/a);
    the statuses other than ok and skips for budget are listed below it."""
    rows = (read_csv(pathlib.Path(rows_or_path)) if isinstance(rows_or_path, (str, pathlib.Path))
            else rows_or_path)
    engines = list(dict.fromkeys(r["engine"] for r in rows if r["engine"] != "jax"))
    jax1 = {(r["op"], r["n"]): r for r in rows if r["engine"] == "jax"}
    by = {(r["op"], r["n"], r["gpus"], r["engine"]): r for r in rows}
    head = ["op", "N", "GPUs", "JAX, 1 GPU"] + engines
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ops = [op for op in OPS if any(r["op"] == op for r in rows)]
    for op in ops:
        for n in sorted({r["n"] for r in rows if r["op"] == op}):
            base = jax1.get((op, n))
            base_text = "" if base is None else (
                f"{base['median_s']:.3f} s" if base["status"] == "ok" else _cell(base))
            for g in sorted({r["gpus"] for r in rows if r["op"] == op and r["engine"] != "jax"},
                            reverse=True):
                cells = [_cell(by.get((op, n, g, e))) for e in engines]
                if not any(c and not c.startswith(("skipped", "n/a")) for c in cells) and \
                        not (base and base["status"] == "ok"):
                    continue
                lines.append("| " + " | ".join([op, str(n), str(g), base_text] + cells) + " |")
    notes: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        if r["status"] != "ok" and not r["status"].startswith(("skipped: budget", "n/a: one process")):
            notes.setdefault((r["engine"], r["status"]), []).append(
                f"{r['op']} {r['n']} on {r['gpus']}")
    text = "\n".join(lines) + "\n"
    text += ("\nCells: median seconds, speed against JAX's routine on one GPU (JAX's time "
             "over the row's; above 1 is faster), efficiency (TFLOP/s by the standard count "
             "over GPUs x the per-GPU peak).\n")
    if notes:
        text += "\n" + "\n".join(f"- {engine}: {status} ({', '.join(where)})"
                                 for (engine, status), where in notes.items()) + "\n"
    return text


def plot_all(rows: list[dict[str, Any]], out: pathlib.Path) -> list[pathlib.Path]:
    """<op>.png: seconds (left) and efficiency (right) against N, one line
    per engine and device count, JAX on one GPU in black; passed cases only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    engines = list(dict.fromkeys(r["engine"] for r in rows if r["engine"] != "jax"))
    markers = {1: "s", 2: "o", 4: "^", 8: "D"}
    for op in [op for op in OPS if any(r["op"] == op for r in rows)]:
        mine = [r for r in rows if r["op"] == op and r["status"] == "ok" and r["median_s"]]
        if not mine:
            continue
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
        series = [("jax", 1)] + sorted({(r["engine"], r["gpus"]) for r in mine
                                        if r["engine"] != "jax"},
                                       key=lambda s: (engines.index(s[0]), -s[1]))
        for engine, g in series:
            pts = sorted((r["n"], r["median_s"], r["efficiency"]) for r in mine
                         if r["engine"] == engine and r["gpus"] == g)
            if not pts:
                continue
            style = dict(color="k", marker="*", lw=2) if engine == "jax" else dict(
                color=f"C{engines.index(engine)}", marker=markers.get(g, "x"),
                ls="-" if g == max(r["gpus"] for r in rows) else "--")
            label = "JAX, 1 GPU" if engine == "jax" else f"{engine}, {g} GPU(s)"
            ns = [p[0] for p in pts]
            left.plot(ns, [p[1] for p in pts], label=label, **style)
            if any(p[2] is not None for p in pts):
                right.plot(ns, [100 * (p[2] or 0) for p in pts], label=label, **style)
        for ax in (left, right):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("N")
            ax.grid(True, which="both", alpha=0.3)
        left.set_yscale("log")
        left.set_ylabel("seconds (median)")
        right.set_ylabel("efficiency (% of GPUs x peak)")
        left.legend(fontsize=7)
        fig.suptitle(f"{op} {DTYPE} (JAX: {JAX_ROUTINE[op]})", fontsize=10)
        fig.tight_layout()
        path = out / f"{op}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def machine_name(info: dict[str, Any]) -> str:
    """"h200x2", "h100x4", "cpux4": the results folder's machine part."""
    if info["platform"] == "cpu":
        return f"cpux{info['devices']}"
    m = re.search(r"([A-Z]\d{2,4})", info["kind"])
    return f"{(m.group(1) if m else info['kind'].split()[-1]).lower()}x{info['devices']}"


def write_readme(out: pathlib.Path, meta: dict[str, Any], rows: list[dict[str, Any]],
                 plots: list[pathlib.Path]) -> None:
    info = meta["machine"]
    text = [f"# Scaling: every op on 1 to {info['devices']} devices against JAX on one "
            f"({meta['date'][:10]}, {info['devices']} x {info['kind']})", "",
            "Made by `bench/scaling.py` (its docstring says what is measured and how); "
            "the command:", "", "```", meta["command"], "```", "",
            f"- machine: {info['devices']} x {info['kind']} ({info['platform']}); jax "
            f"{info['jax']}, jaxlib {info['jaxlib']}, jaxmg {info['jaxmg']}, python "
            f"{info['python']}; cuSOLVERMp: "
            f"{'available' if info['cusolvermp'][0] else info['cusolvermp'][1]}",
            f"- commit: {meta['commit']}",
            f"- float64, T_A left out, under jit, median of {meta['repeats']} timed runs after "
            f"a warm-up, every run checked; budget {meta['budget_s']:g} s "
            f"({'interrupted' if meta.get('interrupted') else 'finished'} after "
            f"{meta.get('elapsed_s', 0):.0f} s), per-case timeout {meta['case_timeout_s']:g} s",
            f"- efficiency against {meta['peak_tflops']:g} TFLOP/s per device (float64 peak)",
            "", "## Results", "", markdown_table(rows) if rows else "(no rows)", ""]
    if plots:
        text += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    text += ["`results.csv` has every row (times, residuals, the engine the default ran, "
             "T_A, peak memory); `raw/` each worker's log.", ""]
    (out / "README.md").write_text("\n".join(text))


def finish(out: pathlib.Path, results: Results, meta: dict[str, Any]) -> None:
    """table.md, plots, README.md, meta.json from what was measured."""
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    table = markdown_table(results.rows) if results.rows else "(no rows)\n"
    (out / "table.md").write_text(table)
    plots: list[pathlib.Path] = []
    try:
        plots = plot_all(results.rows, out)
    except Exception as e:  # noqa: BLE001  (never lose the table to a plot)
        print(f"plots not written: {type(e).__name__}: {e}", flush=True)
    write_readme(out, meta, results.rows, plots)
    print("\n" + table, flush=True)


def gpu_probe(args: argparse.Namespace) -> dict[str, Any]:
    """probe's answer from a process of its own (the parent never touches
    a GPU: a worker after it gets all the memory)."""
    raw_probe = subprocess.run([sys.executable, str(HERE / "scaling.py"), "--probe",
                                "--platform", args.platform], capture_output=True, text=True,
                               timeout=args.startup_timeout_s, cwd=HERE.parent)
    line = [ln for ln in raw_probe.stdout.splitlines() if ln.startswith(MARK)]
    if raw_probe.returncode != 0 or not line:
        print(raw_probe.stdout[-3000:] + raw_probe.stderr[-3000:])
        raise SystemExit("scaling.py: the probe process failed")
    return json.loads(line[-1][len(MARK):])


def cpu_info() -> dict[str, Any]:
    """probe's answer for CPU devices, without starting JAX: the workers
    make their own devices (4, or one per process)."""
    from importlib import metadata

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "?"

    return {"devices": 4, "kind": "cpu", "platform": "cpu", "bytes_limit": None,
            "jax": version("jax"), "jaxlib": version("jaxlib"), "jaxmg": version("jaxmg"),
            "jaxmg_path": "", "cusolvermp": [False, "CPU devices"],
            "python": sys.version.split()[0]}


def main(args: argparse.Namespace, argv: list[str]) -> int:
    t0 = time.time()
    info = cpu_info() if args.platform == "cpu" else gpu_probe(args)
    if args.out is None:
        date = datetime.date.today().isoformat()
        args.out = (args.out_root or HERE / "results") / f"{date}-{machine_name(info)}-scaling"
    out, raw = args.out, args.out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    logf = open(raw / "scaling.log", "a")

    def log(msg: str) -> None:
        text = f"[{time.time() - t0:6.1f}s] {msg}"
        print(text, flush=True)
        logf.write(text + "\n")
        logf.flush()

    meta = {"command": "python bench/scaling.py " + " ".join(argv), "commit": commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": info, "budget_s": args.budget_s, "repeats": args.repeats,
            "case_timeout_s": args.case_timeout_s, "peak_tflops": args.peak_tflops,
            "ops": args.ops, "sizes": args.sizes, "gpus": args.gpus, "engines": args.engines}
    if os.environ.get("JAXMG_SCALING_COMMAND"):  # scripts/device-bench.sh's own line
        meta["command"] = os.environ["JAXMG_SCALING_COMMAND"]
    log(f"scaling: {info['devices']} x {info['kind']}, jax {info['jax']}, jaxmg "
        f"{info['jaxmg']} ({info['jaxmg_path']}), cuSOLVERMp {info['cusolvermp']}, "
        f"budget {args.budget_s:g} s, results in {out}")
    results = Results(out / "results.csv", args.peak_tflops)
    lanes = plan_lanes(args.platform, args.engines, args.gpus, info["devices"], args.mpmd_gpus)
    todo = plan_cases(args.ops, args.sizes)
    hard_end = t0 + args.budget_s
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    interrupted = False
    try:
        work = []
        for lane in lanes:  # the rows known before anything runs, first
            mine = []
            for c in todo:
                why = static_reason(lane, c["n"], info)
                if why:
                    results.add(lane, {**c, "status": why}, 0.0)
                else:
                    mine.append(c)
            if mine:
                work.append((lane, mine))
        for i, (lane, mine) in enumerate(work):
            weights = sum(ln.weight for ln, _ in work[i:])
            share = max(hard_end - time.time(), 0.0) * lane.weight / weights
            log(f"lane {lane.label}: {len(mine)} case(s), {share:.0f} s")
            run_lane(lane, mine, share, hard_end, args, raw, results, log)
    except (Interrupted, KeyboardInterrupt):
        interrupted = True
        log("interrupted: writing what was measured")
    finally:
        signal.signal(signal.SIGTERM, previous)
    meta.update(elapsed_s=round(time.time() - t0, 1), interrupted=interrupted)
    finish(out, results, meta)
    log(f"done in {time.time() - t0:.0f} s; results in {out}")
    return 1 if any(r["status"] == "FAIL" for r in results.rows) else 0


def _csv(kind: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    return lambda s: [kind(x) for x in s.split(",") if x]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--platform", choices=["gpu", "cpu"], default="gpu")
    p.add_argument("--ops", type=_csv(str), default=list(OPS))
    p.add_argument("--sizes", type=_csv(int), default=list(SIZES),
                   help="N to sweep, smallest first (default 8192 doubling to 131072)")
    p.add_argument("--gpus", type=_csv(int), default=[1, 2, 4],
                   help="device counts (sub-meshes of the first k devices; those above "
                   "the machine's are left out)")
    p.add_argument("--mpmd-gpus", type=_csv(int), default=None,
                   help="device counts for the one-process-per-device engine (default: "
                   "--gpus)")
    p.add_argument("--engines", type=_csv(str), default=None,
                   help="engine columns (default: the platform's four; on GPUs "
                        "also eig-mgpu, jaxmg's multi-GPU syevd, when named)")
    p.add_argument("--budget-s", type=float, default=330.0,
                   help="seconds for the whole run, start-up included (default 330)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per case (at least 3)")
    p.add_argument("--case-timeout-s", type=float, default=240.0,
                   help="a case running longer is killed with its worker (default 240)")
    p.add_argument("--startup-timeout-s", type=float, default=180.0,
                   help="seconds a worker may take to start (default 180)")
    p.add_argument("--peak-tflops", type=float, default=67.0,
                   help="one device's float64 peak for the efficiency column (default 67: "
                   "H100/H200 SXM FP64 tensor cores)")
    p.add_argument("--out", type=pathlib.Path, default=None,
                   help="the results folder (default bench/results/<date>-<machine>-scaling)")
    p.add_argument("--out-root", type=pathlib.Path, default=None,
                   help="put <date>-<machine>-scaling in this folder instead")
    p.add_argument("--table", type=pathlib.Path, default=None,
                   help="print the markdown table of this results.csv and stop")
    # A worker's (the parent passes them) and the probe's.
    for name, kind in (("--engine", str), ("--cases-file", str), ("--deadline", float),
                       ("--num-processes", int), ("--process-id", int),
                       ("--coordinator", str)):
        p.add_argument(name, type=kind, help=argparse.SUPPRESS)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker or args.probe or args.table:
        args.num_processes = args.num_processes or 1
        args.gpus = args.gpus[0] if isinstance(args.gpus, list) else args.gpus
        return args
    known = [e.name for e in ENGINES[args.platform]]
    args.engines = args.engines or [e.name for e in ENGINES[args.platform] if e.by_default]
    bad = [e for e in args.engines if e not in known] + [o for o in args.ops if o not in OPS]
    if bad:
        p.error(f"unknown engine or op: {bad} (engines here: {known}; ops: {list(OPS)})")
    if args.repeats < 3:
        p.error("--repeats: at least 3 (the median of three or more)")
    args.sizes = sorted(set(args.sizes))
    return args


if __name__ == "__main__":
    _argv = sys.argv[1:]
    _args = parse_args(_argv)
    if _args.table:
        print(markdown_table(_args.table), end="")
        sys.exit(0)
    if _args.probe:
        print(MARK + json.dumps(probe(_args.platform)), flush=True)
        sys.exit(0)
    if _args.worker:
        sys.exit(worker(_args))
    sys.exit(main(_args, _argv))
