set -u
source scripts/device-lib.sh; jaxmg_device_env; mkdir -p $OUT/d
jaxmg_build $OUT/d >/dev/null || exit 1
export PYTHONPATH=$PWD/tests/python:$PYTHONPATH
timeout 200 python3 scratch/diag_fresh.py $OUT/d 4 base JAXMG_DEBUG_SHARE=1
timeout 200 python3 scratch/diag_fresh.py $OUT/d 4 keep JAXMG_DEBUG_SHARE=1 JAXMG_DEBUG_KEEPMAP=1
timeout 150 python3 scratch/diag_fresh.py $OUT/d 2 two JAXMG_DEBUG_SHARE=1
grep -h "DIFFERENT" $OUT/d/*.log | head -20
