#!/usr/bin/env bash
# Simulator fidelity on this machine (issue 12, item 5): for each strategy (nodg,
# fudg, padg, llumnix) a live run (`ecoserve serve` + `ecoserve bench`) and simulated
# runs (`ecoserve simulate --cost-model cpu-profile`) of the same workload and seed
# with matched settings, and the error of the simulation on TTFT and TPOT at P50 and
# P90. Goal: |error| <= 10%. Method and results: docs/simulator_fidelity.md.
#
#   bash scripts/fidelity.sh OUT_DIR [MODEL.gguf]
#
# Steps:
#  1. A cost profile (`ecoserve profile cost -t THREADS`, THREADS = the threads of one live
#     instance) on a quiet machine, measured once.
#  2. REPEATS rounds over the strategies; per strategy: serve INSTANCES instances x THREADS
#     threads in one process, wait for a quiet machine, run bench's Poisson load, keep
#     bench's JSON, the server's step timeline (/admin/timeline), /metrics and the CPU
#     used by other processes; rerun when other processes took more than DISTURBED_CPU of
#     the machine (the least disturbed attempt is kept).
#  3. Simulate, with the live server's KV block count, context, scheduler limits and router:
#     "raw": bench's workload flags and seed, the profile as measured (what a user runs);
#     "replay": the first live run's requests as a trace (their send times, and prompt
#     lengths as the server counted them, i.e. with the BOS token), the profile as measured;
#     "cal": the replay with the profile's times x K, K = mean live busy time / replay-
#     simulated busy time (steps summed over instances) of the first strategy: what live
#     steps cost beyond the profile on this machine, measured once and applied to every
#     strategy (in-sample for the first strategy only); "own": the same with each
#     strategy's own K (in-sample: the error left when the mean step time is right, i.e.
#     what scheduling and queueing contribute); "host": bench's flags and seed like raw, the
#     profile as measured, plus the simulator's host model (--host-step-scale-alone/-shared:
#     a step takes A x its profiled time when no other instance of the machine is mid-step as
#     it starts, S x when one is), A and S measured once per machine from the first strategy's
#     live runs: the median live/profile time of their prefill-only steps of one fresh prompt,
#     split the same way (in-sample for the first strategy only). All add --step-overhead-ms
#     (default: the median idle gap between back-to-back steps of the first live run).
#  4. Print and save (OUT_DIR/table.txt, OUT_DIR/summary.json) the table strategy x
#     {TTFT P50, TTFT P90, TPOT P50, TPOT P90}: live (the mean of the runs, and their
#     spread: half their range as a % of the mean), raw, replay, cal and own with their
#     error %; then step checks: step counts and busy time, median step time by step shape
#     live vs simulated, live prefill-only steps against the profile's prediction while no
#     other instance runs a step and while one does (cross-instance interference, which no
#     cost model here models).
#
# MODEL defaults to build/models/synth-110m-q8_0.gguf (written with `ecoserve model
# synth --preset 110m --type q8_0` when missing). With the defaults a run takes about 12
# minutes on a quiet machine (a 75 s profile, 8 live runs of 77 s, 16 simulations of ~1 s),
# longer while it waits for other people's builds to finish.
#
# Environment (defaults in brackets):
#   BIN [build/ecoserve]                   the ecoserve binary
#   STRATEGIES ["nodg fudg padg llumnix"]  which strategies to run
#   INSTANCES [2]  THREADS [1]             instances per server, threads per instance
#   PREFILL_INSTANCES [1]                  fudg: prefill instances (the rest decode)
#   RATE [2.5]  NUM_PROMPTS [200]  SEED [1]  LENGTH_SCALE [0.2]
#   INPUT_LEN [sharegpt]  OUTPUT_LEN [sharegpt]   bench/simulate length specs
#   MAX_NUM_SEQS [64]  MAX_NUM_BATCHED_TOKENS [512]  CHUNK_SIZE [512]  BLOCK_SIZE [16]
#                                          passed to both serve and simulate (their defaults differ)
#   KV_CACHE_MB [0 = serve's auto]         passed to serve; the block count it gives is read back
#   MIGRATE_INTERVAL_MS [500]              llumnix
#   PADG_SLO_TTFT_MS [unset]  PADG_SLO_TPOT_MS [unset]  padg: SLOs given to both serve and
#                                          simulate; unset, both derive them from the profile alike
#   PROFILE [unset]                        reuse this cost profile instead of measuring one
#   PROFILE_REPEATS [5]                    runs per profile point (the median is kept)
#   CAL_FACTOR [auto]                      K of the "cal" simulations: a number, or auto (above)
#   STEP_OVERHEAD_MS [auto]                --step-overhead-ms of every simulation: a number or auto
#   QUIET_BUSY [0.15]  QUIET_WAIT_S [900]  before each measurement, wait up to QUIET_WAIT_S s for
#                                          the machine's busy share to stay below this for 6 s
#   REPEATS [2]                            live runs per strategy (rounds over the strategies); the
#                                          table compares the simulations with their mean
#   DISTURBED_CPU [0.10]  RETRIES [2]      rerun a live run in which other processes used more
#                                          than this share of the machine's CPU, up to RETRIES times
#   NICE [-10]                             niceness of the profiler, server and bench (negative
#                                          needs root; 0 = unchanged): concurrent builds then take
#                                          less CPU from the measured runs
#   LIVE_TIMEOUT_S [300]                   bench's time limit per run
#   HOST_SCALES [auto]                     "A S" of the "host" simulations, or auto (above)
#   ANALYZE_ONLY [0]                       1: run nothing; print the table of the results in OUT_DIR
#   SIM_ONLY [0]                           1: no live runs: simulate again against the live runs in OUT_DIR
#
# Exit status: 0 when every run happened (whatever the errors); 1 on a setup failure
# (missing binary, model or tools, a profiler or server that fails, failed requests,
# a failed simulation).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  [ $# -lt 1 ] && exit 1 || exit 0
fi
out=$1
model=${2:-build/models/synth-110m-q8_0.gguf}
bin=${BIN:-build/ecoserve}
strategies=${STRATEGIES:-nodg fudg padg llumnix}
instances=${INSTANCES:-2}
threads=${THREADS:-1}
prefill_instances=${PREFILL_INSTANCES:-1}
rate=${RATE:-2.5}
num=${NUM_PROMPTS:-200}
seed=${SEED:-1}
scale=${LENGTH_SCALE:-0.2}
input_len=${INPUT_LEN:-sharegpt}
output_len=${OUTPUT_LEN:-sharegpt}
max_num_seqs=${MAX_NUM_SEQS:-64}
max_batched=${MAX_NUM_BATCHED_TOKENS:-512}
chunk=${CHUNK_SIZE:-512}
block=${BLOCK_SIZE:-16}
kv_cache_mb=${KV_CACHE_MB:-0}
migrate_ms=${MIGRATE_INTERVAL_MS:-500}
padg_slos=""
[ -n "${PADG_SLO_TTFT_MS:-}" ] && padg_slos="$padg_slos --slo-ttft-ms $PADG_SLO_TTFT_MS"
[ -n "${PADG_SLO_TPOT_MS:-}" ] && padg_slos="$padg_slos --slo-tpot-ms $PADG_SLO_TPOT_MS"
cal=${CAL_FACTOR:-auto}
overhead=${STEP_OVERHEAD_MS:-auto}
quiet_busy=${QUIET_BUSY:-0.15}
quiet_wait=${QUIET_WAIT_S:-900}
disturbed=${DISTURBED_CPU:-0.10}
retries=${RETRIES:-2}
repeats=${REPEATS:-2}
profile_repeats=${PROFILE_REPEATS:-5}
live_timeout=${LIVE_TIMEOUT_S:-300}
analyze_only=${ANALYZE_ONLY:-0}
sim_only=${SIM_ONLY:-0}
host_scales=${HOST_SCALES:-auto}
niceness=${NICE:--10}

