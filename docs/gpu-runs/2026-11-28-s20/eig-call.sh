#!/usr/bin/env bash
# Issue 37, session 20 (branch eig-latency): the multi-GPU eigensolver (engine eig-mgpu,
# JAXMG_SYEVD_MGPU=1) with its reduction's new "replicated" column (every GPU runs each
# column's steps: one exchange between GPUs a column, not two), against session 19's
# ("owner", JAXMG_SYEVD_MGPU_PATH=owner) and JAX's jnp.linalg.eigh / eigvalsh on one GPU.
# Neither is yet run on a GPU with this tree. Goal: 1.5x JAX at N = 16384 and 32768.
#
# Prepare: .snap = git archive of the branch's HEAD (its short hash in .snap/.commit), this file
# copied to .snap's root (it also runs from its own place in the tree); .whl/ beside .snap holding
# nvidia_cusolvermp_cu13-0.8.0.3126-*.whl (T's eigenproblem on the GPU: without it the host
# solves T, about 9 s at N = 16384, and the timings mean little); carry [".snap", ".whl"];
# run on 2 GPUs (H200 best: N = 32768 with JAX's eigh beside needs about 60 GB on GPU 0):
#   bash .snap/eig-call.sh            (about 280 s; JAXMG_DEADLINE=290 bounds every step)
# Steps, in order of what matters most (each bounded by what is left):
#  1. build jaxmg (about 100 s);
#  2. tests/gpu/test_gpu_syevd_mgpu.py (JAXMG_SYEVD_MGPU=1; both paths, against NumPy);
#  3. syevd with and without eigenvectors on 2 GPUs (T_A = 256) against JAX on GPU 0:
#     N = 16384 (replicated, then owner), then N = 32768 (replicated; owner if time is left),
#     with JAXMG_TRACE=1: each call's steps (sytrd, stedc, ormtr) and the reduction's profile
#     (GPU 0's ms in the panels' columns and in the trailing updates; us a column by eighths
#     of the columns: large early (the product, ~m^2), the per-column chain in the last one);
#  4. if time is left: the reduction alone (scripts/probe-eig-mgpu.sh, N = 16384, 2 GPUs, both
#     paths: min of 2 runs, its profile, the split product's TB/s).
# Prints a summary (the last lines of stdout); logs in $OUT/r and $OUT/r.tar.gz.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
for root in "$here" "$here/../../.."; do [ -f "$root/scripts/device-lib.sh" ] && break; done
cd "$root" || exit 1
source scripts/device-lib.sh; jaxmg_device_env
export JAXMG_DEADLINE=${JAXMG_DEADLINE:-290}
# The seconds a step may take (at most $1), or "" where too few are left (timeout 0 would
# mean no bound at all).
bound() { local l; l=$(jaxmg_left "$1"); [ "$l" -ge "${2:-10}" ] && echo "$l"; }
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1}
R=$OUT/r; mkdir -p "$R"
finish() { tar czf "$OUT/r.tar.gz" -C "$OUT" r; }
{ echo "tree: $(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader; } > "$R/machine.txt" 2>&1
jaxmg_machine_info "$R"
t0=$SECONDS
jaxmg_build "$R" > "$R/build.txt" 2>&1 || {
  finish; echo "== BUILD FAILED (log r/build.log):"; tail -n 25 "$R/build.txt"; exit 1; }
jaxmg_carried_wheels "$R" >> "$R/build.txt" 2>&1
build_s=$((SECONDS - t0))

# 2. The engine's GPU tests (they set JAXMG_SYEVD_MGPU=1 themselves too).
b=$(bound 60 20) && { JAXMG_SYEVD_MGPU=1 JAXMG_TEST_PROGRESS=$R/progress-tests.txt timeout -k 5 "$b" \
  python3 -m pytest -q -rfEs -p no:cacheprovider --timeout 50 --durations=8 \
  tests/gpu/test_gpu_syevd_mgpu.py > "$R/pytest-syevd_mgpu.log" 2>&1
  echo "exit $? (bound $b s)" >> "$R/pytest-syevd_mgpu.log"; }

# 3. Timings. Each result line is printed as it comes (a cut run keeps what it has).
cat > "$R/time_eig.py" <<'PY'
import os, sys, time, numpy as np, jax, jax.numpy as jnp, jaxmg
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
jax.config.update("jax_enable_x64", True)
end = time.time() + float(sys.argv[1]) - 5          # the seconds this script may take
mesh = Mesh(np.array(jax.devices()[:2]), ("x",)); d0 = jax.devices()[0]
def left(): return end - time.time()
def say(*a): print(*a, flush=True)
def run(f, x, reps):                                 # compiled ahead: runs are all timed
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); out = jax.block_until_ready(f(x)); ts.append(time.perf_counter() - t)
    return out, min(ts), ts
