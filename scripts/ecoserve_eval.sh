#!/usr/bin/env bash
# EcoServe's evaluation in the simulator (issue 12, item 6b; results and analysis in
# docs/reproductions.md, "EcoServe evaluation (32 x L20)"): P90 goodput of six
# serving strategies for Llama-30B, CodeLlama-34B and Qwen2-72B on 32 NVIDIA L20
# (4 nodes x 8, PCIe inside a node, 10 GbE between nodes), with the length
# statistics of EcoServe's Table 4 (alpaca, sharegpt, longbench presets).
#
#   bash scripts/ecoserve_eval.sh OUT_DIR           # run the grid (15-17 min on 2 vCPUs)
#   bash scripts/ecoserve_eval.sh --table OUT_DIR   # redraw the table of a finished run
#
# Goodput = the highest Poisson request rate at which >= 90% of requests meet both
# the TTFT and the TPOT SLO (`ecoserve simulate --goodput-search`: bisection).
# SLOs per model and dataset, EcoServe's Table 4 rule as `ecoserve profile slo`
# applies it (policy::derive_slos): TTFT = TTFT_FACTOR x the prefill of the mean
# prompt alone (chunks of 512), TPOT = TPOT_FACTOR x a batch-1 decode step at the
# mean context (prompt + output/2), both from `ecoserve simulate cost` (roofline,
# L20, tp 4 - the tp of most instances below).
#
# Strategies, every one on the same 32 GPUs (4 nodes x 8 L20). Each has a few variants
# (layouts and its usual tuning knob); the table reports the best variant of each
# (named in brackets), summary.tsv all of them.
#   nodg-pf       vLLM: mixed instances, prefill-first, least-loaded routing
#   nodg-chunked  Sarathi-Serve: mixed instances, chunked prefill (chunk 512), token budget
#                 per step in CHUNKED_BUDGETS (default "2048 512": -b2048, -b512)
#   fudg-intra    DistServe, intra-node (Algorithm 2): every node holds prefill and decode
#                 instances in the same ratio (--placement paired) and the dispatcher sends a
#                 prompt's KV to a decode instance on its prefill instance's node (over PCIe),
#                 across the 10 GbE only when every decode instance there is full.
#                 Per-node layouts PREFILLxTP+DECODExTP, times 4, in FUDG_INTRA_LAYOUTS
#                 (default "1x4+1x4 2x2+1x4 1x4+2x2 1x2+3x2 2x2+2x2 3x2+1x2"; qwen2-72b, which
#                 does not fit on 2 GPUs, only 1x4+1x4)
#   fudg-inter    Mooncake-like KV pool: P prefill instances of tp 4 packed on the first
#                 nodes, 8-P decode instances of tp 4 on the others (--placement packed), so
#                 every hand-off crosses the 10 GbE NICs; P in FUDG_INTER_PREFILL (default
#                 "2 4 6": -2p6d, -4p4d, -6p2d)
#   llumnix       the nodg-chunked instances (same budgets) with freeness routing and live
#                 migration planned every 500 ms
#   padg          EcoServe: temporal instances in macro instances of N_l..N_u instances,
#                 PADG_MACROS (default "2-4 4-8")
#                 (`simulate` gives every request the evaluation SLOs, as serve does)
#   padg-slo      (only with PADG_SLO_BIN) padg run by a second binary, for comparing two
#                 builds (it was how requests got their SLOs before `simulate` gave them)
# Mixed instances (nodg-*, llumnix, padg*) come as INSTANCESxTP layouts in MIXED_LAYOUTS
# (default "8x4 16x2": 8 instances of tp 4, 2 per node, or 16 of tp 2; qwen2-72b only 8x4).
# llama-30b runs with an 8k context (its native 2k cannot hold LongBench prompts).
#
# Environment:
#   ECOSERVE_BIN   binary (default build/ecoserve); copied to OUT_DIR/bin first, so a
#                  rebuild during the run cannot mix two simulators in one table
#   PADG_SLO_BIN   optional second binary for the padg-slo column (also copied)
#   MODELS         default "llama-30b codellama-34b qwen2-72b"
#   DATASETS       default "alpaca sharegpt longbench"
#   STRATEGIES     default "nodg-pf nodg-chunked fudg-intra fudg-inter llumnix padg" (+ padg-slo)
#   FUDG_INTER_PREFILL  prefill instances (of 8) tried for fudg-inter (default "2 4 6")
#   SEARCH_STEPS   bisection probes per search (default 8)
#   ATTAINMENT     target SLO attainment % (default 90)
#   TTFT_FACTOR, TPOT_FACTOR   SLO rule factors (default 5, 5)
#   PROMPT_SCALE   multiplies the prompts per probe (default 1): alpaca 6000, sharegpt 3000,
#                  longbench 1200 on the 30B/34B models, half on qwen2-72b, so the arrivals
#                  last roughly a minute or more at the knee (steady state, not a burst)
#   MAX_RATE_SCALE multiplies the highest rate searched (default 1: alpaca 256, sharegpt 96,
#                  longbench 24 req/s; half on qwen2-72b)
#   EXTRA_FLAGS    more `ecoserve simulate` flags for every run, e.g. "--max-num-seqs 512"
#   SEED (default 1), NICE (default 19: the machine is shared)
# Output: OUT_DIR/slos.tsv, OUT_DIR/MODEL.DATASET.STRATEGY.json (+ .txt: the report),
# OUT_DIR/summary.tsv (goodput, P90 TTFT/TPOT at that rate, KV moved, misses, ...),
# and a markdown table of goodput (req/s) per strategy with PaDG's gain over the best
# other strategy on stdout (also OUT_DIR/table.md). `--table OUT_DIR` only redraws the
# summary and the table from the JSON already there (same MODELS/DATASETS/STRATEGIES).
set -euo pipefail
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
if [ $# -eq 1 ] && { [ "$1" = "-h" ] || [ "$1" = "--help" ]; }; then usage; exit 0; fi
table_only=0
if [ $# -eq 2 ] && [ "$1" = "--table" ]; then table_only=1; shift; fi
if [ $# -ne 1 ]; then usage >&2; exit 2; fi
# Paths given relative to the caller's directory, resolved before moving to the project root.
mkdir -p "$1"
out=$(cd "$1" && pwd)
eco_bin=${ECOSERVE_BIN:+$(realpath "$ECOSERVE_BIN")}
padg_bin=${PADG_SLO_BIN:+$(realpath "$PADG_SLO_BIN")}
cd "$(dirname "$0")/.."
padg_slo_bin=""
if [ "$table_only" = 0 ]; then
  mkdir -p "$out/bin"
  cp "${eco_bin:-build/ecoserve}" "$out/bin/ecoserve"
  if [ -n "$padg_bin" ]; then
    cp "$padg_bin" "$out/bin/ecoserve-padg-slo"
    padg_slo_bin="$out/bin/ecoserve-padg-slo"
  fi
elif [ -e "$out/bin/ecoserve-padg-slo" ]; then
  padg_slo_bin="$out/bin/ecoserve-padg-slo"
fi
bin="$out/bin/ecoserve"
config=configs/sim/ecoserve_l20_cluster.yaml
models=(${MODELS:-llama-30b codellama-34b qwen2-72b})
datasets=(${DATASETS:-alpaca sharegpt longbench})
default_strategies="nodg-pf nodg-chunked fudg-intra fudg-inter llumnix padg"
[ -n "$padg_slo_bin" ] && default_strategies="$default_strategies padg-slo"
strategies=(${STRATEGIES:-$default_strategies})
steps=${SEARCH_STEPS:-8}
attain=${ATTAINMENT:-90}
ttft_factor=${TTFT_FACTOR:-5}
tpot_factor=${TPOT_FACTOR:-5}
seed=${SEED:-1}
nice=(nice -n "${NICE:-19}")
# EcoServe Table 4: mean prompt and output lengths (src/loadgen/length_distribution.h).
declare -A mean_in=([alpaca]=20.63 [sharegpt]=343.76 [longbench]=2686.89)
declare -A mean_out=([alpaca]=163.80 [sharegpt]=237.20 [longbench]=101.78)
# Prompts per probe and the highest rate searched (req/s, whole cluster) for 30B/34B;
# qwen2-72b (about half the speed) gets half of both.
declare -A prompts=([alpaca]=6000 [sharegpt]=3000 [longbench]=1200)
declare -A max_rate=([alpaca]=256 [sharegpt]=96 [longbench]=24)

# Seconds of one step of MODEL at tp 4 on L20 (roofline): step_s MODEL simulate-cost-flags...
step_s() {
  "${nice[@]}" "$bin" simulate cost --model "$1" --gpu l20 --tp 4 "${@:2}" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["predictions"][0]["step_seconds"])'
}
# "TTFT_MS TPOT_MS PREFILL_MS DECODE_MS" for MODEL DATASET (policy::derive_slos).
derive_slo() {
  local model=$1 ds=$2 prompt ctx pos=0 n total=0 t dec
  prompt=$(python3 -c "print(max(1, round(${mean_in[$ds]})))")
  ctx=$(python3 -c "print(max(1, round(${mean_in[$ds]} + ${mean_out[$ds]} / 2)))")
  while [ "$pos" -lt "$prompt" ]; do
    n=$((prompt - pos < 512 ? prompt - pos : 512))
    t=$(step_s "$model" --prefill-tokens "$n" --prefill-context "$pos")
    total=$(python3 -c "print($total + $t)")
    pos=$((pos + n))
  done
  dec=$(step_s "$model" --decode-batch 1 --decode-context "$ctx")
  python3 -c "print(round($ttft_factor * $total * 1e3), round($tpot_factor * $dec * 1e3), round($total * 1e3, 1), round($dec * 1e3, 2))"
}

# One goodput search: search NAME MODEL DATASET BIN simulate-flags...
search() {
  local name=$1 model=$2 ds=$3 b=$4
  shift 4
  local n=${prompts[$ds]} hi=${max_rate[$ds]} extra=()
  [ "$model" = "qwen2-72b" ] && n=$((n / 2)) && hi=$(python3 -c "print($hi / 2)")
  n=$(python3 -c "print(max(50, round($n * ${PROMPT_SCALE:-1})))")
  hi=$(python3 -c "print($hi * ${MAX_RATE_SCALE:-1})")
  # llama-30b's native context (2048) cannot hold LongBench prompts (up to 3236 tokens)
  # nor ShareGPT's tail: every strategy runs it with an 8k context (8k, not 16k, so that
  # a tp-2 instance, 16005 tokens of KV, still holds one whole context).
  [ "$model" = "llama-30b" ] && extra=(--max-context 8192)
  "${nice[@]}" "$b" simulate --config "$config" --model "$model" --input-len "$ds" --output-len "$ds" \
    --num-prompts "$n" --seed "$seed" --slo-ttft-ms "${ttft[$model.$ds]}" --slo-tpot-ms "${tpot[$model.$ds]}" \
    --goodput-search --attainment "$attain" --search-min-rate 0.25 \
    --search-max-rate "$hi" --search-steps "$steps" "${extra[@]}" ${EXTRA_FLAGS:-} "$@" --quiet \
    --result-json "$out/$model.$ds.$name.json" >"$out/$model.$ds.$name.txt" 2>&1 ||
    echo "[eval] $model $ds $name: simulate exited $? (see $out/$model.$ds.$name.txt)" >&2
}

t_start=$(date +%s)
declare -A ttft tpot
if [ "$table_only" = 0 ]; then
printf "model\tdataset\tmean_prompt\tmean_output\tprefill_ms\tdecode_ms\tslo_ttft_ms\tslo_tpot_ms\n" >"$out/slos.tsv"
for model in "${models[@]}"; do
  for ds in "${datasets[@]}"; do
    read -r a b p d < <(derive_slo "$model" "$ds")
    ttft[$model.$ds]=$a
    tpot[$model.$ds]=$b
    printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$model" "$ds" "${mean_in[$ds]}" "${mean_out[$ds]}" "$p" "$d" "$a" "$b" >>"$out/slos.tsv"
    echo "[eval] $model $ds: SLO TTFT $a ms (${ttft_factor} x prefill $p ms), TPOT $b ms (${tpot_factor} x decode $d ms)" >&2
  done
done

for model in "${models[@]}"; do
  # Mixed instances (nodg, llumnix, padg): INSTANCESxTP layouts of the 32 GPUs.
  mixed_layouts=(${MIXED_LAYOUTS:-8x4 16x2})
  # qwen2-72b does not fit on 2 L20s.
  [ "$model" = qwen2-72b ] && mixed_layouts=(8x4)
  for ds in "${datasets[@]}"; do
    for s in "${strategies[@]}"; do
      t0=$(date +%s)
      case $s in
        nodg-pf | nodg-chunked | llumnix | padg | padg-slo)
          b=$bin
          if [ "$s" = padg-slo ]; then
            [ -n "$padg_slo_bin" ] || { echo "[eval] padg-slo needs PADG_SLO_BIN" >&2; continue; }
            b=$padg_slo_bin
          fi
          for lay in "${mixed_layouts[@]}"; do
            mixed=(--instances "${lay%x*}" --tp "${lay#*x}")
            case $s in
              nodg-pf) search "$s-$lay" "$model" "$ds" "$b" --strategy nodg --policy prefill-first --router least-loaded "${mixed[@]}" ;;
              nodg-chunked | llumnix)
                for budget in ${CHUNKED_BUDGETS:-2048 512}; do
                  if [ "$s" = llumnix ]; then
                    search "$s-$lay-b$budget" "$model" "$ds" "$b" --strategy llumnix --policy chunked --migrate-interval-ms 500 \
                      --max-num-batched-tokens "$budget" "${mixed[@]}"
                  else
                    search "$s-$lay-b$budget" "$model" "$ds" "$b" --strategy nodg --policy chunked --router least-loaded \
                      --max-num-batched-tokens "$budget" "${mixed[@]}"
                  fi
                done ;;
              padg | padg-slo)
                for macro in ${PADG_MACROS:-2-4 4-8}; do
                  search "$s-$lay-m$macro" "$model" "$ds" "$b" --strategy padg --macro-min "${macro%-*}" --macro-max "${macro#*-}" "${mixed[@]}"
                done ;;
            esac
          done ;;
        fudg-intra)
          # Per-node layout x 4 nodes, placed pairwise (see above).
          for lay in ${FUDG_INTRA_LAYOUTS:-1x4+1x4 2x2+1x4 1x4+2x2 1x2+3x2 2x2+2x2 3x2+1x2}; do
            pre=${lay%+*} dec=${lay#*+}
            # qwen2-72b does not fit on 2 L20s: its only intra-node pair is 1x4+1x4.
            if [ "$model" = qwen2-72b ] && [ "$lay" != 1x4+1x4 ]; then continue; fi
            search "$s-$lay" "$model" "$ds" "$bin" --strategy fudg --nodes 4 --placement paired \
              --prefill-instances $((4 * ${pre%x*})) --prefill-tp "${pre#*x}" \
              --decode-instances $((4 * ${dec%x*})) --decode-tp "${dec#*x}"
          done ;;
        fudg-inter)
          for p in ${FUDG_INTER_PREFILL:-2 4 6}; do
            search "$s-${p}p$((8 - p))d" "$model" "$ds" "$bin" --strategy fudg --nodes 4 --placement packed \
              --prefill-instances "$p" --prefill-tp 4 --decode-instances $((8 - p)) --decode-tp 4
          done ;;
        *) echo "[eval] unknown strategy $s" >&2; continue ;;
      esac
      echo "[eval] $model $ds $s: $(($(date +%s) - t0)) s" >&2
    done
  done
