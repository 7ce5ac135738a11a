#!/usr/bin/env bash
# deploy/systemd/kvforge.service and deploy/kvforge.yaml. Usage:
#   systemd_unit_test.sh KVFORGE DEPLOY_DIR [DATA_DIR]
# - `systemd-analyze verify` on a copy of the unit whose ExecStart runs KVFORGE: exit status 0
#   and no output at all (verify reports unknown keys and bad values as warnings, exit 0).
# - The unit keeps its service settings and sandboxing (a list of required lines).
# - MemoryDenyWriteExecute=yes is compatible with the binary: under the kernel's equivalent
#   (prctl PR_SET_MDWE, Linux 6.3+) `kvforge run` and BPE tokenization (PCRE2, whose JIT is then
#   refused) give the same output as without it. Skipped with a note on older kernels.
# - Where this kvforge has --config: every key of deploy/kvforge.yaml (commented ones too) is a
#   `kvforge serve` flag, `serve --config deploy/kvforge.yaml --print-engine-config` accepts it,
#   and a server started from it (host, model and sizes overridden) serves the configured model
#   name and CORS origin (under MDWE where the kernel has it) and exits 0 on SIGTERM.
# Exits 77 (skipped) when systemd-analyze is not installed.
set -u
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "SKIP: systemd-analyze not installed"
  exit 77
fi
KVF="$(readlink -f "$1")"
DEPLOY="$2"
DATA="${KVF_SHARED_DIR:-${3:-}}"
UNIT="$DEPLOY/systemd/kvforge.service"
CONFIG="$DEPLOY/kvforge.yaml"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# --- systemd-analyze verify
want_exec='ExecStart=/usr/local/bin/kvforge serve --config /etc/kvforge/kvforge.yaml'
grep -qxF "$want_exec" "$UNIT" || bad "the unit's ExecStart is not '$want_exec'"
sed "s#^ExecStart=/usr/local/bin/kvforge #ExecStart=$KVF #" "$UNIT" >"$TMP/kvforge.service"
grep -q "^ExecStart=$KVF serve " "$TMP/kvforge.service" || bad "ExecStart was not pointed at $KVF"
out="$(timeout 60 systemd-analyze verify "$TMP/kvforge.service" 2>&1)"
rc=$?
if [[ $rc != 0 || -n "$out" ]]; then
  bad "systemd-analyze verify exited $rc with output:"
  printf '%s\n' "$out"
else
  echo "ok: systemd-analyze verify (no warnings)"
fi

# --- required settings
for line in User=kvforge Group=kvforge Restart=on-failure KillSignal=SIGTERM \
  NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes PrivateDevices=yes \
  ProtectKernelTunables=yes ProtectKernelModules=yes ProtectKernelLogs=yes \
  'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX' MemoryDenyWriteExecute=yes \
  SystemCallFilter=@system-service StateDirectory=kvforge CacheDirectory=kvforge; do
  grep -qxF "$line" "$UNIT" || bad "the unit lacks '$line'"
done
for key in TimeoutStopSec LimitNOFILE; do
  grep -q "^$key=" "$UNIT" || bad "the unit sets no $key"
done
[[ $fail == 0 ]] && echo "ok: required unit settings"

# --- MemoryDenyWriteExecute: the same results under the kernel's W^X refusal
# mdwe CMD...: execs CMD (same process) with PR_SET_MDWE(PR_MDWE_REFUSE_EXEC_GAIN); 125 if the
# kernel lacks it.
cat >"$TMP/mdwe.py" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(65, 1, 0, 0, 0) != 0:
    sys.exit(125)
os.execv(sys.argv[1], sys.argv[1:])
PY
mdwe() { python3 "$TMP/mdwe.py" "$@"; }
MDWE=()  # the prefix that runs a command under MDWE, where the kernel has it
if ! command -v python3 >/dev/null 2>&1; then
  echo "note: python3 missing: MemoryDenyWriteExecute check skipped"
elif ! mdwe /bin/true; then
  echo "note: this kernel has no PR_SET_MDWE: MemoryDenyWriteExecute check skipped"
elif ! mdwe "$(command -v python3)" -c 'import mmap; mmap.mmap(-1, 4096, prot=7)' 2>/dev/null; then
  MDWE=(python3 "$TMP/mdwe.py")
  checks=0
  fail_before_mdwe=$fail
  run_both() {  # run_both NAME STDIN CMD...
    local name="$1" input="$2"
    shift 2
    "$@" <"$input" >"$TMP/plain.out" 2>"$TMP/plain.err"
    local rc1=$?
    mdwe "$@" <"$input" >"$TMP/mdwe.out" 2>"$TMP/mdwe.err"
    local rc2=$?
    if [[ $rc1 != 0 || $rc2 != 0 ]]; then
      bad "$name: exit $rc1 plain, $rc2 under MDWE"
      head -c 400 "$TMP/mdwe.err"
    elif ! cmp -s "$TMP/plain.out" "$TMP/mdwe.out" || [[ ! -s "$TMP/plain.out" ]]; then
      bad "$name: the output differs under MDWE"
    else
      checks=$((checks + 1))
    fi
  }
  run_both "run" /dev/null "$KVF" run --prompt "Once upon a time" --max-tokens 16 --temperature 0 --threads 1
  if [[ -n "$DATA" && -d "$DATA/tokenizer-tests" ]]; then
    for v in llama-bpe gpt-2 deepseek-coder; do
      f="$DATA/tokenizer-tests/ggml-vocab-$v.gguf"
      [[ -f "$f" && -f "$f.inp" ]] || continue
      run_both "tokenize $v" "$f.inp" "$KVF" tokenize --model "$f" --no-special
    done
  else
    echo "note: no DATA_DIR/tokenizer-tests: BPE tokenization under MDWE not checked"
  fi
  [[ $fail == "$fail_before_mdwe" ]] &&
    echo "ok: $checks runs give the same output under MemoryDenyWriteExecute's kernel equivalent"
