#!/usr/bin/env bash
# Drives the kvforge executable as a user would. Usage: cli_test.sh KVFORGE DATA_DIR
# (a KVF_SHARED_DIR environment variable overrides DATA_DIR, as for the GoogleTest suites).
set -u
KVF="$1"
SHARED="${KVF_SHARED_DIR:-$2}"
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
for sub in run tokenize info make-model quantize; do
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
# No --model: the embedded model, as for run and serve (the same ids as its GGUF file).
check "tokenize embedded model" 0 "$KVF" tokenize --no-special <"$TMP/in.txt"
cp "$TMP/out" "$TMP/tok_embedded"
check "tokenize embedded model's file" 0 "$KVF" tokenize --model "$SHARED/models/stories260K.gguf" --no-special <"$TMP/in.txt"
if cmp -s "$TMP/out" "$TMP/tok_embedded" && [[ -s "$TMP/out" ]]; then pass=$((pass + 1)); else
  fail=$((fail + 1)); echo "FAIL: tokenize default model differs from stories260K.gguf"; fi

check "info" 0 "$KVF" info --model "$SHARED/models/stories260K.gguf"
contains "info kv bytes" "$TMP/out" "KV bytes/token: 640 (f16)"
check "info json" 0 "$KVF" info --json
contains "info json arch" "$TMP/out" '"architecture":"llama"'
contains "info json embedded dtypes" "$TMP/out" '"dtypes":{"f32":'
check "calc embedded model" 0 "$KVF" calc --seq-len 512 --json
contains "calc embedded layers" "$TMP/out" '"n_layers":5'

check "make-model" 0 "$KVF" make-model --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 96 --dtype q8_0 --out "$TMP/m.gguf"
check "make-model runs" 0 "$KVF" run --model "$TMP/m.gguf" --prompt "Hello" --max-tokens 4
for arch in qwen3 gemma phi3 falcon; do
  check "make-model $arch" 0 "$KVF" make-model --arch $arch --dim 64 --layers 2 --heads 4 --kv-heads 1 --ffn 96 --dtype f16 --out "$TMP/m-$arch.gguf"
  check "make-model $arch runs" 0 "$KVF" run --model "$TMP/m-$arch.gguf" --prompt "Hello" --max-tokens 4 --temperature 0
  check "make-model $arch info" 0 "$KVF" info --model "$TMP/m-$arch.gguf" --json
  contains "make-model $arch info architecture" "$TMP/out" "\"architecture\":\"$arch\""
done
check "make-model bad arch" 2 "$KVF" make-model --arch gpt2 --out "$TMP/x.gguf"
check "make-model bad shape" 2 "$KVF" make-model --dim 65 --heads 4 --out "$TMP/x.gguf"
check "make-model bad dtype" 2 "$KVF" make-model --dtype q9 --out "$TMP/x.gguf"

# quantize: every type must load and generate. stories260K has 64-wide rows (and 172-wide
# ffn_down rows), so k-quants fall back per tensor to 32-blocks / f16, as llama.cpp does.
S260="$SHARED/models/stories260K.gguf"
for qt in q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k; do
  check "quantize $qt" 0 "$KVF" quantize --in "$S260" --out "$TMP/s-$qt.gguf" --type "$qt"
  contains "quantize $qt summary" "$TMP/err" "wrote $TMP/s-$qt.gguf ($qt)"
  check "quantized $qt runs" 0 "$KVF" run --model "$TMP/s-$qt.gguf" --prompt "Once upon a time" --temperature 0 --max-tokens 24
  contains "quantized $qt text" "$TMP/out" "Once upon a time"
  check "quantized $qt info" 0 "$KVF" info --model "$TMP/s-$qt.gguf" --json
done
# 8-bit weights keep the f32 model's greedy continuation.
check "quantized q8_0 greedy" 0 "$KVF" run --model "$TMP/s-q8_0.gguf" --prompt "Once upon a time" --temperature 0 --max-tokens 16
contains "q8_0 greedy text" "$TMP/out" "Once upon a time, there was a little girl named Lily."
check "quantize q4_k fallback log" 0 "$KVF" quantize --in "$S260" --out "$TMP/s-q4k.gguf" --type q4_k
contains "q4_k falls back to q5_0" "$TMP/err" "using q5_0 instead of q4_k"
contains "ffn_down falls back to f16" "$TMP/err" "ffn_down.weight: row length 172 is not a multiple of 256 or 32, using f16 instead of q4_k"
contains "q4_k output to q6_k then q8_0" "$TMP/err" "output.weight: row length 64 is not a multiple of 256, using q8_0 instead of q6_k"
check "quantize keep output f16" 0 "$KVF" quantize --in "$S260" --out "$TMP/s-keep.gguf" --type q4_0 --keep-output-f16
check "keep-output-f16 info" 0 "$KVF" info --model "$TMP/s-keep.gguf" --json
contains "keep-output-f16 dtypes" "$TMP/out" '"f16":{"tensors":6,'
check "quantize make-model f16" 0 "$KVF" make-model --dim 256 --layers 1 --heads 4 --ffn 512 --dtype f16 --out "$TMP/m256.gguf"
for qt in q4_k q5_k q6_k; do
  check "quantize m256 $qt" 0 "$KVF" quantize --in "$TMP/m256.gguf" --out "$TMP/m256-$qt.gguf" --type "$qt"
  check "m256 $qt runs" 0 "$KVF" run --model "$TMP/m256-$qt.gguf" --prompt "Hello" --max-tokens 4
done
check "m256 q4_k info" 0 "$KVF" info --model "$TMP/m256-q4_k.gguf" --json
contains "m256 q4_k dtypes" "$TMP/out" '"q4_k":{"tensors":8,'
contains "m256 q4_k output q6_k" "$TMP/out" '"q6_k":{"tensors":1,'
check "quantize missing file" 1 "$KVF" quantize --in "$TMP/nope.gguf" --out "$TMP/x.gguf" --type q4_0
contains "quantize missing file message" "$TMP/err" "nope.gguf"
check "quantize unknown type" 2 "$KVF" quantize --in "$S260" --out "$TMP/x.gguf" --type q3_k
contains "quantize unknown type message" "$TMP/err" "unknown --type 'q3_k'"
check "quantize missing type" 2 "$KVF" quantize --in "$S260" --out "$TMP/x.gguf"
check "quantize not float" 1 "$KVF" quantize --in "$TMP/s-q4_0.gguf" --out "$TMP/x.gguf" --type q8_0
contains "quantize not float message" "$TMP/err" "is not a float model"

