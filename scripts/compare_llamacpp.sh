#!/usr/bin/env bash
# Prefill and batch-1 decode tok/s of ecoserve (`ecoserve profile engine`) and
# of llama.cpp (the prebuilt CPU build in the node-llama-cpp npm package,
# tests/node) on the same GGUF file, thread counts, prompt length, context,
# decode steps and KV cache type, on this machine.
#
# Usage: scripts/compare_llamacpp.sh [--json] [--context C] [--steps S] [--kv f16|f32] [--prompt-len P] [--runs N]
#                                    MODEL.gguf [THREADS...]
#   defaults: threads 1 2, prompt 512, context 128, steps 128, KV f16 (llama.cpp's default type), runs 3
#   --runs N: the three programs run in turn N times per thread count, and each
#             figure is the best of the N (the machine is shared; others' load only slows)
#   --json (or COMPARE_JSON=1): one JSON array instead of the table
#
# What is timed, on both sides:
#   prefill  one P-token prompt in one step, best of 3 (ecoserve: random ids in
#            the vocabulary; llama.cpp: a fixed English text through the model's
#            own tokenizer, repeated; both only the last position's logits)
#   decode   S single-token steps after C tokens of context, each computing
#            the logits and sampling greedily, its pick fed back as the next input
# llama.cpp's figures come from tests/node/llamacpp_native_bench.cc: a C++ loop
# linked against the libllama/libggml that node-llama-cpp ships, so no Node
# call sits in the timed loop. The same decode through node-llama-cpp's
# sequence.evaluate() is printed beside it, with the difference per token
# (the Node hop: two async native calls and JS batching per token); that
# overhead is reported, not subtracted from anything.
set -euo pipefail
cd "$(dirname "$0")/.."
json=${COMPARE_JSON:-0}
context=128 steps=128 kv=f16 prompt_len=512 runs=3
while [ $# -gt 0 ]; do
  case $1 in
    --json) json=1; shift ;;
    --context) context=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --kv) kv=$2; shift 2 ;;
    --prompt-len) prompt_len=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
model=${1:?usage: scripts/compare_llamacpp.sh [--json] [--context C] [--steps S] [--kv f16|f32] [--prompt-len P] MODEL.gguf [THREADS...]}
shift
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=(1 2)
case $kv in f16 | f32) ;; *) echo "--kv must be f16 or f32" >&2; exit 2 ;; esac

[ -x build/ecoserve ] || bash scripts/build.sh
[ -d tests/node/node_modules/node-llama-cpp ] ||
  (cd tests/node && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error)

# The native driver: llama.cpp's headers come from the source bundle inside the
# node-llama-cpp package (the release its binaries were built from).
nlc=tests/node/node_modules/node-llama-cpp
bins=$(realpath tests/node/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64)
native=build/llamacpp/llamacpp_native_bench
if [ ! -x $native ] || [ tests/node/llamacpp_native_bench.cc -nt $native ]; then
  src=build/llamacpp/src
  if [ ! -f $src/include/llama.h ]; then
    rm -rf $src
    git clone -q --no-checkout $nlc/llama/gitRelease.bundle $src
    git -C $src -c advice.detachedHead=false checkout -q HEAD -- include ggml/include
  fi
  ${CXX:-g++} -std=c++20 -O2 -I$src/include -I$src/ggml/include tests/node/llamacpp_native_bench.cc -o $native \
    -L"$bins" -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so -Wl,-rpath,"$bins"
fi

results=()
for t in "${threads[@]}"; do
  for ((run = 0; run < runs; ++run)); do
    eco=$(./build/ecoserve profile engine -m "$model" -t "$t" --batches 1 --prompt-len "$prompt_len" \
      --context "$context" --decode-steps "$steps" --repeats 3 --kv-cache-dtype "$kv" --json)
    nat=$($native "$bins" "$model" "$t" "$prompt_len" "$context" "$steps" "$kv")
    viaNode=$(node tests/node/bench_llamacpp.mjs "$model" "$t" --prompt-len "$prompt_len" --context "$context" \
      --steps "$steps" --kv "$kv")
    results+=("{\"eco\": $eco, \"native\": $nat, \"node\": $viaNode}")
  done
