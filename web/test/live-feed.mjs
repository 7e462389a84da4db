// Browser checks of the live page's bookkeeping, run by live_browser_test.go:
// a Feed that keeps 2 connections gets a third (the page must drop the oldest and
// say so), then an update of a connection it shows (the page must replace it),
// then the end of the capture (the page must say it stopped).
//
// Usage: node test/live-feed.mjs CONFIG.json
// CONFIG.json: {"chromium", "artifacts", "url", "updated_rounds": N}
// Protocol on stdin/stdout with the Go test: prints "step N" when ready for the
// test's step N, waits for a line "done N".
import { readFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { check, finish, launch, watch } from "./harness.mjs";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
mkdirSync(config.artifacts, { recursive: true });
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function step(n) {
  console.log(`step ${n}`);
  const { value, done } = await lines.next();
  if (done || value.trim() !== `done ${n}`) throw new Error(`expected "done ${n}", got ${done ? "end of input" : JSON.stringify(value)}`);
}
const browser = await launch(config.chromium);
const context = await browser.newContext({ viewport: { width: 1366, height: 900 } });
const page = await context.newPage();
const { problems } = watch(page, { requests: false });
const attr = (sel, name) => page.locator(sel).first().getAttribute(`data-${name}`);

await page.goto(config.url);
await page.waitForSelector("[data-testid=live-count][data-count='0']", { timeout: 30000 });
check(await page.locator("[data-testid=empty]").isVisible(), "with no connection yet the page says it is waiting");
await page.screenshot({ path: join(config.artifacts, "live-waiting.png") });

await step(1); // the test puts connection 1
await page.waitForSelector("[data-testid=live-count][data-count='1']", { timeout: 15000 });
check((await page.locator("[data-testid=conn-row]").count()) === 1, "connection 1 drawn");
await page.locator("[data-testid=unit-rtt]").check();

await step(2); // connections 2 and 3: the Feed keeps 2
await page.waitForSelector("[data-testid=live-dropped][data-dropped='1']", { timeout: 15000 });
check(Number(await attr("[data-testid=live-count]", "count")) === 2, "2 connections shown after the oldest was dropped");
check(Number(await attr("[data-testid=live-count]", "total")) === 3, "3 connections counted in all");
check((await page.locator("[data-testid=live-dropped]").innerText()).includes("1 older connection dropped"), "the page says 1 older connection was dropped");
const options = await page.locator("[data-testid=connection-select] option").evaluateAll((os) => os.map((o) => o.value));
check(options.join(",") === "2,3", `connections #2 and #3 remain (${options.join(",")})`);
check(await page.locator("[data-testid=unit-rtt]").isChecked(), "the round-trip axis chosen before stays chosen");
await page.locator("[data-testid=connection-select]").selectOption("3");
await page.waitForSelector("body[data-selected='3']");
await page.screenshot({ path: join(config.artifacts, "live-dropped.png"), fullPage: true });

await step(3); // connection 3 updated (it was idle, then carried more)
await page.waitForSelector(`[data-testid=tsg][data-rounds='${config.updated_rounds}']`, { timeout: 15000 }).catch(() => {});
check(Number(await attr("[data-testid=tsg]", "rounds")) === config.updated_rounds, `the update of #3 replaced it: ${config.updated_rounds} rounds`);
check(Number(await attr("[data-testid=live-count]", "count")) === 2, "an update adds no connection");
check((await page.evaluate(() => document.body.dataset.selected)) === "3", "the chosen connection stays chosen across updates");

await step(4); // the capture stopped
await page.waitForSelector("[data-testid=live][data-state=stopped]", { timeout: 15000 }).catch(() => {});
check((await attr("[data-testid=live]", "state")) === "stopped", "the page says the capture stopped");
check(problems.length === 0, `no console errors${problems.length ? ": " + problems.join("; ") : ""}`);
await browser.close();
finish();