check "ppl json" 0 "$KVF" eval ppl --text "$SHARED/models/tinystories-val-head.txt" --ctx 128 --chunks 4 --json
contains "ppl json shape" "$TMP/out" '"tokens_scored":252'
check "ppl bad mode" 2 "$KVF" eval nonsense

# Prefix caching: the three workloads with off/hash/radix in one run, and prompts-file runs.
for w in shared-prefix multi-turn few-shot; do
  check "bench $w all" 0 "$KVF" bench throughput --workload "$w" --num-prompts 6 --input-len 8 --output-len 4 --prefix-len 64 --turns 2 --prefix-cache all --json --no-progress
  contains "bench $w ratios" "$TMP/out" '"ratio_mean_ttft":{"hash":'
  contains "bench $w hit rate" "$TMP/out" '"prefix_hit_rate":'
done
check "bench bad prefix mode" 2 "$KVF" bench throughput --prefix-cache trie
check "bench compare+all" 2 "$KVF" bench throughput --compare --prefix-cache all
# Decode-priority chunking: the three prefill modes in one run (the embedded model's steps never
# reach 5 ms, so nothing is cut, but every mode runs and is reported), and bad values.
check "bench compare chunking" 0 "$KVF" bench throughput --workload fixed --num-prompts 6 --input-len 16 --output-len 4 --max-num-seqs 2 --max-itl-ms 5 --compare-chunking --json --no-progress
contains "bench compare chunking modes" "$TMP/out" '"decode-priority":{"output_tokens_per_s":'
contains "bench compare chunking ratio" "$TMP/out" '"ratio_itl_p99":'
check "bench compare chunking text" 0 "$KVF" bench throughput --workload fixed --num-prompts 4 --input-len 8 --output-len 4 --max-itl-ms 50 --compare-chunking --no-progress
contains "bench compare chunking summary" "$TMP/out" 'mean of two runs (decode-priority target 50 ms)'
check "bench compare chunking needs a target" 2 "$KVF" bench throughput --compare-chunking --max-itl-ms 0
check "bench compare chunking alone" 2 "$KVF" bench throughput --compare-chunking --max-itl-ms 50 --compare
check "bench negative itl" 2 "$KVF" bench throughput --max-itl-ms -1
check "bench zero min chunk" 2 "$KVF" bench throughput --min-prefill-chunk 0
check "serve negative itl" 2 "$KVF" serve --port 0 --max-itl-ms -5
check "serve nan itl" 2 "$KVF" serve --port 0 --max-itl-ms nan
check "serve help itl" 0 "$KVF" serve --help
contains "serve help lists max-itl-ms" "$TMP/out" '--max-itl-ms'
printf 'Once upon a time there was a little girl named Lily. She liked to play.\nOnce upon a time there was a little girl named Lily. She had a dog.\n' >"$TMP/prompts.txt"
for m in off hash radix; do
  check "prompts-file $m" 0 "$KVF" run --prompts-file "$TMP/prompts.txt" --prefix-cache "$m" --temperature 0 --max-tokens 8 --json
  cp "$TMP/out" "$TMP/out-$m"
done
if cmp -s "$TMP/out-off" "$TMP/out-hash" && cmp -s "$TMP/out-off" "$TMP/out-radix"; then pass=$((pass + 1)); else
  # Timing fields differ between runs; compare only the generated texts.
  if diff <(grep -o '"text":"[^"]*"' "$TMP/out-off") <(grep -o '"text":"[^"]*"' "$TMP/out-radix") >/dev/null &&
     diff <(grep -o '"text":"[^"]*"' "$TMP/out-off") <(grep -o '"text":"[^"]*"' "$TMP/out-hash") >/dev/null; then
    pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: prompts-file outputs differ with the prefix cache"; fi