else
  echo "note: PR_SET_MDWE did not refuse a W+X mapping: MemoryDenyWriteExecute check skipped"
fi

# --- deploy/kvforge.yaml against the flags of this kvforge
"$KVF" serve --help >"$TMP/help" 2>&1
if grep -q -- '--config' "$TMP/help"; then
  keys="$(sed -nE 's/^#? ?([a-z][a-z0-9-]*):( .*)?$/\1/p' "$CONFIG" | sort -u)"
  [[ -n "$keys" ]] || bad "no keys found in $CONFIG"
  for k in $keys; do
    grep -qE -- "^ +--$k([ =[]|$)" "$TMP/help" || bad "$CONFIG: '$k' is not a kvforge serve flag"
  done
  # The file as shipped (its model path need not exist to print the configuration).
  if "$KVF" serve --config "$CONFIG" --print-engine-config >"$TMP/cfg.json" 2>"$TMP/cfg.err"; then
    grep -q '"model":"/var/lib/kvforge/model.gguf"' "$TMP/cfg.json" ||
      bad "--config $CONFIG did not set the model: $(head -c 300 "$TMP/cfg.json")"
    echo "ok: $CONFIG: $(echo $keys | wc -w) keys are serve flags; --config accepts the file"
  else
    bad "kvforge serve --config $CONFIG --print-engine-config failed: $(head -c 600 "$TMP/cfg.err")"
  fi
  # And it serves: the file with the host, the model and the sizes overridden on the command line
  # (the embedded model, a loopback ephemeral port, small pools): the served name and the CORS
  # origin come from the file. Under MDWE where the kernel has it, as the unit runs it.
  name="$(sed -nE 's/^served-model-name: *([^ #]+).*/\1/p' "$CONFIG")"
  origin="$(sed -nE 's/^allowed-origins: *\[ *"([^"]+)".*/\1/p' "$CONFIG")"
  "${MDWE[@]}" "$KVF" serve --config "$CONFIG" --model "" --host 127.0.0.1 --port 0 --max-model-len 0 \
    --kv-cache-memory-bytes 16MiB --kv-offload-ram-bytes 16MiB --kv-offload-disk "$TMP/kv:64MiB" \
    --threads 1 --no-webui >"$TMP/serve.out" 2>"$TMP/serve.err" &
  SERVE_PID=$!
  trap 'kill -9 $SERVE_PID 2>/dev/null; rm -rf "$TMP"' EXIT
  url=""
  for _ in $(seq 1 200); do  # at most 20 s for the listening line
    url="$(grep -o 'http://127.0.0.1:[0-9]*' "$TMP/serve.err" | head -1)"
    [[ -n "$url" ]] || ! kill -0 $SERVE_PID 2>/dev/null && break
    sleep 0.1
  done
  if [[ -z "$url" ]]; then
    bad "serve --config $CONFIG did not start: $(head -c 600 "$TMP/serve.err")"
  elif ! command -v curl >/dev/null 2>&1; then
    echo "note: curl missing: the served config was not queried"
  else
    curl -s --max-time 10 "$url/v1/models" >"$TMP/models" || bad "GET /v1/models failed"
    grep -qF "\"id\":\"$name\"" "$TMP/models" || bad "served model is not '$name': $(head -c 300 "$TMP/models")"
    curl -s -i --max-time 10 -X OPTIONS "$url/v1/completions" -H "Origin: $origin" \
      -H 'Access-Control-Request-Method: POST' >"$TMP/preflight" || bad "CORS preflight failed"
    grep -qiF "access-control-allow-origin: $origin" "$TMP/preflight" ||
      bad "no CORS allow for $origin from the config's allowed-origins: $(head -c 400 "$TMP/preflight")"
    [[ $fail == 0 ]] && echo "ok: serve --config $CONFIG serves '$name' and allows $origin${MDWE:+ (under MDWE)}"
  fi
  kill -TERM $SERVE_PID 2>/dev/null
  for _ in $(seq 1 100); do kill -0 $SERVE_PID 2>/dev/null || break; sleep 0.1; done
  if kill -0 $SERVE_PID 2>/dev/null; then
    bad "serve was still running 10 s after SIGTERM"
    kill -9 $SERVE_PID 2>/dev/null
  fi
  wait $SERVE_PID 2>/dev/null
  rc=$?
  [[ -z "$url" || $rc == 0 ]] || bad "serve exited $rc on SIGTERM (the unit expects 0)"
else
  echo "note: this kvforge has no --config flag yet: $CONFIG not checked"
fi

if [[ $fail != 0 ]]; then
  echo "$fail failure(s)"
  exit 1
fi
echo PASS
