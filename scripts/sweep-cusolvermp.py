"""Sweep cuSOLVERMp's routines over small problems on several GPUs, one
process driving them (JAXMG_ENGINE=cusolvermp), to find every configuration
in which the library fails inside or leaves the process's GPUs broken.

    python3 scripts/sweep-cusolvermp.py OUTDIR [--gpus 2] [--ops syevd,...]
        [--budget-s 300] [--engine cusolvermp]

(``--engine lapack-local`` with JAX_PLATFORMS=cpu and
XLA_FLAGS=--xla_force_host_platform_device_count=2 runs the same sweep on CPU
devices: how the script itself is checked without a GPU.)

Each configuration (op, dtype, N, T_A) runs in a worker process; the worker
prints one line per configuration. After a configuration that raises, the
worker runs a canary (potrs on the same GPUs through the default engine,
checked against NumPy): if the canary fails too, the configuration broke the
process, and the parent starts a fresh worker at the next configuration. A
worker that dies or stops answering is treated the same way. The results go
to OUTDIR/sweep.csv (op,dtype,n,t_a,block,gpus,outcome,detail) as they come,
and a summary to stdout.

outcome: ok (checked against NumPy), wrong (ran, check failed), raised (an
error, the process still healthy), breaks (the process's GPUs unusable after
it), died (the worker exited or hung inside it).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
TESTS = HERE.parent / "tests" / "python"

OPS = ("syevd", "eigvals", "sygvd", "potrs", "potri", "lu_solve", "qr")
NS = (4, 8, 16, 32, 64, 128, 256, 512)
TILES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def configs(ops: list[str], gpus: int) -> list[dict]:
    """The sweep: every dtype for the eigensolvers (the routines seen failing),
    float32 and float64 for the rest, small N only for the factorizations."""
    out = []
    for op in ops:
        dtypes = (["float32", "float64", "complex64", "complex128"] if op == "syevd"
                  else ["float32", "float64"])
        ns = NS if op in ("syevd", "eigvals", "sygvd") else tuple(n for n in NS if n <= 64)
        for dtype, n, t in itertools.product(dtypes, ns, TILES):
            if n % gpus or t > n // gpus:
                continue
            out.append({"op": op, "dtype": dtype, "n": n, "t_a": t, "gpus": gpus})
    return out


# --- the worker -----------------------------------------------------------------


def worker(gpus: int, engine: str) -> None:
    """Reads configurations (JSON lines) from stdin, answers one JSON line each."""
    sys.path.insert(0, str(TESTS))
    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    import jaxmg
    import jaxmg_testing as jt

    mesh = Mesh(np.array(jax.devices()[:gpus]), ("x",))
    rows = NamedSharding(mesh, P("x", None))
    specs = (P("x", None), P(None, None))

    def on(a):
        return jax.device_put(a, rows)

    def run(cfg: dict) -> tuple[str, str]:
        dtype, n, t = np.dtype(cfg["dtype"]).type, cfg["n"], cfg["t_a"]
        rng = np.random.default_rng([n, t])
        tol = jt.tol(dtype, n) * 10
        op = cfg["op"]
        if op in ("syevd", "eigvals"):
            h = jt.make_hermitian(rng, n, dtype)
            if op == "syevd":
                w, v, s = jaxmg.syevd(on(h), t, mesh, (P("x", None),), return_status=True)
                w, v = np.asarray(w), np.asarray(v)
                err = max(jt.eig_residual(h, w, v), jt.orthogonality(v) / np.sqrt(n))
            else:
                w, s = jaxmg.syevd(on(h), t, mesh, (P("x", None),), return_status=True,
                                   return_eigenvectors=False)
                want = np.linalg.eigvalsh(jt.to_ref(h))
                err = np.abs(np.asarray(w) - want).max() / max(np.abs(want).max(), 1.0)
        elif op == "sygvd":
            import scipy.linalg

            a = jt.make_hermitian(rng, n, dtype)
            b = jt.make_hpd(rng, n, dtype)
            w, v = jaxmg.eigh_generalized(on(a), on(b), t, mesh, (P("x", None), P("x", None)))
            want = scipy.linalg.eigh(jt.to_ref(a), jt.to_ref(b), eigvals_only=True)
            err = np.abs(np.asarray(w) - want).max() / max(np.abs(want).max(), 1.0)
            s = 0
        elif op == "potrs":
            a, b = jt.make_hpd(rng, n, dtype), jt.make_rhs(rng, n, 3, dtype)
            x, s = jaxmg.potrs(on(a), b, t, mesh, specs, return_status=True)
            err = jt.solve_backward_error(a, np.asarray(x), b)
        elif op == "potri":
            a = jt.make_hpd(rng, n, dtype)
            inv, s = jaxmg.potri(on(a), t, mesh, (P("x", None),), return_status=True)
            err = jt.inverse_residual(a, np.asarray(inv))
        elif op == "lu_solve":
            g = (jt.make_general(rng, n, dtype) + 3 * np.sqrt(n) * np.eye(n)).astype(dtype)
            b = jt.make_rhs(rng, n, 3, dtype)
            x, s = jaxmg.lu_solve(on(g), b, t, mesh, specs, return_status=True)
            err = jt.solve_backward_error(g, np.asarray(x), b)
        elif op == "qr":
            g = jt.make_general(rng, n, dtype)
            q, r = jaxmg.qr(on(g), t, mesh, P("x", None))
            q, r = np.asarray(q), np.asarray(r)
            err = max(np.linalg.norm(q @ r - g) / np.linalg.norm(g), jt.orthogonality(q))
            s = 0
        else:
            raise ValueError(op)
        ok = int(s) == 0 and np.isfinite(err) and err < tol
        return ("ok" if ok else "wrong"), f"status {int(s)} error {err:.2e} (tol {tol:.1e})"

    def canary() -> bool:
        os.environ.pop("JAXMG_ENGINE", None)
        try:
            rng = np.random.default_rng(7)
            a, b = jt.make_hpd(rng, 256, np.float64), jt.make_rhs(rng, 256, 1, np.float64)
            x = np.asarray(jaxmg.potrs(on(a), b, 64, mesh, specs))
            return jt.solve_backward_error(a, x, b) < 1e-12
        except Exception:  # noqa: BLE001 - any failure of the canary is the answer
            return False
        finally:
            os.environ["JAXMG_ENGINE"] = engine

    os.environ["JAXMG_ENGINE"] = engine
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cfg = json.loads(line)
        try:
            outcome, detail = run(cfg)
        except Exception as e:  # noqa: BLE001 - the sweep records every failure
            outcome, detail = "raised", f"{type(e).__name__}: {str(e)[:300]}"
        if outcome != "ok" and not canary():
            outcome = "breaks"
        print(json.dumps({"outcome": outcome, "detail": detail}), flush=True)
        if outcome == "breaks":
            return


# --- the parent -----------------------------------------------------------------


class Worker:
    def __init__(self, gpus: int, engine: str):
        self.p = subprocess.Popen([sys.executable, __file__, "--worker", "--gpus", str(gpus),
                                   "--engine", engine],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  bufsize=1)
        first = self.p.stdout.readline()
        if not first.startswith("{"):
            raise RuntimeError(f"sweep worker did not start: {first!r}")

    def ask(self, cfg: dict, timeout_s: float) -> dict | None:
        import selectors

        try:
            self.p.stdin.write(json.dumps(cfg) + "\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            return None
        sel = selectors.DefaultSelector()
        sel.register(self.p.stdout, selectors.EVENT_READ)
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if sel.select(timeout=max(end - time.monotonic(), 0.1)):
                line = self.p.stdout.readline()
                if not line:
                    return None
                if line.startswith("{"):
                    return json.loads(line)
        return None

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--case-timeout-s", type=float, default=60.0)
    ap.add_argument("--engine", default="cusolvermp")
    ap.add_argument("--worker", action="store_true")
    args = ap.parse_args()
    if args.worker:
        worker(args.gpus, args.engine)
        return
    out = pathlib.Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    todo = configs(args.ops.split(","), args.gpus)
    end = time.monotonic() + args.budget_s
    w = None
    counts: dict[str, int] = {}
    with open(out / "sweep.csv", "w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(["op", "dtype", "n", "t_a", "gpus", "outcome", "detail"])
        for cfg in todo:
            if time.monotonic() > end:
                print(f"budget spent: {len(todo) - sum(counts.values())} configurations not run")
                break
            if w is None:
                w = Worker(args.gpus, args.engine)
            got = w.ask(cfg, args.case_timeout_s)
            if got is None:
                got = {"outcome": "died", "detail": f"exit {w.p.poll()}"}
            if got["outcome"] in ("breaks", "died"):
                w.stop()
                w = None
            counts[got["outcome"]] = counts.get(got["outcome"], 0) + 1
            rows.writerow([cfg["op"], cfg["dtype"], cfg["n"], cfg["t_a"], cfg["gpus"],
                           got["outcome"], got["detail"]])
            f.flush()
            if got["outcome"] != "ok":
                print(f"{cfg['op']} {cfg['dtype']} N={cfg['n']} T_A={cfg['t_a']}: "
                      f"{got['outcome']}: {got['detail'][:200]}", flush=True)
    if w is not None:
        w.stop()
    print("sweep:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
