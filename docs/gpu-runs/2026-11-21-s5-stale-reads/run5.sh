set -u
source scripts/device-lib.sh; jaxmg_device_env; mkdir -p $OUT/d
jaxmg_build $OUT/d >/dev/null || exit 1
export PYTHONPATH=$PWD/tests/python:$PYTHONPATH
run() { tag=$1; shift; for k in 1 2 3 4; do timeout 100 python3 scratch/diag_fresh.py $OUT/d/$tag-$k 4 x "$@" | awk -v t=$tag -v k=$k '/^x 0 /{print t, k, $0}'; grep JMGDBG-E $OUT/d/$tag-$k/x-p0.log | awk '$8+0 > 1e-12 || $10+0 > 1e-10' | head -3; done; }
run syncb JAXMG_DEBUG_SYNC_BEFORE=1 JAXMG_DEBUG_ENGINE=1
run zero JAXMG_DEBUG_ZERO_WORK=1 JAXMG_DEBUG_ENGINE=1
run nan JAXMG_DEBUG_NAN_WORK=1 JAXMG_DEBUG_ENGINE=1
run cmw JAXMG_DEBUG_CUDAMALLOC_WORK=1 JAXMG_DEBUG_ENGINE=1
rm -rf $OUT/d
