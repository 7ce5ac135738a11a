// What the browser tests share: Debian's chromium and the puppeteer-core package from the
// build tree's npm prefix (exit 77, ctest's skip, where either is missing), and fail().
"use strict";
const fs = require("fs");
const path = require("path");

function loadBrowser(npmPrefix) {
  const chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => fs.existsSync(p));
  if (!chromium) {
    console.log("SKIP: no chromium (Debian package `chromium`; scripts/install_deps.sh installs it)");
    process.exit(77);
  }
  try {
    return { chromium, puppeteer: require(path.join(npmPrefix, "node_modules", "puppeteer-core")) };
  } catch (e) {
    console.log("SKIP: puppeteer-core is not installed in " + npmPrefix + " (npm unreachable?)");
    process.exit(77);
  }
}

function fail(msg) {
  console.error("FAIL: " + msg);
  process.exitCode = 1;
  throw new Error(msg);
}

module.exports = { loadBrowser, fail };
