#!/usr/bin/env bash
# Sets everything up (see setup-venv.sh) and runs examples/minimal.py on the
# devices at hand (4 CPU devices when there is no GPU).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup-venv.sh"
cd "$root"
python examples/minimal.py
