#!/bin/bash
# pearl's checks on a machine with an NVIDIA GPU, in one go (about 7 minutes on an H200 host): the CUDA tests
# (captured updates against eager ones, the busy-power window, the board's energy counter), each learn path's
# distance from its autograd reference, each learn path's time (captured, eager, reference), a quick profile (act
# and learn on the GPU timed captured and eager, every point also by CUDA events), a
# plan trained, pearl compare for DQN, DDPG and SAC, and the learner-group benchmark on the GPU, time-sliced and
# under an MPS daemon of its own (started with its own pipe and log folders, stopped at the end). Run from the repository root with pearl
# importable; everything goes to OUT (default gpu-checks/): one log and the profile, plans and run records.
#
#     bash benchmarks/gpu_checks.sh [OUT]
#     PEARL_GPU_VS_SB3="dqn ddpg" bash benchmarks/gpu_checks.sh [OUT]   # also vs_sb3.py's cases named: SB3 on cpu
#                                                    # and on cuda against pearl on its plan from the profile
set -u
OUT=$(realpath -m "${1:-gpu-checks}")
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
LOG=$OUT/gpu.log
ROOT=$PWD
stage() {  # stage NAME SECONDS CMD...: run under a time limit, its output into the one log
  local name=$1 t=$2; shift 2; local s=$(date +%s)
  echo "=== $name $(date -u +%T) ===" >> "$LOG"
  timeout -k 5 "$t" "$@" >> "$LOG" 2>&1; local rc=$?
  echo "=== $name rc=$rc in $(( $(date +%s) - s )) s" | tee -a "$LOG"
}
stage info 30 bash -c 'nvidia-smi; lscpu | grep -E "Model name|^CPU\(s\)"; python3 -m pearl devices'
stage tests 200 python3 -m pytest -p no:cacheprovider -q -m cuda -rs tests/test_cuda.py tests/test_reference_learn.py \
  tests/test_learner_group.py tests/test_slices.py
stage distances 60 python3 benchmarks/reference_distances.py --device cuda:0
stage learn-paths 90 python3 benchmarks/learn_paths.py --device cuda:0 --what dqn ddpg td3 sac --rounds 3 --updates 200
cd "$OUT" || exit 1
stage profile 220 python3 -m pearl profile --quick --out "$OUT/profile-quick.json"
stage plan 30 python3 -m pearl plan --profile "$OUT/profile-quick.json" --algo dqn --env CartPole-v1 --out "$OUT/plan.json"
stage train 60 python3 -m pearl train --plan "$OUT/plan.json" --steps 20000 --eval-episodes 5 --runs-dir "$OUT/runs"
for case in "dqn CartPole-v1" "ddpg Pendulum-v1" "sac Pendulum-v1"; do
  set -- $case
  stage "compare-$1" 80 python3 -m pearl compare --profile "$OUT/profile-quick.json" --algo "$1" --env "$2" \
    --seconds 6 --runs-dir "$OUT/runs"
done
cd "$ROOT" || exit 1
if [ -n "${PEARL_GPU_VS_SB3:-}" ]; then  # issue 61's acceptance runs: about 10 more minutes on an H200 host
  stage vs-sb3 600 env PEARL_BENCH_RUNS="$OUT/runs" python3 benchmarks/vs_sb3.py --what $PEARL_GPU_VS_SB3 \
    --sb3-devices cpu cuda --pearl-plan "$OUT/profile-quick.json" --precisions fp32
fi
stage learners 90 python3 benchmarks/learners.py --device cuda:0 --updates 100 --rounds 1 --learners 1 2
export CUDA_MPS_PIPE_DIRECTORY=/tmp/pearl-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/pearl-mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if nvidia-cuda-mps-control -d >> "$LOG" 2>&1; then
  stage mps-devices 20 python3 -m pearl devices
  stage mps-learners 100 python3 benchmarks/learners.py --device cuda:0 --updates 100 --rounds 1 --learners 1 2 4
  echo quit | nvidia-cuda-mps-control >> "$LOG" 2>&1
  sleep 1
  tail -n 3 "$CUDA_MPS_LOG_DIRECTORY/control.log" >> "$LOG" 2>/dev/null
fi
