#!/usr/bin/env bash
# Sets everything up (see setup-venv.sh), then runs the whole test suite:
#   1. the C unit tests, built plainly and under AddressSanitizer + UBSan;
#   2. the documentation site (scripts/docs.sh, warnings are errors);
#   3. the Python tests on 4 CPU devices (GPU tests skip without GPUs), with
#      the newest jax installable here (.venv), the docs' examples among them
#      (tests/python/test_docs_examples.py);
#   4. a subset of them with the oldest jax jaxmg claims (.venv-jaxmin).
# Exits non-zero if anything fails.
#
# What waits (pip, the C tests' timeouts and sleeps) overlaps other work on
# CI's two cores: .venv-jaxmin is set up while .venv is, and the jax-oldest
# subset runs as soon as it is (at nice 19), beside the C builds and tests,
# the documentation and the main pytest run, its output printed after the
# main summary; the two C test programs run at once.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$root/build"
# pytest-xdist: one worker per core, at most 4 (each holds a JAX process of
# about 4 GB); one pytest process keeps one core busy (tracing and XLA's
# compiles), so two workers take the suite's time near half on CI's two
# cores. The tests that start processes share one worker (--dist loadgroup,
# their xdist_group "processes"): they check that no shared memory segment or
# socket is left behind, which another worker's job would make.
workers="$(nproc)"; [ "$workers" -gt 4 ] && workers=4
# XLA compiles the tests' programs (thousands, each run a few times on tiny
# matrices) cheaply: without LLVM's optimizations, fusions by its older IR
# emitters rather than its MLIR fusion emitters
# (xla_cpu_use_fusion_emitters=false; both are XLA's own code generators),
# and each module in one piece rather than split across threads. The same
# programs, compiled in much less CPU time, which is most of the suite's
# (the last two flags take about a third off the suite's, half off its
# derivative checks'). jaxmg's own code is C, built as always; the
# processes the tests start keep the flags (tests/python/mpmd_launch.py,
# xla_flags).
export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_backend_optimization_level=0"
XLA_FLAGS+=" --xla_cpu_use_fusion_emitters=false --xla_cpu_parallel_codegen_split_count=1"

# The oldest jax jaxmg claims (pyproject.toml), in its own environment
# (.venv-jaxmin), on a subset within a few minutes that covers every op, both
# API forms (the seeds' and 1.x's, plain and ctx), grad, jvp and vmap, on
# meshes of Auto and Explicit axes: the 1.x forms (every op but gesvd; vmap
# and grad of the ctx forms; the seeds' ctx forms inside shard_map), the
# log-determinant and its derivative, vmap of the plain forms and of gesvd
# and polar, gesvd's and polar's ctx forms, polar's check_grads, qr's and
# least_squares's jit, vmap, ctx form and check_grads, eigh_generalized's
# ctx form, vmap and check_grads, and the
# derivatives (check_grads: jvp and vjp) and cotangents of every op and form
# (gesvd and polar included) on every kind of mesh,
# jitted (the eager cases run the same rules and take most of that file's
# time). The log-determinant's check_grads on the exact tilings (each dtype
# and kind of mesh once; the padded ones, the same rule on a padded matrix,
# run in the main run) and polar's on a float64 QDWH case and the complex
# repeated-singular-value SVD case, on both kinds of mesh (the other two,
# QDWH again, in the main run).
JAXMIN_TESTS=(tests/python/test_v1_api.py tests/python/test_logdet.py
              tests/python/test_derivatives.py::test_vmap_equals_unbatched_calls
              tests/python/test_gesvd.py::test_gesvd_vmaps
              tests/python/test_gesvd.py::test_gesvd_ctx_at_the_global_level
              tests/python/test_polar.py::test_polar_under_jit_and_vmap
              tests/python/test_polar.py::test_polar_ctx_at_the_global_level
              tests/python/test_polar.py::test_polar_check_grads
              tests/python/test_qr.py::test_qr_under_jit_and_vmap
              tests/python/test_qr.py::test_qr_ctx_at_the_global_level
              tests/python/test_qr.py::test_qr_check_grads_on_auto_and_explicit_meshes
              tests/python/test_least_squares.py::test_least_squares_under_jit_and_vmap
              tests/python/test_least_squares.py::test_least_squares_ctx_at_the_global_level
              tests/python/test_least_squares.py::test_least_squares_check_grads_on_auto_and_explicit_meshes
              tests/python/test_sygvd.py::test_shardmap_ctx
              tests/python/test_sygvd.py::test_vmap_over_a_batch
              tests/python/test_sygvd.py::test_check_grads
              tests/python/test_mesh_derivatives.py)
