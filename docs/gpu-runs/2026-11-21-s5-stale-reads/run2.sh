set -u
source scripts/device-lib.sh; jaxmg_device_env; mkdir -p $OUT/d
jaxmg_build $OUT/d >/dev/null || exit 1
export PYTHONPATH=$PWD/tests/python:$PYTHONPATH
run() { tag=$1; shift; for k in 1 2 3 4 5; do timeout 100 python3 scratch/diag_fresh.py $OUT/d/$tag-$k 4 x "$@" | awk -v t=$tag -v k=$k '/^x 0 /{print t, k, $0}'; done; }
run base A=1
run nofree JAXMG_DEBUG_NOFREE=1
run pinva JAXMG_DEBUG_PINVA=1
run keep JAXMG_DEBUG_KEEPMAP=1
timeout 100 python3 scratch/diag_fresh.py $OUT/d/handles 4 x JAXMG_DEBUG_SHARE=1 | head -3
grep -h "JMGDBG-H" $OUT/d/handles/x-p0.log | head -30 > $OUT/d/h0.txt
grep -h "JMGDBG-H" $OUT/d/handles/x-p1.log | head -10 > $OUT/d/h1.txt
rm -rf $OUT/d/*/ $OUT/d/build.log
