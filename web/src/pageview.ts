// The page load (schema slowstart.pageload/v1): one row per connection grouped by
// host, each request a bar on its connection (waiting for the response, then
// receiving it, colored by content type), the connection's rounds shaded behind,
// the critical path to the first render outlined and joined, the page's events as
// lines; an axis in milliseconds or round trips. Below: the critical path's steps
// and what would save round trips.
import { axisTop } from "d3-axis";
import { scaleLinear } from "d3-scale";
import { select } from "d3-selection";

import { el, svgNS } from "./canvas";
import type { TimeUnit } from "./data";
import * as fmt from "./format";
import { iwHasNumber, iwShort } from "./iw";
import { color } from "./palette";
import type { Tooltip, TooltipRows } from "./tooltip";
import type { Connection, PageConnection, PageLoad, PageRequest, Report } from "./types";

const axisHeight = 30;
const groupHeight = 22;
const laneHeight = 14; // one lane of bars; concurrent requests take more lanes
const rowPad = 8;
const labelWidth = 230;

/** Content kinds the bars are colored by, with their legend. */
const kinds: { kind: string; label: string; color: string }[] = [
  { kind: "html", label: "document", color: color.blue },
  { kind: "css", label: "stylesheet", color: color.purple },
  { kind: "js", label: "script", color: color.orange },
  { kind: "font", label: "font", color: color.green },
  { kind: "image", label: "image", color: color.sky },
  { kind: "other", label: "other", color: color.grey },
];
const kindColor: Record<string, string> = Object.fromEntries(kinds.map((k) => [k.kind, k.color]));

/** The content kind of a request, from its type or content type. */
export function contentKind(r: PageRequest): string {
  const t = (r.type || "").toLowerCase();
  const ct = (r.content_type || "").toLowerCase();
  if (t === "document" || ct.startsWith("text/html")) return "html";
  if (t === "stylesheet" || ct.startsWith("text/css")) return "css";
  if (t === "script" || ct.includes("javascript")) return "js";
  if (t === "font" || ct.startsWith("font/")) return "font";
  if (t === "image" || ct.startsWith("image/")) return "image";
  return "other";
}

interface Row {
  kind: "group" | "conn" | "orphans";
  label: string;
  title: string;
  y: number;
  height: number;
  conn?: PageConnection;
  report?: Connection;
  requests: PageRequest[];
  lanes: Map<number, number>; // request index → lane
}

/** Puts overlapping bars in lanes (first fit), and returns the number of lanes. */
function assignLanes(requests: PageRequest[], lanes: Map<number, number>): number {
  const ends: number[] = [];
  for (const s of requests.map(span).sort((a, b) => a.start - b.start)) {
    let lane = ends.findIndex((e) => e <= s.start);
    if (lane < 0) {
      lane = ends.length;
      ends.push(0);
    }
    ends[lane] = s.end;
    lanes.set(s.req.index, lane);
  }
  return Math.max(1, ends.length);
}

interface Span {
  req: PageRequest;
  start: number; // ms on the page's axis
  first: number | null;
  end: number;
}

/** The times a request's bar spans: the capture's, else the browser's. */
function span(r: PageRequest): Span {
  const start = r.request_ms ?? r.browser.request_ms ?? r.start_ms;
  const first = r.first_byte_ms ?? r.browser.first_byte_ms;
  const end = r.last_byte_ms ?? r.browser.last_byte_ms ?? first ?? start;
  return { req: r, start, first, end: Math.max(end, start) };
}

export class PageView {
  readonly section: HTMLElement;
  private readonly plot: HTMLDivElement;
  private readonly svg: SVGSVGElement;
  private readonly rows: Row[] = [];
  private unit: TimeUnit = "ms";

