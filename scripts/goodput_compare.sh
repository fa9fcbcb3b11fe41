#!/usr/bin/env bash
# P90 goodput of the strategies on 2 instances x 1 thread: for each strategy and
# each workload preset, `ecoserve bench --goodput-search` bisects the request rate
# for the highest one at which --attainment % of requests meet both SLOs.
# Figures for notes, not a test (the machine is noisy; compare within one run).
#
#   bash scripts/goodput_compare.sh [MODEL.gguf]
#
# Environment: STRATEGIES (names below, space-separated; default all), PRESETS
# (default "sharegpt longbench"), NUM_PROMPTS per probe (60), SEARCH_STEPS (5),
# ATTAINMENT (90), and per preset the length scale and SLOs (defaults for the
# 110m synth model on one thread: decode step 10 ms at batch 1, prefill 2.2 ms
# per token; TPOT SLO = 5 x the batch-1 step, TTFT SLO = 5 x the mean prompt's
# prefill): SHAREGPT_SCALE=0.3 SHAREGPT_TTFT_MS=1200 SHAREGPT_TPOT_MS=50,
# LONGBENCH_SCALE=0.15 LONGBENCH_TTFT_MS=4500 LONGBENCH_TPOT_MS=50 (the scales keep
# the presets' long tails inside the 1,024-token context).
# Results: build/goodput/ (one bench JSON per run) and a table on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/ecoserve
model=${1:-build/models/synth-110m-q8_0.gguf}
out=build/goodput
mkdir -p "$out" "$(dirname "$model")"
[ -f "$model" ] || "$bin" model synth --preset 110m --type q8_0 -o "$model" >/dev/null

declare -A flags=(
  [nodg-prefill-first]="--strategy nodg --router least-loaded --policy prefill-first"
  [nodg-chunked]="--strategy nodg --router least-loaded --policy chunked"
  [fudg-1p1d]="--strategy fudg --prefill-instances 1 --policy chunked"
)
strategies=(${STRATEGIES:-nodg-prefill-first nodg-chunked fudg-1p1d})
presets=(${PRESETS:-sharegpt longbench})
declare -A scale=([sharegpt]=${SHAREGPT_SCALE:-0.3} [longbench]=${LONGBENCH_SCALE:-0.15})
declare -A ttft=([sharegpt]=${SHAREGPT_TTFT_MS:-1200} [longbench]=${LONGBENCH_TTFT_MS:-4500})
declare -A tpot=([sharegpt]=${SHAREGPT_TPOT_MS:-50} [longbench]=${LONGBENCH_TPOT_MS:-50})

printf "%-20s %-10s %s\n" strategy preset result
for preset in "${presets[@]}"; do
  for name in "${strategies[@]}"; do
    read -r -a f <<<"${flags[$name]}"
    "$bin" serve -m "$model" --port 0 --instances 2 --threads-per-instance 1 "${f[@]}" \
      >"$out/$name.$preset.stdout" 2>"$out/$name.$preset.server.log" &
    pid=$!
    port=""
    for _ in $(seq 1 300); do
      port=$(sed -n 's|^ecoserve listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$out/$name.$preset.stdout")
      [ -n "$port" ] && break
      sleep 0.1
    done
    if [ -z "$port" ]; then
      echo "$name: the server did not start (see $out/$name.$preset.server.log)"
      kill "$pid" 2>/dev/null || true
      continue
    fi
    "$bin" bench --url "http://127.0.0.1:$port" --tokenizer "$model" --preset "$preset" \
      --length-scale "${scale[$preset]}" --num-prompts "${NUM_PROMPTS:-60}" --seed 1 \
      --slo-ttft-ms "${ttft[$preset]}" --slo-tpot-ms "${tpot[$preset]}" --goodput-search \
      --attainment "${ATTAINMENT:-90}" --search-min-rate 0.25 --search-max-rate 8 --search-steps "${SEARCH_STEPS:-5}" \
      --quiet --result-json "$out/$name.$preset.json" >"$out/$name.$preset.bench.txt" 2>&1 || true
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    summary=$(grep -E "^(Max rate meeting target|Goodput at that rate|P90 TTFT|P90 TPOT|Failed requests)" \
      "$out/$name.$preset.bench.txt" | sed 's/  */ /g' | paste -sd ';' -)
    printf "%-20s %-10s %s\n" "$name" "$preset" "$summary"
  done
done
