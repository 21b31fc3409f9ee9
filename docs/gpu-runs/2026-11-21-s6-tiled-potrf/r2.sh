set -u
source scripts/device-lib.sh; jaxmg_device_env; mkdir -p $OUT/d
jaxmg_build $OUT/d >/dev/null || exit 1
export PYTHONPATH=$PWD/tests/python:$PYTHONPATH
echo "== quiet"; timeout 150 python3 scratch/spmd_ops.py potrs,potri 16,2 64,4 1024,64 4096,256 2>&1 | grep -E "SPMD|Error" | head -20
for dt in float32 complex64 complex128; do SPMD_DTYPE=$dt timeout 60 python3 scratch/spmd_ops.py potrs,potri 1024,64 2>&1 | grep -E "SPMD|Error" | head -4; done
for k in 1 2 3; do python3 scratch/busy_ctx.py $k 300 >/dev/null & done; sleep 3
echo "== busy 1-3"; timeout 150 python3 scratch/spmd_ops.py potrs,potri 16,2 1024,64 4096,256 2>&1 | grep -E "SPMD|Error" | head -20
kill %1 %2 %3 2>/dev/null; wait
echo "== MPMD fresh x4"; for i in 1 2 3; do timeout 100 python3 scratch/diag_fresh.py $OUT/d/fresh$i 4 x 2>&1 | grep -E "^x 0 |Error" | head -3; done
echo "== perf"
timeout 120 python3 bench/time_potrs.py 16384 256 5 JAXMG_POTRF=cusolvermg 2>&1 | tail -4
timeout 150 python3 bench/time_potrs.py 32768 1024 5 JAXMG_POTRF=cusolvermg 2>&1 | tail -4
timeout 200 python3 bench/time_potrs.py 65536 1024 3 JAXMG_POTRF=cusolvermg 2>&1 | tail -4