fi
check "prompts-file bad prefix mode" 2 "$KVF" run --prompts-file "$TMP/prompts.txt" --prefix-cache lru
# KV-cache dtypes (docs/kv_quantization.md).
check "run q8_0 kv" 0 "$KVF" run --prompt "Once upon a time" --temperature 0 --max-tokens 24 --kv-dtype q8_0
contains "run q8_0 text" "$TMP/out" "Once upon a time, there was a little girl named Lily."
contains "run q8_0 log line" "$TMP/err" "KV cache: q8_0, 340 B/token incl. scales"
check "run split kv dtypes" 0 "$KVF" run --prompt "Hi" --max-tokens 4 --kv-dtype-k kivi4 --kv-dtype-v int8
contains "run split log line" "$TMP/err" "KV cache: k=kivi4,v=int8"
# Engine options by their EngineConfig names (as in C++ and Python).
check "run kv-cache-dtype alias" 0 "$KVF" run --prompt "Hi" --max-tokens 4 --kv-cache-dtype q8_0 --kv-cache-dtype-v=int8
contains "alias sets the dtypes" "$TMP/err" "KV cache: k=q8_0,v=int8"
check "bench preemption-mode alias" 0 "$KVF" bench throughput --workload fixed --num-prompts 2 --input-len 8 --output-len 4 --preemption-mode swap --kv-cache-memory-bytes 4MiB --no-progress
check "serve help lists aliases" 0 "$KVF" serve --help
contains "serve help alias" "$TMP/out" "the same as --kv-cache-dtype"
# KV offload tiers: serve and bench throughput take them; a second run on the same disk directory
# loads what the first stored; bad values are refused before any work.
check "bench offload disk cold" 0 "$KVF" bench throughput --workload multi-turn --num-prompts 8 --turns 3 --input-len 48 --output-len 16 --kv-cache-memory 160KiB --kv-offload-disk "$TMP/tiers:16MiB" --kv-offload-ram 64KiB --kv-offload-chunk 32 --no-progress --json
contains "bench offload tiers json" "$TMP/out" '"kv_tiers":[{"name":"ram"'
ls "$TMP"/tiers/*/*.kvc >/dev/null 2>&1 && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: no chunk files under $TMP/tiers"; }
check "bench offload disk warm" 0 "$KVF" bench throughput --workload multi-turn --num-prompts 8 --turns 3 --input-len 48 --output-len 16 --kv-cache-memory 160KiB --kv-offload-disk "$TMP/tiers:16MiB" --kv-offload-chunk 32 --no-progress
contains "bench offload text" "$TMP/out" "kv offload:"
if grep -qE 'disk [1-9][0-9]*/' "$TMP/out"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: warm run had no disk hits"; cat "$TMP/out"; fi
check "serve help offload" 0 "$KVF" serve --help
contains "serve help lists offload" "$TMP/out" "--kv-offload-disk"
check "run with an offload tier" 0 "$KVF" run --prompt hi --max-tokens 4 --kv-offload-ram 1MiB
# Speculative decoding: greedy tokens are those of plain decoding, with a random-weight draft of
# the same vocabulary (most drafts refused) and with prompt lookup on the induction model (which
# copies, so lookups are kept); bad drafts are refused with a message.
spec_tokens() { grep -o '"tokens":\[[0-9,]*\]' "$TMP/out"; }
check "make random draft" 0 "$KVF" make-model --dim 32 --layers 1 --heads 2 --out "$TMP/draft.gguf" --vocab-from "$SHARED/models/stories260K.gguf"
check "run plain" 0 "$KVF" run --prompt "Once upon a time" --temperature 0 --max-tokens 48 --ignore-eos --json
spec_tokens >"$TMP/plain.tok"
check "run --model-draft" 0 "$KVF" run --prompt "Once upon a time" --temperature 0 --max-tokens 48 --ignore-eos --json --model-draft "$TMP/draft.gguf" --draft-max 4 --no-speculative-adaptive
spec_tokens >"$TMP/draft.tok"
if cmp -s "$TMP/plain.tok" "$TMP/draft.tok"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: draft-model tokens differ"; cat "$TMP/plain.tok" "$TMP/draft.tok"; fi
if grep -qE '"spec_draft_tokens":[1-9]' "$TMP/out"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: no drafts"; cat "$TMP/out"; fi
check "make induction model" 0 "$KVF" make-model --induction --out "$TMP/induct.gguf" --vocab-from "$SHARED/models/stories260K.gguf"
INDUCT_PROMPT="Tom had a red ball and a blue kite. Tom had a red ball and a blue kite. Tom had a red"
check "induction plain" 0 "$KVF" run --model "$TMP/induct.gguf" --prompt "$INDUCT_PROMPT" --temperature 0 --max-tokens 40 --ignore-eos --json
spec_tokens >"$TMP/iplain.tok"
check "induction ngram" 0 "$KVF" run --model "$TMP/induct.gguf" --prompt "$INDUCT_PROMPT" --temperature 0 --max-tokens 40 --ignore-eos --json --speculative-method ngram --num-speculative-tokens 6
spec_tokens >"$TMP/ingram.tok"
if cmp -s "$TMP/iplain.tok" "$TMP/ingram.tok"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: n-gram tokens differ"; cat "$TMP/iplain.tok" "$TMP/ingram.tok"; fi
if grep -qE '"spec_accepted_tokens":[1-9]' "$TMP/out"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: no n-gram draft kept"; cat "$TMP/out"; fi
check "bench throughput ngram" 0 "$KVF" bench throughput --workload fixed --num-prompts 4 --input-len 32 --output-len 16 --speculative-method ngram --no-progress --json
contains "bench reports drafts" "$TMP/out" '"spec_draft_tokens":'
check "draft of another vocabulary" 1 "$KVF" run --prompt hi --max-tokens 4 --model-draft "$SHARED/models/tiny-random-qwen2.gguf"
contains "vocabulary message" "$TMP/err" "same vocabulary"
check "bad spec method" 2 "$KVF" run --prompt hi --max-tokens 4 --speculative-method eagle
contains "spec method message" "$TMP/err" "speculative_method must be one of off, ngram, draft_model"
check "bad lookup range" 2 "$KVF" run --prompt hi --max-tokens 4 --speculative-method ngram --prompt-lookup-min 5 --prompt-lookup-max 2
check "offload bad disk size" 2 "$KVF" bench throughput --workload fixed --num-prompts 2 --input-len 8 --output-len 4 --kv-offload-disk "$TMP/t2:lots" --no-progress
contains "offload bad size message" "$TMP/err" "bad size 'lots'"
check "offload bad compression" 2 "$KVF" bench throughput --workload fixed --num-prompts 2 --input-len 8 --output-len 4 --kv-offload-ram 1MiB --kv-offload-compression gzip --no-progress
check "offload bad write policy" 2 "$KVF" bench throughput --workload fixed --num-prompts 2 --input-len 8 --output-len 4 --kv-offload-ram 1MiB --kv-offload-write sideways --no-progress
check "offload write-back" 0 "$KVF" bench throughput --workload fixed --num-prompts 2 --input-len 8 --output-len 4 --kv-offload-ram 1MiB --kv-offload-write back --no-progress
contains "offload write-back is logged" "$TMP/err" "write-back"
check "offload transcoded" 0 "$KVF" bench throughput --workload multi-turn --num-prompts 4 --turns 2 --input-len 48 --output-len 8 --kv-cache-memory 160KiB --kv-offload-ram 1MiB --kv-offload-chunk 32 --kv-offload-dtype q8_0 --no-progress
contains "offload transcoding is logged" "$TMP/err" "stored k f16 -> q8_0, v f16 -> q8_0"
check "offload bad dtype" 2 "$KVF" bench throughput --workload fixed --num-prompts 2 --input-len 8 --output-len 4 --kv-offload-ram 1MiB --kv-offload-dtype q9_9 --no-progress
contains "offload bad dtype message" "$TMP/err" "--kv-offload-dtype"
check "offload dtype not smaller" 1 "$KVF" bench throughput --workload fixed --num-prompts 2 --input-len 8 --output-len 4 --kv-offload-ram 1MiB --kv-offload-dtype bf16 --no-progress
contains "offload dtype not smaller message" "$TMP/err" "not smaller"
check "offload chunk not a block multiple" 1 "$KVF" bench throughput --workload fixed --num-prompts 2 --input-len 8 --output-len 4 --kv-offload-ram 1MiB --kv-offload-chunk 24 --no-progress
contains "offload chunk message" "$TMP/err" "multiple of block_size"
check "run bad kv dtype" 2 "$KVF" run --prompt "Hi" --kv-dtype q9_9
contains "bad kv dtype message" "$TMP/err" "unknown KV cache dtype 'q9_9'"
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
check "calc kvquant3" 0 "$KVF" calc --preset llama-3-8b --seq-len 8192 --kv-dtype kvquant3
contains "calc kvquant3 bits" "$TMP/out" "3.51562 bits per stored value"
contains "calc kvquant3 outliers" "$TMP/out" "sparse f16 outlier slots"
check "run kvquant3 kv" 0 "$KVF" run --prompt "Once upon a time" --temperature 0 --max-tokens 16 --kv-dtype kvquant3
contains "kvquant3 log" "$TMP/err" "kvquant3 calibrated on"
check "eval kv kvquant3 save" 0 "$KVF" eval kv --text "$SHARED/models/tinystories-val-head.txt" --kv-dtype kvquant3 --kv-scales calibrate --ctx 64 --chunks 1 --prompts 1 --gen-tokens 8 --json --save-kv-scales "$TMP/kq3.txt"
contains "kvquant3 calibration file" "$TMP/kq3.txt" "kvforge-kvquant-calib 1"
check "eval kv kvquant3 post-rope ablation" 0 "$KVF" eval kv --text "$SHARED/models/tinystories-val-head.txt" --kv-dtype kvquant3 --kvquant-post-rope --ctx 64 --chunks 1 --prompts 1 --gen-tokens 8 --json
check "run kvquant3 loaded" 0 "$KVF" run --prompt "Hi" --max-tokens 4 --kv-dtype kvquant3 --kv-scales "$TMP/kq3.txt"
contains "kvquant3 loaded log" "$TMP/err" "kvquant3 calibration loaded from a file"
check "qjl needs turbo keys" 1 "$KVF" run --prompt "Hi" --max-tokens 4 --kv-dtype q8_0 --kv-turbo-qjl
contains "qjl needs turbo keys message" "$TMP/err" "applies to turbo3 / turbo4 keys"
check "run kvquant3 bad file" 1 "$KVF" run --prompt "Hi" --max-tokens 4 --kv-dtype kvquant3 --kv-scales "$TMP/nope.txt"
# TurboQuant rows: 4 KV heads x 8, turbo4 = 16 B codes + 4 f16 norms per layer per K/V (5 layers);
# QJL keys: 12 B codes + 4 B signs + 4 x (2 f16 norms).
check "run turbo3 kv" 0 "$KVF" run --prompt "Once upon a time" --temperature 0 --max-tokens 8 --kv-dtype turbo3
contains "run turbo3 log line" "$TMP/err" "KV cache: turbo3, 200 B/token incl. scales"
contains "run turbo3 format" "$TMP/err" "turbo format v1"
check "eval kv turbo qjl" 0 "$KVF" eval kv --text "$SHARED/models/tinystories-val-head.txt" --kv-dtype turbo4 --kv-turbo-qjl --ctx 64 --chunks 1 --prompts 1 --gen-tokens 8 --json
contains "eval kv turbo dtype" "$TMP/out" '"kv_dtype":"k=turbo4+qjl,v=turbo4","baseline_dtype":"f32","bytes_per_token":280'
# KV eviction (docs/kv_cache.md#eviction).
check "run streaming past the context" 0 "$KVF" run --prompt "Once upon a time" --temperature 0 --max-tokens 1000 --ignore-eos --ctx 128 --kv-policy streaming --kv-budget 48 --json
contains "streaming generated 1000" "$TMP/out" '"finish_reason":"length"'
python3 - "$TMP/out" <<'PYEOF' && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: streaming KV bound"; }
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["tokens"]) == 1000 and d["kv_peak_tokens"] <= 64 and d["kv_evicted_tokens"] > 900, d
PYEOF
check "run snapkv fraction" 0 "$KVF" run --prompt "Once upon a time, there was a little girl named Lily. She loved to play outside in the park." --temperature 0 --max-tokens 16 --kv-policy snapkv --kv-budget 0.5 --kv-window 8
contains "snapkv eviction line" "$TMP/err" "KV eviction:"
check "run snapkv per-head" 0 "$KVF" run --prompt "Once upon a time, there was a little girl named Lily. She loved to play outside in the park." --temperature 0 --max-tokens 16 --kv-policy snapkv --kv-budget 0.5 --kv-window 8 --kv-heads per_head
check "kv-heads unknown" 2 "$KVF" run --prompt "Once" --max-tokens 2 --kv-policy snapkv --kv-budget 8 --kv-heads sideways
contains "kv-heads unknown names the choices" "$TMP/err" "per_head"
check "kv-heads q8_0 spans heads" 1 "$KVF" run --prompt "Once" --max-tokens 2 --kv-policy snapkv --kv-budget 8 --kv-heads adaptive --kv-dtype q8_0
contains "kv-heads q8_0 message" "$TMP/err" "share bytes between KV heads"
check "run quest sparse decode" 0 "$KVF" run --prompt "Once upon a time" --temperature 0 --max-tokens 200 --ignore-eos --kv-policy quest --kv-budget 48 --json
contains "quest evicts nothing" "$TMP/out" '"kv_evicted_tokens":0'
check "run nsa sparse decode" 0 "$KVF" run --prompt "Once upon a time" --temperature 0 --max-tokens 200 --ignore-eos --kv-policy nsa --kv-budget 128 --kv-window 32
check "bench latency quest" 0 "$KVF" bench latency --n-prompt 0 --n-gen 8 --depth 256 --repetitions 1 --no-bandwidth --kv-policy quest --kv-budget 64
check "bench latency compare quest" 0 "$KVF" bench latency --n-prompt 0 --n-gen 4 --depth 256 --repetitions 2 --no-bandwidth --kv-policy quest --kv-budget 64 --compare-kv-policy --json
contains "bench latency compare rounds" "$TMP/out" '"rounds":[{"dense":'
check "bench latency compare needs sparse" 2 "$KVF" bench latency --n-prompt 0 --n-gen 4 --repetitions 1 --no-bandwidth --compare-kv-policy
check "bench latency compare no pp" 2 "$KVF" bench latency --n-gen 4 --repetitions 1 --no-bandwidth --kv-policy quest --kv-budget 64 --compare-kv-policy
check "bench latency compare random fill" 0 "$KVF" bench latency --n-prompt 0 --n-gen 2 --depth 128 --repetitions 1 --no-bandwidth --kv-policy quest --kv-budget 48 --compare-kv-policy --also-kv-policy nsa --fill random
contains "bench latency compare two policies" "$TMP/out" "nsa / dense ="
check "bench latency pp peak" 0 "$KVF" bench latency --n-prompt 64 --n-gen 4 --repetitions 1 --no-bandwidth --json
python3 - "$TMP/out" <<'PY' && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: bench latency pp fraction of the FMA peak"; }
import json, sys
r = json.load(open(sys.argv[1]))
t = r["tests"][0]
assert r["fma_peak_gflop_per_s"] > 0 and t["matmul_gflop_per_s"] > 0, r
assert 0 < t["peak_fraction"] <= 1, t
assert r["tests"][1]["name"] == "tg4" and r["tests"][1]["peak_fraction"] == 0, r
PY
check "bench latency no peak" 0 "$KVF" bench latency --n-prompt 16 --n-gen 0 --repetitions 1 --no-bandwidth --no-peak
check "bench latency bad fill" 2 "$KVF" bench latency --n-prompt 0 --n-gen 2 --repetitions 1 --fill zeros
check "bench latency also needs compare" 2 "$KVF" bench latency --n-prompt 0 --n-gen 2 --repetitions 1 --no-bandwidth --kv-policy quest --kv-budget 48 --also-kv-policy nsa
check "eval stream streaming" 0 "$KVF" eval stream --text "$SHARED/models/tinystories-val-head.txt" --tokens 1200 --report-every 400 --ctx 256 --kv-policy streaming --kv-budget 64 --json
contains "eval stream windows" "$TMP/out" '"windows":[{"tokens":400,"window_ppl":'
check "eval stream past the context without a policy" 1 "$KVF" eval stream --text "$SHARED/models/tinystories-val-head.txt" --tokens 600 --ctx 256
check "eval stream bad tokens" 2 "$KVF" eval stream --text "$SHARED/models/tinystories-val-head.txt" --tokens 1
check "bench latency refuses eviction" 2 "$KVF" bench latency --n-prompt 0 --n-gen 8 --repetitions 1 --no-bandwidth --kv-policy h2o --kv-budget 64
check "run bad kv policy" 2 "$KVF" run --prompt "Hi" --kv-policy lru --kv-budget 8
contains "bad kv policy lists names" "$TMP/err" "none, streaming, h2o, tova, knorm, snapkv, pyramidkv, random, quest, nsa"
check "run kv policy without budget" 2 "$KVF" run --prompt "Hi" --kv-policy h2o
check "run kv budget without policy" 2 "$KVF" run --prompt "Hi" --kv-budget 8
check "run bad kv pool kernel" 2 "$KVF" run --prompt "Hi" --kv-policy snapkv --kv-budget 8 --kv-pool-kernel 4
check "eval ppl refuses eviction" 2 "$KVF" eval ppl --text "$SHARED/models/tinystories-val-head.txt" --ctx 64 --chunks 1 --kv-policy h2o --kv-budget 16
check "eval kv with a policy" 0 "$KVF" eval kv --text "$SHARED/models/tinystories-val-head.txt" --ctx 128 --chunks 1 --prompts 1 --gen-tokens 8 --kv-policy h2o --kv-budget 32 --json
contains "eval kv policy fields" "$TMP/out" '"kv_policy":"h2o","kv_budget":32,"kept_fraction":{"streaming":0.'
check "bench throughput with a policy" 0 "$KVF" bench throughput --workload fixed --num-prompts 2 --input-len 64 --output-len 8 --kv-policy snapkv --kv-budget 0.25 --no-progress
# Passkey retrieval on the hand-set induction-head model: full KV retrieves every key; a
# StreamingLLM window of 64 tokens loses the keys planted before it; quest keeps them all.
check "make-model induction" 0 "$KVF" make-model --induction --ctx 1024 --out "$TMP/ind.gguf"
contains "make-model induction margins" "$TMP/err" "logit margins: position 30.0"
check "make-model induction fixed shape" 2 "$KVF" make-model --induction --dim 128 --out "$TMP/x.gguf"
check "make-model induction bad ctx" 2 "$KVF" make-model --induction --ctx 1000000 --out "$TMP/x.gguf"
check "passkey full KV" 0 "$KVF" eval passkey --model "$TMP/ind.gguf" --context-tokens 512 --n-depths 5 --trials 2 --json
contains "passkey full KV accuracy" "$TMP/out" '"accuracy":1.000000,"digit_accuracy":1.000000'
contains "passkey per depth" "$TMP/out" '"depths":[{"depth":0.0000,"accuracy":1.000000'
check "passkey streaming" 0 "$KVF" eval passkey --model "$TMP/ind.gguf" --context-tokens 512 --n-depths 5 --trials 2 --kv-policy streaming --kv-budget 64 --json
contains "passkey streaming loses early keys" "$TMP/out" '"kv_policy":"streaming","kv_budget":64,"kv_dtype":"auto","accuracy":0.2'
check "passkey quest" 0 "$KVF" eval passkey --model "$TMP/ind.gguf" --context-tokens 512 --n-depths 3 --trials 1 --kv-policy quest --kv-budget 64 --json
contains "passkey quest retrieves" "$TMP/out" '"accuracy":1.000000'
check "passkey text" 0 "$KVF" eval passkey --model "$TMP/ind.gguf" --context-tokens 256 --n-depths 2 --trials 1
contains "passkey text summary" "$TMP/out" "accuracy 1.0000 (2/2)"
check "passkey too short" 2 "$KVF" eval passkey --model "$TMP/ind.gguf" --context-tokens 40
check "passkey bad depths" 2 "$KVF" eval passkey --model "$TMP/ind.gguf" --n-depths 0
check "passkey bad policy" 2 "$KVF" eval passkey --model "$TMP/ind.gguf" --kv-policy lru --kv-budget 8
check "calc turbo3" 0 "$KVF" calc --preset llama-3-8b --seq-len 1024 --kv-dtype turbo3
contains "calc turbo3 bits" "$TMP/out" "3.125 bits per stored value"