  constructor(
    parent: HTMLElement,
    private readonly page: PageLoad,
    private readonly rep: Report,
    private readonly tooltip: Tooltip,
  ) {
    const cp = page.critical_path;
    this.section = el("section", "card pageload");
    this.section.dataset.testid = "pageload";
    this.section.dataset.requests = String(page.requests.length);
    this.section.dataset.connections = String(page.connections.length);
    this.section.dataset.critical = String(page.requests.filter((r) => r.critical).length);
    this.section.dataset.roundTrips = String(cp.round_trips);
    parent.appendChild(this.section);

    const head = el("div", "card-head");
    head.appendChild(el("h2", "", "Page load"));
    const events = [
      ["first contentful paint", page.first_contentful_paint_ms],
      ["load", page.load_ms],
    ]
      .filter(([, v]) => v !== null)
      .map(([k, v]) => `${k} ${fmt.ms(v as number)}`);
    const sum = el(
      "p",
      "page-summary",
      `${fmt.plural(page.requests.length, "request")} on ${fmt.plural(page.connections.length, "connection")}` +
        (page.browser ? ` · ${page.browser}` : "") +
        (events.length ? ` · ${events.join(", ")}` : ""),
    );
    sum.dataset.testid = "page-summary";
    head.appendChild(sum);
    const crit = el(
      "p",
      "page-critical",
      `Critical path to the first render: ${fmt.plural(cp.round_trips, "round trip")}, ${fmt.ms(cp.ms)}` +
        (cp.predicted ? ` (the model predicts ${fmt.plural(cp.predicted.round_trips, "round trip")})` : ""),
    );
    crit.dataset.testid = "page-critical";
    head.appendChild(crit);
    head.appendChild(this.legend());
    this.section.appendChild(head);

    this.plot = el("div", "page-plot");
    this.section.appendChild(this.plot);
    this.svg = document.createElementNS(svgNS, "svg");
    this.svg.setAttribute("class", "page-svg");
    this.plot.appendChild(this.svg);

    this.section.appendChild(this.steps());
    this.buildRows();
  }

  private legend(): HTMLElement {
    const box = el("div", "legend");
    for (const k of kinds) {
      const item = el("span", "legend-item");
      const sw = el("span", "legend-bar");
      sw.style.background = k.color;
      item.appendChild(sw);
      item.appendChild(document.createTextNode(k.label));
      box.appendChild(item);
    }
    const item = el("span", "legend-item");
    item.appendChild(el("span", "legend-bar critical-swatch"));
    item.appendChild(document.createTextNode("critical path"));
    box.appendChild(item);
    const band = el("span", "legend-item");
    band.appendChild(el("span", "legend-band"));
    band.appendChild(document.createTextNode("a round of the connection (arrival at the client)"));
    box.appendChild(band);
    return box;
  }

  /** The critical path's steps and the savings, in words. */
  private steps(): HTMLElement {
    const box = el("div", "page-steps");
    const cp = this.page.critical_path;
    const byIndex = new Map(this.page.requests.map((r) => [r.index, r]));
    const ol = el("ol");
    ol.dataset.testid = "critical-steps";
    for (const s of cp.steps) {
      const r = byIndex.get(s.request);
      const parts: string[] = [];
      if (s.handshake_round_trips > 0) parts.push(`new connection #${s.connection}: ${fmt.plural(s.handshake_round_trips, "round trip")} of handshake`);
      if (s.data_round_trips > 0) parts.push(`${fmt.plural(s.data_round_trips, "round")} of #${s.connection}${s.partial ? " until the next was asked for" : ""}`);
      const li = el("li", "", `${s.why} ${r ? r.path : ""}: ${parts.join(" + ") || "no round of its own"} = ${fmt.plural(s.round_trips, "round trip")}`);
      li.dataset.request = String(s.request);
      ol.appendChild(li);
    }
    box.appendChild(ol);
    if (cp.savings.length > 0) {
      box.appendChild(el("h3", "", "What would save round trips"));
      const ul = el("ul");
      ul.dataset.testid = "savings";
      for (const s of cp.savings) {
        const li = el("li", "", `${s.text} (${fmt.plural(s.cost_round_trips, "round trip")}, ${fmt.ms(s.cost_ms)})`);
        li.dataset.kind = s.kind;
        ul.appendChild(li);
      }
      box.appendChild(ul);
    }
    return box;
  }

  /** One row per connection, grouped by host in order of first use; requests on no connection last. */
  private buildRows(): void {
    const reportConns = new Map((this.rep.connections ?? []).map((c) => [c.index, c]));
    const byIndex = new Map(this.page.requests.map((r) => [r.index, r]));
    const hosts = new Map<string, PageConnection[]>();
    for (const c of this.page.connections) {
      const host = c.host || c.server;
      if (!hosts.has(host)) hosts.set(host, []);
      hosts.get(host)!.push(c);
    }
    let y = axisHeight;
    for (const [host, conns] of hosts) {
      this.rows.push({ kind: "group", label: host, title: host, y, height: groupHeight, requests: [], lanes: new Map() });
      y += groupHeight;
      for (const c of conns) {
        const iw = c.initial_window;
        const iwText = iwHasNumber(iw) ? `IW ${iwShort(iw)}` : "";
        const label = [`#${c.connection}`, `:${c.client.split(":").pop()}`, c.tls_version ? `TLS ${c.tls_version}` : "", c.alpn, iwText]
          .filter(Boolean)
          .join(" · ");
        const requests = c.requests.map((i) => byIndex.get(i)!).filter(Boolean);
        const lanes = new Map<number, number>();
        const height = assignLanes(requests, lanes) * laneHeight + 2 * rowPad;
        this.rows.push({ kind: "conn", label, title: `${c.client} → ${c.server}`, y, height, conn: c, report: reportConns.get(c.connection), requests, lanes });
        y += height;
      }
    }
    const orphans = this.page.requests.filter((r) => r.connection === 0);
    if (orphans.length > 0) {
      const lanes = new Map<number, number>();
      const height = assignLanes(orphans, lanes) * laneHeight + 2 * rowPad;
      this.rows.push({ kind: "orphans", label: "not on a captured connection", title: "", y, height, requests: orphans, lanes });
      y += height;
    }
    this.svg.setAttribute("height", String(y + 8));
  }