done
fi  # table_only

# Summary and table.
OUT="$out" STRATS="${strategies[*]}" MODELS_="${models[*]}" DATASETS_="${datasets[*]}" python3 - <<'EOF' | tee "$out/table.md"
import glob, json, os
out = os.environ["OUT"]
strats = os.environ["STRATS"].split()
models = os.environ["MODELS_"].split()
datasets = os.environ["DATASETS_"].split()

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def run_row(j):
    """Goodput (whole cluster) and facts about the run at that rate."""
    gs = j.get("goodput_search") or {}
    rate = gs.get("best_rate")
    c, m, s = j["config"], j["metrics"], j["simulation"]
    T, P = c["slo_ttft_ms"], c["slo_tpot_ms"]
    miss_ttft = miss_tpot = miss_both = failed = 0
    for r in j["requests"]:
        if not r.get("success"):
            failed += 1
            continue
        a, b = r["ttft_ms"] > T, (r.get("tpot_ms") or 0) > P
        miss_ttft += a and not b
        miss_tpot += b and not a
        miss_both += a and b
    util = [i["utilization"] for i in s["instances"]]
    def util_of(role):
        u = [i["utilization"] for i in s["instances"] if i["role"] == role]
        return sum(u) / len(u) if u else None
    return {
        "goodput": rate or 0.0, "min_rate": c.get("goodput_search", {}).get("min_rate", 0),
        "p50_ttft": m["ttft_ms"]["median"], "p90_ttft": m["ttft_ms"].get("p90"),
        "p50_tpot": m["tpot_ms"]["median"], "p90_tpot": m["tpot_ms"].get("p90"),
        "attainment": m["slo_attainment"], "n": len(j["requests"]),
        "miss_ttft": miss_ttft, "miss_tpot": miss_tpot, "miss_both": miss_both, "failed": failed,
        "kv_gb": s["kv_transfer_bytes"] / 1e9, "kv_s_mean": s["kv_transfer_seconds"] / max(1, s["kv_transfers"]),
        "migrations": s["migrations_completed"], "preemptions": s["preemptions"],
        "util_mean": sum(util) / len(util), "util_min": min(util), "util_max": max(util),
        "util_prefill": util_of("prefill"), "util_decode": util_of("decode"),
        "layout": s.get("layout", ""), "sim_s": s["simulated_s"],
    }

