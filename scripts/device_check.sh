#!/usr/bin/env bash
# Run wherever a CUDA GPU is: the gpu-marked tests, then the GPU measurements of
# scripts/device_check.py (full-size SAM 3 in bfloat16: backbone per image, time per phrase
# on cached features for 1 and 8 phrases, peak GPU memory; one in-process MLLM round with the
# tiny Qwen2.5-VL). Installs nothing and needs no network: it uses the installed project or
# this checkout. Finishes within 5 minutes. Extra arguments go to device_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PYTHON="${PYTHON:-python3}"

"$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else "no CUDA device here")'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

# Only the files holding gpu-marked tests: collecting the others needs nothing on a GPU box
# and would cost time (or fail on an optional extra that is not installed there).
mapfile -t gpu_files < <(grep -rl --include="test_*.py" "mark.gpu" tests | sort)
echo "== gpu-marked tests: ${gpu_files[*]}"
timeout 150 "$PYTHON" -m pytest -q -p no:cacheprovider -m gpu "${gpu_files[@]}"

echo "== measurements"
timeout 200 "$PYTHON" -m scripts.device_check --device cuda "$@"
