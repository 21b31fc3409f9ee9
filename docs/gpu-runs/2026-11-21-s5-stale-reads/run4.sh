set -u
source scripts/device-lib.sh; jaxmg_device_env; mkdir -p $OUT/d
jaxmg_build $OUT/d >/dev/null || exit 1
export PYTHONPATH=$PWD/tests/python:$PYTHONPATH
run() { tag=$1; shift; for k in 1 2 3 4; do timeout 100 python3 scratch/diag_fresh.py $OUT/d/$tag-$k 4 x "$@" | awk -v t=$tag -v k=$k '/^x 0 /{print t, k, $0}'; done; }
run lb0 JAXMG_DEBUG_LB0=1
run lbp JAXMG_DEBUG_LBP=1
run blockstream JAXMG_DEBUG_BLOCKING_STREAM=1
run lball CUDA_LAUNCH_BLOCKING=1
rm -rf $OUT/d
