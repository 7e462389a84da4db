// The field view: what a store of `slowstart field` holds, one panel per client
// network (all networks first), each showing how a quantity was distributed in
// each stretch of time: the 10th to 90th percentile as a band, the median as a
// line, and the marks of tune's changes across every panel.
import "./field.css";

import { axisBottom, axisLeft } from "d3-axis";
import { format } from "d3-format";
import { scaleLinear, scaleTime } from "d3-scale";
import { select } from "d3-selection";

import { el, svgNS } from "./canvas";
import * as fmt from "./format";
import { color } from "./palette";
import { Tooltip } from "./tooltip";
import type { FieldBucket, FieldNetwork, FieldQuantiles, FieldView } from "./types";

/**
 * Reads the field view: from the page itself (<script type="application/json"
 * id="slowstart-field">) or from the server (api/field).
 */
export async function loadField(doc: Document): Promise<FieldView> {
  const inline = doc.getElementById("slowstart-field");
  let view: FieldView;
  if (inline && inline.textContent && inline.textContent.trim() !== "") {
    view = JSON.parse(inline.textContent) as FieldView;
  } else {
    const res = await fetch("api/field", { headers: { Accept: "application/json" } });
    if (!res.ok) throw new Error(`loading the field view: HTTP ${res.status} ${res.statusText}`);
    view = (await res.json()) as FieldView;
  }
  if (!view.schema || !view.schema.startsWith("slowstart.field-view/")) {
    throw new Error(`not a slowstart field view (schema ${JSON.stringify(view.schema)})`);
  }
  return view;
}

/** A quantity the panels can show. */
interface Metric {
  key: "round_trips" | "handshake_rtt_ms" | "round1_bytes" | "response_ms" | "window_limited";
  label: string;
  /** The value's quantiles in a bucket (a share has its value as the median). */
  values: (b: FieldBucket) => FieldQuantiles;
  axis: (v: number) => string;
  exact: (v: number) => string;
}

const share = (b: FieldBucket): FieldQuantiles => ({ p10: null, median: b.window_limited, p90: null, mean: b.window_limited });

const metrics: Metric[] = [
  { key: "round_trips", label: "round trips per first response", values: (b) => b.round_trips, axis: (v) => (Number.isInteger(v) ? format("d")(v) : ""), exact: (v) => format(".2~f")(v) },
  { key: "handshake_rtt_ms", label: "handshake RTT", values: (b) => b.handshake_rtt_ms, axis: (v) => `${format("~s")(v)} ms`, exact: fmt.ms },
  { key: "round1_bytes", label: "round 1 bytes", values: (b) => b.round1_bytes, axis: (v) => fmt.bytes(v), exact: fmt.bytes },
  { key: "response_ms", label: "response time", values: (b) => b.response_ms, axis: (v) => `${format("~s")(v)} ms`, exact: fmt.ms },
  { key: "window_limited", label: "window-limited share", values: share, axis: format(".0%"), exact: format(".1%") },
];

const margin = { top: 12, right: 14, bottom: 28, left: 64 };
const panelHeight = 170;

/** One network's panel. */
class Panel {
  readonly section: HTMLElement;
  private readonly plot: HTMLDivElement;
  private readonly svgEl: SVGSVGElement;

  constructor(
    parent: HTMLElement,
    private readonly view: FieldView,
    private readonly net: FieldNetwork,
    private readonly tooltip: Tooltip,
  ) {
    this.section = el("section", "card field-panel");
    this.section.dataset.testid = "field-panel";
    this.section.dataset.network = net.network;
    this.section.dataset.buckets = String((net.buckets ?? []).length);
    const head = el("div", "card-head");
    head.appendChild(el("h2", "", net.network === "" ? "All networks" : net.network));
    head.appendChild(el("span", "source", fmt.plural(net.connections, "first response")));
    this.section.appendChild(head);
    this.plot = el("div", "plot");
    this.svgEl = document.createElementNS(svgNS, "svg");
    this.plot.appendChild(this.svgEl);
    this.section.appendChild(this.plot);
    parent.appendChild(this.section);
  }