JAXMIN_SELECT="not (mesh_derivatives and eager) and not (check_grads_logdet and padded)"
JAXMIN_SELECT+=" and not (test_polar_check_grads and (c128_square or c128_repeated-qdwh))"
# The jax-oldest subset, set up beside the main set-up and run as soon as
# that is done, at the lowest priority (nice 19): it takes what the rest
# leaves idle (pip's downloads, the C tests' timeouts and sleeps, the
# processes' tests' waits, the last worker's tail) and leaves the C tests,
# whose checks bound how long a failure may take, and the main run's tests,
# some of which run a benchmark within a time budget, their CPU; what is
# left of it when the main run ends runs on both cores. Exit status 100:
# its set-up failed.
jaxmin_log="$root/build/jaxmin.log"
(
  (JAXMG_VENV="$root/.venv-jaxmin" JAXMG_JAX_SPEC=oldest source "$root/scripts/setup-venv.sh") \
    >"$root/build/jaxmin-setup.log" 2>&1
  [ "$?" = 0 ] || exit 100
  cd "$root" && PATH="$root/.venv-jaxmin/bin:$PATH" \
    nice -n 19 "$root/.venv-jaxmin/bin/python" -m pytest -q -rs -n "$workers" --dist loadgroup \
      "${JAXMIN_TESTS[@]}" -k "$JAXMIN_SELECT" >"$jaxmin_log" 2>&1
) &
jaxmin_pid=$!
source "$root/scripts/setup-venv.sh" || { echo "test: setup failed" >&2; exit 1; }
set +e
cd "$root"
status=0
declare -A c_run
for variant in plain sanitize; do
  build="$root/build/ctest-$variant"
  flags=(-DJAXMG_BUILD_TESTS=ON -DJAXMG_WITH_CUDA=OFF -DPython_EXECUTABLE="$(command -v python)")
  [ "$variant" = sanitize ] && flags+=(-DJAXMG_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
  if cmake -S "$root" -B "$build" "${flags[@]}" >"$build.log" 2>&1 &&
     cmake --build "$build" -j "$(nproc)" >>"$build.log" 2>&1; then
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "$build/jaxmg_c_tests" \
      >"$build.out" 2>&1 &
    c_run[$variant]=$!
  else
    echo "== C unit tests ($variant)"; cat "$build.log"; echo "C build ($variant) failed"; status=1
  fi
done
for variant in plain sanitize; do
  [ -n "${c_run[$variant]:-}" ] || continue
  wait "${c_run[$variant]}"; rc=$?
  echo "== C unit tests ($variant)"; cat "$root/build/ctest-$variant.out"
  [ "$rc" = 0 ] || status=1
done
# The tiled Cholesky and inverse of the CUDA engine (csrc/engine/cusolvermg/cuda_potrf.c,
# cuda_potri.c) on the CPU, under tests/emu's emulation of the CUDA calls they make, streams
# run in random orders that their events allow (about 10 s); needs the CUDA toolkit's
# headers, no GPU. The eigensolver's part of tests/emu takes minutes: run by hand.
echo "== CUDA engine's tiled factorizations, emulated (tests/emu/run.sh, EMU_PARTS=tiles)"
if [ -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda_runtime.h" ]; then
  if EMU_PARTS=tiles bash "$root/tests/emu/run.sh" >"$root/build/emu-tiles.log" 2>&1; then
    tail -n 1 "$root/build/emu-tiles.log"
  else
    tail -n 40 "$root/build/emu-tiles.log"; echo "emulated tiled factorizations failed"; status=1
  fi
else
  echo "skipped: no CUDA headers (${CUDA_HOME:-/usr/local/cuda}/include)"
fi
# The documentation site, before the Python tests (whose summary closes the
# output); its Python examples run with them (tests/python/test_docs_examples.py).
echo "== Documentation site (scripts/docs.sh, warnings are errors)"
mkdir -p "$root/build"
if "$root/scripts/docs.sh" >"$root/build/docs.log" 2>&1; then
  tail -n 1 "$root/build/docs.log"
else
  cat "$root/build/docs.log"; echo "documentation build failed"; status=1
fi
echo "== Python tests (4 CPU devices, jax $(python -c 'import jax; print(jax.__version__)'), $workers workers)"
python -m pytest -q -rs -n "$workers" --dist loadgroup tests/python tests/gpu "$@" || status=1
echo "== Python tests on the oldest jax jaxmg claims (jax $JAXMG_JAX_MIN, a subset; run beside the above)"
wait "$jaxmin_pid"; rc=$?
if [ "$rc" = 100 ]; then
  cat "$root/build/jaxmin-setup.log"; echo "test: setup (jax $JAXMG_JAX_MIN) failed" >&2; status=1
else
  [ "$rc" = 0 ] || status=1
  cat "$jaxmin_log"
fi
exit $status
