set -u
source scripts/device-lib.sh; jaxmg_device_env
mkdir -p $OUT/d
jaxmg_build_ceiling /tmp/ceil $OUT/d/ceil-build.log >/dev/null || exit 1
C="--check-all --repeats 20 --case potrs,float64,16,2 --case potrs,float64,1024,64 --case potrs,float64,4096,256 --case potrs,float64,4096,1024 --case potri,float64,1024,64 --case syevd,float64,1024,64"
cl() { timeout 120 /tmp/ceil $C 2>&1 | grep -E "ceiling:"; }
echo "== ceiling quiet"; cl
for k in 1 2 3; do python3 scratch/busy_ctx.py $k 400 >/dev/null & done; sleep 3
echo "== ceiling, busy 1-3"; cl
echo "== ceiling, busy 1-3, CUDA_LAUNCH_BLOCKING=1"; CUDA_LAUNCH_BLOCKING=1 cl
kill %1 %2 %3 2>/dev/null; wait
python3 scratch/busy_ctx.py 0 100 >/dev/null & sleep 3
echo "== ceiling, busy 0 only"; cl
kill %1; wait
python3 scratch/busy_ctx.py 2 100 >/dev/null & sleep 3
echo "== ceiling, busy 2 only"; cl
kill %1; wait
jaxmg_build $OUT/d >/dev/null || exit 1
export PYTHONPATH=$PWD/tests/python:$PYTHONPATH
for k in 1 2 3; do python3 scratch/busy_ctx.py $k 400 >/dev/null & done; sleep 3
echo "== jaxmg SPMD busy 1-3"; timeout 200 python3 scratch/spmd_ops.py potrs,potri,syevd 16,2 1024,64 2>&1 | grep SPMD
kill %1 %2 %3 2>/dev/null; wait
echo "== pmon during MPMD fresh x4"
(nvidia-smi pmon -s u -d 1 -c 25 > $OUT/d/pmon.txt 2>&1 &) ; sleep 1
timeout 100 python3 scratch/diag_fresh.py $OUT/d/fresh 4 x 2>&1 | grep -E "^x [0-3] " | head -4
sleep 2; cat $OUT/d/pmon.txt | head -120