EST = {16384: 4.0, 32768: 26.0}                      # s a run, JAX's eigh (the slowest)
SIZES = [int(s) for s in os.environ.get("EIG_SIZES", "16384,32768").split(",")]  # (dry runs)
for n in SIZES:
    EST.setdefault(n, 1.0)
    # The first size: a warm-up, then 2 runs of jaxmg's (which varied by 5% in session 19),
    # 1 of JAX's (steady); the next: one run each (the first of its size in the process).
    first = n == SIZES[0]
    if left() < 3 * EST[n]:
        say(f"N={n}: skipped, {left():.0f} s left"); continue
    g = jax.random.normal(jax.random.key(n), (n, n), jnp.float64)
    a1 = jax.device_put((g + g.T) / 2, d0); del g
    a2 = jax.device_put(a1, NamedSharding(mesh, P("x", None)))
    for vec in (True, False):
        what = "eigh" if vec else "eigvalsh"
        mg = jax.jit(lambda a: jaxmg.syevd(a, T_A=256, mesh=mesh, in_specs=(P("x", None),),
                                           return_eigenvectors=vec)).lower(a2).compile()
        ref = jax.jit(jnp.linalg.eigh if vec else jnp.linalg.eigvalsh).lower(a1).compile()
        res = {}
        for path in ("replicated", "owner", "jax"):
            if path == "owner" and not first and left() < 4 * EST[n]:
                say(f"N={n} {what} owner: skipped, {left():.0f} s left"); continue
            reps = 2 if first and path != "jax" else 1
            if left() < (1.5 if path == "jax" else 0.8) * EST[n] * (reps + first):
                say(f"N={n} {what} {path}: skipped, {left():.0f} s left"); continue
            os.environ["JAXMG_SYEVD_MGPU_PATH"] = path if path != "jax" else "replicated"
            f, x = (ref, a1) if path == "jax" else (mg, a2)
            if first: run(f, x, 1)
            out, t, ts = run(f, x, reps)
            w = out[0] if vec else out
            res[path] = (t, jax.device_put(w, d0))
            line = f"N={n} {what} {path}: {t:.3f} s {['%.3f' % x for x in ts]}"
            if vec and path == "replicated":
                v = jax.device_put(out[1], d0)
                r = float(jnp.linalg.norm(a1 @ v - v * res[path][1]) / jnp.linalg.norm(a1))
                o = float(jax.jit(lambda v: jnp.linalg.norm(v.T @ v - jnp.eye(n, dtype=v.dtype)))(v)
                          / np.sqrt(n))
                line += f"; ||AV-VW||/||A|| {r:.1e}; ||V^TV-I||/sqrt(N) {o:.1e}"
                del v
            del out
            say(line)
        if "jax" in res:
            wj = res["jax"][1]
            for p in ("replicated", "owner"):
                if p in res:
                    dw = float(jnp.max(jnp.abs(res[p][1] - wj)) / jnp.max(jnp.abs(wj)))
                    say(f"RESULT N={n} {what} {p}: {res[p][0]:.3f} s vs jax {res['jax'][0]:.3f} s: "
                        f"{res['jax'][0] / res[p][0]:.2f}x; eigenvalues vs jax {dw:.1e}")
        del mg, ref, res
    del a1, a2
