#!/usr/bin/env bash
# A CPU-only install of jaxmg's binary wheel: installed into a fresh folder
# and run on 4 CPU devices with no CUDA library reachable (the toolkit's
# folder hidden under an empty tmpfs in a private mount namespace: needs
# root and unshare; without them the check runs with the toolkit where it
# is, and says so). Prints the backward error of one potrs and the jaxmg and
# CUDA libraries the process loaded (/proc/self/maps): libjaxmg_cpu.so only.
#
#   scripts/wheel-cpu-check.sh [WHEEL]     (default: the one in dist/)
#
# Uses .venv's python (jax for CPU, no NVIDIA wheels), as scripts/test.sh
# sets it up.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
wheel="${1:-$(ls "$root"/dist/jaxmg-*.whl 2>/dev/null | head -n 1)}"
[ -f "$wheel" ] || { echo "wheel-cpu-check: no wheel (run scripts/build-wheel.sh first)" >&2; exit 1; }
python="$root/.venv/bin/python"
site="$(mktemp -d /tmp/jaxmg-cpu-wheel-XXXXXX)"
trap 'rm -rf "$site"' EXIT
"$python" -m pip install -q --no-deps --no-index --target "$site" "$wheel"
check="$(cat <<'PY'
import sys
import jax, numpy as np
import jaxmg
site = sys.argv[1]
assert jaxmg.__file__.startswith(site), f"jaxmg imported from {jaxmg.__file__}"
devs = jax.devices("cpu")
mesh = jax.make_mesh((len(devs),), ("x",), devices=devs)
n = 64
rng = np.random.default_rng(0)
a = rng.standard_normal((n, n)).astype(np.float32)
a = a @ a.T + n * np.eye(n, dtype=np.float32)
b = rng.standard_normal((n, 1)).astype(np.float32)
x = np.asarray(jaxmg.potrs(a, b, mesh=mesh))
res = np.linalg.norm(a @ x - b) / (np.linalg.norm(a) * np.linalg.norm(x))
print(f"potrs on {len(devs)} CPU devices from {site}: backward error {res:.1e}")
libs = sorted({l.split()[-1] for l in open("/proc/self/maps")
               if any(k in l for k in ("jaxmg", "cuda", "cusolver", "cublas", "nccl"))})
print("loaded:\n  " + "\n  ".join(libs))
sys.exit(0 if res < 1e-4 and not any("jaxmg_cuda" in p for p in libs) else 1)
PY
)"
run=(env XLA_FLAGS=--xla_force_host_platform_device_count=4 LD_LIBRARY_PATH= PYTHONPATH="$site"
     "$python" -c "$check" "$site")
cuda="$(readlink -f "${CUDA_HOME:-/usr/local/cuda}" 2>/dev/null || true)"
if [ -n "$cuda" ] && [ -d "$cuda" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  echo "== the CUDA toolkit ($cuda) hidden"
  unshare -m sh -c 'mount -t tmpfs none "$0" && exec "$@"' "$cuda" "${run[@]}"
else
  echo "== the CUDA toolkit left where it is (hiding it needs root and unshare)"
  "${run[@]}"
fi
