#!/usr/bin/env bash
# A/B in one run on one GPU: potrs through bench/time_potrs.py with the build of
# the reference commit (.old/base.tar.gz) and the current tree, alternating.
# Usage: ab.sh OUTDIR [ENGINE_VARIANT...]
set -uo pipefail
out="$1"; shift
mkdir -p "$out" /tmp/ab-old
tar -xzf .old/base.tar.gz -C /tmp/ab-old
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/ab-old-site /tmp/ab-old > "$out/build-old.log" 2>&1 || { tail "$out/build-old.log"; exit 1; }
for round in 1 2; do
  for n in 4096 8192 16384; do
    for which in old new; do
      site=/tmp/jaxmg-site; [ $which = old ] && site=/tmp/ab-old-site
      PYTHONPATH=$site timeout 100 python3 bench/time_potrs.py $n 1024 9 "$@" 2>&1 | grep -v IOTA | sed "s/^/$which r$round: /" | tee -a "$out/ab.txt"
    done
  done
done