  draw(metric: Metric): void {
    const width = Math.max(280, this.plot.clientWidth || 600);
    const svg = select(this.svgEl);
    svg.selectAll("*").remove();
    svg.attr("width", width).attr("height", panelHeight).attr("role", "img");
    svg.attr("aria-label", `${metric.label} over time, ${this.net.network || "all networks"}`);
    this.plot.style.height = `${panelHeight}px`;
    const buckets = (this.net.buckets ?? []).filter((b) => metric.values(b).median !== null);
    const x = scaleTime()
      .domain([new Date(this.view.from_unix_ms), new Date(this.view.to_unix_ms)])
      .range([margin.left, width - margin.right]);
    let top = 0;
    for (const b of buckets) {
      const q = metric.values(b);
      top = Math.max(top, q.p90 ?? q.median ?? 0);
    }
    const y = scaleLinear()
      .domain([0, metric.key === "window_limited" ? 1 : top > 0 ? top * 1.1 : 1])
      .nice()
      .range([panelHeight - margin.bottom, margin.top]);
    svg.append("g").attr("class", "axis").attr("transform", `translate(0,${panelHeight - margin.bottom})`).call(axisBottom(x).ticks(Math.max(2, Math.floor(width / 110))));
    svg.append("g").attr("class", "axis").attr("transform", `translate(${margin.left},0)`).call(axisLeft(y).ticks(4).tickFormat((v) => metric.axis(+v)));
    const mid = (b: FieldBucket) => (x(new Date(b.start_unix_ms)) + x(new Date(b.end_unix_ms))) / 2;
    // The 10th to 90th percentile of each stretch, as a bar; the median as a line.
    const bands = svg.append("g").attr("data-testid", "field-bands");
    for (const b of buckets) {
      const q = metric.values(b);
      if (q.p10 === null || q.p90 === null) continue;
      const x0 = x(new Date(b.start_unix_ms));
      const x1 = Math.max(x0 + 1, x(new Date(b.end_unix_ms)) - 1);
      bands
        .append("rect")
        .attr("x", x0)
        .attr("width", x1 - x0)
        .attr("y", y(q.p90))
        .attr("height", Math.max(1, y(q.p10) - y(q.p90)))
        .attr("fill", "#cfe0ef");
    }
    const points = buckets.map((b) => [mid(b), y(metric.values(b).median ?? 0)] as [number, number]);
    if (points.length > 0) {
      svg
        .append("path")
        .attr("data-testid", "field-median")
        .attr("d", "M" + points.map(([px, py]) => `${px},${py}`).join("L"))
        .attr("fill", "none")
        .attr("stroke", color.blue)
        .attr("stroke-width", 2);
      for (const [px, py] of points) svg.append("circle").attr("cx", px).attr("cy", py).attr("r", 2.5).attr("fill", color.blue);
    }
    // The marks of changes.
    const marks = svg.append("g").attr("data-testid", "field-marks");
    for (const m of this.view.marks ?? []) {
      const mx = x(new Date(m.unix_ms));
      if (mx < margin.left || mx > width - margin.right) continue;
      marks
        .append("line")
        .attr("x1", mx)
        .attr("x2", mx)
        .attr("y1", margin.top)
        .attr("y2", panelHeight - margin.bottom)
        .attr("stroke", color.vermillion)
        .attr("stroke-dasharray", "4 3")
        .attr("stroke-width", 1.5);
      marks.append("text").attr("x", mx + 3).attr("y", margin.top + 9).attr("class", "field-mark-label").text(m.text.replace(/^\S+ \S+ /, ""));
    }
    this.section.dataset.marks = String(marks.selectAll("line").size());
    this.section.dataset.points = String(points.length);
    // The tooltip: the bucket under the pointer.
    this.svgEl.onpointermove = (e: PointerEvent) => {
      const rect = this.svgEl.getBoundingClientRect();
      const px = e.clientX - rect.left;
      let best: FieldBucket | null = null;
      let bestDist = Infinity;
      for (const b of buckets) {
        const d = Math.abs(mid(b) - px);
        if (d < bestDist) {
          best = b;
          bestDist = d;
        }
      }
      if (!best || bestDist > 40) {
        this.tooltip.hide();
        return;
      }
      const q = metric.values(best);
      const v = (n: number | null) => (n === null ? "–" : metric.exact(n));
      const rows: [string, string][] = [
        ["from", new Date(best.start_unix_ms).toLocaleString()],
        ["to", new Date(best.end_unix_ms).toLocaleString()],
        ["first responses", fmt.int(best.connections)],
      ];
      if (metric.key === "window_limited") rows.push(["window-limited", v(q.median)]);
      else rows.push(["p10", v(q.p10)], ["median", v(q.median)], ["p90", v(q.p90)], ["mean", v(q.mean)]);
      if (best.cut_short > 0) rows.push(["not seen to the end", fmt.int(best.cut_short)]);
      this.tooltip.show(e.clientX, e.clientY, `${this.net.network || "all networks"}: ${metric.label}`, rows);
    };
    this.svgEl.onpointerleave = () => this.tooltip.hide();
  }
}

