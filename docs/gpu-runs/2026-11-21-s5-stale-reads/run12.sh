set -u
source scripts/device-lib.sh; jaxmg_device_env
if [ -d /tmp/jaxmg-site/jaxmg ]; then jaxmg_use_site; else mkdir -p $OUT/d; jaxmg_build $OUT/d >/dev/null || exit 1; fi
export PYTHONPATH=$PWD/tests/python:$PYTHONPATH
echo "== quiet"; timeout 60 python3 scratch/spmd_cases.py 1024,64 4096,256 2>&1 | grep SPMD
for k in 1 2 3; do python3 scratch/busy_ctx.py $k 150 & done; sleep 3
echo "== busy"; timeout 120 python3 scratch/spmd_cases.py 1024,64 4096,256 8192,1024 16,2 2>&1 | grep SPMD
kill %1 %2 %3 2>/dev/null; wait
