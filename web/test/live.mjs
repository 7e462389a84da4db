// Browser checks of the live view (`slowstart view --live`), run by
// cmd/slowstart/view_live_test.go: headless Chromium driven by playwright-core
// opens the live page, the test makes real connections while it is open, and the
// page must add them as they complete.
//
// Usage: node test/live.mjs CONFIG.json
// CONFIG.json: {"chromium", "artifacts", "url", "first": N, "total": M, "out": PATH}
// Protocol on stdin/stdout with the Go test: the script prints "ready N" once the
// page shows the first N connections, then waits for a line "more" (the test has
// made the rest) and checks the page shows all M; it prints "shown" and waits for
// "stopped" (the test sent Ctrl-C) and checks the page says the capture stopped.
// It writes what the page showed per connection (rounds, IW) to PATH.
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { check, finish, launch, watch } from "./harness.mjs";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
mkdirSync(config.artifacts, { recursive: true });
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function expectLine(want) {
  const { value, done } = await lines.next();
  if (done || value.trim() !== want) throw new Error(`expected "${want}" on stdin, got ${done ? "end of input" : JSON.stringify(value)}`);
}

const browser = await launch(config.chromium);
const context = await browser.newContext({ viewport: { width: 1366, height: 900 } });
const page = await context.newPage();
// The event stream is cut when the server stops; that is expected at the end.
const { problems, requests } = watch(page, { expectedFailure: (url) => url.endsWith("/api/events") });

const count = async () => Number(await page.locator("[data-testid=live-count]").getAttribute("data-count"));
async function waitCount(n) {
  await page.waitForSelector(`[data-testid=live-count][data-count="${n}"]`, { timeout: 30000 });
  await page.waitForSelector("body[data-ready=true]", { timeout: 30000 });
}

await page.goto(config.url);
await waitCount(config.first);
check((await count()) === config.first, `the page shows the ${config.first} connections made before it opened`);
const badge = page.locator("[data-testid=live]");
check(await badge.isVisible(), "a live indicator is visible");
check((await badge.getAttribute("data-state")) === "capturing", `the indicator says capturing (${await badge.getAttribute("data-state")})`);
await page.screenshot({ path: join(config.artifacts, "live-first.png"), fullPage: true });
console.log(`ready ${config.first}`);

await expectLine("more");
await waitCount(config.total);
check((await count()) === config.total, `the page added the connections made while it was open: ${config.total} in all`);
check(Number(await page.locator("[data-testid=timeline]").getAttribute("data-connections")) === config.total, `the timeline has ${config.total} connections`);
check((await page.locator("[data-testid=conn-row]").count()) === config.total, `${config.total} connection rows drawn`);
check((await page.locator("[data-testid=live-dropped]").count()) === 0, "no connection was dropped");

// What the page shows per connection: pick each in the selector.
const shown = [];
const options = await page.locator("[data-testid=connection-select] option").evaluateAll((os) => os.map((o) => o.value));
check(options.length === config.total, `the selector lists ${config.total} connections (${options.length})`);
for (const v of options) {
  await page.locator("[data-testid=connection-select]").selectOption(v);
  await page.waitForSelector(`body[data-selected="${v}"]`);
  const rounds = Number(await page.locator("[data-testid=tsg]").getAttribute("data-rounds"));
  const bars = await page.locator("[data-testid=round-bar]").count();
  const bands = await page.locator("[data-testid=round-band]").count();
  const iw = (await page.locator("[data-testid=fact-iw]").count()) ? await page.locator("[data-testid=fact-iw]").innerText() : "";
  const label = await page.locator(`[data-testid=connection-select] option[value="${v}"]`).innerText();
  check(rounds === bars && rounds === bands, `#${v}: ${rounds} rounds, ${bars} bars, ${bands} bands agree`);
  shown.push({ index: Number(v), label, rounds, iw });
}
writeFileSync(config.out, JSON.stringify(shown));
await page.screenshot({ path: join(config.artifacts, "live-all.png"), fullPage: true });
await page.locator("[data-testid=unit-rtt]").check();
await page.screenshot({ path: join(config.artifacts, "live-all-rtt.png"), fullPage: true });

// The phone layout of the same live page.
{
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
  const p = await phone.newPage();
  const phoneProblems = [];
  p.on("pageerror", (e) => phoneProblems.push(e.message));
  p.on("console", (m) => m.type() === "error" && phoneProblems.push(m.text()));
  await p.goto(config.url);
  await p.waitForSelector(`[data-testid=live-count][data-count="${config.total}"]`, { timeout: 30000 });
  const overflow = await p.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 1, `phone: no horizontal overflow (${overflow} px)`);
  await p.screenshot({ path: join(config.artifacts, "live-phone.png"), fullPage: true });
  check(phoneProblems.length === 0, `phone: no console errors${phoneProblems.length ? ": " + phoneProblems.join("; ") : ""}`);
  await phone.close();
}

// Security: only the page, the assets, the Report and the events are served.
const base = new URL(config.url);
for (const p of ["/etc/passwd", "/api/events/../../go.mod", "/api/events/x", "/assets/../go.mod", "/%2e%2e/go.mod", "/index.html"]) {
  const res = await context.request.get(new URL(p, base).href, { maxRedirects: 5 });
  check(res.status() === 404, `GET ${p} is 404 (got ${res.status()})`);
}
const index = await context.request.get(base.href);
const csp = index.headers()["content-security-policy"] ?? "";
check(csp.includes("default-src 'none'") && csp.includes("connect-src 'self'"), `the page has its CSP (${csp.slice(0, 40)}…)`);
const foreign = requests.filter((u) => new URL(u).origin !== base.origin);
check(foreign.length === 0, `no requests beyond the server${foreign.length ? ": " + foreign.join(", ") : ""}`);
console.log("shown");

// Ctrl-C: the page says the capture stopped, and keeps what it showed.
await expectLine("stopped");
await page.waitForSelector("[data-testid=live][data-state=stopped]", { timeout: 15000 }).catch(() => {});
check((await badge.getAttribute("data-state")) === "stopped", "after Ctrl-C the indicator says stopped");
check((await count()) === config.total, `after Ctrl-C the page still shows ${config.total} connections`);
await page.screenshot({ path: join(config.artifacts, "live-stopped.png"), fullPage: true });
check(problems.length === 0, `no console errors${problems.length ? ": " + problems.join("; ") : ""}`);

await browser.close();
finish();
