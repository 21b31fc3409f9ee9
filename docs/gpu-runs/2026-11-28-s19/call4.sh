#!/usr/bin/env bash
# Session 19 call 4, on 4 GPUs (nvidia-h200-x4 or h100-x4): three trees at once.
#  0. main's scripts/probe-potrf-panel.c on GPU 0 (the tiled Cholesky's panel parts, ~10 s);
#  1. GPUs 0,1: branch eig-mgpu (39beda4) eig-call.sh (the multi-GPU eigensolver's first run);
#  2. GPUs 2,3: branch mixed-fast (bea4aac) mixed-call.sh, its GPUs 0/1 renamed 2/3.
# Prepare: .snap = main (this file copied in), .snap-eig = git archive eig-mgpu (its
# eig-call.sh copied to its root), .snap-mixed = git archive mixed-fast; .whl holds
# cuSOLVERMp's wheel only (64 MiB a call); carry [".snap", ".snap-eig", ".snap-mixed", ".whl"].
set -u
cd "$(dirname "$0")"
ROOT=$(cd .. && pwd); O=$OUT
gcc -std=c11 -O2 -Wall -Wextra -Werror -I/usr/local/cuda/include scripts/probe-potrf-panel.c \
  -o /tmp/ppp -L/usr/local/cuda/lib64 -lcusolver -lcublas -lcudart > $O/potrf-panel.txt 2>&1
for m in 30720 14336; do CUDA_VISIBLE_DEVICES=0 timeout 30 /tmp/ppp 2048 $m >> $O/potrf-panel.txt 2>&1; done
mkdir -p $O/eig $O/mixed
( export OUT=$O/eig JAXMG_SITE=/tmp/site-eig CUDA_VISIBLE_DEVICES=0,1 JAXMG_DEADLINE=255
  bash $ROOT/.snap-eig/eig-call.sh > $O/eig-stdout.txt 2>&1 ) &
( f=$ROOT/.snap-mixed/docs/gpu-runs/2026-11-28-s19/mixed-call.sh
  sed -e 's/CUDA_VISIBLE_DEVICES=0,1/CUDA_VISIBLE_DEVICES=2,3/' -e 's/CUDA_VISIBLE_DEVICES=0$/CUDA_VISIBLE_DEVICES=2/' \
      -e 's/CUDA_VISIBLE_DEVICES=1$/CUDA_VISIBLE_DEVICES=3/' $f > ${f%.sh}-23.sh
  export OUT=$O/mixed JAXMG_SITE=/tmp/site-mixed JAXMG_DEADLINE=255
  bash ${f%.sh}-23.sh > $O/mixed-stdout.txt 2>&1 ) &
wait
cd $O && tar czf /tmp/call4.tar.gz . && rm -rf $O/* && mv /tmp/call4.tar.gz $O/
tar xzf $O/call4.tar.gz -O ./potrf-panel.txt; tar xzf $O/call4.tar.gz -O ./eig-stdout.txt | tail -25; tar xzf $O/call4.tar.gz -O ./mixed-stdout.txt | tail -40
