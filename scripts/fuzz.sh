#!/usr/bin/env bash
# Fuzzes every parser for a bounded time (part of scripts/test.sh and CI).
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Builds the libFuzzer targets of fuzz/ with clang-14, ASan and UBSan into
# build-fuzz/, then for each target: runs every file of fuzz/regressions/TARGET
# once (past crashes), and fuzzes for SECONDS_PER_TARGET (default 12: the ten
# targets take about 140 s with an up-to-date build) starting from a copy of
# fuzz/corpus/TARGET in build-fuzz/work/TARGET, so the repository's corpus is
# never modified.
# SECONDS_PER_TARGET = 0 only replays the corpus and the regressions.
# Fails (exit 1) on any crash, leak, timeout, out-of-memory, sanitizer report or
# failed property check; the input is saved in build-fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-12}
shift || true
all_targets=(openai_request http_request sse_parser gguf tokenizer_spm tokenizer_bpe chat_template wire config_text
             gpu_profile meminfo)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")

if ! command -v clang++-14 >/dev/null 2>&1; then
  echo "[fuzz] clang++-14 not found: run 'bash scripts/install_deps.sh' (clang-14, libfuzzer-14-dev, libclang-rt-14-dev)" >&2
  exit 1
fi

build=build-fuzz
start=$(date +%s)
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DECOSERVE_FUZZ=ON >/dev/null
if ! ninja -C "$build" -j"$(nproc)" fuzz_targets >"$build/build.log" 2>&1; then
  tail -n 60 "$build/build.log"
  echo "[fuzz] build failed (log: $build/build.log)" >&2
  exit 1
fi
echo "[fuzz] build: $(( $(date +%s) - start )) s"

mkdir -p "$build/artifacts" "$build/logs" "$build/work"
# UBSan is fatal at compile time (-fno-sanitize-recover=undefined); these add stacks.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
common=(-rss_limit_mb=2048 -timeout=10 -print_final_stats=1)

failed=()
summary=()
for t in "${targets[@]}"; do
  bin="$build/fuzz/${t}_fuzz"
  [ -x "$bin" ] || { echo "[fuzz] unknown target '$t' (known: ${all_targets[*]})" >&2; exit 2; }
  dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=(-dict="fuzz/dict/$t.dict")
  artifacts="$build/artifacts/$t-"

  # Past crashes: each file once.
  if [ -d "fuzz/regressions/$t" ] && [ -n "$(ls -A "fuzz/regressions/$t")" ]; then
    if ! "$bin" "${common[@]}" -artifact_prefix="$artifacts" "fuzz/regressions/$t"/* >"$build/logs/$t.regressions.log" 2>&1; then
      echo "[fuzz] $t: a regression input fails again:"
      tail -n 40 "$build/logs/$t.regressions.log"
      failed+=("$t (regression)")
    fi
  fi

  work="$build/work/$t"
  rm -rf "$work"
  mkdir -p "$work"
  cp -r "fuzz/corpus/$t/." "$work/"
  if [ "$secs" -eq 0 ]; then
    run=(-runs=0)
  else
    run=(-max_total_time="$secs")
  fi
  log="$build/logs/$t.log"
  status=0
  "$bin" "${common[@]}" "${run[@]}" "${dict[@]}" -artifact_prefix="$artifacts" "$work" >"$log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  added=$(sed -n 's/^stat::new_units_added: *//p' "$log" | tail -n 1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)
  line=$(printf '%-16s %10s execs %8s exec/s %5s new inputs %6s MB peak' "$t" "${execs:-?}" "${rate:-?}" \
         "${added:-?}" "${rss:-?}")
  if [ "$status" -ne 0 ]; then
    echo "[fuzz] $t FAILED (exit $status); log $log:"
    grep -v -E '^#[0-9]+ +(NEW|REDUCE|pulse)' "$log" | tail -n 60
    ls -1 "$build/artifacts/$t-"* 2>/dev/null | sed 's/^/[fuzz] input saved: /' || true
    failed+=("$t")
    line+="  FAILED"
  fi
  echo "[fuzz] $line"
  summary+=("$line")
done

echo
echo "[fuzz] summary (${secs} s per target, $(( $(date +%s) - start )) s in all):"
printf '  %s\n' "${summary[@]}"
echo "[fuzz] new inputs are left in $build/work/TARGET; to keep the ones that add coverage:"
echo "         $build/fuzz/TARGET_fuzz -merge=1 fuzz/corpus/TARGET $build/work/TARGET"
if [ ${#failed[@]} -gt 0 ]; then
  echo "[fuzz] FAILED: ${failed[*]}"
  echo "[fuzz] reproduce: $build/fuzz/TARGET_fuzz $build/artifacts/TARGET-crash-...  (or build/fuzz/TARGET_replay FILE)"
  echo "[fuzz] once fixed, keep the input as a regression: cp ARTIFACT fuzz/regressions/TARGET/short_name"
  exit 1
fi
echo "[fuzz] all targets clean"