/** Draws the field view into #app. */
export function showField(view: FieldView): void {
  const app = document.getElementById("app")!;
  app.replaceChildren();
  const head = el("header", "page-head");
  head.appendChild(el("h1", "", "slowstart field"));
  const nets = view.networks ?? [];
  const all = nets.find((n) => n.network === "");
  const parts = [
    view.store.split("/").pop() ?? view.store,
    all ? fmt.plural(all.connections, "first response") : "",
    view.from_unix_ms ? `${new Date(view.from_unix_ms).toLocaleString()} to ${new Date(view.to_unix_ms).toLocaleString()}` : "",
    view.bucket_seconds ? `each point ${format("~s")(view.bucket_seconds)}s` : "",
  ].filter(Boolean);
  const p = el("p", "source", parts.join(" · "));
  p.dataset.testid = "source";
  p.title = view.store;
  head.appendChild(p);
  app.appendChild(head);
  if (nets.length === 0 || !all || all.connections === 0) {
    const e = el("p", "empty", "The store holds no first responses yet.");
    e.dataset.testid = "empty";
    app.appendChild(e);
    document.body.dataset.ready = "true";
    return;
  }
  const controls = el("div", "controls");
  const label = el("label", "conn-select", "show ");
  const select_ = el("select");
  select_.dataset.testid = "field-metric";
  for (const m of metrics) {
    const o = el("option", "", m.label);
    o.value = m.key;
    select_.appendChild(o);
  }
  label.appendChild(select_);
  controls.appendChild(label);
  const legend = el("div", "legend");
  for (const [text, cls, c] of [
    ["median", "legend-line solid", color.blue],
    ["a tune change", "legend-line dashed", color.vermillion],
  ]) {
    const item = el("span", "legend-item");
    const sw = el("span", cls);
    sw.style.borderColor = c;
    item.appendChild(sw);
    item.appendChild(document.createTextNode(text));
    legend.appendChild(item);
  }
  const band = el("span", "legend-item");
  band.appendChild(el("span", "legend-band"));
  band.appendChild(document.createTextNode("10th to 90th percentile"));
  legend.appendChild(band);
  controls.appendChild(legend);
  app.appendChild(controls);
  for (const m of view.marks ?? []) {
    const line = el("p", "field-mark", `mark: ${m.text}`);
    line.dataset.testid = "field-mark";
    app.appendChild(line);
  }
  const tooltip = new Tooltip(document.body);
  const grid = el("div", "field-grid");
  app.appendChild(grid);
  const panels = nets.map((n) => new Panel(grid, view, n, tooltip));
  if (view.networks_omitted > 0) {
    app.appendChild(el("p", "source", `${fmt.plural(view.networks_omitted, "more network")} not shown (field report lists them all).`));
  }
  let metric = metrics[0];
  const draw = () => {
    document.body.dataset.metric = metric.key;
    for (const p of panels) p.draw(metric);
  };
  select_.addEventListener("change", () => {
    metric = metrics.find((m) => m.key === select_.value) ?? metrics[0];
    draw();
  });
  draw();
  let lastWidth = grid.clientWidth;
  new ResizeObserver(() => {
    if (grid.clientWidth === lastWidth) return;
    lastWidth = grid.clientWidth;
    requestAnimationFrame(draw);
  }).observe(grid);
  document.body.dataset.ready = "true";
}
