// The web page in a real browser (ctest `webui_browser`): starts `kvforge serve` on an
// ephemeral port, opens the page in Debian's chromium (headless, driven by puppeteer-core over
// CDP), sends a chat message and waits for the streamed reply, checks that the inspector shows
// the request's blocks while it runs and that the prefix hit count rises when the same system
// prompt is sent again, and saves screenshots. Every wait is bounded and fails with a message.
// Exit 77 (ctest: skipped) only where chromium or puppeteer-core is missing.
//   node webui_browser_test.cjs KVFORGE NPM_PREFIX SCREENSHOT_DIR
"use strict";
const { spawn } = require("child_process");
const fs = require("fs");
const path = require("path");

const [kvforge, npmPrefix, shotDir] = process.argv.slice(2);
if (!kvforge || !npmPrefix || !shotDir) {
  console.error("usage: webui_browser_test.cjs KVFORGE NPM_PREFIX SCREENSHOT_DIR");
  process.exit(2);
}
const { loadBrowser, fail } = require("./browser_env.cjs");
const { chromium, puppeteer } = loadBrowser(npmPrefix);

// Starts the server; resolves with its URL once it prints the listening line (at most 30 s).
function startServer() {
  const proc = spawn(kvforge, ["serve", "--port", "0", "--prefix-cache", "hash", "--max-model-len", "2048"],
                     { stdio: ["ignore", "ignore", "pipe"] });
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

async function text(page, sel) { return page.$eval(sel, (e) => e.textContent); }

async function main() {
  fs.mkdirSync(shotDir, { recursive: true });
  const { proc, url } = await startServer();
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 1000 });
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url + "/", { waitUntil: "load", timeout: 30000 });
    // The inspector's first snapshot: every block free.
    await page.waitForFunction(() => document.getElementById("pool-free").textContent !== "-",
                               { timeout: 20000 }).catch(() => fail("the inspector never showed a snapshot"));
    const total = Number(await text(page, "#pool-free"));
    if (!(total > 0)) fail("no free blocks shown at start: " + total);

    // A long reply (ignore EOS) so the inspector sees it running.
    const system = "You are a storyteller. You tell short, happy stories about a little dog named " +
                   "Max and his friend Lily, who live in a small town by the sea.";
    await page.type("#system", system);
    await page.$eval("#max_tokens", (e) => { e.value = "1500"; });
    await page.$eval("#temperature", (e) => { e.value = "0"; });
    await page.click("#ignore_eos");
    await page.type("#prompt", "Tell me a story.");
    await page.click("#send");
    await page.waitForFunction(() => Number(document.getElementById("grid").dataset.used || 0) > 0 &&
                                     document.querySelector("#req-table tbody tr[data-id]") !== null,
                               { timeout: 30000, polling: 100 })
      .catch(() => fail("the inspector never showed the running request's blocks"));
    const running = await page.$eval("#req-table tbody tr[data-id]", (tr) => [...tr.cells].map((c) => c.textContent));
    if (running[1] !== "running" || !(Number(running[6]) > 0))
      fail("request row is not a running request holding blocks: " + running.join(" | "));
    await page.screenshot({ path: path.join(shotDir, "webui-running.png"), fullPage: true });
    await page.waitForSelector(".msg.assistant[data-done='1']", { timeout: 120000 })
      .catch(() => fail("the streamed reply never finished"));
    const reply = await page.$eval(".msg.assistant", (e) => e.firstChild ? e.firstChild.textContent : "");
    if (reply.trim().length < 20) fail("the reply is too short: '" + reply + "'");
    if ((await text(page, "#last-ttft")) === "-") fail("no TTFT shown for the reply");

    // The same system prompt again, in a new chat: the prefix cache is hit.
    await page.waitForFunction(() => document.getElementById("prefix-query").textContent !== "0", { timeout: 20000 })
      .catch(() => fail("the prefix cache counters never moved"));
    const hitsBefore = Number(await text(page, "#prefix-hits"));
    await page.click("#clear");
    await page.click("#ignore_eos");
    await page.$eval("#max_tokens", (e) => { e.value = "32"; });
    await page.type("#prompt", "And another one.");
    await page.click("#send");
    await page.waitForSelector(".msg.assistant[data-done='1']", { timeout: 60000 })
      .catch(() => fail("the second reply never finished"));
    await page.waitForFunction((before) => Number(document.getElementById("prefix-hits").textContent) > before,
                               { timeout: 20000, polling: 100 }, hitsBefore)
      .catch(() => fail("the prefix hit count did not rise after the same system prompt (was " + hitsBefore + ")"));
    const cached = Number(await text(page, "#last-cached"));
    if (!(cached > 0)) fail("the reply shows no cached prompt tokens");
    const entries = await page.$$eval("#prefix-tree div", (d) => d.length);
    if (entries === 0) fail("the prefix cache tree is empty");
    // The charts fill from /v1/kvforge/history.
    await page.waitForFunction(() => document.getElementById("c-tps").toDataURL().length > 3000, { timeout: 20000 })
      .catch(() => fail("the charts were never drawn"));
    await page.screenshot({ path: path.join(shotDir, "webui.png"), fullPage: true });
    if (errors.length) fail("page errors: " + errors.join("; "));
    console.log(`ok: ${total} blocks, reply of ${reply.length} chars, prefix hits ${hitsBefore} -> ` +
                `${await text(page, "#prefix-hits")}, ${cached} cached prompt tokens, screenshots in ${shotDir}`);
  } finally {
    await browser.close();
    proc.kill("SIGTERM");
  }
}

main().catch((e) => {
  if (!process.exitCode) console.error("FAIL: " + (e.stack || e));
  process.exitCode = 1;
});
