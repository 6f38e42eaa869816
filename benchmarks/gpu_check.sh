#!/usr/bin/env bash
# One-shot check of tphyolo on CUDA GPUs (Hopper or Ampere; steps 1-5 use one), in under 10 minutes, with nothing to
# download. Writes a log and JSON files to the folder given as $1, else $OUT, else ./gpu_check.
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]
#
# Steps (each under its own time limit, so the whole stays under 10 minutes; a step that fails or runs out of
# time is recorded in summary.json and the script goes on):
#   1. doctor                      -> doctor.json
#   2. parity tests (CPU: the model tests take no device switch; the CUDA parity of the attention blocks and
#      of the whole model is checked by steps 3-4, which compare ours with the original computation on the
#      GPU before timing)         -> pytest.txt
#   3. benchmarks/attention_vs_original.py: C3TR, C3STR, CLLA at l width, 1536 and 1996 inputs, batch 2, per SDPA backend
#      (flash, efficient, cudnn, math) and dtype (fp32, fp16, bf16), eval and train -> attention.json
#   4. benchmarks/model_vs_original.py: tph-yolov5l at 1536, batch 2, eager (fp32) and AMP (bf16 on these GPUs:
#      --amp auto autocasts only the amp variants), train step and inference, ours against the original-attention
#      model -> model.json; bench model: AMP bf16 + torch.compile against eager AMP bf16, train step
#      -> model_compile.json
#   5. 50 training steps of tph-yolov5l on the built-in synthetic set (generated locally): images/s and peak
#      memory -> train.json (+ the run's results csv)
#   6. val of step 5's best.pt on the synthetic val split in one process on GPU 0, then under torchrun on every
#      GPU (one process each): the time of each and whether the numbers agree -> val_gpus.json
set -u -o pipefail

OUT_DIR="${1:-${OUT:-gpu_check}}"
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
LOG="$OUT_DIR/gpu_check.log"
SUMMARY="$OUT_DIR/summary.json"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PYTHON="${PYTHON:-python}"
export PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}"
SCRATCH="$(mktemp -d)"  # large outputs (synthetic images, checkpoints) stay out of OUT_DIR
export XDG_CACHE_HOME="$SCRATCH/cache"  # the synthetic set is generated here
START=$(date +%s)
STEPS=()

log() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }

# step NAME SECONDS COMMAND...: run with a time limit, output appended to the log, status recorded.
step() {
  local name="$1" limit="$2"
  shift 2
  log "== $name (limit ${limit}s): $*"
  local t0=$(date +%s)
  timeout --signal=INT --kill-after=10 "$limit" "$@" >>"$LOG" 2>&1
  local rc=$?
  local status="ok"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="timeout"; elif [ $rc -ne 0 ]; then status="failed"; fi
  log "== $name: $status (rc $rc, $(( $(date +%s) - t0 ))s)"
  STEPS+=("{\"step\": \"$name\", \"status\": \"$status\", \"rc\": $rc, \"seconds\": $(( $(date +%s) - t0 ))}")
}

log "tphyolo GPU check in $REPO -> $OUT_DIR"
nvidia-smi >>"$LOG" 2>&1 || log "nvidia-smi not available"

step doctor 30 bash -c "$PYTHON -m tphyolo doctor --json > '$OUT_DIR/doctor.json'"

step parity-tests 50 "$PYTHON" -m pytest -q -x -p no:cacheprovider tests/models/test_parity.py \
  tests/models/test_swin_clla_parity.py tests/bench/test_original_attention.py --junitxml="$OUT_DIR/pytest.xml"

step bench-attention 90 "$PYTHON" benchmarks/attention_vs_original.py --device cuda --blocks c3tr,c3str,clla --scales l \
  --sizes 1536,1996 --batch 2 --warmup 2 --repeats 5 --json "$OUT_DIR/attention.json"

step model-vs-original 55 "$PYTHON" benchmarks/model_vs_original.py --device cuda --model tph-yolov5l --img 1536 \
  --batch 2 --variants eager,amp --warmup 2 --repeats 5 --json "$OUT_DIR/model.json"

step bench-model-compile 150 "$PYTHON" -m tphyolo bench model --device cuda --model tph-yolov5l --img 1536 \
  --batch 2 --variants amp+compile --amp bf16 --model-modes train --warmup 2 --repeats 5 \
  --json "$OUT_DIR/model_compile.json"

# 80 synthetic images / batch 16 = 5 steps per epoch: 10 epochs = 50 training steps.
step train-50-steps 70 "$PYTHON" - <<EOF
import json, time, torch
from tphyolo.cli import main
t0 = time.time()
rc = main(["train", "--device", "cuda", "--amp", "bf16", "--model", "tph-yolov5l", "--data", "synthetic",
           "--img", "640", "--batch", "16", "--epochs", "10", "--workers", "8", "--noautoanchor", "--no-plots",
           "--project", "$SCRATCH/train", "--name", "run", "--exist-ok"])
seconds = time.time() - t0
report = {"rc": rc, "steps": 50, "images": 800, "seconds_incl_validation": round(seconds, 1),
          "images_per_s_incl_validation": round(800 / seconds, 1),
          "peak_memory_mb": round(torch.cuda.max_memory_allocated() / 2**20, 1)}
json.dump(report, open("$OUT_DIR/train.json", "w"), indent=2)
print(report)
raise SystemExit(rc)
EOF

# Distributed validation: the same numbers on 1 GPU and on all of them (cuDNN autotuning off, so that every
# process picks the same convolution algorithms), and the time of each, process start included.
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') || NGPU=1
[ "$NGPU" -ge 1 ] || NGPU=1
step val-1-vs-all-gpus 120 "$PYTHON" - <<EOF
import json, subprocess, sys, time
weights = "$SCRATCH/train/run/weights/best.pt"
common = ["val", "--weights", weights, "--data", "synthetic", "--img", "640", "--batch", "8", "--amp", "bf16",
          "--no-cudnn-benchmark", "--project", "$SCRATCH/val", "--exist-ok"]
runs = {"1 GPU": [sys.executable, "-m", "tphyolo", *common, "--device", "0", "--name", "one",
                  "--json", "$SCRATCH/val/one.json"],
        "$NGPU GPU(s)": [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=$NGPU",
                         "-m", "tphyolo", *common, "--name", "all", "--json", "$SCRATCH/val/all.json"]}
seconds = {}
for name, cmd in runs.items():
    t0 = time.time()
    subprocess.run(cmd, check=True)
    seconds[name] = round(time.time() - t0, 1)
one, every = (json.load(open(f"$SCRATCH/val/{n}.json"))["metrics"] for n in ("one", "all"))
report = {"seconds": seconds, "gpus": $NGPU, "metrics_1": one, "metrics_all": every,
          "max_abs_difference": max(abs(one[k] - every[k]) for k in one)}
json.dump(report, open("$OUT_DIR/val_gpus.json", "w"), indent=2)
print(report)
EOF

cp "$SCRATCH"/train/run/*.csv "$OUT_DIR/" 2>/dev/null || true
rm -rf "$SCRATCH"
{
  echo "{\"seconds\": $(( $(date +%s) - START )), \"steps\": ["
  (IFS=,; echo "${STEPS[*]}")
  echo "]}"
} >"$SUMMARY"
log "done in $(( $(date +%s) - START ))s; summary in $SUMMARY"
