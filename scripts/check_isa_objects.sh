#!/usr/bin/env bash
# Checks that the per-ISA kernel objects (src/kernels/matmul_quant_<isa>.cc,
# matmul_float_<isa>.cc and attention_rows_<isa>.cc, compiled with -m flags
# beyond the x86-64-v3 baseline) define no weak symbol.
# A weak (COMDAT) definition, e.g. an out-of-line copy of an inline function,
# is merged by the linker with the other objects' copies and may be the one
# kept, which would put AVX-512 instructions in code every CPU runs.
# DW.ref.__gxx_personality_v0 (a data word pointing at the C++ personality
# routine, emitted when a function has landing pads, e.g. under ASan) holds no
# code and is allowed.
# Usage: scripts/check_isa_objects.sh path/to/libecoserve_kernels.a
set -euo pipefail
lib=$(realpath "${1:?usage: check_isa_objects.sh libecoserve_kernels.a}")
members=$(ar t "$lib" | grep -E '(matmul_quant|matmul_float|attention_rows)_(avx2|avxvnni|avx512[a-z0-9]*)\.cc\.o$' || true)
[ -n "$members" ] || { echo "no per-ISA kernel objects in $lib" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for m in $members; do
  (cd "$tmp" && ar x "$lib" "$m")
  weak=$(nm --defined-only "$tmp/$m" | awk '$2 ~ /^[WwVvu]$/ && $3 !~ /^DW\.ref\./' || true)
  if [ -n "$weak" ]; then
    echo "FAIL $m defines weak symbols:" >&2
    echo "$weak" | c++filt >&2
    fail=1
  else
    echo "ok   $m: $(nm --defined-only "$tmp/$m" | awk '$2 ~ /^[TtDdRrBb]$/' | wc -l) symbols, none weak"
  fi
done
exit $fail
