#!/usr/bin/env bash
# The layer check passes on the repository and fails, naming the include, on a tree that breaks
# a rule (an include from a lower layer up, and one sideways that the table does not list).
# Usage: check_layers_test.sh REPO_ROOT
set -u
ROOT="$1"
CHECK="$ROOT/scripts/check_layers.py"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail=0
pass=0
expect() {  # expect NAME WANT_RC TREE [PATTERN]
  local name="$1" want="$2" tree="$3" pattern="${4:-}"
  python3 "$CHECK" "$tree" >"$TMP/out" 2>&1
  local rc=$?
  if [[ "$rc" != "$want" ]] || { [[ -n "$pattern" ]] && ! grep -q -- "$pattern" "$TMP/out"; }; then
    fail=$((fail + 1))
    echo "FAIL: $name (exit $rc, wanted $want${pattern:+, output with '$pattern'})"
    cat "$TMP/out"
  else
    pass=$((pass + 1))
  fi
}
expect "the repository is clean" 0 "$ROOT"

# A copy of the table with a tree of three modules.
make_tree() {
  local t="$1"
  mkdir -p "$t/docs" "$t/src/base" "$t/src/tokenizer" "$t/src/gguf" "$t/src/sampling" "$t/apps/cli"
  cp "$ROOT/docs/architecture.md" "$t/docs/"
  echo '#include "base/strings.h"' >"$t/src/gguf/gguf_reader.cc"
  echo '#include "gguf/gguf_reader.h"' >"$t/src/tokenizer/vocab.cc"
  echo '#include "kvforge/status.h"' >"$t/src/sampling/sampler.cc"
}
make_tree "$TMP/ok"
expect "lower and listed same-layer includes" 0 "$TMP/ok"
make_tree "$TMP/up"
echo '#include "engine/engine_core.h"' >>"$TMP/up/src/gguf/gguf_reader.cc"
expect "an include from a lower layer up" 1 "$TMP/up" "gguf_reader.cc:2: gguf (L2) includes engine/engine_core.h"
make_tree "$TMP/side"
echo '#include "tokenizer/vocab.h"' >>"$TMP/side/src/sampling/sampler.cc"
expect "an unlisted same-layer include" 1 "$TMP/side" "not listed after '->'"
make_tree "$TMP/public"
echo '#include "kvforge/llm.h"' >>"$TMP/public/src/sampling/sampler.cc"
expect "a public header of a higher layer" 1 "$TMP/public" "includes kvforge/llm.h"
echo "$pass passed, $fail failed"
[[ "$fail" == 0 ]]