die() { echo "[fidelity] setup failure: $*" >&2; exit 1; }
log() { echo "[fidelity] $(date +%T) $*" >&2; }

for tool in python3 curl awk; do command -v "$tool" >/dev/null || die "$tool is not installed"; done
[ -x "$bin" ] || die "$bin not found: build it with 'ninja -C build ecoserve'"
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
for s in $strategies; do
  case "$s" in nodg|fudg|padg|llumnix) ;; *) die "unknown strategy '$s' (nodg fudg padg llumnix)" ;; esac
  if [ "$s" = fudg ] && [ "$instances" -lt 2 ]; then die "fudg needs INSTANCES >= 2"; fi
done

if [ "$analyze_only" != 1 ]; then
nice_cmd=()
if [ "$niceness" != 0 ]; then
  if [ "$(nice -n "$niceness" nice 2>/dev/null)" = "$(( $(nice) + niceness ))" ]; then
    nice_cmd=(nice -n "$niceness")
  else
    log "cannot run at niceness $niceness; running at the default"
  fi
fi
if [ ! -f "$model" ]; then
  case "$(basename "$model")" in
    synth-*) preset=$(basename "$model" | sed -n 's/^synth-\([a-z0-9]*\)-.*/\1/p')
             log "writing $model"
             mkdir -p "$(dirname "$model")"
             "$bin" model synth --preset "${preset:-110m}" --type q8_0 -o "$model" >/dev/null || die "model synth failed" ;;
    *) die "model $model not found" ;;
  esac
fi

# The model's geometry: context and KV bytes per token (f32 K and V of every layer).
info=$("$bin" model info "$model") || die "ecoserve model info $model failed"
field() { sed -n "s/^$1: *\([0-9]*\).*/\1/p" <<<"$info"; }
ctx=$(field "context length"); layers=$(field layers); heads=$(field "attention heads")
kv_heads=$(field "kv heads"); embd=$(field "embedding length")
[ -n "$ctx" ] && [ -n "$layers" ] && [ -n "$heads" ] && [ -n "$kv_heads" ] && [ -n "$embd" ] ||
  die "cannot read the model's shape from 'ecoserve model info'"