PY
b=$(bound 250 30) && { JAXMG_SYEVD_MGPU=1 JAXMG_TRACE=1 timeout -k 5 "$b" \
  python3 "$R/time_eig.py" "$b" > "$R/time.txt" 2> "$R/time.err"
  echo "exit $? (bound $b s)" >> "$R/time.txt"; }
touch "$R/time.txt" "$R/time.err" "$R/pytest-syevd_mgpu.log"

# 4. The reduction alone, if time is left (no library build needed): no small-N checks, no
# cuSOLVERDn baselines (session 19's: cusolverDnDsytrd 2.75 s at 16384 on one H200).
b=$(bound 60 45) && SIZES=16384 GPUS=2 PATHS=replicated,owner DN=0 ORTH=0 CHECK_MAX=0 REPS=2 \
  timeout -k 5 "$b" bash scripts/probe-eig-mgpu.sh "$R/probe" > "$R/probe.txt" 2>&1

summary() {
echo "== eig-call.sh (session 20): $(head -1 "$R/machine.txt"); GPUs: $(tail -n +2 "$R/machine.txt" | cut -d, -f2 | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"
echo "== build ${build_s} s; $(grep -h "carried wheels\|no carried" "$R/build.txt" | head -1)"
grep -q "nvidia_cusolvermp" "$R/build.txt" || echo "!! no cuSOLVERMp wheel: T is solved on the host (slow); timings not comparable"
echo "== tests (tests/gpu/test_gpu_syevd_mgpu.py): $(grep -E "passed|failed|error|skipped|no tests" "$R/pytest-syevd_mgpu.log" | tail -1) $(tail -n 1 "$R/pytest-syevd_mgpu.log")"
grep -E "^(FAILED|ERROR)" "$R/pytest-syevd_mgpu.log" | cut -c1-200 | head -8
echo "== syevd on 2 GPUs (T_A = 256, float64) against JAX on GPU 0 (min of runs; goal 1.5x):"
grep -E "^RESULT|skipped|AV-VW" "$R/time.txt" | sed 's/^RESULT //'
grep -q "^RESULT" "$R/time.txt" || { echo "!! no timing finished: time.txt / time.err say:"; tail -n 4 "$R/time.txt"; tail -n 6 "$R/time.err" | cut -c1-300; }
echo "== the engine's steps and the reduction's profile (the last trace of each kind):"
python3 - "$R/time.err" <<'PY'
import re, sys
last = {}
for line in open(sys.argv[1], errors="replace"):
    if not line.startswith("jaxmg trace syevd"): continue
    m = re.search(r"N=(\d+) .*want_vectors=(\d).*?sytrd ([\d.]+) ms.*?sytrd \[(\w+)(.*?)\]", line)
    if not m: continue
    steps = ", ".join(f"{k} {v} ms" for k, v in re.findall(r"(stedc|stemr|sterf|ormtr|total) ([\d.]+) ms", line))
    last[(int(m[1]), m[2], m[4])] = f"sytrd {m[3]} ms, {steps}; [{m[4]}{m[5]}]"
for (n, vec, path), s in sorted(last.items()):
    print(f"N={n} {'eigh' if vec == '1' else 'eigvalsh'} {path}: {s}")
if not last: print("(no trace lines: see r/time.err)")
PY
if [ -f "$R/probe/probe-eig-mgpu.csv" ]; then
  echo "== the reduction alone (probe, N = 16384, 2 GPUs):"
  grep -E "^mg_(symv|sytrd|profile|check)" "$R/probe/probe-eig-mgpu.csv" | cut -d, -f1,6,7,8 | cut -c1-220
fi
echo "== $SECONDS s; logs: r/ (summary.txt, time.txt, time.err, pytest-syevd_mgpu.log, probe/) in r.tar.gz"
}
summary > "$R/summary.txt" 2>&1
finish
cat "$R/summary.txt"