# deepseek2 (MLA + MoE): the survey's DeepSeek-V3 figures, calc equal to what the engine allocates,
# make-model in its forms, and the latent dtypes refused with a message.
check "calc deepseek-v3" 0 "$KVF" calc --preset deepseek-v3 --seq-len 4096
contains "calc deepseek-v3 per layer" "$TMP/out" "61 layers x 1152 bytes (latent 512 + 64 = 576 values)"
contains "calc deepseek-v3 ratio" "$TMP/out" "56.9x less"
contains "calc deepseek-v3 4K" "$TMP/out" "(287834112 bytes)"
check "calc deepseek-v3 128K" 0 "$KVF" calc --preset deepseek-v3 --seq-len 131072
contains "calc deepseek-v3 128K total" "$TMP/out" "8.57812 GiB"
check "calc deepseek-v3 1M" 0 "$KVF" calc --preset deepseek-v3 --seq-len 1048576
contains "calc deepseek-v3 1M total" "$TMP/out" "68.625 GiB"
DS="$SHARED/models/tiny-random-deepseek2-moe.gguf"
check "calc deepseek2 model" 0 "$KVF" calc --model "$DS" --seq-len 1024
contains "calc deepseek2 paged" "$TMP/out" "64 blocks/seq of 16 tokens x 6144 bytes (1536 bytes row padding) = 0.000366211 GiB = 0.375 MiB (393216 bytes)"
check "run deepseek2" 0 "$KVF" run --model "$DS" --prompt "Once upon a time" --max-tokens 8 --temperature 0 --ctx 1024
contains "engine allocates what calc says" "$TMP/err" "288 B/token incl. scales"
contains "engine allocates what calc says (bytes)" "$TMP/err" "64 blocks x 16 tokens = 1024 tokens, 384 KiB (393216 bytes)"
check "run deepseek2 kivi" 1 "$KVF" run --model "$DS" --prompt "Once" --max-tokens 2 --kv-dtype kivi4
contains "deepseek2 kivi refused" "$TMP/err" "KIVI is defined for separate K and V heads, not for an MLA latent"
check "run deepseek2 turbo" 1 "$KVF" run --model "$DS" --prompt "Once" --max-tokens 2 --kv-dtype turbo3
contains "deepseek2 turbo refused" "$TMP/err" "an MLA latent's value is only its first kv_lora_rank values"
for form in "--q-lora-rank 0" "--q-lora-rank 64 --experts 8 --experts-used 2 --shared-experts 1 --sigmoid-gating"; do
  # shellcheck disable=SC2086
  check "make-model deepseek2 $form" 0 "$KVF" make-model --arch deepseek2 --dim 128 --layers 2 --heads 4 --kv-lora-rank 64 --qk-rope-dim 32 $form --dtype q8_0 --out "$TMP/ds.gguf"
  check "run made deepseek2 $form" 0 "$KVF" run --model "$TMP/ds.gguf" --prompt "Once" --max-tokens 4 --kv-dtype q8_0
