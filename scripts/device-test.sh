#!/usr/bin/env bash
# On a GPU machine: build jaxmg against the machine's own python3 (no network,
# no build isolation: jax, scikit-build-core, cmake and ninja must be there),
# then run the GPU tests with timeouts, writing logs to LOGDIR.
#
#   scripts/device-test.sh LOGDIR [extra pytest arguments]
#
# Environment: PYTHON (default python3), JAXMG_TEST_TIMEOUT (seconds for the
# whole pytest run, default 1500); see also scripts/device-lib.sh.
set -uo pipefail
logdir="${1:?usage: scripts/device-test.sh LOGDIR [pytest args]}"
shift
# shellcheck source=scripts/device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"
mkdir -p "$logdir"
jaxmg_device_env
jaxmg_machine_info "$logdir"
jaxmg_build "$logdir" || { echo "device-test: build failed"; exit 1; }
cd "$jaxmg_root" || exit 1
echo "== GPU tests"
timeout "${JAXMG_TEST_TIMEOUT:-1500}" "$jaxmg_python" -m pytest -q -rs -p no:cacheprovider \
  --timeout 900 --durations=20 tests/gpu "$@" 2>&1 | tee "$logdir/pytest.log"
exit "${PIPESTATUS[0]}"
