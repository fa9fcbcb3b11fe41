#!/usr/bin/env bash
# Checks DESIGN.md's layer graph: every #include "LAYER/..." in src/<layer>/ (tests
# and test-only headers excepted: a test may drive its layer with a higher one, as
# instance's tests drive it with the real engine) must name an allowed layer.
#
#   bash scripts/check_layering.sh [REPO_ROOT]
#
# Dependencies point down only; engine/ and policy/ stand side by side and never
# include each other (what both need - StepPlan, SamplingParams, Executor - is
# plain data in base/); policy/ and kv/ are pure (base/ only), so the simulator
# runs the same decisions as the live server.
set -uo pipefail
root=${1:-.}

declare -A allowed=(
  [base]="base"
  [kernels]="base kernels"
  [model]="base kernels model"
  [kv]="base kv"
  [policy]="base kv policy"
  [engine]="base kernels model kv engine"
  [instance]="base kv policy instance"
  [transport]="base kv transport"
  [sim]="base kv policy instance sim"
  [cluster]="base kernels model kv policy engine instance transport cluster"
  [server]="base model kv policy instance cluster server"
  [loadgen]="base model loadgen"
)

status=0
for layer in "${!allowed[@]}"; do
  dir="$root/src/$layer"
  [ -d "$dir" ] || continue
  while IFS= read -r hit; do
    file=${hit%%:*}
    case "$file" in
      *_test.cc | *_test_util.h | */fake_*.h | */*test_client*) continue ;;
    esac
    inc=$(sed -E 's|.*#include *"([a-z_]+)/.*|\1|' <<<"${hit#*:*:}")
    if [[ " ${allowed[$layer]} " != *" $inc "* ]]; then
      echo "layer violation: $hit"
      echo "  $layer/ may include only: ${allowed[$layer]}"
      status=1
    fi
  done < <(grep -rnE '#include *"[a-z_]+/' "$dir" --include='*.h' --include='*.cc')
done
# Unknown layers (a new src/ directory must be placed in the graph above).
for dir in "$root"/src/*/; do
  layer=$(basename "$dir")
  if [ -z "${allowed[$layer]+x}" ]; then
    echo "layer '$layer' is not in scripts/check_layering.sh's graph"
    status=1
  fi
done
[ $status -eq 0 ] && echo "every layer includes only the layers below it (DESIGN.md)"
exit $status