done
# A real `kvforge serve` process on the MoE model, over HTTP: the completion is `run`'s greedy text.
check "run deepseek2 greedy" 0 "$KVF" run --model "$DS" --prompt "Once upon a time" --max-tokens 12 --temperature 0
RUN_TEXT="$(cat "$TMP/out")"
for form in absorbed naive; do  # the forced forms give the same greedy text on an f32 cache
  check "run deepseek2 --mla-attention $form" 0 "$KVF" run --model "$DS" --prompt "Once upon a time" --max-tokens 12 --temperature 0 --kv-dtype f32 --mla-attention $form
  cp "$TMP/out" "$TMP/mla-$form.txt"
done
if cmp -s "$TMP/mla-absorbed.txt" "$TMP/mla-naive.txt"; then pass=$((pass + 1)); else
  fail=$((fail + 1)); echo "FAIL: deepseek2 absorbed and naive texts differ"; fi
check "run deepseek2 bad --mla-attention" 2 "$KVF" run --model "$DS" --prompt "Once" --max-tokens 2 --mla-attention sideways
contains "bad --mla-attention message" "$TMP/err" "mla_attention must be one of auto, absorbed, naive"
"$KVF" serve --model "$DS" --port 0 >"$TMP/serve.out" 2>"$TMP/serve.err" &
SERVE_PID=$!
URL=""
for _ in $(seq 1 200); do  # at most 20 s for the listening line
  URL="$(grep -o 'http://127.0.0.1:[0-9]*' "$TMP/serve.err" | head -1)"
  [[ -n "$URL" ]] && break
  sleep 0.1
