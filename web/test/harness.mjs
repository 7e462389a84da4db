// What the browser checks (browser.mjs, live.mjs, live-feed.mjs) share: the
// checks' tally, headless Chromium launched the same way, and a page's problems.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

let failures = 0;

/** Prints one check's outcome and counts the failures. */
export function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures++;
}

/** Ends the script with a summary: exit status 1 when a check failed. */
export function finish() {
  console.log(failures === 0 ? "PASS" : `${failures} check(s) failed`);
  process.exit(failures === 0 ? 0 : 1);
}

/**
 * Headless Chromium; launch() gives it a fresh temporary profile (--user-data-dir) of
 * its own, and a temporary directory (TMPDIR) for the files Chromium leaves there
 * (org.chromium.Chromium.*), removed when the browser closes.
 */
export async function launch(executablePath) {
  const tmp = mkdtempSync(join(tmpdir(), "ssweb"));
  const browser = await chromium.launch({
    executablePath,
    env: { ...process.env, TMPDIR: tmp },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  browser.on("disconnected", () => rmSync(tmp, { recursive: true, force: true }));
  return browser;
}

/**
 * Records page's console errors and warnings and its page errors in problems, and
 * unless requests is false every request's URL in requests and every failed
 * request not expected (expectedFailure) in problems.
 */
export function watch(page, { requests: recordRequests = true, expectedFailure = () => false } = {}) {
  const problems = [];
  const requests = [];
  page.on("console", (m) => {
    if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  if (recordRequests) {
    page.on("request", (r) => requests.push(r.url()));
    page.on("requestfailed", (r) => {
      if (!expectedFailure(r.url())) problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
    });
  }
  return { problems, requests };
}