kv_bytes_per_token=$(( 2 * layers * kv_heads * (embd / heads) * 4 ))

# Machine state: the busy share of all CPUs (from /proc/stat).
cpu_jiffies() { awk '/^cpu /{b=$2+$3+$4+$7+$8+$9; t=b+$5+$6; print b, t}' /proc/stat; }
busy_share() {  # over $1 seconds
  local b0 t0 b1 t1
  read -r b0 t0 < <(cpu_jiffies); sleep "$1"; read -r b1 t1 < <(cpu_jiffies)
  awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) 'BEGIN { printf "%.3f", (t > 0) ? b / t : 0 }'
}
wait_quiet() {  # three quiet 2 s samples in a row, or give up after QUIET_WAIT_S
  local waited=0 b quiet=0
  while :; do
    b=$(busy_share 2)
    if awk -v b="$b" -v q="$quiet_busy" 'BEGIN { exit !(b + 0 < q + 0) }'; then
      quiet=$((quiet + 1))
      [ "$quiet" -ge 3 ] && return 0
    else
      quiet=0
    fi
    if [ "$waited" -ge "$quiet_wait" ]; then log "machine still busy ($b of the CPUs) after ${quiet_wait}s; going on"; return 0; fi
    [ $((waited % 60)) -eq 0 ] && log "waiting for a quiet machine (busy $b, load $(cut -d' ' -f1-3 /proc/loadavg))"
    waited=$((waited + 2))
  done
}
proc_jiffies() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
clk_tck=$(getconf CLK_TCK)

started=()
cleanup() { for p in "${started[@]:-}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
trap 'exit 143' TERM INT

[ "$sim_only" = 1 ] || {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) ($(nproc) vCPUs)"
  echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "model: $model (context $ctx, KV $kv_bytes_per_token bytes per token)"
  echo "settings: instances $instances x $threads thread(s), rate $rate req/s, $num prompts, seed $seed," \
       "lengths $input_len/$output_len x $scale, max_num_seqs $max_num_seqs, max_num_batched_tokens $max_batched," \
       "chunk $chunk, block $block, kv_cache_mb $kv_cache_mb, niceness ${nice_cmd[2]:-0}"
} >"$out/machine.txt"

# (1) The cost profile.
if [ "$sim_only" = 1 ]; then
  [ -f "$out/profile.json" ] || die "SIM_ONLY: no $out/profile.json"
elif [ -n "${PROFILE:-}" ]; then
  cp "$PROFILE" "$out/profile.json" || die "PROFILE=$PROFILE not readable"
  echo "profile: $PROFILE (given)" >>"$out/machine.txt"
else
  wait_quiet
  log "measuring the cost profile ($threads thread(s); about a minute)"
  echo "profile: load before $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
  "${nice_cmd[@]}" "$bin" profile cost -m "$model" -t "$threads" --repeats "$profile_repeats" -o "$out/profile.json" >"$out/profile.txt" 2>&1 ||
    die "ecoserve profile cost failed (see $out/profile.txt)"
  echo "profile: load after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
fi

# Serve flags and simulate flags per strategy (matched).
serve_flags() {
  case "$1" in
    nodg)    echo "--strategy nodg --policy chunked --router least-loaded" ;;
    fudg)    echo "--strategy fudg --policy chunked --prefill-instances $prefill_instances" ;;
    padg)    echo "--strategy padg --profile $out/profile.json $padg_slos --macro-min 2 --macro-max 4" ;;
    llumnix) echo "--strategy llumnix --policy chunked --router freeness --migrate-interval-ms $migrate_ms" ;;
  esac
}
sim_flags() {
  case "$1" in
    nodg)    echo "--strategy nodg --instances $instances --policy chunked --router least-loaded" ;;
    fudg)    echo "--strategy fudg --prefill-instances $prefill_instances --decode-instances $((instances - prefill_instances)) --policy chunked" ;;
    padg)    echo "--strategy padg --instances $instances --padg-profile $out/profile.json $padg_slos --macro-min 2 --macro-max 4" ;;
    llumnix) echo "--strategy llumnix --instances $instances --policy chunked --router freeness --migrate-interval-ms $migrate_ms" ;;
  esac
}
common_sched="--max-num-seqs $max_num_seqs --max-num-batched-tokens $max_batched --chunk-size $chunk --block-size $block"
workload="--input-len $input_len --output-len $output_len --length-scale $scale --num-prompts $num --rate $rate --seed $seed"

