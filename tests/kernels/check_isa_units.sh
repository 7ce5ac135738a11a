#!/usr/bin/env bash
# The AVX-512 translation units must define no weak (COMDAT) code: an inline function of a
# shared header instantiated there is compiled with -mavx512f, and the linker may keep that copy
# for every caller, putting AVX-512 instructions on AVX2-only CPUs (docs/adr/0016). Usage:
#   check_isa_units.sh OBJECT...
set -euo pipefail
status=0
for obj in "$@"; do
  [[ -f "$obj" ]] || { echo "check_isa_units: no object file $obj" >&2; exit 1; }
  # W: weak code (an inline function's COMDAT copy). Weak data (V, u: e.g. the unwinder's
  # DW.ref.__gxx_personality_v0 in a debug build) holds no instructions.
  weak=$(nm -C --defined-only "$obj" | awk '$2 == "W"' || true)
  if [[ -n "$weak" ]]; then
    echo "check_isa_units: $obj defines shared inline code:" >&2
    echo "$weak" >&2
    status=1
  fi
done
[[ $status -eq 0 ]] && echo "check_isa_units: $# AVX-512 units define no weak code"
exit $status