done
if [[ -z "$URL" ]]; then
  fail=$((fail + 1)); echo "FAIL: deepseek2 serve did not start"; head -c 600 "$TMP/serve.err"
else
  check "deepseek2 serve completion" 0 curl -sf --max-time 60 "$URL/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt":"Once upon a time","max_tokens":12,"temperature":0}'
  GOT="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"], end="")' "$TMP/out")"
  if [[ "Once upon a time$GOT" == "$RUN_TEXT" ]]; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: deepseek2 serve text '$GOT' is not run's '$RUN_TEXT'"; fi
  check "deepseek2 serve bad kv policy" 22 curl -sf --max-time 60 "$URL/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt":"Once","max_tokens":2,"kv_policy":{"name":"h2o","budget":0}}'
  check "deepseek2 serve h2o" 0 curl -sf --max-time 60 "$URL/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt":"Once upon a time there was","max_tokens":8,"kv_policy":{"name":"h2o","budget":4,"window":2}}'
fi
kill "$SERVE_PID" 2>/dev/null
wait "$SERVE_PID" 2>/dev/null
check "make-model deepseek2 bad rope" 2 "$KVF" make-model --arch deepseek2 --qk-rope-dim 3 --out "$TMP/ds.gguf"
contains "make-model deepseek2 bad rope message" "$TMP/err" "RoPE width even"