done

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
nlc_version=$(node -p "require('./$nlc/package.json').version")
llama_release=$(node -p "require('./$nlc/llama/llama.cpp.info.json').tag")
IFS=,
printf '[%s]' "${results[*]}" | node -e '
const [model, cpu, nlc, release, json, nruns] = process.argv.slice(1);
const runs = JSON.parse(require("fs").readFileSync(0, "utf8"));
// Best of the runs of each thread count, figure by figure.
const byThreads = new Map();
for (const r of runs) {
  const b = byThreads.get(r.native.threads);
  if (!b) { byThreads.set(r.native.threads, r); continue; }
  for (const a of r.eco) {
    const kept = b.eco.find((x) => x.test === a.test);
    kept.tokens_per_second = Math.max(kept.tokens_per_second, a.tokens_per_second);
  }
  for (const k of ["native", "node"]) for (const f of ["pp", "decode"]) b[k][f] = Math.max(b[k][f], r[k][f]);
}
const rows = [...byThreads.values()].map(({ eco, native, node }) => {
  const pp = eco.find((x) => x.test.startsWith("prefill"));
  const tg = eco.find((x) => x.test === "decode batch 1");
  for (const [k, v] of [["context", native.context], ["decode_steps", native.decode_steps], ["kv_cache_type", native.kv_cache_type]])
    if (tg[k] !== v || node[k] !== v) throw new Error(`${k} differs between the runs`);
  if (pp.prompt_len !== native.prompt_len) throw new Error("prompt lengths differ");
  return {
    threads: native.threads, prompt_len: native.prompt_len, context: native.context, decode_steps: native.decode_steps,
    kv_cache_type: native.kv_cache_type,
    ecoserve: { prefill_tokens_per_second: pp.tokens_per_second, decode_tokens_per_second: tg.tokens_per_second },
    llamacpp: { prefill_tokens_per_second: native.pp, decode_tokens_per_second: native.decode },
    llamacpp_via_node: { prefill_tokens_per_second: node.pp, decode_tokens_per_second: node.decode,
                         node_overhead_ms_per_token: 1000 / node.decode - 1000 / native.decode },
    ratio: { prefill: pp.tokens_per_second / native.pp, decode: tg.tokens_per_second / native.decode },
    cpu_variant: native.cpu_variant, ecoserve_isa: pp.isa, ecoserve_openblas_core: pp.openblas_core,
    ecoserve_float_prefill: pp.float_matmul_kernel, ecoserve_amx_bf16: pp.amx_bf16 === true,
    ecoserve_bf16_weights: pp.bf16_weights === true, runs: Number(nruns),
  };
});
const r0 = rows[0];
if (json === "1") {
  console.log(JSON.stringify({ model, cpu, node_llama_cpp: nlc, llamacpp_release: release,
                               llamacpp_cpu_variant: r0.cpu_variant, ecoserve_isa: r0.ecoserve_isa,
                               ecoserve_openblas_core: r0.ecoserve_openblas_core,
                               ecoserve_float_prefill: r0.ecoserve_float_prefill,
                               ecoserve_amx_bf16: r0.ecoserve_amx_bf16, ecoserve_bf16_weights: r0.ecoserve_bf16_weights,
                               results: rows }, null, 2));
  process.exit(0);
}
console.log(`model: ${model}`);
console.log(`cpu: ${cpu}; llama.cpp: node-llama-cpp ${nlc} (llama.cpp ${release}), CPU build libggml-cpu-${r0.cpu_variant}.so; ` +
            `ecoserve: kernels ${r0.ecoserve_isa}${r0.ecoserve_amx_bf16 ? " with bf16 tiles for prompts (ECOSERVE_AMX_BF16)" : ""}` +
            `${r0.ecoserve_bf16_weights ? ", their weights made at load (ECOSERVE_BF16_WEIGHTS)" : ""}, ` +
            `float-weight prefill on ${r0.ecoserve_float_prefill}`);
console.log(`best of ${nruns} runs; prefill: one ${r0.prompt_len}-token prompt, best of 3; decode: ${r0.decode_steps} greedy tokens (logits + sampling each) ` +
            `from context ${r0.context}, batch 1; KV cache ${r0.kv_cache_type} on both; llama.cpp without flash attention`);
console.log("llama.cpp timed in a C++ loop over its library; \"via Node\" is the same decode through node-llama-cpp, " +
            "with its per-token overhead (not subtracted)");
const pad = (s, n) => String(s).padStart(n);
console.log(`${"threads".padEnd(8)}${pad("pp ecoserve", 13)}${pad("llama.cpp", 11)}${pad("ratio", 7)}` +
            `${pad("tg ecoserve", 13)}${pad("llama.cpp", 11)}${pad("ratio", 7)}${pad("via Node", 10)}${pad("Node ms/tok", 13)}`);
for (const r of rows)
  console.log(`${String(r.threads).padEnd(8)}${pad(r.ecoserve.prefill_tokens_per_second.toFixed(1), 13)}` +
              `${pad(r.llamacpp.prefill_tokens_per_second.toFixed(1), 11)}${pad(r.ratio.prefill.toFixed(2), 7)}` +
              `${pad(r.ecoserve.decode_tokens_per_second.toFixed(1), 13)}${pad(r.llamacpp.decode_tokens_per_second.toFixed(1), 11)}` +
              `${pad(r.ratio.decode.toFixed(2), 7)}${pad(r.llamacpp_via_node.decode_tokens_per_second.toFixed(1), 10)}` +
              `${pad(r.llamacpp_via_node.node_overhead_ms_per_token.toFixed(3), 13)}`);
' "$model" "$cpu" "$nlc_version" "$llama_release" "$json" "$runs"