# (2) One live run of strategy $1 into $out/$1.*; returns 1 when the server or bench failed.
live_run() {
  local s=$1 port="" pid kv_flag=()
  [ "$kv_cache_mb" != 0 ] && kv_flag=(--kv-cache-mb "$kv_cache_mb")
  read -r -a flags <<<"$(serve_flags "$s")"
  "${nice_cmd[@]}" "$bin" serve -m "$model" --port 0 --instances "$instances" --threads-per-instance "$threads" \
    $common_sched "${kv_flag[@]}" "${flags[@]}" >"$out/$s.serve.stdout" 2>"$out/$s.serve.log" &
  pid=$!
  started+=("$pid")
  for _ in $(seq 1 600); do
    port=$(sed -n 's|^ecoserve listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$out/$s.serve.stdout" 2>/dev/null)
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    log "$s: the server did not start; see $out/$s.serve.log"
    kill "$pid" 2>/dev/null || true
    return 1
  fi
  local url="http://127.0.0.1:$port"
  wait_quiet
  local load0 b0 t0 p0 b1 t1 p1 bench_cpu rc=0 tstart=$SECONDS top_pid
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  read -r b0 t0 < <(cpu_jiffies)
  p0=$(proc_jiffies "$pid")
  # Who else runs meanwhile: the top CPU users (lifetime %CPU) every 10 s.
  ( while sleep 10; do date +%T; ps -eo pid,pcpu,etimes,args --sort=-pcpu | cut -c1-110 | sed -n "2,6p"; done ) \
    >"$out/$s.top.txt" 2>&1 &
  top_pid=$!
  started+=("$top_pid")
  # bench's own CPU time (user sys) goes to $s.bench.cpu.
  { TIMEFORMAT='%U %S'; time "${nice_cmd[@]}" timeout "$live_timeout" "$bin" bench --url "$url" --tokenizer "$model" \
      $workload --percentiles 90,99 --max-failure-rate 0 --quiet --result-json "$out/$s.live.json" \
      >"$out/$s.bench.txt" 2>"$out/$s.bench.err"; } 2>"$out/$s.bench.cpu" || rc=$?
  read -r b1 t1 < <(cpu_jiffies)
  p1=$(proc_jiffies "$pid")
  kill "$top_pid" 2>/dev/null || true
  wait "$top_pid" 2>/dev/null || true
  bench_cpu=$(awk '{print $1 + $2}' "$out/$s.bench.cpu" 2>/dev/null || echo 0)
  # Shares of all CPUs over the run: busy, this server, bench, and every other process.
  awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) -v p=$((p1 - p0)) -v bc="$bench_cpu" -v hz="$clk_tck" \
      -v l0="$load0" -v l1="$(cut -d' ' -f1-3 /proc/loadavg)" -v secs=$((SECONDS - tstart)) \
      'BEGIN { other = (b - p - bc * hz) / t; if (other < 0) other = 0;
               printf "{\"busy\": %.4f, \"server_cpu\": %.4f, \"bench_cpu\": %.4f, \"other_cpu\": %.4f, \"load_before\": \"%s\", \"load_after\": \"%s\", \"wall_s\": %d}\n",
                      b / t, p / t, bc * hz / t, other, l0, l1, secs }' >"$out/$s.machine.json"
  curl -s "$url/admin/timeline?seconds=3600" >"$out/$s.timeline.json" || true
  curl -s "$url/metrics" >"$out/$s.metrics.txt" || true
  curl -s "$url/admin/cluster" >"$out/$s.cluster.json" || true
  kill -TERM "$pid"
  wait "$pid" || log "$s: the server did not exit 0"
  if [ "$rc" != 0 ]; then
    log "$s: bench failed (exit $rc; see $out/$s.bench.txt and $out/$s.bench.err)"
    return 1
  fi
  return 0
}

# (3) One simulation: strategy, KV blocks, profile, step overhead (ms), output JSON, and the
# workload: "flags" (bench's flags, the same seed) or a Mooncake-format trace file to replay.
sim_run() {
  local s=$1 blocks=$2 profile=$3 ms=$4 json=$5 load=$6 wl
  shift 6  # the rest: extra simulate flags
  read -r -a flags <<<"$(sim_flags "$s")"
  if [ "$load" = flags ]; then
    read -r -a wl <<<"$workload"
  else
    wl=(--dataset mooncake --dataset-file "$load" --rate inf --prompt-extra-tokens 0)  # lengths as the server counted
  fi
  "$bin" simulate --cost-model cpu-profile --cost-profile "$profile" --kv-blocks "$blocks" \
    --max-context "$ctx" --kv-bytes-per-token "$kv_bytes_per_token" $common_sched "${flags[@]}" "${wl[@]}" \
    --step-overhead-ms "$ms" --percentiles 90,99 --quiet --result-json "$json" "$@" >"${json%.json}.txt" 2>&1 ||
    die "$s: simulate failed (see ${json%.json}.txt)"
}
# The requests a live run sent, as a Mooncake trace: send times, and the prompt and output
# lengths the server counted (its prompts have the BOS token bench's lengths leave out).
live_trace() {  # bench JSON, output
  python3 - "$1" "$2" <<'EOF'
import json, sys
reqs = sorted(json.load(open(sys.argv[1]))["requests"], key=lambda r: (r["sent_s"], r["index"]))
with open(sys.argv[2], "w") as f:
    for r in reqs:
        f.write(json.dumps({"timestamp": r["sent_s"] * 1000.0, "input_length": r["input_tokens"],
                            "output_length": r["output_tokens"]}) + "\n")
EOF
}
# The profile with every time x K.
scaled_profile() {  # K, output
  python3 - "$out/profile.json" "$1" "$2" <<'EOF'
import json, sys
p, k = json.load(open(sys.argv[1])), float(sys.argv[2])
for table in ("prefill", "decode"):
    for x in p[table]: x["seconds"] *= k
p["machine"] += f" (times x {k:.4f})"
json.dump(p, open(sys.argv[3], "w"), indent=1)
EOF
}
# Step time summed over the instances of a live timeline or a simulation's JSON.
busy_s() {
  python3 - "$1" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
t = j.get("timeline", j)
print(f"{sum(s[1] for i in t.get('instances', []) for s in i['steps']):.4f}")
EOF
}

