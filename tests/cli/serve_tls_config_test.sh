#!/usr/bin/env bash
# `kvforge serve` in production shape: HTTPS with a certificate made here (curl --cacert), a plain
# HTTP request to the TLS port answered 400 in plain HTTP, unreadable or mismatched TLS files
# refused at start naming the file, and `--config FILE.yaml` (flags override it; unknown keys,
# nested values and syntax errors refused naming them). Usage: serve_tls_config_test.sh KVFORGE
# Every wait is bounded; exit 77 (skipped) only without openssl or curl.
set -u
KVF="$1"
command -v openssl >/dev/null && command -v curl >/dev/null || { echo "SKIP: needs openssl and curl"; exit 77; }
TMP="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$TMP"; }
trap cleanup EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() {  # check NAME EXPECTED_RC COMMAND...
  local name="$1" want="$2"
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [[ "$rc" == "$want" ]]; then ok; else bad "$name (exit $rc, wanted $want)"; head -c 600 "$TMP/err"; fi
}
contains() {  # contains NAME FILE TEXT
  if grep -qF -- "$3" "$2"; then ok; else bad "$1: '$3' not in $2"; head -c 600 "$2"; echo; fi
}
# start_serve LOG ARGS...: starts serve on an ephemeral port; sets URL once it listens (30 s).
start_serve() {
  local log="$1"
  shift
  "$KVF" serve "$@" >/dev/null 2>"$log" &
  PIDS+=($!)
  URL=""
  for _ in $(seq 300); do
    URL="$(grep -oE 'listening on https?://127\.0\.0\.1:[0-9]+' "$log" | head -1 | sed 's/listening on //')"
    [[ -n "$URL" ]] && return 0
    kill -0 "${PIDS[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  bad "serve $* did not start"; head -c 800 "$log"; echo
  return 1
}

# A CA and a server certificate it signs (so --cacert checks a real chain), and a second key.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/ca.key" -out "$TMP/ca.pem" -days 2 \
  -subj "/CN=kvforge test CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$TMP/server.key" -out "$TMP/server.csr" \
  -subj "/CN=127.0.0.1" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$TMP/san.ext"
openssl x509 -req -in "$TMP/server.csr" -CA "$TMP/ca.pem" -CAkey "$TMP/ca.key" -CAcreateserial \
  -out "$TMP/server.pem" -days 2 -extfile "$TMP/san.ext" 2>/dev/null
openssl genrsa -out "$TMP/other.key" 2048 2>/dev/null

# --- TLS -------------------------------------------------------------------------------------
if start_serve "$TMP/tls.log" --port 0 --ssl-certfile "$TMP/server.pem" --ssl-keyfile "$TMP/server.key"; then
  case "$URL" in https://*) ok ;; *) bad "TLS serve prints $URL, not https://" ;; esac
  check "https health" 0 curl -sf --max-time 30 --cacert "$TMP/ca.pem" "$URL/health"
  contains "https health body" "$TMP/out" '"status":"ok"'
  check "https completion" 0 curl -sf --max-time 60 --cacert "$TMP/ca.pem" "$URL/v1/completions" \
    -H 'Content-Type: application/json' -d '{"prompt":"Once upon a time","max_tokens":8,"temperature":0}'
  contains "https completion text" "$TMP/out" '"text_completion"'
  check "https stream" 0 curl -sfN --max-time 60 --cacert "$TMP/ca.pem" "$URL/v1/chat/completions" \
    -H 'Content-Type: application/json' \
    -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":8,"stream":true}'
  contains "https stream done" "$TMP/out" 'data: [DONE]'
  # Without the CA the certificate is not trusted: curl refuses (exit 60).
  check "untrusted certificate" 60 curl -sf --max-time 30 "$URL/health"
  PLAIN="${URL/https:/http:}"
  check "plain http to the TLS port" 22 curl -sf --max-time 30 "$PLAIN/health"
  curl -s --max-time 30 "$PLAIN/v1/models" >"$TMP/plain.out" 2>&1
  contains "plain http answered clearly" "$TMP/plain.out" "this server speaks HTTPS only"
  check "https after a plain request" 0 curl -sf --max-time 30 --cacert "$TMP/ca.pem" "$URL/health"
  kill -TERM "${PIDS[-1]}"
  wait "${PIDS[-1]}"
  rc=$?
  [[ "$rc" == 0 ]] && ok || bad "TLS serve exited $rc on SIGTERM"