rows, table = [], {}
for model in models:
    for ds in datasets:
        for st in strats:
            best = None
            for path in sorted(glob.glob(f"{out}/{model}.{ds}.{st}*.json")):
                variant = path[len(f"{out}/{model}.{ds}."):-len(".json")]
                if variant != st and not variant.startswith(st + "-"):
                    continue
                if st == "padg" and variant.startswith("padg-slo"):
                    continue
                j = load(path)
                if j is None:
                    continue
                r = run_row(j)
                r.update(model=model, dataset=ds, strategy=st, variant=variant)
                rows.append(r)
                if best is None or r["goodput"] > best["goodput"]:
                    best = r
            if best:
                table[(model, ds, st)] = best

cols = ["model", "dataset", "strategy", "variant", "goodput", "attainment", "n", "p50_ttft", "p90_ttft",
        "p50_tpot", "p90_tpot", "miss_ttft", "miss_tpot", "miss_both", "failed", "kv_gb", "kv_s_mean",
        "migrations", "preemptions", "util_mean", "util_min", "util_max", "util_prefill", "util_decode",
        "sim_s", "layout"]
def fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)
with open(f"{out}/summary.tsv", "w") as f:
    f.write("\t".join(cols) + "\n")
    for r in rows:
        f.write("\t".join(fmt(r.get(k)) for k in cols) + "\n")

padgs = [s for s in ("padg", "padg-slo") if s in strats]
others = [s for s in strats if s not in ("padg", "padg-slo")]
head = ["model", "dataset"] + strats + [f"{p} vs best other" for p in padgs]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for model in models:
    for ds in datasets:
        cells = [model, ds]
        for st in strats:
            r = table.get((model, ds, st))
            if not r:
                cells.append("-")
                continue
            g = f"{r['goodput']:.2f}" if r["goodput"] > 0 else f"<{r['min_rate']:g}"
            if r["variant"] != st:
                g += f" ({r['variant'][len(st) + 1:]})"
            cells.append(g)
        best_other = max(((table[(model, ds, s)]["goodput"], s) for s in others if (model, ds, s) in table), default=None)
        for p in padgs:
            r = table.get((model, ds, p))
            if not r or not best_other or best_other[0] <= 0:
                cells.append("-")
            else:
                cells.append(f"{100 * (r['goodput'] / best_other[0] - 1):+.0f}% vs {best_other[1]}")
        print("| " + " | ".join(cells) + " |")
EOF
echo "[eval] done in $(($(date +%s) - t_start)) s; per-run facts in $out/summary.tsv" >&2