# The host model's "A S" from live timelines: prefill-only steps of one fresh prompt (>= 16
# tokens) over the profile's context-0 prediction, median, split by whether another instance
# was mid-step when the step started (the simulator's rule).
host_factors() {  # timeline files...
  python3 - "$out/profile.json" "$@" <<'EOF'
import bisect, json, statistics, sys
p = json.load(open(sys.argv[1]))
row = sorted((x["tokens"], x["seconds"]) for x in p["prefill"] if x["context"] == 0)
xs = [x for x, _ in row]
def predict(n):
    i = max(1, min(len(xs) - 1, bisect.bisect_left(xs, n)))
    (x0, y0), (x1, y1) = row[i - 1], row[i]
    return y0 * n / x0 if n < x0 else y0 + (y1 - y0) * (n - x0) / (x1 - x0)
alone, shared = [], []
for path in sys.argv[2:]:
    lanes = [i["steps"] for i in json.load(open(path)).get("instances", [])]
    for i, lane in enumerate(lanes):
        others = sorted((s[0], s[0] + s[1]) for j, l in enumerate(lanes) if j != i for s in l)
        starts = [a for a, _ in others]
        for s in lane:
            if s[3] == 0 and s[4] == 1 and s[2] >= 16:
                k = bisect.bisect_right(starts, s[0]) - 1
                busy = any(b > s[0] for _, b in others[max(0, k - 8):k + 1])
                (shared if busy else alone).append(s[1] / predict(s[2]))
a = statistics.median(alone) if alone else 1.0
print(f"{a:.4f} {statistics.median(shared) if shared else a:.4f} {len(alone)} {len(shared)}")
EOF
}

overhead_ms=""
case "$overhead" in auto) ;; *) overhead_ms=$overhead ;; esac
live_files="live.json serve.log serve.stdout bench.txt bench.err bench.cpu machine.json timeline.json metrics.txt cluster.json top.txt"
# REPEATS rounds over the strategies (interleaved, so a slow drift of the machine touches all).
# In each, attempts until one is undisturbed (or RETRIES more were made): every attempt is kept
# as $s.r<R>.attempt<N>.*, the least disturbed one as $s.r<R>.*.
[ "$sim_only" = 1 ] && log "SIM_ONLY: simulating against the live runs in $out"
for r in $(seq 1 "$repeats"); do
  [ "$sim_only" = 1 ] && break
  for s in $strategies; do
    attempt=1 best="" best_other=""
    while :; do
      log "$s: live run $r/$repeats (attempt $attempt)"
      live_run "$s" || die "$s: live run failed"
      other=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['other_cpu'])" "$out/$s.machine.json")
      log "$s: other processes used $other of the CPUs during the run"
      for f in $live_files; do [ -f "$out/$s.$f" ] && mv "$out/$s.$f" "$out/$s.r$r.attempt$attempt.$f"; done
      if [ -z "$best" ] || awk -v o="$other" -v b="$best_other" 'BEGIN { exit !(o + 0 < b + 0) }'; then
        best=$attempt best_other=$other
      fi
      if awk -v o="$other" -v d="$disturbed" 'BEGIN { exit !(o + 0 > d + 0) }' && [ "$attempt" -le "$retries" ]; then
        attempt=$((attempt + 1))
        log "$s: the run was disturbed; again"
        continue
      fi
      break
    done
    for f in $live_files; do [ -f "$out/$s.r$r.attempt$best.$f" ] && cp "$out/$s.r$r.attempt$best.$f" "$out/$s.r$r.$f"; done
    echo "$best" >"$out/$s.r$r.attempt"
    log "$s: keeping attempt $best of run $r (other processes $best_other of the CPUs)"
  done
done

