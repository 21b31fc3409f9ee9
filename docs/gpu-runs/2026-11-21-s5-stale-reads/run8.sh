set -u
source scripts/device-lib.sh; jaxmg_device_env
if [ -d /tmp/jaxmg-site/jaxmg ]; then jaxmg_use_site; else mkdir -p $OUT/d; jaxmg_build $OUT/d >/dev/null || exit 1; fi
export PYTHONPATH=$PWD/tests/python:$PYTHONPATH
echo "== SPMD alone"; timeout 120 python3 scratch/spmd_idle.py 2>&1 | grep SPMD
for k in 1 2 3; do python3 scratch/idle_ctx.py $k 150 & done; sleep 3
echo "== SPMD with idle contexts on GPUs 1-3"; timeout 120 python3 scratch/spmd_idle.py 2>&1 | grep SPMD
kill %1 %2 %3 2>/dev/null; wait
