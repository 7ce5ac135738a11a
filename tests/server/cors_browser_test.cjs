// CORS in a real browser (ctest `cors_browser`): a page served from one origin calls a `kvforge
// serve` on another origin, in Debian's chromium (headless, puppeteer-core). The server allows
// only the first page's origin (--allowed-origins) and needs an API key, so the browser sends a
// preflight (OPTIONS) before each POST: from the allowed origin the chat completion, streamed and
// not, reaches the page; from a second origin the browser refuses the response. The server's
// /metrics shows the preflights answered (204) and refused (403). Bounded waits throughout.
// Exit 77 (ctest: skipped) only where chromium or puppeteer-core is missing.
//   node cors_browser_test.cjs KVFORGE NPM_PREFIX
"use strict";
const { spawn } = require("child_process");
const http = require("http");

const [kvforge, npmPrefix] = process.argv.slice(2);
if (!kvforge || !npmPrefix) {
  console.error("usage: cors_browser_test.cjs KVFORGE NPM_PREFIX");
  process.exit(2);
}
const { loadBrowser, fail } = require("./browser_env.cjs");
const { chromium, puppeteer } = loadBrowser(npmPrefix);

// A page server on an ephemeral loopback port: its origin is http://127.0.0.1:PORT.
function startPageServer() {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { "Content-Type": "text/html" });
    res.end("<!doctype html><title>client</title><p>another origin</p>");
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () =>
    resolve({ server, origin: "http://127.0.0.1:" + server.address().port })));
}

function startKvforge(allowedOrigin) {
  const proc = spawn(kvforge, ["serve", "--port", "0", "--api-key", "sekret", "--allowed-origins",
                               JSON.stringify([allowedOrigin])], { stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("kvforge serve did not listen within 30 s:\n" + err)), 30000);
    proc.stderr.on("data", (d) => {
      err += d.toString();
      const m = err.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) { clearTimeout(timer); resolve({ proc, url: m[1] }); }
    });
    proc.on("exit", (code) => { clearTimeout(timer); reject(new Error("kvforge serve exited " + code + ":\n" + err)); });
  });
}

// Runs in the page: a non-streamed and a streamed chat completion against `api`.
async function callFromPage(api) {
  const headers = { "Content-Type": "application/json", "Authorization": "Bearer sekret" };
  const body = (stream) => JSON.stringify({ messages: [{ role: "user", content: "Tell a story." }],
                                            max_tokens: 8, temperature: 0, stream });
  const out = {};
  try {
    const r = await fetch(api + "/v1/chat/completions", { method: "POST", headers, body: body(false) });
    out.status = r.status;
    out.text = (await r.json()).choices[0].message.content;
    const s = await fetch(api + "/v1/chat/completions", { method: "POST", headers, body: body(true) });
    const reader = s.body.getReader();
    const decoder = new TextDecoder();
    let sse = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      sse += decoder.decode(value, { stream: true });
    }
    out.streamText = sse.split("\n").filter((l) => l.startsWith("data: {"))
      .map((l) => JSON.parse(l.slice(6)).choices.map((c) => (c.delta && c.delta.content) || "").join(""))
      .join("");
    out.done = sse.includes("data: [DONE]");
  } catch (e) {
    out.error = String(e);
  }
  return out;
}

async function metric(url, name) {
  const res = await fetch(url + "/metrics");
  const line = (await res.text()).split("\n").find((l) => l.startsWith(name + " "));
  return line ? Number(line.split(" ")[1]) : 0;
}

async function withTimeout(promise, ms, what) {
  let timer;
  const t = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(what + " took over " + ms + " ms")), ms); });
  try { return await Promise.race([promise, t]); } finally { clearTimeout(timer); }
}

async function main() {
  const allowed = await startPageServer();
  const denied = await startPageServer();
  const { proc, url } = await startKvforge(allowed.origin);
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  try {
    const page = await browser.newPage();
    await page.goto(allowed.origin + "/", { waitUntil: "load", timeout: 30000 });
    const ok = await withTimeout(page.evaluate(callFromPage, url), 60000, "the allowed origin's calls");
    if (ok.error) fail("the allowed origin could not call the API: " + ok.error);
    if (ok.status !== 200) fail("allowed origin: status " + ok.status);
    if (!ok.text) fail("allowed origin: an empty reply");
    if (ok.streamText !== ok.text) fail("the streamed reply '" + ok.streamText + "' is not '" + ok.text + "'");
    if (!ok.done) fail("the stream did not end with [DONE]");

    const other = await browser.newPage();
    await other.goto(denied.origin + "/", { waitUntil: "load", timeout: 30000 });
    const no = await withTimeout(other.evaluate(callFromPage, url), 60000, "the other origin's call");
    if (!no.error) fail("a page from " + denied.origin + " read the reply: " + JSON.stringify(no));
    if (!/Failed to fetch/.test(no.error)) fail("unexpected error from the other origin: " + no.error);

    const answered = await metric(url, 'kvforge_http_requests_total{code="204"}');
    const refused = await metric(url, 'kvforge_http_requests_total{code="403"}');
    // One preflight: the browser caches its answer (Access-Control-Max-Age) for the second POST.
    if (answered < 1) fail("preflights answered 204: " + answered);
    if (refused < 1) fail("preflights refused 403: " + refused + " (expected at least 1)");
    // The server is still up after the refused origin, and names the allowed one (a script
    // cannot read Access-Control-Allow-Origin, so it is checked from here).
    const health = await fetch(url + "/health", { headers: { Origin: allowed.origin } });
    if (health.status !== 200) fail("health after the CORS calls: " + health.status);
    if (health.headers.get("access-control-allow-origin") !== allowed.origin)
      fail("Access-Control-Allow-Origin is " + health.headers.get("access-control-allow-origin"));
    console.log("PASS: CORS from " + allowed.origin + " allowed, from " + denied.origin + " refused; reply '" + ok.text + "'");
  } finally {
    await browser.close();
    proc.kill("SIGTERM");
    allowed.server.close();
    denied.server.close();
  }
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exitCode = 1;
});
