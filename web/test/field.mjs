// Browser checks of the field view (a store of slowstart field), run by
// field_browser_test.go: the page served and the self-contained file each draw a
// panel per network with a point per stretch of time holding a value, the marks
// across every panel, and switch quantities.
//
// Usage: node test/field.mjs CONFIG.json
// CONFIG.json: {"chromium", "artifacts", "cases": [{"name", "url", "networks": [{"network", "points"}], "marks"}]}
import { readFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { check, finish, launch, watch } from "./harness.mjs";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
mkdirSync(config.artifacts, { recursive: true });
const browser = await launch(config.chromium);
for (const c of config.cases) {
  const context = await browser.newContext({ viewport: { width: 1366, height: 900 } });
  const page = await context.newPage();
  const { problems } = watch(page);
  await page.goto(c.url);
  await page.waitForSelector("body[data-ready='true']", { timeout: 30000 });
  const panels = page.locator("[data-testid=field-panel]");
  check((await panels.count()) === c.networks.length, `${c.name}: ${c.networks.length} panels (${await panels.count()})`);
  for (const [i, n] of c.networks.entries()) {
    const p = panels.nth(i);
    const network = await p.getAttribute("data-network");
    check(network === n.network, `${c.name}: panel ${i} is network ${JSON.stringify(n.network)} (${JSON.stringify(network)})`);
    check(Number(await p.getAttribute("data-points")) === n.points, `${c.name}: ${n.network || "all"}: ${n.points} points (${await p.getAttribute("data-points")})`);
    check(Number(await p.getAttribute("data-marks")) === c.marks, `${c.name}: ${n.network || "all"}: ${c.marks} marks (${await p.getAttribute("data-marks")})`);
  }
  check((await page.locator("[data-testid=field-mark]").count()) === c.marks, `${c.name}: the marks listed`);
  check((await page.locator("[data-testid=field-bands] rect").count()) > 0, `${c.name}: percentile bands drawn`);
  // The tooltip of a point.
  const dot = panels.first().locator("circle").first();
  const box = await dot.boundingBox();
  if (box) {
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    const tip = page.locator("[data-testid=tooltip]");
    check(await tip.isVisible(), `${c.name}: a point's tooltip shows`);
    check((await tip.innerText()).includes("first responses"), `${c.name}: the tooltip counts the first responses`);
  } else {
    check(false, `${c.name}: a point to hover`);
  }
  await page.screenshot({ path: join(config.artifacts, `field-${c.name}.png`), fullPage: true });
  await page.locator("[data-testid=field-metric]").selectOption("window_limited");
  await page.waitForSelector("body[data-metric='window_limited']");
  check(Number(await panels.first().getAttribute("data-points")) === c.networks[0].points, `${c.name}: the share has a point per stretch too`);
  await page.locator("[data-testid=field-metric]").selectOption("handshake_rtt_ms");
  await page.waitForSelector("body[data-metric='handshake_rtt_ms']");
  check(problems.length === 0, `${c.name}: no console errors or failed requests${problems.length ? ": " + problems.join("; ") : ""}`);
  await context.close();
}
await browser.close();
finish();
