set -u
source scripts/device-lib.sh; jaxmg_device_env
if [ -d /tmp/jaxmg-site/jaxmg ]; then jaxmg_use_site; else mkdir -p $OUT/d; jaxmg_build $OUT/d >/dev/null || exit 1; fi
export PYTHONPATH=$PWD/tests/python:$PYTHONPATH
for k in 1 2 3; do python3 scratch/busy_ctx.py $k 150 & done; sleep 3
echo "== busy: cases"; timeout 100 python3 scratch/spmd_cases.py 16,2 16,4 32,8 32,2 64,16 2>&1 | grep SPMD
echo "== busy: engine debug 16,2"; JAXMG_DEBUG_ENGINE=1 timeout 60 python3 scratch/spmd_cases.py 16,2 2>&1 | grep -E "SPMD|JMGDBG-E" | head -8
echo "== busy: inplace 16,2"; JAXMG_PERMUTE=inplace timeout 60 python3 scratch/spmd_cases.py 16,2 2>&1 | grep SPMD
kill %1 %2 %3 2>/dev/null; wait
