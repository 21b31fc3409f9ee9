set -u
source scripts/device-lib.sh; jaxmg_device_env; mkdir -p $OUT/d
jaxmg_build $OUT/d >/dev/null || exit 1
export PYTHONPATH=$PWD/tests/python:$PYTHONPATH
run() { tag=$1; shift; for k in 1 2 3; do timeout 100 python3 scratch/diag_fresh.py $OUT/d/$tag-$k 4 x "$@" | awk -v t=$tag -v k=$k '/^x 0 /{print t, k, $0}'; done; }
run tiles JAXMG_DEBUG_ENGINE=1
grep -h -A8 "JMGDBG-T" $OUT/d/tiles-*/x-p0.log | head -60
run cmall JAXMG_DEBUG_CUDAMALLOC_ALL=1
run cmall8 JAXMG_DEBUG_CUDAMALLOC_ALL=1 JAXMG_DEBUG_N=8
rm -rf $OUT/d
