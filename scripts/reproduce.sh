#!/usr/bin/env bash
# Reproduce the SAM 3 paper's agent evaluations with one command, and write one report.
#
#   scripts/reproduce.sh --data DATA_DIR [--model HF_ID] [--llm-url URL]
#                        [--presets "reasonseg-val reasonseg-test"] [--out DIR]
#                        [--port 8000] [--dry-run] [-- EXTRA EVAL FLAGS...]
#
# DATA_DIR holds each dataset in its published layout, one folder per dataset:
#   reasonseg/{val,test}/*.jpg+*.json   refcoco/ refcoco+/ refcocog/ grefcoco/ (refer files,
#   instances.json, and images/train2014 or pass --images through the extra flags).
#
# The MLLM: with --llm-url, that OpenAI-compatible endpoint serves --model. Without it, when
# `vllm` is installed, a vLLM server for --model is started on 127.0.0.1:--port for the
# duration of the script (VLLM_ARGS adds flags, e.g. a reasoning parser for Thinking
# models). Each preset is one `sam3-agent eval --preset` run in OUT/<preset> (rerunning the
# script resumes them); `sam3-agent report` then writes OUT/report/report.md, with the
# paper's published rows beside ours. SAM3_AGENT overrides the command (default:
# sam3-agent); --dry-run prints the commands instead of running them (no server, no network,
# no model needed; exit 0).
set -euo pipefail

MODEL="Qwen/Qwen2.5-VL-7B-Instruct"   # a model of the paper's agent tables
LLM_URL=""
DATA=""
OUT="runs/reproduce"
PRESETS="reasonseg-val reasonseg-test"
PORT=8000
DRY_RUN=0
EXTRA=()

usage() { sed -n '2,/^[^#]/{ /^#/p; }' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --data) DATA="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    --llm-url) LLM_URL="$2"; shift 2 ;;
    --presets) PRESETS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) usage 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "reproduce.sh: unknown argument $1" >&2; usage 2 ;;
  esac
done
[[ -n "$DATA" ]] || { echo "reproduce.sh: --data DATA_DIR is required" >&2; exit 2; }

read -r -a SAM3_AGENT_CMD <<< "${SAM3_AGENT:-sam3-agent}"

run() {
  if [[ "$DRY_RUN" == 1 ]]; then printf '%q ' "$@"; echo; else "$@"; fi
}

dataset_of() {  # the dataset folder a preset reads
  case "$1" in
    reasonseg-*) echo reasonseg ;;
    refcoco+-*) echo "refcoco+" ;;
    refcocog-*) echo refcocog ;;
    refcoco-*) echo refcoco ;;
    grefcoco-*) echo grefcoco ;;
    *) echo "reproduce.sh: no dataset folder known for preset $1" >&2; exit 2 ;;
  esac
}

VLLM_PID=""
cleanup() { if [[ -n "$VLLM_PID" ]]; then kill "$VLLM_PID" 2>/dev/null || true; wait "$VLLM_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT

if [[ -z "$LLM_URL" ]]; then
  NO_VLLM="reproduce.sh: no --llm-url given and vllm is not installed (pip install vllm), or point --llm-url at an OpenAI-compatible server for $MODEL"
  LLM_URL="http://127.0.0.1:$PORT/v1"
  # Up to 3 images per request (mask checks); a context long enough for several rounds.
  read -r -a VLLM_EXTRA <<< "${VLLM_ARGS:-}"
  VLLM_CMD=(vllm serve "$MODEL" --host 127.0.0.1 --port "$PORT" --max-model-len 32768
            --limit-mm-per-prompt '{"image": 4}' "${VLLM_EXTRA[@]}")
  if [[ "$DRY_RUN" == 1 ]]; then
    # Print only: no server, no health check, nothing written. A missing vllm is worth a
    # note, not a refusal: the commands are what the user asked to see.
    command -v vllm >/dev/null 2>&1 || echo "$NO_VLLM (a dry run prints the commands anyway)" >&2
    run "${VLLM_CMD[@]}"
    echo "# then wait until $LLM_URL/models answers (up to 15 min); its log: $OUT/vllm.log"
  else
    command -v vllm >/dev/null 2>&1 || { echo "$NO_VLLM" >&2; exit 2; }
    mkdir -p "$OUT"
    "${VLLM_CMD[@]}" > "$OUT/vllm.log" 2>&1 &
    VLLM_PID=$!
    echo "starting vLLM for $MODEL (log: $OUT/vllm.log)..." >&2
    for _ in $(seq 1 180); do
      if curl -fsS "$LLM_URL/models" >/dev/null 2>&1; then break; fi
      if ! kill -0 "$VLLM_PID" 2>/dev/null; then echo "vLLM exited; see $OUT/vllm.log" >&2; exit 1; fi
      sleep 5
    done
    curl -fsS "$LLM_URL/models" >/dev/null || { echo "vLLM did not start in 15 min" >&2; exit 1; }
  fi
fi

RUN_DIRS=()
for preset in $PRESETS; do
  dataset="$(dataset_of "$preset")"
  run "${SAM3_AGENT_CMD[@]}" eval --preset "$preset" --root "$DATA/$dataset" \
    --out "$OUT/$preset" --llm-url "$LLM_URL" --llm-model "$MODEL" --no-progress "${EXTRA[@]}"
  RUN_DIRS+=("$OUT/$preset")
done
run "${SAM3_AGENT_CMD[@]}" report "${RUN_DIRS[@]}" --out "$OUT/report"