fi
check "cert without key" 2 "$KVF" serve --port 0 --ssl-certfile "$TMP/server.pem"
contains "cert without key message" "$TMP/err" "both --ssl-certfile and --ssl-keyfile"
check "missing cert file" 2 "$KVF" serve --port 0 --ssl-certfile "$TMP/nope.pem" --ssl-keyfile "$TMP/server.key"
contains "missing cert names it" "$TMP/err" "$TMP/nope.pem"
check "key as certificate" 1 "$KVF" serve --port 0 --ssl-certfile "$TMP/server.key" --ssl-keyfile "$TMP/server.key"
contains "bad certificate names it" "$TMP/err" "cannot load the TLS certificate $TMP/server.key"
check "mismatched key" 1 "$KVF" serve --port 0 --ssl-certfile "$TMP/server.pem" --ssl-keyfile "$TMP/other.key"
contains "mismatched key names both" "$TMP/err" "$TMP/other.key"
check "llama.cpp spelling" 0 "$KVF" serve --help
contains "help lists the alias" "$TMP/out" "--ssl-cert-file"

# --- config file -----------------------------------------------------------------------------
cat >"$TMP/kvforge.yaml" <<'YAML'
# keys are flag names, with '-' or '_'
port: 0
served_model_name: from-config
max-num-seqs: 4
enable_prefix_caching: true
allowed-origins: ["http://a.example", "http://b.example"]
YAML
if start_serve "$TMP/cfg.log" --config "$TMP/kvforge.yaml"; then
  check "config models" 0 curl -sf --max-time 30 "$URL/v1/models"
  contains "config sets the name" "$TMP/out" '"id":"from-config"'
  check "config cors" 0 curl -sf -i --max-time 30 -H 'Origin: http://b.example' "$URL/health"
  contains "config list reaches the flag" "$TMP/out" "Access-Control-Allow-Origin: http://b.example"
fi
if start_serve "$TMP/cfg2.log" --config "$TMP/kvforge.yaml" --served-model-name from-flag; then
  check "flag over config" 0 curl -sf --max-time 30 "$URL/v1/models"
  contains "the flag wins" "$TMP/out" '"id":"from-flag"'
fi
printf 'port: 0\nbogus_key: 1\nalso-unknown: [1, 2]\n' >"$TMP/unknown.yaml"
check "unknown keys" 2 "$KVF" serve --config "$TMP/unknown.yaml"
contains "unknown keys named" "$TMP/err" "unknown keys 'bogus_key', 'also-unknown'"
printf 'port: [\n' >"$TMP/syntax.yaml"
check "yaml syntax error" 2 "$KVF" serve --config "$TMP/syntax.yaml"
contains "syntax error names the file" "$TMP/err" "syntax.yaml:"
printf 'port:\n  nested: 1\n' >"$TMP/nested.yaml"
check "nested value" 2 "$KVF" serve --config "$TMP/nested.yaml"
contains "nested value named" "$TMP/err" "'port' must be a scalar or a list of scalars"
printf 'no-webui: maybe\n' >"$TMP/switch.yaml"
check "bad switch value" 2 "$KVF" serve --config "$TMP/switch.yaml"
contains "switch value named" "$TMP/err" "'no-webui' is a switch"
printf 'port: 99999\n' >"$TMP/range.yaml"
check "bad value from config" 2 "$KVF" serve --config "$TMP/range.yaml"
check "missing config file" 2 "$KVF" serve --config "$TMP/absent.yaml"
contains "missing config named" "$TMP/err" "$TMP/absent.yaml"

echo "serve TLS/config: $pass passed, $fail failed"
[[ "$fail" == 0 ]]