for s in $strategies; do
  blocks=$(sed -n 's/.*KV cache \([0-9]*\) blocks of.*/\1/p' "$out/$s.r1.serve.log" | head -1)
  [ -n "$blocks" ] || die "$s: no KV block count in $out/$s.r1.serve.log"
  echo "$blocks" >"$out/$s.kv_blocks"
  if [ -z "$overhead_ms" ]; then
    # The median idle gap between back-to-back steps (less than 2 ms apart) of the first run.
    overhead_ms=$(python3 - "$out/$s.r1.timeline.json" <<'EOF'
import json, statistics, sys
gaps = []
for inst in json.load(open(sys.argv[1])).get("instances", []):
    st = inst["steps"]
    gaps += [b[0] - (a[0] + a[1]) for a, b in zip(st, st[1:]) if 0 <= b[0] - (a[0] + a[1]) < 0.002]
print(f"{statistics.median(gaps) * 1e3:.3f}" if gaps else "0")
EOF
)
    log "step overhead (median gap between back-to-back live steps of $s): $overhead_ms ms"
    echo "$overhead_ms" >"$out/step_overhead_ms"
  fi
  log "$s: simulate ($blocks KV blocks per instance)"
  sim_run "$s" "$blocks" "$out/profile.json" "$overhead_ms" "$out/$s.sim.raw.json" flags
  live_trace "$out/$s.r1.live.json" "$out/$s.trace.jsonl"
  sim_run "$s" "$blocks" "$out/profile.json" "$overhead_ms" "$out/$s.sim.replay.json" "$out/$s.trace.jsonl"
  live_busy=$(for r in $(seq 1 "$repeats"); do busy_s "$out/$s.r$r.timeline.json"; done | awk '{ t += $1 } END { print t / NR }')
  own=$(awk -v l="$live_busy" -v r="$(busy_s "$out/$s.sim.replay.json")" 'BEGIN { printf "%.4f", (r > 0) ? l / r : 1 }')
  echo "$own" >"$out/$s.own_factor"
  log "$s: K (mean live busy time / replay-simulated busy time) = $own"
  if [ "$cal" = auto ]; then
    cal=$own
    echo "$cal $s" >"$out/cal_factor"
  fi
  [ -f "$out/profile.cal.json" ] || scaled_profile "$cal" "$out/profile.cal.json"
  sim_run "$s" "$blocks" "$out/profile.cal.json" "$overhead_ms" "$out/$s.sim.cal.json" "$out/$s.trace.jsonl"
  scaled_profile "$own" "$out/$s.profile.own.json"
  sim_run "$s" "$blocks" "$out/$s.profile.own.json" "$overhead_ms" "$out/$s.sim.own.json" "$out/$s.trace.jsonl"
  if [ "$host_scales" = auto ]; then
    read -r ha hs na ns < <(host_factors $(for r in $(seq 1 "$repeats"); do echo "$out/$s.r$r.timeline.json"; done))
    host_scales="$ha $hs"
    echo "$ha $hs $s $na $ns" >"$out/host_scales"
    log "host model from $s: a step alone x$ha ($na steps), with another instance mid-step x$hs ($ns steps)"
  fi
  read -r ha hs _ <<<"$host_scales"
  sim_run "$s" "$blocks" "$out/profile.json" "$overhead_ms" "$out/$s.sim.host.json" flags \
    --host-step-scale-alone "$ha" --host-step-scale-shared "$hs"
done
fi  # ANALYZE_ONLY

# (4) The table and the step checks.
python3 - "$out" "$strategies" <<'EOF' | tee "$out/table.txt"
import bisect, json, os, statistics, sys
out, strategies = sys.argv[1], sys.argv[2].split()
variants, primary = ["raw", "replay", "cal", "own", "host"], "raw"
metrics = [("ttft_ms", "median", "TTFT P50"), ("ttft_ms", "p90", "TTFT P90"),
           ("tpot_ms", "median", "TPOT P50"), ("tpot_ms", "p90", "TPOT P90")]
def load(p):
    return json.load(open(p)) if os.path.exists(p) else None
def read(p, default=""):
    return open(p).read().strip() if os.path.exists(p) else default
def err(sim, live):
    return 100.0 * (sim - live) / live if live else float("nan")
def med(xs):
    return statistics.median(xs) if xs else float("nan")
def bucket(n):  # the power of two at or below n
    return 1 << (max(1, n).bit_length() - 1)
def shape(s):
    # Step columns: start, seconds, prefill tokens, decode tokens, prefill seqs, decode seqs, phase.
    # P<n>: prefill-only, one prompt of n..2n-1 tokens (Pm<n>: several prompts); D<b>: decode-only
    # batch b; M<n>: mixed, n..2n-1 prefill tokens plus decodes.
    pt, ps, ds = s[2], s[4], s[5]
    if ps > 0 and ds == 0:
        return ("P" if ps == 1 else "Pm", bucket(pt))
    if ps == 0:
        return ("D", ds)
    return ("M", bucket(pt))
def lanes(t):
    return [inst["steps"] for inst in (t or {}).get("instances", [])]
def by_shape(t):
    d = {}
    for l in lanes(t):
        for s in l: d.setdefault(shape(s), []).append(s[1])
    return d
def rows_of(a, b, min_n=5):
    return [(k, len(a[k]), med(a[k]), len(b[k]), med(b[k])) for k in sorted(set(a) & set(b))
            if len(a[k]) >= min_n and len(b[k]) >= min_n]
