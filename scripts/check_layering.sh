#!/usr/bin/env bash
# Fails when policy/ or kv/ include a layer above them (DESIGN.md's hard rule).
root=${1:-.}
viol=$(grep -rnE '#include *"(ecoserve/)?(engine|instance|transport|server|sim|cluster|loadgen|apps|kernels|model)/' \
  "$root/src/policy" "$root/src/kv" 2>/dev/null)
if [ -n "$viol" ]; then echo "layer violation:"; echo "$viol"; exit 1; fi
echo "policy/ and kv/ include only base/, kv/, policy/"
