set -u
source scripts/device-lib.sh; jaxmg_device_env; mkdir -p $OUT/d
jaxmg_build $OUT/d >/dev/null || exit 1
export PYTHONPATH=$PWD/tests/python:$PYTHONPATH
for k in 1 2 3 4; do timeout 100 python3 scratch/diag_fresh.py $OUT/d/e$k 4 x JAXMG_DEBUG_ENGINE=1 | grep "^x 0"; grep JMGDBG-E $OUT/d/e$k/x-p0.log | awk '{print NR-1, $0}' | awk '$6+0 > 1e-12 || $8+0 > 1e-12 || $10+0 > 1e-10' ; grep -o "fresh-[0-9]*: Traceback" $OUT/d/e$k/x-p0.log | head; done
rm -rf $OUT/d/build.log