def weighted_ratio(rows):  # sum n_a x median_a / sum n_a x median_b
    den = sum(na * mb for _, na, _, _, mb in rows)
    return sum(na * ma for _, na, ma, _, _ in rows) / den if den else float("nan")
def overlap(ls, i, s, starts):  # share of step s of lane i during which another lane runs a step
    a, b = s[0], s[0] + s[1]
    if b <= a: return 0.0
    cover = 0.0
    for j, m in enumerate(ls):
        if j == i: continue
        k = max(0, bisect.bisect_left(starts[j], a) - 1)
        while k < len(m) and m[k][0] < b:
            cover += max(0.0, min(b, m[k][0] + m[k][1]) - max(a, m[k][0]))
            k += 1
    return cover / (b - a)
# The profile's prefill of n new tokens at context 0 (the context-0 row, piecewise linear; below
# its first point, in proportion), for live prefill-only steps of one fresh prompt.
profile = load(os.path.join(out, "profile.json")) or {"prefill": []}
row0 = sorted((p["tokens"], p["seconds"]) for p in profile["prefill"] if p["context"] == 0)
def prefill0(n):
    xs = [x for x, _ in row0]
    if len(xs) < 2: return float("nan")
    i = max(1, min(len(xs) - 1, bisect.bisect_left(xs, n)))
    (x0, y0), (x1, y1) = row0[i - 1], row0[i]
    return y0 * n / x0 if n < x0 else y0 + (y1 - y0) * (n - x0) / (x1 - x0)
def live_steps(t):
    # Prefill-only steps of one prompt (>= 8 tokens) against the profile, alone (<= 10% of the step
    # overlapped by another instance's steps) and concurrent (>= 90%); and decode/prefill shapes
    # concurrent vs alone.
    ls = lanes(t)
    starts = [[s[0] for s in l] for l in ls]
    ratio = {"alone": [], "concurrent": []}
    alone, conc = {}, {}
    for i, l in enumerate(ls):
        for s in l:
            f = overlap(ls, i, s, starts) if len(ls) > 1 else 0.0
            key = "alone" if f <= 0.1 else "concurrent" if f >= 0.9 else None
            if key is None: continue
            (alone if key == "alone" else conc).setdefault(shape(s), []).append(s[1])
            if s[4] == 1 and s[5] == 0 and s[2] >= 8:
                ratio[key].append(s[1] / prefill0(s[2]))
    return {k: (len(v), med(v)) for k, v in ratio.items()}, rows_of(conc, alone)
def fmt_shapes(rows, limit=18):
    return ", ".join(f"{k[0]}{k[1]} {ma * 1e3:.1f}/{mb * 1e3:.1f}" for k, _, ma, _, mb in rows[:limit])

cal = read(os.path.join(out, "cal_factor"), "? ?").split()
runs = 0
while os.path.exists(f"{out}/{strategies[0]}.r{runs + 1}.live.json"): runs += 1
summary = {"machine": read(os.path.join(out, "machine.txt")), "step_overhead_ms": read(os.path.join(out, "step_overhead_ms")),
           "cal_factor": cal[0], "cal_from": cal[1] if len(cal) > 1 else "", "strategies": {}}
print(summary["machine"])
print(f"live: mean of {runs} run(s) per strategy, +-%: half their range; every simulated step + {summary['step_overhead_ms'] or '?'} ms;\ncal: profile times x {cal[0]} "
      f"(mean live / replay-simulated busy time of {summary['cal_from'] or '?'}); own: x each strategy's own K (below)")
