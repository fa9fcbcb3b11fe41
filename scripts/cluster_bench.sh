#!/usr/bin/env bash
# Serves one model with 2 instances x 1 thread under each strategy and drives each
# with the same `ecoserve bench` load, checking that every request succeeds and
# that every instance's KV cache is empty afterwards (issue 9's integration run;
# the figures go in notes, not in tests).
#
#   bash scripts/cluster_bench.sh [MODEL.gguf] [RATE] [NUM_PROMPTS] [-- extra bench args...]
#
# MODEL defaults to build/models/synth-110m-q8_0.gguf (written with `ecoserve model
# synth --preset 110m --type q8_0` when missing: random weights, real vocabulary;
# scheduling depends on compute, not on weight values; a decode step takes tens of
# ms on one thread). RATE (req/s, default 2) and NUM_PROMPTS (default 200) shape a
# Poisson load of the `sharegpt` preset scaled by $LENGTH_SCALE (default 0.2, to
# fit the context). Results: build/cluster_bench/ (bench reports, each run's
# timeline as JSON and as an SVG of its last 20 s, with `ecoserve timeline`'s
# summary of prompt work per instance and its overlap). ONLY="a b" runs a subset;
# SERVE_ARGS="..." adds server flags to every run (e.g. --kv-cache-mb 64 for
# memory pressure). Per run it also prints the preemptions and, under llumnix,
# the migrations (started, completed, aborted by reason, downtime).
#
# The Llumnix comparison of issue 11 (bursty, long and short requests, 10% high
# priority):
#   ONLY="nodg-chunked llumnix" SERVE_ARGS="--kv-cache-mb 48" bash scripts/cluster_bench.sh "" 1 200 -- \
#     --burstiness 0.5 --high-priority-fraction 0.1 --long-fraction 0.2 --long-input-len 1024 --long-output-len 256
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/ecoserve
model=${1:-}
model=${model:-build/models/synth-110m-q8_0.gguf}
rate=${2:-2}
scale=${LENGTH_SCALE:-0.2}
num=${3:-200}
shift $(( $# < 3 ? $# : 3 )) || true
[ "${1:-}" = "--" ] && shift
extra=("$@")
out=build/cluster_bench
mkdir -p "$out" "$(dirname "$model")"
if [ ! -f "$model" ]; then
  echo "[cluster_bench] writing $model"
  preset=$(basename "$model" | sed -n 's/^synth-\([a-z0-9]*\)-.*/\1/p')
  "$bin" model synth --preset "${preset:-110m}" --type q8_0 -o "$model" >/dev/null
fi

strategies=(
  "nodg-prefill-first|--strategy nodg --router least-loaded --policy prefill-first"
  "nodg-chunked|--strategy nodg --router least-loaded --policy chunked"
  "nodg-cache-aware|--strategy nodg --router cache-aware --policy chunked"
  "fudg-1p1d|--strategy fudg --prefill-instances 1 --policy chunked"
  "nodg-processes|--strategy nodg --router least-loaded --policy chunked --multi-process"
  "fudg-1p1d-processes|--strategy fudg --prefill-instances 1 --policy chunked --multi-process"
  "padg|--strategy padg"
  "padg-processes|--strategy padg --multi-process"
  "llumnix|--strategy llumnix --policy chunked --migrate-interval-ms 200"
  "llumnix-processes|--strategy llumnix --policy chunked --migrate-interval-ms 200 --multi-process"
)
read -r -a serve_extra <<<"${SERVE_ARGS:-}"
# ONLY="padg nodg-chunked" runs a subset.
if [ -n "${ONLY:-}" ]; then
  kept=()
  for entry in "${strategies[@]}"; do
    for want in $ONLY; do [ "${entry%%|*}" = "$want" ] && kept+=("$entry"); done
  done
  strategies=("${kept[@]}")
fi
status=0
for entry in "${strategies[@]}"; do
  name=${entry%%|*}
  read -r -a flags <<<"${entry#*|}"
  log="$out/$name.server.log"
  "$bin" serve -m "$model" --port 0 --instances 2 --threads-per-instance 1 "${flags[@]}" "${serve_extra[@]}" >"$out/$name.stdout" 2>"$log" &
  pid=$!
  port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's|^ecoserve listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$out/$name.stdout")
    [ -n "$port" ] && break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    echo "[cluster_bench] $name: the server did not start; see $log"
    kill "$pid" 2>/dev/null || true
    status=1
    continue
  fi
  url="http://127.0.0.1:$port"
  echo "[cluster_bench] $name on $url"
  if ! "$bin" bench --url "$url" --tokenizer "$model" --preset sharegpt --length-scale "$scale" --num-prompts "$num" \
       --rate "$rate" --seed 1 --max-failure-rate 0 --quiet --result-json "$out/$name.json" "${extra[@]}" \
       >"$out/$name.bench.txt"; then
    echo "[cluster_bench] $name: requests failed (see $out/$name.bench.txt)"
    status=1
  fi
  grep -E "Successful requests|Failed requests|Request throughput|Output token throughput|Mean TTFT|P90 TTFT|Mean TPOT|P90 TPOT" \
    "$out/$name.bench.txt" | sed "s/^/  /" || true
  # Every instance's KV cache must be back to empty.
  usage="" busy=1
  for _ in $(seq 1 50); do
    usage=$(curl -s "$url/metrics" | sed -n 's/^ecoserve:instance_kv_cache_usage_perc{.*instance="\([^"]*\)".*} \(.*\)/\1=\2/p' | tr '\n' ' ')
    busy=$(awk -v u="$usage" 'BEGIN { n = split(u, a, " "); b = (n == 0); for (i = 1; i <= n; i++) { split(a[i], kv, "="); if (kv[2] + 0 != 0) b = 1 } print b }')
    [ "$busy" = 0 ] && break
    sleep 0.1
  done
  echo "  KV cache usage per instance after the run: $usage"
  if [ "$busy" != 0 ]; then
    echo "[cluster_bench] $name: KV blocks left in use"
    status=1
  fi
  curl -s "$url/admin/cluster" | sed -n 's/.*"router":\({.*}\)}$/  router: \1\n/p'
  curl -s "$url/metrics" | grep -E '^ecoserve:(num_preemptions_total|migrations_[a-z]*_total|migration_downtime_seconds_(sum|count))' \
    | sed 's/model_name="[^"]*",\{0,1\}//; s/{}//; s/^ecoserve:/  /' || true
  # The run's engine steps per instance: JSON and a picture (phases are visible under padg).
  curl -s "$url/admin/timeline?seconds=3600" >"$out/$name.timeline.json" || true
  "$bin" timeline --url "$url" --seconds 20 -o "$out/$name.timeline.svg" >/dev/null 2>&1 || true
  # How the instances shared prompt work over the whole run (staggered under padg).
  "$bin" timeline --from "$out/$name.timeline.json" 2>&1 | sed "s/^/  /" || true
  kill -TERM "$pid"
  wait "$pid" || { echo "[cluster_bench] $name: the server did not exit 0"; status=1; }
done
exit $status
