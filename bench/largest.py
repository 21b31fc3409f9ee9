"""The largest problem: the largest N whose float32 potrs jaxmg solves on the
GPUs at hand, the memory it used per GPU, and what the matrix alone needs.

    python bench/run.py --largest [--n 372736,368640] [--tile 1024] [--gpus 4]
                                  [--mem-fraction 0.96] [--max-tries 3] [--out DIR]

Each N is tried in a fresh process (a failed allocation leaves nothing
behind, and JAX's peak-memory counter starts at zero), from large to small,
until one succeeds. Without --n the candidates come from the devices' memory
limit: the N whose matrix takes 97%, 94% and 91% of it, rounded down to a
multiple of GPUs x T_A (no padding, which would copy the matrix).

Memory. The matrix is never on one device, nor twice anywhere: it is
generated inside the jitted function that solves with it (inputs.py: each
device computes its own rows in one fused kernel), so it is an intermediate
that XLA hands to jaxmg's in-place solve without a copy. (Donating an
argument instead would not work for potrs: its outputs have b's shape, so XLA
has nothing to give the donated buffer to and keeps it, then copies it for
the in-place solve.) jaxmg's workspaces come from XLA's allocator, so XLA's
peak_bytes_in_use counts them; XLA_PYTHON_CLIENT_MEM_FRACTION (--mem-fraction)
raises XLA's cap above its default 75%, leaving the rest to the CUDA context
and cuSOLVERMg. nvidia-smi's view (everything on the GPU) is polled too.

Check. After the solve, A is regenerated block by block of rows (never whole)
and ||A x - b|| / (||A||_F ||x||) computed in float64 against cases.tolerance.
Since entries are a pure integer function of (seed, i, j), the regenerated
blocks are bit for bit the matrix the solver was given; the check is
independent of the solver's buffers and of the block-cyclic layout, so a
wrong factorization, a misplaced tile or a read of garbage cannot pass. It
proves that this x solves this A to the tolerance, nothing about other
matrices.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import subprocess
import sys
import threading
import time
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

MARK = "LARGEST "  # the line a child's result is printed on


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="run.py --largest", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=lambda s: [int(x) for x in s.split(",") if x],
                   help="candidate N, tried from large to small (default: from memory)")
    p.add_argument("--tile", type=int, default=1024)
    p.add_argument("--gpus", type=int, default=0, help="devices to use (default: all)")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--platform", default="gpu", choices=["gpu", "cpu"])
    p.add_argument("--mem-fraction", type=float, default=0.96,
                   help="XLA_PYTHON_CLIENT_MEM_FRACTION for the tries")
    p.add_argument("--max-tries", type=int, default=3)
    p.add_argument("--child-timeout", type=float, default=480.0,
                   help="seconds one try may take")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=pathlib.Path, default=HERE / "results" / "largest")
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child: try this N
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)  # child: limits
    return p.parse_args(argv)


# ---- the child: one N ---------------------------------------------------------


def _setup_jax(args: argparse.Namespace) -> tuple[Any, list]:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if args.platform == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_force_host_platform_device_count" not in flags:
            n = max(args.gpus, 4)
            os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()
    import jax

    jax.config.update("jax_enable_x64", True)
    devices = jax.devices(args.platform)
    return jax, devices[:args.gpus] if args.gpus else devices


class SmiPoller:
    """The largest memory.used nvidia-smi reports per GPU while running."""

    def __init__(self, period: float = 0.5) -> None:
        self.peak: dict[int, int] = {}
        self.total: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(period,), daemon=True)

    def _poll(self) -> bool:
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=index,memory.used,memory.total",
                 "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return False
        for line in out.stdout.splitlines():
            parts = [x.strip() for x in line.split(",")]
            if len(parts) == 3 and all(x.isdigit() for x in parts):
                i, used, total = map(int, parts)
                self.peak[i] = max(self.peak.get(i, 0), used)
                self.total[i] = total
        return out.returncode == 0

    def _run(self, period: float) -> None:
        while not self._stop.is_set() and self._poll():
            self._stop.wait(period)

    def __enter__(self) -> "SmiPoller":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=15)


def _residual(jax: Any, n: int, dtype: str, mesh: Any, seed: Any, x: Any, b: Any,
              block: int) -> float:
    """||A x - b|| / (||A||_F ||x||), A regenerated block by block of rows."""
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    import inputs

    wide = jnp.complex128 if dtype.startswith("complex") else jnp.float64
    r = n // mesh.size

    def shard(seed, x, b):
        first = jax.lax.axis_index(inputs.AXIS) * r
        xw = x.astype(wide)

        def body(k, acc):
            start = first + k * block
            rows = (jax.lax.broadcasted_iota(jnp.uint32, (block, n), 0)
                    + start.astype(jnp.uint32))
            cols = jax.lax.broadcasted_iota(jnp.uint32, (block, n), 1)
            a = inputs.entries(rows, cols, n, dtype, seed).astype(wide)
            ax = jnp.matmul(a, xw, precision=jax.lax.Precision.HIGHEST)
            bl = jax.lax.dynamic_slice(b, (start, jnp.zeros((), start.dtype)),
                                      (block, b.shape[1])).astype(wide)
            return (acc[0] + jnp.sum(jnp.abs(ax - bl) ** 2), acc[1] + jnp.sum(jnp.abs(a) ** 2))

        # Derived from the device's index so that its type varies over the mesh
        # axis like the loop's results (shard_map checks this).
        zero = first.astype(jnp.float64) * 0
        rr, aa = jax.lax.fori_loop(0, r // block, body, (zero, zero))
        return jax.lax.psum(rr, inputs.AXIS), jax.lax.psum(aa, inputs.AXIS)

    f = jax.jit(inputs._shard_map(shard, mesh=mesh, in_specs=(P(), P(), P()),
                                  out_specs=(P(), P())))
    rr, aa = f(seed, x, b)
    xn = float(jnp.linalg.norm(x.astype(wide)))
    return math.sqrt(float(rr)) / (math.sqrt(float(aa)) * xn)


def try_one(args: argparse.Namespace) -> dict[str, Any]:
    """Solves once at N = args.one; returns what happened."""
    t_start = time.perf_counter()
    jax, devices = _setup_jax(args)
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, PartitionSpec as P

    import cases
    import inputs
    import jaxmg

    n, g, tile = args.one, len(devices), args.tile
    es = jnp.dtype(args.dtype).itemsize
    res: dict[str, Any] = {"N": n, "gpus": g, "T_A": tile, "dtype": args.dtype,
                           "matrix_bytes_per_gpu": n * n * es // g,
                           "mem_fraction": os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION")}
    if n % (g * tile):
        res["status"] = f"error: N={n} is not a multiple of GPUs x T_A = {g * tile}"
        return res
    mesh = Mesh(np.array(devices), (inputs.AXIS,))
    seed = jnp.uint32(args.seed)
    b = inputs.replicated_normal(jax.random.PRNGKey(args.seed), (n, 1), args.dtype, mesh)

    def solve(seed, b):
        a = inputs.hpd_traced(n, args.dtype, mesh, seed)
        return jaxmg.potrs(a, b, tile, mesh, (P(inputs.AXIS, None), P(None, None)),
                           return_status=True)

    try:
        with SmiPoller() as smi:
            t0 = time.perf_counter()
            compiled = jax.jit(solve).lower(seed, b).compile()
            res["compile_s"] = round(time.perf_counter() - t0, 2)
            t0 = time.perf_counter()
            x, status = jax.block_until_ready(compiled(seed, b))
            res["solve_s"] = round(time.perf_counter() - t0, 2)
        stats = [d.memory_stats() or {} for d in devices]
        res["peak_bytes_in_use"] = [s.get("peak_bytes_in_use") for s in stats]
        res["bytes_limit"] = [s.get("bytes_limit") for s in stats]
        ids = [getattr(d, "local_hardware_id", None) for d in devices]
        res["nvidia_smi_peak_mib"] = [smi.peak.get(i) for i in ids] if smi.peak else None
        res["nvidia_smi_total_mib"] = [smi.total.get(i) for i in ids] if smi.total else None
        res["solver_status"] = int(status)
        t0 = time.perf_counter()
        block = math.gcd(n // g, 1024)
        res["residual"] = _residual(jax, n, args.dtype, mesh, seed, x, b, block)
        res["check_s"] = round(time.perf_counter() - t0, 2)
        tol = cases.tolerance(args.dtype, n)
        res["tolerance"] = tol
        ok = res["solver_status"] == 0 and res["residual"] < tol
        res["status"] = "ok" if ok else "FAIL"
    except Exception as e:  # out of memory above all: the parent tries a smaller N
        msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        res["status"] = f"error: {type(e).__name__}: {msg}"
    res["total_s"] = round(time.perf_counter() - t_start, 2)
    return res


def probe(args: argparse.Namespace) -> dict[str, Any]:
    """The devices' memory limits as XLA sees them with --mem-fraction."""
    jax, devices = _setup_jax(args)
    stats = [d.memory_stats() or {} for d in devices]
    return {"gpus": len(devices), "device_kind": devices[0].device_kind,
            "bytes_limit": [s.get("bytes_limit") for s in stats]}


