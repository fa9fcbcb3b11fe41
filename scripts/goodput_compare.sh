#!/usr/bin/env bash
# P90 goodput of the strategies on 2 instances x 1 thread: for each strategy and
# each workload preset, `ecoserve bench --goodput-search` bisects the request rate
# for the highest one at which --attainment % of requests meet both SLOs.
# Figures for notes, not a test (the machine is noisy; compare within one run).
#
#   bash scripts/goodput_compare.sh [MODEL.gguf]
#
# Environment: STRATEGIES (names below, space-separated; default all), PRESETS
# (default "alpaca sharegpt longbench"), NUM_PROMPTS per probe (60), SEARCH_STEPS
# (5), ATTAINMENT (90), SEARCH_MAX_RATE (8 req/s), and per preset the length
# scale (ALPACA_SCALE=0.5, SHAREGPT_SCALE=0.3, LONGBENCH_SCALE=0.15: they keep the
# presets' long tails inside the 1,024-token context) and SLOs. The SLOs follow
# EcoServe's Table 4 rule of thumb on this machine: `ecoserve profile slo` reads
# the model's cost profile (`ecoserve profile cost -m MODEL -t 1`, measured here
# once and also read by padg) and gives TPOT SLO = 5 x a batch-1 decode step at
# the mean context, TTFT SLO = 5 x the prefill of the preset's mean (scaled)
# prompt. ALPACA_TTFT_MS, ALPACA_TPOT_MS, SHAREGPT_..., LONGBENCH_... override
# them. The server gets the same SLOs as its defaults (padg schedules by them;
# the others ignore them).
# ECOSERVE_BIN picks the binary (default build/ecoserve). Results: build/goodput/ (one bench JSON per run) and a table on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${ECOSERVE_BIN:-build/ecoserve}
model=${1:-build/models/synth-110m-q8_0.gguf}
out=build/goodput
mkdir -p "$out" "$(dirname "$model")"
[ -f "$model" ] || "$bin" model synth --preset 110m --type q8_0 -o "$model" >/dev/null
# padg's cost profile, beside the model (measured once, with one thread like the instances).
[ -f "$model.profile.json" ] || "$bin" profile cost -m "$model" -t 1 >/dev/null

declare -A flags=(
  [nodg-prefill-first]="--strategy nodg --router least-loaded --policy prefill-first"
  [nodg-chunked]="--strategy nodg --router least-loaded --policy chunked"
  [fudg-1p1d]="--strategy fudg --prefill-instances 1 --policy chunked"
  [padg]="--strategy padg"
)
strategies=(${STRATEGIES:-nodg-prefill-first nodg-chunked fudg-1p1d padg})
presets=(${PRESETS:-alpaca sharegpt longbench})
declare -A scale=([alpaca]=${ALPACA_SCALE:-0.5} [sharegpt]=${SHAREGPT_SCALE:-0.3} [longbench]=${LONGBENCH_SCALE:-0.15})
declare -A ttft=([alpaca]=${ALPACA_TTFT_MS:-} [sharegpt]=${SHAREGPT_TTFT_MS:-} [longbench]=${LONGBENCH_TTFT_MS:-})
declare -A tpot=([alpaca]=${ALPACA_TPOT_MS:-} [sharegpt]=${SHAREGPT_TPOT_MS:-} [longbench]=${LONGBENCH_TPOT_MS:-})
for preset in "${presets[@]}"; do
  derived=$("$bin" profile slo -m "$model" --preset "$preset" --length-scale "${scale[$preset]}")
  [ -n "${ttft[$preset]}" ] || ttft[$preset]=$(sed -n 's/.*slo_ttft_ms=\([0-9]*\).*/\1/p' <<<"$derived")
  [ -n "${tpot[$preset]}" ] || tpot[$preset]=$(sed -n 's/.*slo_tpot_ms=\([0-9]*\).*/\1/p' <<<"$derived")
  echo "[goodput] $preset (length scale ${scale[$preset]}): SLOs TTFT ${ttft[$preset]} ms, TPOT ${tpot[$preset]} ms"
done

printf "%-20s %-10s %s\n" strategy preset result
for preset in "${presets[@]}"; do
  for name in "${strategies[@]}"; do
    read -r -a f <<<"${flags[$name]}"
    "$bin" serve -m "$model" --port 0 --instances 2 --threads-per-instance 1 "${f[@]}" \
      --slo-ttft-ms "${ttft[$preset]}" --slo-tpot-ms "${tpot[$preset]}" \
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
      --attainment "${ATTAINMENT:-90}" --search-min-rate 0.25 --search-max-rate "${SEARCH_MAX_RATE:-8}" --search-steps "${SEARCH_STEPS:-5}" \
      --quiet --result-json "$out/$name.$preset.json" >"$out/$name.$preset.bench.txt" 2>&1 || true
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    summary=$(grep -E "^(Max rate meeting target|Goodput at that rate|P90 TTFT|P90 TPOT|P90 first gap|Failed requests)" \
      "$out/$name.$preset.bench.txt" | sed 's/  */ /g' | paste -sd ';' -)
    printf "%-20s %-10s %s\n" "$name" "$preset" "$summary"
  done
done