  setUnit(u: TimeUnit): void {
    this.unit = u;
    this.layout();
  }

  layout(): void {
    const width = Math.max(this.plot.clientWidth, 480);
    const page = this.page;
    const svg = select(this.svg);
    svg.selectAll("*").remove();
    svg.attr("width", width);
    const spans = page.requests.map(span);
    let maxMs = Math.max(1, ...spans.map((s) => s.end), page.load_ms ?? 0, page.first_contentful_paint_ms ?? 0);
    for (const row of this.rows) {
      for (const r of row.report?.rounds ?? []) maxMs = Math.max(maxMs, this.roundAt(row, r.end_ms));
    }
    const rtt = page.critical_path.rtt_ms > 0 ? page.critical_path.rtt_ms : 1;
    const k = this.unit === "rtt" ? 1 / rtt : 1;
    const x = scaleLinear()
      .domain([0, maxMs * 1.02 * k])
      .range([labelWidth, width - 12]);
    const X = (ms: number) => x(ms * k);
    const axis = axisTop(x)
      .ticks(Math.max(2, Math.floor((width - labelWidth) / 80)))
      .tickFormat((d) => (this.unit === "rtt" ? `${+d} RTT` : `${+d} ms`));
    svg
      .append("g")
      .attr("class", "axis")
      .attr("data-testid", "page-axis")
      .attr("data-unit", this.unit)
      .attr("transform", `translate(0,${axisHeight - 6})`)
      .call(axis);
    const bottom = +(this.svg.getAttribute("height") ?? "0");

    // Rows: labels, and each connection's rounds shaded behind its bars.
    for (const row of this.rows) {
      if (row.kind === "group") {
        svg.append("text").attr("class", "page-group").attr("x", 4).attr("y", row.y + 15).text(row.label);
        continue;
      }
      const g = svg.append("g").attr("data-testid", "page-row").attr("data-connection", row.conn?.connection ?? 0);
      g.append("text").attr("class", "page-label").attr("x", 12).attr("y", row.y + row.height / 2 + 4).text(row.label).append("title").text(row.title);
      const rounds = row.report?.rounds ?? [];
      const rttMs = row.report?.handshake_rtt_ms ?? row.report?.min_rtt_ms ?? rtt;
      if (row.report && rounds.length > 0 && row.report.handshake_rtt_ms !== null) {
        // The TCP handshake: from the SYN to the server's first round.
        const x0 = X(this.roundAt(row, 0));
        const x1 = X(this.roundAt(row, rounds[0].start_ms));
        if (x1 > x0 + 1) {
          g.append("rect").attr("data-testid", "page-tcp").attr("class", "page-round tcp").attr("x", x0).attr("y", row.y + 1).attr("width", x1 - x0).attr("height", row.height - 2);
          if (x1 - x0 > 24) g.append("text").attr("class", "page-round-label").attr("x", x0 + 2).attr("y", row.y + 9).text("TCP");
        }
      }
      rounds.forEach((r, i) => {
        // A round's band: from its first segment's arrival to the next round's
        // (the last one: half a round trip past its end).
        const x0 = X(this.roundAt(row, r.start_ms));
        const next = i + 1 < rounds.length ? rounds[i + 1].start_ms : r.end_ms + rttMs / 2;
        const x1 = Math.max(X(this.roundAt(row, next)), x0 + 2);
        const band = g.append("g").attr("data-testid", "page-round").attr("data-round", r.index);
        band
          .append("rect")
          .attr("class", `page-round ${i % 2 ? "odd" : "even"} ${r.phase}`)
          .attr("x", x0)
          .attr("y", row.y + 1)
          .attr("width", x1 - x0)
          .attr("height", row.height - 2)
          .on("mousemove", (ev: MouseEvent) =>
            this.tooltip.show(ev.clientX, ev.clientY, `Round ${r.index} of #${row.conn?.connection}`, [
              ["phase", r.phase],
              ["segments", fmt.int(r.segments)],
              ["bytes", fmt.bytesExact(r.bytes)],
              ["arrived", `${fmt.ms(this.roundAt(row, r.start_ms))} – ${fmt.ms(this.roundAt(row, r.end_ms))}`],
              ["ended by", r.limit],
            ]),
          )
          .on("mouseleave", () => this.tooltip.hide());
        if (x1 - x0 > 18) band.append("text").attr("class", "page-round-label").attr("x", x0 + 2).attr("y", row.y + 9).text(`R${r.index}`);
      });
      // The bars: waiting (request to first byte), then receiving (first to last byte).
      for (const req of row.requests) {
        const s = span(req);
        const kind = contentKind(req);
        const bar = g
          .append("g")
          .attr("data-testid", "page-bar")
          .attr("data-request", req.index)
          .attr("data-type", kind)
          .attr("data-critical", req.critical ? "true" : "false")
          .attr("class", `page-bar${req.critical ? " critical" : ""}`);
        const y0 = row.y + rowPad + (row.lanes.get(req.index) ?? 0) * laneHeight + 1;
        const h = laneHeight - 3;
        const xs = X(s.start);
        const xf = s.first !== null ? X(s.first) : xs;
        const xe = Math.max(X(s.end), xf + 2);
        bar.append("rect").attr("class", "wait").attr("x", xs).attr("y", y0 + h / 3).attr("width", Math.max(xf - xs, 1)).attr("height", h / 3).attr("fill", kindColor[kind]);
        bar.append("rect").attr("class", "receive").attr("x", xf).attr("y", y0).attr("width", xe - xf).attr("height", h).attr("fill", kindColor[kind]);
        bar
          .on("mousemove", (ev: MouseEvent) => this.tooltip.show(ev.clientX, ev.clientY, req.url, this.requestRows(req)))
          .on("mouseleave", () => this.tooltip.hide());
      }
    }

    // The critical path: its bars joined, step to step.
    const pos = new Map<number, { x0: number; x1: number; y: number }>();
    for (const row of this.rows) {
      for (const req of row.requests) {
        const s = span(req);
        pos.set(req.index, { x0: X(s.start), x1: X(s.end), y: row.y + rowPad + (row.lanes.get(req.index) ?? 0) * laneHeight + laneHeight / 2 });
      }
    }
    const steps = page.critical_path.steps;
    for (let i = 1; i < steps.length; i++) {
      const a = pos.get(steps[i - 1].request);
      const b = pos.get(steps[i].request);
      if (!a || !b) continue;
      svg
        .append("path")
        .attr("data-testid", "critical-link")
        .attr("class", "critical-link")
        .attr("d", `M${Math.min(a.x1, b.x0)},${a.y} C${b.x0},${a.y} ${Math.min(a.x1, b.x0)},${b.y} ${b.x0},${b.y}`);
    }

    // The page's events.
    for (const [name, at] of [
      ["first contentful paint", page.first_contentful_paint_ms],
      ["DOMContentLoaded", page.dom_content_loaded_ms],
      ["load", page.load_ms],
    ] as [string, number | null][]) {
      if (at === null) continue;
      const g = svg.append("g").attr("data-testid", "page-marker").attr("data-event", name).attr("class", "page-marker");
      g.append("line").attr("x1", X(at)).attr("x2", X(at)).attr("y1", axisHeight - 4).attr("y2", bottom);
      g.append("title").text(`${name} at ${fmt.ms(at)}`);
    }
  }