# ---- the parent: the tries -------------------------------------------------------


def _child(args: argparse.Namespace, extra: list[str], log: Any) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE / "largest.py"), "--tile", str(args.tile),
           "--gpus", str(args.gpus), "--dtype", args.dtype, "--platform", args.platform,
           "--seed", str(args.seed)] + extra
    env = dict(os.environ, XLA_PYTHON_CLIENT_MEM_FRACTION=str(args.mem_fraction),
               XLA_PYTHON_CLIENT_PREALLOCATE="false")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                           timeout=args.child_timeout)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        rc = "timeout"
    log.write(f"$ {' '.join(cmd)}\n{out}{err}(exit {rc})\n")
    log.flush()
    for line in reversed(out.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    tail = (err.strip().splitlines() or [""])[-1][:200]
    return {"status": f"error: the try ended without a result (exit {rc}): {tail}"}


def candidates(args: argparse.Namespace, limits: list[int], gpus: int) -> list[int]:
    """N whose matrix takes 97%, 94%, 91% of the smallest memory limit,
    rounded down to a multiple of gpus x T_A."""
    es = 8 if args.dtype in ("float64", "complex64") else 16 if args.dtype == "complex128" else 4
    step = gpus * args.tile
    out = []
    for frac in (0.97, 0.94, 0.91, 0.88, 0.85)[:args.max_tries]:
        n = int(math.sqrt(gpus * min(limits) * frac / es)) // step * step
        if n > 0 and n not in out:
            out.append(n)
    return out


def _gb(x: Any) -> str:
    return f"{x / 1e9:.1f}" if isinstance(x, (int, float)) else "?"


def summary(tries: list[dict[str, Any]]) -> str:
    lines = ["largest float32 potrs (jaxmg), one try per N, largest first:"]
    for t in tries:
        line = f"  N={t.get('N')}: {t.get('status')}"
        if "solve_s" in t:
            line += f", solve {t['solve_s']} s (compile {t.get('compile_s')} s)"
        if "residual" in t:
            line += f", residual {t['residual']:.2e} (tolerance {t.get('tolerance', 0):.1e})"
        lines.append(line)
        if any(t.get("peak_bytes_in_use") or []):
            peak = t["peak_bytes_in_use"]
            need = t["matrix_bytes_per_gpu"]
            lines.append(
                f"    per GPU: XLA peak {', '.join(_gb(p) for p in peak)} GB of limit "
                f"{', '.join(_gb(x) for x in t['bytes_limit'])} GB; the matrix alone "
                f"{_gb(need)} GB (peak/matrix {max(p or 0 for p in peak) / need:.3f})")
        if t.get("nvidia_smi_peak_mib"):
            lines.append(f"    nvidia-smi peak used (MiB): {t['nvidia_smi_peak_mib']} of "
                         f"{t.get('nvidia_smi_total_mib')}")
    ok = [t for t in tries if t.get("status") == "ok"]
    lines.append(f"largest N solved: {max(t['N'] for t in ok)}" if ok else
                 "largest N solved: none of the N tried")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.one is not None:
        print(MARK + json.dumps(try_one(args)), flush=True)
        return 0
    if args.probe:
        print(MARK + json.dumps(probe(args)), flush=True)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "raw").mkdir(exist_ok=True)
    start = time.perf_counter()
    with open(args.out / "raw" / "largest.log", "a") as log:
        ns = sorted(args.n, reverse=True) if args.n else None
        if ns is None:
            p = _child(args, ["--probe"], log)
            limits = [x for x in p.get("bytes_limit") or [] if x]
            if not limits:
                print(f"largest: no memory limit from the devices: {p}", flush=True)
                return 1
            ns = candidates(args, limits, p["gpus"])
            print(f"largest: {p['gpus']} x {p['device_kind']}, XLA limit "
                  f"{_gb(min(limits))} GB per device at fraction {args.mem_fraction}: "
                  f"trying N = {ns}", flush=True)
        tries = []
        for n in ns[:args.max_tries]:
            t = _child(args, ["--one", str(n)], log)
            t.setdefault("N", n)
            tries.append(t)
            print(f"largest: N={n}: {t.get('status')} ({time.perf_counter() - start:.0f} s "
                  f"so far)", flush=True)
            (args.out / "largest.json").write_text(json.dumps(tries, indent=1) + "\n")
            if t.get("status") == "ok":
                break
    text = summary(tries) + f"\n(took {time.perf_counter() - start:.0f} s)"
    (args.out / "largest.txt").write_text(text + "\n")
    print("\n" + text, flush=True)
    return 0 if any(t.get("status") == "ok" for t in tries) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