# The shared Redis tier. A dead URL is a clear start-up error; with the suite's redis-server
# (scripts/with_redis.sh sets KVF_REDIS_URL), instance B serves a long prompt from what instance A
# stored, with A's text, and says so on /metrics.
DEAD_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
check "offload redis unreachable" 1 "$KVF" bench throughput --workload fixed --num-prompts 2 --input-len 8 --output-len 4 --kv-offload-redis "redis://127.0.0.1:$DEAD_PORT" --no-progress
contains "offload redis unreachable message" "$TMP/err" "kv_offload_redis"
check "offload redis bad url" 1 "$KVF" bench throughput --workload fixed --num-prompts 2 --input-len 8 --output-len 4 --kv-offload-redis "127.0.0.1:6379" --no-progress
contains "offload redis bad url message" "$TMP/err" "redis://"
check "offload redis bad timeout" 2 "$KVF" bench throughput --workload fixed --num-prompts 2 --input-len 8 --output-len 4 --kv-offload-redis "redis://127.0.0.1:1" --kv-offload-redis-timeout 0 --no-progress
check "offload bad load timeout" 2 "$KVF" bench throughput --workload fixed --num-prompts 2 --input-len 8 --output-len 4 --kv-offload-ram 1MiB --kv-offload-load-timeout 0 --no-progress
contains "offload bad load timeout message" "$TMP/err" "kv-offload-load-timeout"
start_serve() {  # start_serve NAME ARGS...: sets SERVE_URL (empty on failure), SERVE_PID
  local name="$1"; shift
  "$KVF" serve --port 0 "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  SERVE_PID=$!
  SERVE_URL=""
  for _ in $(seq 1 200); do  # at most 20 s for the listening line
    SERVE_URL="$(grep -o 'http://127.0.0.1:[0-9]*' "$TMP/$name.err" | head -1)"
    [[ -n "$SERVE_URL" ]] && break
    sleep 0.1
  done
}
# serve with prompt lookup: completions are the plain tokens, /metrics counts the drafts.
start_serve "spec" --speculative-method ngram --num-speculative-tokens 6 --threads 1
if [[ -z "$SERVE_URL" ]]; then
  fail=$((fail + 1)); echo "FAIL: serve with speculative decoding did not start"; head -c 600 "$TMP/spec.err"
else
  SPEC_BODY='{"prompt":"The cat sat on the mat. The cat sat on the mat. The cat sat on the","max_tokens":24,"temperature":0}'
  curl -s --max-time 60 "$SERVE_URL/v1/completions" -H 'Content-Type: application/json' -d "$SPEC_BODY" >"$TMP/spec.json"
  contains "spec completion" "$TMP/spec.json" '"text"'
  curl -s --max-time 10 "$SERVE_URL/metrics" >"$TMP/spec.metrics"
  contains "spec metrics" "$TMP/spec.metrics" "kvforge_spec_decode_num_draft_tokens_total"
  check "plain run of the same prompt" 0 "$KVF" run --prompt "The cat sat on the mat. The cat sat on the mat. The cat sat on the" --max-tokens 24 --temperature 0 --threads 1 --json
  PLAIN_TEXT="$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().split("\n")[0])["text"])' "$TMP/out" 2>/dev/null)"
  SPEC_TEXT="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$TMP/spec.json" 2>/dev/null)"
  if [[ -n "$PLAIN_TEXT" && "$PLAIN_TEXT" == "$SPEC_TEXT" ]]; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: served speculative text differs: '$SPEC_TEXT' vs '$PLAIN_TEXT'"; fi
  kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null
fi
if [[ -n "${KVF_REDIS_URL:-}" ]]; then
  LONG_PROMPT="Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. One day, she saw a big tree with a swing. She ran to the swing and sat on it. She swung high and low, and she laughed."
  BODY="$(python3 -c 'import json,sys; print(json.dumps({"prompt":sys.argv[1],"max_tokens":8,"temperature":0}))' "$LONG_PROMPT")"
  # A fresh namespace of keys for this run: a salt-free key depends only on model and tokens, so
  # flush what an earlier run against the same server left.
  redis-cli -u "$KVF_REDIS_URL" flushall >/dev/null 2>&1 || true
  TEXTS=()
  for inst in a b; do
    start_serve "redis-$inst" --kv-offload-redis "$KVF_REDIS_URL" --kv-offload-chunk 16
    if [[ -z "$SERVE_URL" ]]; then
      fail=$((fail + 1)); echo "FAIL: serve $inst with redis did not start"; head -c 600 "$TMP/redis-$inst.err"
    else
      contains "serve $inst logs the redis tier" "$TMP/redis-$inst.err" "redis 127.0.0.1:"
      check "serve $inst redis completion" 0 curl -sf --max-time 60 "$SERVE_URL/v1/completions" -H 'Content-Type: application/json' -d "$BODY"
      TEXTS+=("$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"], end="")' "$TMP/out")")
      check "serve $inst redis metrics" 0 curl -sf --max-time 10 "$SERVE_URL/metrics"
      cp "$TMP/out" "$TMP/redis-$inst.metrics"
    fi
    kill "$SERVE_PID" 2>/dev/null
    wait "$SERVE_PID" 2>/dev/null  # A's writer finishes its queue before it exits
  done
  if [[ "${#TEXTS[@]}" == 2 && "${TEXTS[0]}" == "${TEXTS[1]}" ]]; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: instance B's text differs from A's: ${TEXTS[*]}"; fi
  HITS="$(grep -E '^kvforge_kv_tier_hits_total\{tier="redis"\}' "$TMP/redis-b.metrics" | awk '{print $2}')"
  if [[ -n "$HITS" ]] && python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$HITS"; then
    pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: instance B had no redis hits ($HITS)"; grep kv_tier "$TMP/redis-b.metrics" | head; fi
  contains "serve b reports load waits" "$TMP/redis-b.metrics" "kvforge_kv_offload_load_waits_total"
  contains "serve b reports load timeouts" "$TMP/redis-b.metrics" "kvforge_kv_offload_load_timeouts_total"
