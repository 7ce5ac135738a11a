#!/usr/bin/env bash
# Drives the kvforge executable as a user would. Usage: cli_test.sh KVFORGE SHARED_DIR
set -u
KVF="$1"
SHARED="$2"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
check() {  # check NAME EXPECTED_RC COMMAND...
  local name="$1" want="$2"
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [[ "$rc" == "$want" ]]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: $name (exit $rc, wanted $want)"
    head -c 600 "$TMP/err"
  fi
}
contains() {  # contains NAME FILE TEXT
  if grep -qF -- "$3" "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1: '$3' not in $2"; head -c 600 "$2"; fi
}

check "help" 0 "$KVF" --help
contains "help lists run" "$TMP/out" "run"
check "no args" 2 "$KVF"
check "unknown command" 2 "$KVF" frobnicate
for sub in run tokenize info make-model; do
  check "$sub --help" 0 "$KVF" "$sub" --help
  contains "$sub usage" "$TMP/out" "usage: kvforge $sub"
done
check "eval ppl --help" 0 "$KVF" eval ppl --help
check "run unknown flag" 2 "$KVF" run --prompt hi --bogus
contains "unknown flag message" "$TMP/err" "unknown flag '--bogus'"
check "run bad number" 2 "$KVF" run --prompt hi --max-tokens abc
check "run missing prompt" 2 "$KVF" run
check "run negative tokens" 2 "$KVF" run --prompt hi --max-tokens -5
check "run bad temperature" 2 "$KVF" run --prompt hi --temperature -1

check "run greedy" 0 "$KVF" run --prompt "Once upon a time" --temperature 0 --max-tokens 64
contains "run text" "$TMP/out" "Once upon a time, there was a little girl named Lily."
contains "run speed" "$TMP/err" "decode"
check "run json" 0 "$KVF" run --prompt "Once upon a time" --temperature 0 --max-tokens 8 --json
contains "json prompt tokens" "$TMP/out" '"prompt_tokens":[1,403,407,261,378]'
contains "json tokens" "$TMP/out" '"tokens":[432,383,286,261,376,298,315,421]'
contains "json ttft" "$TMP/out" '"ttft_ms":'
contains "json decode" "$TMP/out" '"decode_tokens_per_s":'
check "run missing model" 1 "$KVF" run --model "$TMP/nope.gguf" --prompt hi
printf 'GGUF\x03\x00\x00\x00garbage' >"$TMP/bad.gguf"
check "run corrupt model" 1 "$KVF" run --model "$TMP/bad.gguf" --prompt hi
contains "corrupt message names file" "$TMP/err" "bad.gguf"

printf 'Hello world' >"$TMP/in.txt"
check "tokenize" 0 "$KVF" tokenize --model "$SHARED/tokenizer-tests/ggml-vocab-llama-spm.gguf" --no-special <"$TMP/in.txt"
contains "tokenize ids" "$TMP/out" "15043 3186"
check "tokenize json with BOS" 0 "$KVF" tokenize --model "$SHARED/tokenizer-tests/ggml-vocab-llama-spm.gguf" --json <"$TMP/in.txt"
contains "tokenize json" "$TMP/out" "[1,15043,3186]"
check "tokenize missing model flag" 2 "$KVF" tokenize

check "info" 0 "$KVF" info --model "$SHARED/models/stories260K.gguf"
contains "info kv bytes" "$TMP/out" "KV bytes/token: 640 (f16)"
check "info json" 0 "$KVF" info --json
contains "info json arch" "$TMP/out" '"architecture":"llama"'

check "make-model" 0 "$KVF" make-model --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 96 --dtype q8_0 --out "$TMP/m.gguf"
check "make-model runs" 0 "$KVF" run --model "$TMP/m.gguf" --prompt "Hello" --max-tokens 4
check "make-model bad shape" 2 "$KVF" make-model --dim 65 --heads 4 --out "$TMP/x.gguf"
check "make-model bad dtype" 2 "$KVF" make-model --dtype q9 --out "$TMP/x.gguf"

check "ppl json" 0 "$KVF" eval ppl --text "$SHARED/models/tinystories-val-head.txt" --ctx 128 --chunks 4 --json
contains "ppl json shape" "$TMP/out" '"tokens_scored":252'
check "ppl bad mode" 2 "$KVF" eval nonsense

# KV-cache dtypes (docs/kv_quantization.md).
check "run q8_0 kv" 0 "$KVF" run --prompt "Once upon a time" --temperature 0 --max-tokens 24 --kv-dtype q8_0
contains "run q8_0 text" "$TMP/out" "Once upon a time, there was a little girl named Lily."
contains "run q8_0 log line" "$TMP/err" "KV cache: q8_0, 340 B/token incl. scales"
check "run split kv dtypes" 0 "$KVF" run --prompt "Hi" --max-tokens 4 --kv-dtype-k kivi4 --kv-dtype-v int8
contains "run split log line" "$TMP/err" "KV cache: k=kivi4,v=int8"
check "run bad kv dtype" 1 "$KVF" run --prompt "Hi" --kv-dtype q9_9
contains "bad kv dtype message" "$TMP/err" "unknown KV dtype 'q9_9'"
check "ppl q4_0 kv" 0 "$KVF" eval ppl --text "$SHARED/models/tinystories-val-head.txt" --ctx 128 --chunks 2 --kv-dtype q4_0 --json
check "eval kv json" 0 "$KVF" eval kv --text "$SHARED/models/tinystories-val-head.txt" --kv-dtype kivi2 --ctx 64 --chunks 2 --kivi-residual 32 --prompts 2 --gen-tokens 8 --json
contains "eval kv dtype" "$TMP/out" '"kv_dtype":"kivi2","baseline_dtype":"f32","bytes_per_token":120,"baseline_bytes_per_token":1280'
contains "eval kv regimes" "$TMP/out" '"regimes":{"teacher_forced":{"ppl":'
contains "eval kv streaming" "$TMP/out" '"streaming":{"ppl":'
contains "eval kv compress_continue" "$TMP/out" '"compress_continue":{"ppl":'
contains "eval kv greedy" "$TMP/out" '"greedy_agreement":'
contains "eval kv progress" "$TMP/err" "eval kv kivi2 ["
check "eval kv text" 0 "$KVF" eval kv --text "$SHARED/models/tinystories-val-head.txt" --kv-dtype fp8 --kv-scales calibrate --ctx 64 --chunks 1 --prompts 1 --gen-tokens 8
contains "eval kv table" "$TMP/out" "compress_continue"
check "eval kv needs text" 2 "$KVF" eval kv --kv-dtype q8_0
check "eval kv bad ctx" 2 "$KVF" eval kv --text "$SHARED/models/tinystories-val-head.txt" --ctx 8
check "calc kv dtype" 0 "$KVF" calc --preset llama-3-8b --seq-len 1024 --kv-dtype q4_0
contains "calc q4_0 bits" "$TMP/out" "4.5 bits per stored value"

echo "$pass passed, $fail failed"
[[ "$fail" == 0 ]]
