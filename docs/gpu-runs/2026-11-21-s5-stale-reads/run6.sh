set -u
source scripts/device-lib.sh; jaxmg_device_env; mkdir -p $OUT/d
jaxmg_build $OUT/d >/dev/null || exit 1
export PYTHONPATH=$PWD/tests/python:$PYTHONPATH
run() { tag=$1; shift; for k in 1 2 3 4; do timeout 100 python3 scratch/diag_fresh.py $OUT/d/$tag-$k 4 x "$@" | awk -v t=$tag -v k=$k '/^x 0 /{print t, k, $0}'; done; }
run sync0 JAXMG_DEBUG_SYNC_BEFORE=0
run syncR JAXMG_DEBUG_SYNC_BEFORE=R
run entry JAXMG_DEBUG_DEVSYNC_ENTRY=1
run noperm JAXMG_DEBUG_N=8
run nopermsync JAXMG_DEBUG_N=8 JAXMG_DEBUG_SYNC_BEFORE=A
rm -rf $OUT/d