print()
hdr = f"{'strategy':<9} {'metric':<9} {'live':>8} {'+-%':>5}" + "".join(f" {v:>8} {'err%':>6}" for v in variants)
print(hdr + "   (ms)")
print("-" * len(hdr))
worst = {v: 0.0 for v in variants}
for s in strategies:
    lives = [load(f"{out}/{s}.r{r}.live.json") for r in range(1, runs + 1)]
    sims = {v: load(f"{out}/{s}.sim.{v}.json") for v in variants}
    if not lives or any(x is None for x in lives) or any(x is None for x in sims.values()):
        print(f"{s:<9} (missing results)")
        continue
    live = lives[0]
    machines = [load(f"{out}/{s}.r{r}.machine.json") or {} for r in range(1, runs + 1)]
    rec = {"metrics": {}, "machine": machines, "kv_blocks": int(read(f"{out}/{s}.kv_blocks", "0")),
           "attempts": [read(f"{out}/{s}.r{r}.attempt", "1") for r in range(1, runs + 1)],
           "own_factor": read(f"{out}/{s}.own_factor", "?")}
    for m, q, name in metrics:
        lvs = [x["metrics"][m][q] for x in lives]
        lv = statistics.mean(lvs)
        spread = 100.0 * (max(lvs) - min(lvs)) / 2 / lv if lv else float("nan")
        line, r = f"{s:<9} {name:<9} {lv:>8.1f} {spread:>5.1f}", {"live": lv, "live_runs": lvs, "live_spread_pct": spread}
        for v in variants:
            sv = sims[v]["metrics"][m][q]
            e = err(sv, lv)
            worst[v] = max(worst[v], abs(e))
            line += f" {sv:>8.1f} {e:>+6.1f}"
            r[v] = {"sim": sv, "error_pct": e}
        rec["metrics"][name] = r
        print(line)
    lm, sm = live["metrics"], sims[primary]["metrics"]
    rec["completed"] = {"live": lm["completed"], "sim": sm["completed"]}
    rec["duration_s"] = {"live": lm["duration_s"], "sim": sm["duration_s"]}
    rec["tokens"] = {"live_input": lm["total_input_tokens"], "sim_input": sm["total_input_tokens"],
                     "live_output": lm["total_output_tokens"], "sim_output": sm["total_output_tokens"]}
    lt = load(f"{out}/{s}.r1.timeline.json") or {}
    st = sims[primary]["timeline"]
    rows = rows_of(by_shape(lt), by_shape(st))
    pratio, irows = live_steps(lt)
    gaps = [b[0] - (a[0] + a[1]) for l in lanes(lt) for a, b in zip(l, l[1:]) if 0 <= b[0] - (a[0] + a[1]) < 0.002]
    rec["steps"] = {
        "live_steps": sum(map(len, lanes(lt))), "sim_steps": sum(map(len, lanes(st))),
        "live_busy_s": sum(x[1] for l in lanes(lt) for x in l), "sim_busy_s": sum(x[1] for l in lanes(st) for x in l),
        "live_over_sim_step_time": weighted_ratio(rows),
        "shapes": [{"shape": f"{k[0]}{k[1]}", "live_n": na, "live_median_ms": ma * 1e3, "sim_n": nb, "sim_median_ms": mb * 1e3}
                   for k, na, ma, nb, mb in rows],
        "prefill_live_over_profile": {k: {"steps": n, "median": r} for k, (n, r) in pratio.items()},
        "concurrent_over_alone": weighted_ratio(irows),
        "interference": [{"shape": f"{k[0]}{k[1]}", "concurrent_n": na, "concurrent_median_ms": ma * 1e3, "alone_n": nb,
                          "alone_median_ms": mb * 1e3} for k, na, ma, nb, mb in irows],
        "gap_median_ms": med(gaps) * 1e3 if gaps else 0.0}
    rec["_rows"], rec["_irows"] = rows, irows
    summary["strategies"][s] = rec
print()
print(f"Per strategy, live (first run) / raw simulation: requests done; duration (s); input tokens; steps; busy time")
print("summed over instances (s); own K; live/sim median step time weighted over the shapes both have; KV blocks per")
print("instance; other processes' share of the CPUs during each live run (the attempt kept; load average before -> after")
print("the first run):")
for s, rec in summary["strategies"].items():
    ms, st = rec["machine"], rec["steps"]
    m = ms[0] if ms else {}
    others = ", ".join(f"{x.get('other_cpu', float('nan')):.3f} (#{a})" for x, a in zip(ms, rec["attempts"]))
    print(f"  {s:<8} {rec['completed']['live']}/{rec['completed']['sim']}; "
          f"{rec['duration_s']['live']:.1f}/{rec['duration_s']['sim']:.1f}; "
          f"{rec['tokens']['live_input']}/{rec['tokens']['sim_input']}; {st['live_steps']}/{st['sim_steps']}; "
          f"{st['live_busy_s']:.1f}/{st['sim_busy_s']:.1f}; K {rec['own_factor']}; x{st['live_over_sim_step_time']:.3f}; {rec['kv_blocks']}; "
          f"{others}; {m.get('load_before', '?')} -> {m.get('load_after', '?')}")
print()
print("Median step time by shape, live/raw sim (ms; shapes with >= 5 steps in both). P<n>: prefill-only, one prompt")
print("of n..2n-1 tokens (Pm: several); D<b>: decode-only batch b; M<n>: mixed, n..2n-1 prefill tokens + decodes:")
for s, rec in summary["strategies"].items():
    print(f"  {s:<8} {fmt_shapes(rec['_rows'])}")
print()
print("Live prefill-only steps (one prompt, >= 8 tokens, context 0) / the profile's prediction, median, while no other")
print("instance runs a step (alone) and while one does (concurrent); then median step time concurrent/alone by shape (ms):")
for s, rec in summary["strategies"].items():
    p = rec["steps"]["prefill_live_over_profile"]
    print(f"  {s:<8} alone x{p['alone']['median']:.3f} ({p['alone']['steps']} steps), concurrent "
          f"x{p['concurrent']['median']:.3f} ({p['concurrent']['steps']}); shapes x{rec['steps']['concurrent_over_alone']:.3f}: "
          f"{fmt_shapes(rec['_irows'], 10)}")
for rec in summary["strategies"].values():
    del rec["_rows"], rec["_irows"]
summary["worst_abs_error_pct"] = worst
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
print()
print("worst |error|: " + ", ".join(f"{v} {worst[v]:.1f}%" for v in variants) + "   (goal <= 10%)")
EOF
exit 0
