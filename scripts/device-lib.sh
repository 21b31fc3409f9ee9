# shellcheck shell=bash
# Sourced by the scripts that run on a GPU machine (device-test.sh,
# device-bench.sh): the environment, the machine's description, and the two
# builds. Nothing is downloaded there: jaxmg is built against the machine's
# own python3 (jax, scikit-build-core, cmake and ninja must be there).
#
# Environment: PYTHON (default python3), JAXMG_SITE (where jaxmg is installed,
# default /tmp/jaxmg-site), CUDA_HOME (default /usr/local/cuda), CC (gcc).

jaxmg_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jaxmg_python="${PYTHON:-python3}"
jaxmg_site="${JAXMG_SITE:-/tmp/jaxmg-site}"

# What every GPU run sets: cuSOLVERMg's workspaces must fit beside JAX's
# memory pool, and NVLink multicast stays off on shared machines.
jaxmg_device_env() {
  export XLA_PYTHON_CLIENT_PREALLOCATE=false
  export NCCL_NVLS_ENABLE=0
}

# jaxmg_left CAP: the seconds a step of a bounded call may take: CAP, or
# what is left of JAXMG_DEADLINE (seconds since the calling script began,
# bash's SECONDS; default 560), whichever is less.
jaxmg_left() {
  local l=$(( ${JAXMG_DEADLINE:-560} - SECONDS ))
  if [ "$l" -lt "$1" ]; then echo "$l"; else echo "$1"; fi
}

# jaxmg_machine_info LOGDIR: nvidia-smi and the topology, for the record.
jaxmg_machine_info() {
  { nvidia-smi; nvidia-smi topo -m; } >"$1/nvidia-smi.txt" 2>&1
}

# jaxmg_build LOGDIR: builds and installs jaxmg into $jaxmg_site (no build
# isolation, no index) and puts it first on PYTHONPATH. Returns non-zero,
# after the log's tail, when the build fails.
jaxmg_build() {
  local logdir="$1"
  echo "== build ($jaxmg_python)"
  rm -rf "$jaxmg_site"
  if ! "$jaxmg_python" -m pip install --no-build-isolation --no-deps --no-index \
        --target "$jaxmg_site" -v "$jaxmg_root" >"$logdir/build.log" 2>&1; then
    tail -n 60 "$logdir/build.log"
    echo "build failed (log: $logdir/build.log)"
    return 1
  fi
  grep -E "libjaxmg_(cpu|cuda)|Building libjaxmg_cuda" "$logdir/build.log" | head -5
  ls "$jaxmg_site/jaxmg"
  jaxmg_use_site
}

# jaxmg_use_site: puts an existing build ($jaxmg_site) first on PYTHONPATH.
jaxmg_use_site() {
  export PYTHONPATH="$jaxmg_site${PYTHONPATH:+:$PYTHONPATH}"
}

# jaxmg_carried_wheels [LOGDIR]: the wheels carried with the call
# (cuSOLVERMp's, nvidia_cusolvermp_cu13-*.whl: the GPU machine has none and
# no network), in .whl/ inside the tree or beside it (../.whl/, where the call
# carries a snapshot of the tree as .snap/), installed into $jaxmg_site-extra
# and put on PYTHONPATH after jaxmg, where jaxmg looks for libcusolverMp.
# Nothing when neither exists (the cuSOLVERMp engine then says it is not
# available). LOGDIR (default /tmp) receives wheels.log.
jaxmg_carried_wheels() {
  local logdir="${1:-/tmp}" extra="$jaxmg_site-extra" dir
  for dir in "$jaxmg_root/.whl" "$jaxmg_root/../.whl" ""; do
    [ -n "$dir" ] && compgen -G "$dir/*.whl" >/dev/null && break
  done
  [ -n "$dir" ] || { echo "== no carried wheels (.whl/)"; return 0; }
  echo "== carried wheels: $(cd "$dir" && echo *.whl)"
  rm -rf "$extra"
  if "$jaxmg_python" -m pip install -q --no-index --no-deps --no-compile --target "$extra" \
       "$dir"/*.whl >"$logdir/wheels.log" 2>&1; then
    export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$extra"
  else
    tail -n 20 "$logdir/wheels.log"
    echo "carried wheels not installed (log: $logdir/wheels.log)"
  fi
}

# jaxmg_build_ceiling BINARY LOGFILE: the engine's ceiling (bench/ceiling/),
# plain C11 against the CUDA toolkit, warnings as errors.
jaxmg_build_ceiling() {
  local out="$1" log="$2" cuda="${CUDA_HOME:-/usr/local/cuda}"
  echo "== build the ceiling ($out)"
  mkdir -p "$(dirname "$out")"
  if ! "${CC:-gcc}" -std=c11 -O2 -Wall -Wextra -Werror -I"$cuda/include" \
        -I"$jaxmg_root/csrc" "$jaxmg_root"/bench/ceiling/*.c \
        "$jaxmg_root"/csrc/cuda/check.c "$jaxmg_root"/csrc/common/error.c -o "$out" -L"$cuda/lib64" \
        -Wl,-rpath,"$cuda/lib64" -lcusolverMg -lcublas -lcurand -lcudart -lm \
        >"$log" 2>&1; then
    cat "$log"
    echo "ceiling build failed (log: $log)"
    return 1
  fi
}
