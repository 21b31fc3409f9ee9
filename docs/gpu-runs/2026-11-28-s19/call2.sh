#!/usr/bin/env bash
# Session 19 call 2: the whole GPU suite on 2 GPUs in one pytest run, spread over
# pytest-xdist workers (--dist loadgroup: tests/gpu/conftest.py puts every test that
# starts a job of processes in one group, run one at a time), with NetKet's wheels and
# cuSOLVERMp's carried in .whl/. Prepare: .snap = git archive HEAD, this file copied
# into .snap; carry [".snap", ".whl"]; run on 2 GPUs: bash .snap/call2.sh.
set -u
cd "$(dirname "$0")"
source scripts/device-lib.sh; jaxmg_device_env
export JAXMG_DEADLINE=${JAXMG_DEADLINE:-585}
R=$OUT/r; mkdir -p $R
jaxmg_build $R > $R/build.txt 2>&1 || { tar czf $OUT/r.tar.gz -C $OUT r; exit 1; }
jaxmg_carried_wheels $R >> $R/build.txt 2>&1
python3 -c "import netket, jaxmg; print('netket', netket.__version__, jaxmg.cusolvermp_available())" >> $R/build.txt 2>&1
export CUDA_VISIBLE_DEVICES=0,1
JAXMG_TEST_PROGRESS=$R/progress.txt timeout $(jaxmg_left 560) python3 -m pytest -q -rfEs \
  -p no:cacheprovider --timeout 300 --durations=25 -n ${WORKERS:-4} --dist loadgroup tests/gpu \
  > $R/pytest.log 2>&1
echo "pytest exit $?" >> $R/pytest.log
tar czf $OUT/r.tar.gz -C $OUT r
tail -n 3 $R/build.txt; grep -E "^(FAILED|ERROR)" $R/pytest.log | cut -c1-200 | head -30; tail -n 2 $R/pytest.log
