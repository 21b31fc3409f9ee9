#!/usr/bin/env bash
# On a GPU machine: the wheel that scripts/build-wheel.sh made, installed
# into a fresh folder and run with no CUDA toolkit on the library path:
# which CUDA libraries the process loaded (from /proc/self/maps), then the
# GPU tests from that install, writing logs to LOGDIR.
#
#   scripts/device-wheel-test.sh LOGDIR [extra pytest arguments]
#
# Environment: WHEEL (default: the one in dist/), PYTHON (default python3),
# JAXMG_TEST_TIMEOUT (seconds for the pytest run, default 1500),
# JAXMG_EXTRA_PYTHONPATH (folders put after the install on PYTHONPATH).
# Logs: LOGDIR/install.log, LOGDIR/loaded.txt, LOGDIR/pytest-wheel.log.
set -uo pipefail
logdir="${1:?usage: scripts/device-wheel-test.sh LOGDIR [pytest args]}"
shift
# shellcheck source=scripts/device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"
mkdir -p "$logdir"
logdir="$(cd "$logdir" && pwd)"
jaxmg_device_env
jaxmg_machine_info "$logdir"
wheel="${WHEEL:-$(ls "$jaxmg_root"/dist/jaxmg-*.whl 2>/dev/null | head -n 1)}"
[ -f "$wheel" ] || { echo "device-wheel-test: no wheel (run scripts/build-wheel.sh first)"; exit 1; }
site="$(mktemp -d /tmp/jaxmg-wheel-XXXXXX)"
echo "== install $(basename "$wheel") into $site"
if ! "$jaxmg_python" -m pip install --no-deps --no-index --target "$site" "$wheel" \
      >"$logdir/install.log" 2>&1; then
  tail -n 30 "$logdir/install.log"; exit 1
fi
# No toolkit on the library path: LD_LIBRARY_PATH without a CUDA folder.
LD_LIBRARY_PATH="$(printf '%s' "${LD_LIBRARY_PATH:-}" | tr ':' '\n' | grep -viE 'cuda' | paste -sd: -)"
export LD_LIBRARY_PATH
# Wheels the GPU machine lacks (cuSOLVERMp's, carried with the call) may be
# added after the install: JAXMG_EXTRA_PYTHONPATH.
export PYTHONPATH="$site${JAXMG_EXTRA_PYTHONPATH:+:$JAXMG_EXTRA_PYTHONPATH}"
echo "== LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-<empty>}"
# One solve on every GPU, then the CUDA libraries this process loaded.
(cd /tmp && "$jaxmg_python" - "$site" <<'EOF') 2>&1 | tee "$logdir/loaded.txt"
import re, sys
import jax, jax.numpy as jnp, numpy as np
import jaxmg
site = sys.argv[1]
assert jaxmg.__file__.startswith(site), f"jaxmg imported from {jaxmg.__file__}, not {site}"
gpus = jax.devices("gpu")
mesh = jax.make_mesh((len(gpus),), ("x",), devices=gpus)
n = 64 * len(gpus)
rng = np.random.default_rng(0)
a = rng.standard_normal((n, n)).astype(np.float32)
a = a @ a.T + n * np.eye(n, dtype=np.float32)
b = rng.standard_normal((n, 1)).astype(np.float32)
x = np.asarray(jaxmg.potrs(a, b, mesh=mesh))
res = np.linalg.norm(a @ x - b) / (np.linalg.norm(a) * np.linalg.norm(x))
print(f"potrs on {len(gpus)} GPU(s), N={n}: backward error {res:.1e}")
wanted = re.compile(r"lib(cudart|cublas|cublasLt|cusolver|cusolverMg|nccl|cusolverMp|jaxmg_cuda)\.so")
paths = sorted({line.split()[-1] for line in open("/proc/self/maps")
                if wanted.search(line.split()[-1] if line.split() else "")})
print("loaded:\n  " + "\n  ".join(paths))
toolkit = [p for p in paths if "/usr/local/cuda" in p]
print("from the toolkit:", toolkit or "none")
sys.exit(1 if toolkit or res > 1e-4 else 0)
EOF
rc="${PIPESTATUS[0]}"
echo "== wheel check: exit $rc"
cd "$jaxmg_root" || exit 1
echo "== GPU tests from the wheel"
timeout "${JAXMG_TEST_TIMEOUT:-1500}" "$jaxmg_python" -m pytest -q -rs -p no:cacheprovider \
  --timeout 900 tests/gpu "$@" 2>&1 | tee "$logdir/pytest-wheel.log" |
  grep -vE "only supports IOTA device assignment"
prc="${PIPESTATUS[0]}"
echo "== GPU tests from the wheel: pytest exit $prc"
[ "$rc" = 0 ] && [ "$prc" = 0 ]