else
  echo "note: KVF_REDIS_URL not set (run under scripts/with_redis.sh): shared-Redis serve checks skipped"
fi
# kvforge route over two real `kvforge serve` workers: one prompt keeps going to the worker that
# cached it (its second answer reports cached tokens), streaming passes through with the direct
# text, a killed worker's requests go to the other, and with no worker left the router says 503.
check "route no workers" 2 "$KVF" route --port 0
check "route bad policy" 2 "$KVF" route --port 0 --workers http://127.0.0.1:1 --policy random
start_serve "rw1" --threads 1
W1_URL="$SERVE_URL"; W1_PID=$SERVE_PID
start_serve "rw2" --threads 1
W2_URL="$SERVE_URL"; W2_PID=$SERVE_PID
"$KVF" route --port 0 --workers "$W1_URL,$W2_URL" --health-interval-ms 100 >"$TMP/route.out" 2>"$TMP/route.err" &
ROUTE_PID=$!
R_URL=""
for _ in $(seq 1 200); do
  R_URL="$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$TMP/route.err" | grep -o 'http://.*' | head -1)"
  [[ -n "$R_URL" ]] && break
  sleep 0.1
done
if [[ -z "$W1_URL" || -z "$W2_URL" || -z "$R_URL" ]]; then
  fail=$((fail + 1)); echo "FAIL: route or its workers did not start"; head -c 600 "$TMP/route.err"
else
  ROUTE_BODY='{"prompt":"Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine with her dog.","max_tokens":6,"temperature":0}'
  WORKERS_SEEN=()
  for i in 1 2 3; do
    curl -s -D "$TMP/route.h$i" --max-time 60 "$R_URL/v1/completions" -H 'Content-Type: application/json' -d "$ROUTE_BODY" >"$TMP/route.b$i"
    WORKERS_SEEN+=("$(grep -i '^x-kvforge-worker:' "$TMP/route.h$i" | tr -d '\r' | awk '{print $2}')")
  done
  if [[ -n "${WORKERS_SEEN[0]}" && "${WORKERS_SEEN[0]}" == "${WORKERS_SEEN[1]}" && "${WORKERS_SEEN[1]}" == "${WORKERS_SEEN[2]}" ]]; then
    pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: one prompt went to different workers: ${WORKERS_SEEN[*]}"; fi
  CACHED="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens_details"]["cached_tokens"])' "$TMP/route.b2")"
  if [[ "$CACHED" -gt 0 ]]; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: the second routed request had no cached tokens ($CACHED)"; fi
  DIRECT="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"], end="")' "$TMP/route.b1")"
  STREAM_BODY='{"prompt":"Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine with her dog.","max_tokens":6,"temperature":0,"stream":true}'
  curl -sN --max-time 60 "$R_URL/v1/completions" -H 'Content-Type: application/json' -d "$STREAM_BODY" >"$TMP/route.sse"
  STREAMED="$(python3 -c '
import json, sys
text = ""
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("data: ") and line != "data: [DONE]":
        text += json.loads(line[6:])["choices"][0]["text"]
print(text, end="")' "$TMP/route.sse")"
  if [[ "$STREAMED" == "$DIRECT" ]] && grep -q '^data: \[DONE\]' "$TMP/route.sse"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: routed stream '$STREAMED' is not the routed text '$DIRECT'"; fi
  check "route workers json" 0 curl -sf --max-time 10 "$R_URL/workers"
  contains "route workers lists cache routing" "$TMP/out" '"routed_by_cache":3'
  check "route metrics" 0 curl -sf --max-time 10 "$R_URL/metrics"
  contains "route metrics family" "$TMP/out" "kvforge_router_requests_total"
  # Kill the worker that has the prompt: the next request is answered by the other one.
  if [[ "${WORKERS_SEEN[0]}" == "$W1_URL" ]]; then kill -9 "$W1_PID"; wait "$W1_PID" 2>/dev/null; ALIVE="$W2_URL"; else
    kill -9 "$W2_PID"; wait "$W2_PID" 2>/dev/null; ALIVE="$W1_URL"; fi
  curl -s -D "$TMP/route.h4" --max-time 60 "$R_URL/v1/completions" -H 'Content-Type: application/json' -d "$ROUTE_BODY" >"$TMP/route.b4"
  if grep -qi "^x-kvforge-worker: $ALIVE" "$TMP/route.h4" && grep -q '"text"' "$TMP/route.b4"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: after a worker died the request did not go to $ALIVE"; cat "$TMP/route.h4" "$TMP/route.b4"; fi
  kill -9 "$W1_PID" "$W2_PID" 2>/dev/null; wait "$W1_PID" "$W2_PID" 2>/dev/null
  DOWN=0
  for _ in $(seq 1 100); do  # at most 10 s for the health checks to notice
    if [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$R_URL/health")" == 503 ]]; then DOWN=1; break; fi
    sleep 0.1
  done
  if [[ "$DOWN" == 1 ]]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: route /health not 503 with no worker"; fi
  check "route no worker left" 22 curl -sf --max-time 10 "$R_URL/v1/completions" -H 'Content-Type: application/json' -d "$ROUTE_BODY"
fi
kill "$ROUTE_PID" "$W1_PID" "$W2_PID" 2>/dev/null
wait "$ROUTE_PID" 2>/dev/null
echo "$pass passed, $fail failed"
[[ "$fail" == 0 ]]