  /** A round's time on the page's axis. */
  private roundAt(row: Row, ms: number): number {
    return this.page.capture_start_ms + (row.report?.start_ms ?? 0) + ms;
  }

  private requestRows(r: PageRequest): TooltipRows {
    const rows: TooltipRows = [
      ["type", `${r.type || "?"}${r.content_type ? ` (${r.content_type})` : ""}`],
      ["status", String(r.status)],
      ["bytes", fmt.bytesExact(r.bytes)],
      ["connection", r.connection ? `#${r.connection}${r.new_connection ? " (opened for it)" : ""}` : "not in the capture"],
      ["rounds", r.rounds.length ? r.rounds.join(", ") : "–"],
      ["asked for", fmt.ms(r.start_ms)],
      ["request sent", fmt.ms(r.request_ms)],
      ["first byte", fmt.ms(r.first_byte_ms)],
      ["last byte", fmt.ms(r.last_byte_ms)],
      ["browser's last byte", fmt.ms(r.browser.last_byte_ms)],
    ];
    if (r.render_blocking) rows.push(["render blocking", r.render_blocking.replace(/_/g, " ")]);
    if (r.critical) rows.push(["critical path", "yes"]);
    else if (r.blocking) rows.push(["first render waited", "yes"]);
    return rows;
  }
}
