// Browser tests of the view, run by browser_test.go (go test ./web/...): headless
// Chromium driven by playwright-core opens each case's served page and its
// self-contained HTML file and checks what is drawn against the case's Report.
//
// Usage: node test/browser.mjs CASES.json
// CASES.json: {"chromium": PATH, "artifacts": DIR, "cases": [{"name", "url", "html",
//   "report", "large"}]} where report is the path of the Report JSON the page shows.
import { readFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { check, finish, launch, watch } from "./harness.mjs";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
mkdirSync(config.artifacts, { recursive: true });

const browser = await launch(config.chromium);

/** Opens a page that records console errors, page errors and every request. */
async function open(context, url) {
  const page = await context.newPage();
  const { problems, requests } = watch(page);
  await page.goto(url);
  await page.waitForSelector("body[data-ready=true]", { timeout: 30000 });
  return { page, problems, requests };
}

const attr = (page, sel, name) => page.locator(sel).first().getAttribute(`data-${name}`);
const num = async (page, sel, name) => Number(await attr(page, sel, name));
const grouped = (n) => n.toLocaleString("en-US");

/** The checks every rendering of a Report must pass. */
async function checkPage(page, rep, label, large) {
  const conns = rep.connections ?? [];
  const packets = conns.reduce((n, c) => n + (c.packets?.length ?? 0), 0);
  const servers = new Set(conns.map((c) => c.server)).size;
  check((await num(page, "[data-testid=timeline]", "connections")) === conns.length, `${label}: timeline has ${conns.length} connections`);
  check((await page.locator("[data-testid=conn-row]").count()) === conns.length, `${label}: ${conns.length} connection rows drawn`);
  check((await num(page, "[data-testid=timeline]", "groups")) === servers, `${label}: ${servers} server groups`);
  check((await num(page, "[data-testid=timeline]", "packets")) === packets, `${label}: timeline holds ${packets} packets`);
  check((await num(page, "[data-testid=timeline]", "visible-packets")) === packets, `${label}: all ${packets} packets visible before zooming`);
  const drawn = await num(page, "[data-testid=timeline]", "ticks-drawn");
  if (large) {
    check(drawn > 0 && drawn < packets, `${label}: ticks decimated when zoomed out (${drawn} drawn for ${packets} packets)`);
  } else {
    check(drawn === packets, `${label}: one tick per packet (${drawn} drawn, ${packets} in the Report)`);
  }
  const httpBars = conns.reduce((n, c) => n + (c.http ?? []).filter((h) => (h.request_ms ?? h.first_byte_ms) !== null).length, 0);
  const tlsBars = conns.filter((c) => c.tls && (c.rounds ?? []).some((r) => r.phase === "tls")).length;
  check((await page.locator("[data-testid=bar-http]").count()) === httpBars, `${label}: ${httpBars} HTTP message bars`);
  check((await page.locator("[data-testid=bar-tls]").count()) === tlsBars, `${label}: ${tlsBars} TLS handshake bars`);

  // The page opens on the connection whose server sent the most bytes (the
  // first of them on a tie), not on the first one.
  let c = conns[0];
  for (const x of conns) if (x.bytes_to_client > c.bytes_to_client) c = x;
  check((await page.locator("body").getAttribute("data-selected")) === String(c.index), `${label}: opens on #${c.index}, the connection with the most bytes from its server`);
  const rounds = c.rounds ?? [];
  // Ideal slow start: the IW through the TLS handshake, then doubling from the
  // IW plus the handshake's segments (acknowledged before the data) in each
  // data round; the handshake's round trips are not rounds of doubling.
  const iwSeg = c.initial_window && c.initial_window.verdict !== "none" && c.initial_window.segments > 0 ? c.initial_window.segments : (rounds[0]?.segments ?? 0);
  const firstData = rounds.find((r) => r.phase !== "tls");
  if (iwSeg > 0 && firstData) {
    const handshake = rounds.filter((r) => r.phase === "tls").reduce((n, r) => n + r.segments, 0);
    const point = page.locator(`[data-testid=ideal-point][data-round="${firstData.index}"]`);
    if ((await point.count()) > 0) {
      const got = Number(await point.getAttribute("data-segments"));
      check(got === iwSeg + handshake, `${label}: ideal slow start in the first data round (R${firstData.index}) is IW ${iwSeg} + ${handshake} handshake segments (got ${got})`);
    }
  }
  check((await num(page, "[data-testid=tsg]", "rounds")) === rounds.length, `${label}: time-sequence graph of #${c.index} has ${rounds.length} rounds`);
  check((await page.locator("[data-testid=round-band]").count()) === rounds.length, `${label}: ${rounds.length} round bands shaded`);
  check((await page.locator("[data-testid=round-bar]").count()) === rounds.length, `${label}: ${rounds.length} bars in windows per round`);
  const dataSegments = (c.packets ?? []).filter((p) => p.dir === "s2c" && p.len > 0).length;
  check((await num(page, "[data-testid=tsg]", "segments")) === dataSegments, `${label}: ${dataSegments} data segments in the time-sequence graph`);

  // The summary: the initial window and its verdict, in words.
  const iw = c.initial_window;
  if (iw && iw.verdict !== "none") {
    const text = await page.locator("[data-testid=fact-iw]").innerText();
    check(text.includes(String(iw.segments)) && text.includes(grouped(iw.bytes)), `${label}: summary shows IW ${iw.segments} segments, ${iw.bytes} bytes`);
  }
  check((await page.locator("[data-testid=diagnoses] li").count()) > 0, `${label}: diagnoses in words`);

  if (rounds.length > 0) {
    // A tooltip shows a round's exact bytes: hover the first round's band (its top
    // strip holds no segments), then the last round's bar.
    const band = page.locator("[data-testid=round-band][data-round='1'] rect");
    await band.scrollIntoViewIfNeeded();
    const box = await band.boundingBox();
    await page.mouse.move(box.x + Math.min(box.width / 2, 6), box.y + 4);
    const tip = page.locator("[data-testid=tooltip]");
    await tip.waitFor({ state: "visible", timeout: 5000 });
    const tipText = await tip.innerText();
    check(tipText.includes("Round 1") && tipText.includes(grouped(rounds[0].bytes)), `${label}: round 1 tooltip shows ${grouped(rounds[0].bytes)} bytes`);
    const last = rounds[rounds.length - 1];
    await page.locator(`[data-testid=round-bar][data-round='${last.index}'] rect.round-bar`).hover();
    const barTip = await tip.innerText();
    check(barTip.includes(`Round ${last.index}`) && barTip.includes(grouped(last.bytes)) && barTip.includes(grouped(last.cumulative_bytes)),
      `${label}: round ${last.index} bar tooltip shows ${grouped(last.bytes)} bytes, ${grouped(last.cumulative_bytes)} cumulative`);
  }

  // Zoom: the wheel over the timeline narrows its visible range; so does the
  // time-sequence graph's zoom button.
  const before = [await num(page, "[data-testid=timeline]", "domain-start"), await num(page, "[data-testid=timeline]", "domain-end")];
  await page.locator("[data-testid=timeline] .plot").scrollIntoViewIfNeeded();
  const plot = await page.locator("[data-testid=timeline] .plot").boundingBox();
  await page.mouse.move(plot.x + plot.width * 0.6, plot.y + 40);
  await page.mouse.wheel(0, -600);
  await page.waitForFunction(
    ([w]) => {
      const t = document.querySelector("[data-testid=timeline]");
      return Number(t.dataset.domainEnd) - Number(t.dataset.domainStart) < w * 0.9;
    },
    [before[1] - before[0]],
    { timeout: 5000 },
  ).catch(() => {});
  const after = [await num(page, "[data-testid=timeline]", "domain-start"), await num(page, "[data-testid=timeline]", "domain-end")];
  check(after[1] - after[0] < (before[1] - before[0]) * 0.9, `${label}: wheel zoom narrows the timeline from ${(before[1] - before[0]).toFixed(1)} to ${(after[1] - after[0]).toFixed(1)}`);
  const visibleAfter = await num(page, "[data-testid=timeline]", "visible-packets");
  check(visibleAfter <= packets, `${label}: ${visibleAfter} of ${packets} packets visible after zooming`);
  const tsgBefore = (await num(page, "[data-testid=tsg]", "domain-end")) - (await num(page, "[data-testid=tsg]", "domain-start"));
  await page.locator("[data-testid=tsg-zoom-in]").click();
  const tsgAfter = (await num(page, "[data-testid=tsg]", "domain-end")) - (await num(page, "[data-testid=tsg]", "domain-start"));
  check(Math.abs(tsgAfter - tsgBefore / 2) < tsgBefore * 0.01, `${label}: zoom button halves the time-sequence graph's range (${tsgBefore.toFixed(1)} → ${tsgAfter.toFixed(1)})`);

  // The round-trip axis: the timeline's range is then in round trips.
  await page.locator("[data-testid=unit-rtt]").check();
  const rttEnd = await num(page, "[data-testid=timeline]", "domain-end");
  const maxRtts = Math.max(...conns.map((x) => x.duration_ms / (x.handshake_rtt_ms ?? (x.min_rtt_ms || 1))));
  check(Math.abs(rttEnd - maxRtts * 1.02) < 0.05 * maxRtts + 0.01, `${label}: round-trip axis spans ${rttEnd.toFixed(2)} (expected ${(maxRtts * 1.02).toFixed(2)})`);
  await page.locator("[data-testid=unit-ms]").check();
  await page.locator("[data-testid=timeline-show-everything]").click();
  await page.locator("[data-testid=tsg-show-everything]").click();
  await page.mouse.move(0, 0);
}

/** The content kind a request's bar is colored by (as src/pageview.ts decides). */
function contentKind(r) {
  const t = (r.type || "").toLowerCase();
  const ct = (r.content_type || "").toLowerCase();
  if (t === "document" || ct.startsWith("text/html")) return "html";
  if (t === "stylesheet" || ct.startsWith("text/css")) return "css";
  if (t === "script" || ct.includes("javascript")) return "js";
  if (t === "font" || ct.startsWith("font/")) return "font";
  if (t === "image" || ct.startsWith("image/")) return "image";
  return "other";
}

/** The checks of a page load's view against the page load (pl) and its Report. */
async function checkPageLoad(page, pl, rep, label) {
  const sel = "[data-testid=pageload]";
  check((await page.locator(sel).count()) === 1, `${label}: one page-load view`);
  check((await num(page, sel, "requests")) === pl.requests.length, `${label}: ${pl.requests.length} requests`);
  check((await num(page, sel, "round-trips")) === pl.critical_path.round_trips, `${label}: critical path of ${pl.critical_path.round_trips} round trips`);
  const orphans = pl.requests.some((r) => r.connection === 0) ? 1 : 0;
  check((await page.locator("[data-testid=page-row]").count()) === pl.connections.length + orphans, `${label}: ${pl.connections.length} connection rows`);
  check((await page.locator("[data-testid=page-bar]").count()) === pl.requests.length, `${label}: a bar per request`);
  const critical = pl.requests.filter((r) => r.critical);
  check((await page.locator("[data-testid=page-bar][data-critical=true]").count()) === critical.length, `${label}: ${critical.length} bars on the critical path`);
  for (const r of pl.requests) {
    const bar = page.locator(`[data-testid=page-bar][data-request='${r.index}']`);
    const row = await bar.evaluate((e) => e.closest("[data-testid=page-row]")?.getAttribute("data-connection"));
    check(Number(row) === r.connection, `${label}: request ${r.index} drawn on connection ${r.connection}'s row (got ${row})`);
    check((await bar.getAttribute("data-type")) === contentKind(r), `${label}: request ${r.index} colored as ${contentKind(r)}`);
  }
  const byConn = new Map((rep.connections ?? []).map((c) => [c.index, c]));
  const rounds = pl.connections.reduce((n, c) => n + (byConn.get(c.connection)?.rounds?.length ?? 0), 0);
  check((await page.locator("[data-testid=page-round]").count()) === rounds, `${label}: ${rounds} rounds shaded behind the bars`);
  const steps = pl.critical_path.steps;
  check((await page.locator("[data-testid=critical-link]").count()) === Math.max(steps.length - 1, 0), `${label}: the critical path's ${steps.length} steps joined`);
  check((await page.locator("[data-testid=critical-steps] li").count()) === steps.length, `${label}: ${steps.length} steps in words`);
  check((await page.locator("[data-testid=savings] li").count()) === pl.critical_path.savings.length, `${label}: ${pl.critical_path.savings.length} savings in words`);
  const events = [pl.first_contentful_paint_ms, pl.dom_content_loaded_ms, pl.load_ms].filter((v) => v !== null).length;
  check((await page.locator("[data-testid=page-marker]").count()) === events, `${label}: ${events} page events marked`);
  // The steps' bars go left to right along the path.
  const xs = [];
  for (const s of steps) {
    const box = await page.locator(`[data-testid=page-bar][data-request='${s.request}'] rect.receive`).boundingBox();
    xs.push(box.x + box.width);
  }
  check(xs.every((x, i) => i === 0 || x >= xs[i - 1] - 1), `${label}: the critical path's bars end left to right (${xs.map((x) => x.toFixed(0)).join(", ")})`);
  // A tooltip names the request.
  const last = steps[steps.length - 1];
  const lastReq = pl.requests.find((r) => r.index === last.request);
  await page.locator(`[data-testid=page-bar][data-request='${last.request}'] rect.receive`).hover();
  const tip = page.locator("[data-testid=tooltip]");
  await tip.waitFor({ state: "visible", timeout: 5000 });
  const text = await tip.innerText();
  check(text.includes(lastReq.url) && text.includes("critical path"), `${label}: the tooltip of the path's last request names ${lastReq.url}`);
  // The axis in round trips.
  await page.locator("[data-testid=unit-rtt]").check();
  check((await attr(page, "[data-testid=page-axis]", "unit")) === "rtt", `${label}: the page-load axis reads in round trips`);
  await page.locator("[data-testid=unit-ms]").check();
  await page.mouse.move(0, 0);
}

for (const cs of config.cases) {
  const rep = JSON.parse(readFileSync(cs.report, "utf8"));
  const pl = cs.page ? JSON.parse(readFileSync(cs.page, "utf8")) : null;

  // The served page, on a laptop screen.
  {
    const context = await browser.newContext({ viewport: { width: 1366, height: 900 } });
    const t0 = Date.now();
    const { page, problems } = await open(context, cs.url);
    console.log(`info ${cs.name}: served page ready in ${Date.now() - t0} ms`);
    await checkPage(page, rep, `${cs.name} served`, cs.large);
    if (pl) await checkPageLoad(page, pl, rep, `${cs.name} served`);
    else check((await page.locator("[data-testid=pageload]").count()) === 0, `${cs.name} served: no page-load view for a capture`);
    await page.screenshot({ path: join(config.artifacts, `${cs.name}-laptop.png`), fullPage: true });
    await page.locator("[data-testid=unit-rtt]").check();
    await page.screenshot({ path: join(config.artifacts, `${cs.name}-laptop-rtt.png`), fullPage: true });
    await page.locator("[data-testid=unit-ms]").check();
    if (cs.large) {
      // Zooming far in on many packets: time how long a redraw takes (reported, not asserted).
      const start = Date.now();
      for (let i = 0; i < 5; i++) await page.locator("[data-testid=timeline-zoom-in]").click();
      console.log(`info ${cs.name}: 5 zoom steps in ${Date.now() - start} ms`);
      const drawn = await num(page, "[data-testid=timeline]", "ticks-drawn");
      const visible = await num(page, "[data-testid=timeline]", "visible-packets");
      check(visible > 0 && visible < (rep.connections ?? []).reduce((n, c) => n + c.packets.length, 0), `${cs.name}: zoomed in, ${visible} packets visible, ${drawn} ticks drawn`);
    }
    check(problems.length === 0, `${cs.name} served: no console errors${problems.length ? ": " + problems.join("; ") : ""}`);

    // Security: only the assets and the Report are served.
    const base = new URL(cs.url);
    for (const p of ["/etc/passwd", "/assets/../go.mod", "/assets/", "/assets/web.go", "/web.go", "/dist/assets/app.js", "/api/report/x", "/%2e%2e/go.mod", "/index.html"]) {
      const res = await context.request.get(new URL(p, base).href, { maxRedirects: 5 });
      check(res.status() === 404, `${cs.name}: GET ${p} is 404 (got ${res.status()})`);
    }
    const asset = await context.request.get(new URL("/assets/app.js", base).href);
    check(asset.status() === 200 && (asset.headers()["content-type"] ?? "").includes("javascript"), `${cs.name}: GET /assets/app.js is 200 JavaScript`);
    const index = await context.request.get(base.href);
    const csp = index.headers()["content-security-policy"] ?? "";
    check(csp.includes("default-src 'none'") && csp.includes("script-src 'self'"), `${cs.name}: the page has a CSP (${csp.slice(0, 40)}…)`);
    check(index.headers()["x-content-type-options"] === "nosniff", `${cs.name}: X-Content-Type-Options nosniff`);
    await context.close();
  }

  // On a phone: the page lays out and draws without errors.
  if (!cs.large) {
    const context = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
    const { page, problems } = await open(context, cs.url);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(overflow <= 1, `${cs.name} phone: no horizontal overflow (${overflow} px)`);
    check((await page.locator("[data-testid=conn-row]").count()) === (rep.connections ?? []).length, `${cs.name} phone: connection rows drawn`);
    await page.screenshot({ path: join(config.artifacts, `${cs.name}-phone.png`), fullPage: true });
    check(problems.length === 0, `${cs.name} phone: no console errors${problems.length ? ": " + problems.join("; ") : ""}`);
    await context.close();
  }

  // The self-contained file, with networking off: it must make no request but itself.
  if (cs.html) {
    const context = await browser.newContext({ viewport: { width: 1366, height: 900 }, offline: true });
    const fileURL = pathToFileURL(cs.html).href;
    const { page, problems, requests } = await open(context, fileURL);
    await checkPage(page, rep, `${cs.name} html`, cs.large);
    if (pl) await checkPageLoad(page, pl, rep, `${cs.name} html`);
    const others = requests.filter((u) => u !== fileURL && !u.startsWith("data:"));
    check(others.length === 0, `${cs.name} html: no requests besides the file${others.length ? ": " + others.join(", ") : ""}`);
    await page.screenshot({ path: join(config.artifacts, `${cs.name}-html.png`), fullPage: true });
    check(problems.length === 0, `${cs.name} html: no console errors${problems.length ? ": " + problems.join("; ") : ""}`);
    await context.close();
  }
}

await browser.close();
finish();
