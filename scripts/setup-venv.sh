#!/usr/bin/env bash
# Creates (or reuses) the project's virtual environment in .venv with what the
# examples and tests need on a machine without a GPU: JAX for CPU, SciPy (its
# LAPACK serves jaxmg's CPU engine), pytest, matplotlib (the benchmark's
# plots, tested on CPU), NetKet (its distributed solvers are tested on jaxmg:
# tests/python/test_netket.py), the documentation site's tools (MkDocs) and
# the build tools; then builds
# and installs jaxmg itself. Sourced by run-example.sh and test.sh.
#
# JAXMG_VENV (default .venv) and JAXMG_JAX_SPEC (default: the newest jax
# that pyproject.toml allows) make another environment: test.sh makes
# .venv-jaxmin with the oldest jax jaxmg claims (JAXMG_JAX_MIN below), where
# NetKet (which needs a newer jax) is left out.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${JAXMG_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
# The oldest jax jaxmg supports: pyproject.toml's bound, read from there.
JAXMG_JAX_MIN="$(sed -n 's/^dependencies = \["jax>=\([0-9.]*\)".*/\1/p' "$root/pyproject.toml")"
# JAXMG_JAX_SPEC=oldest: jax==$JAXMG_JAX_MIN (what test.sh asks for .venv-jaxmin).
[ "${JAXMG_JAX_SPEC:-}" = oldest ] && JAXMG_JAX_SPEC="jax==$JAXMG_JAX_MIN"
jax_spec="${JAXMG_JAX_SPEC:-jax>=$JAXMG_JAX_MIN}"

if [ ! -x "$venv/bin/python" ]; then
  if ! "$python" -m venv "$venv" 2>/dev/null; then
    # Debian's python3 ships venv separately.
    echo "setup: python3 -m venv failed; installing python3-venv" >&2
    rm -rf "$venv"
    if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq python3-venv; else
      sudo apt-get update -qq && sudo apt-get install -y -qq python3-venv; fi
    "$python" -m venv "$venv"
  fi
fi
if ! command -v cc >/dev/null 2>&1; then
  echo "setup: no C compiler; installing gcc" >&2
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq gcc; else
    sudo apt-get update -qq && sudo apt-get install -y -qq gcc; fi
fi
"$venv/bin/python" -m pip install -q --upgrade pip
# NetKet, and the documentation site's tools (scripts/docs.sh builds the site
# with them; docs/requirements.txt), in the main environment only.
extra=("netket>=3.23" -r "$root/docs/requirements.txt")
[ -n "${JAXMG_JAX_SPEC:-}" ] && extra=()
# pytest below 9.2: 9.2.0 keeps a node's id where pytest-xdist 3.8's
# --dist loadgroup cannot mark it, and the groups are then ignored (checked
# 2026-11-25: 9.1.1 groups, 9.2.0 does not); scripts/test.sh relies on them.
"$venv/bin/python" -m pip install -q "$jax_spec" numpy scipy "pytest<9.2" pytest-timeout pytest-xdist matplotlib \
  "${extra[@]}" "scikit-build-core>=0.10" cmake ninja
# Build and install jaxmg into the venv (no build isolation: the venv already
# holds jax, whose XLA FFI headers the build needs), in a build folder of its
# own: CMake keeps the Python (so the jax headers) it first found.
"$venv/bin/python" -m pip install -q --no-build-isolation --force-reinstall --no-deps \
  -C build-dir="$root/build/$(basename "$venv")" "$root"
export PATH="$venv/bin:$PATH"
