// View 1: every connection on one time axis, grouped by server. Packets are ticks on
// a canvas (client-to-server above each lane's middle, server-to-client below), the
// TLS handshake and HTTP messages are bars; the axis zooms and pans.
import { axisTop } from "d3-axis";
import { scaleLinear, type ScaleLinear } from "d3-scale";
import type { Selection } from "d3-selection";
import { zoomIdentity, type ZoomBehavior, type ZoomTransform } from "d3-zoom";

import { el, sizeCanvas } from "./canvas";
import { lowerBound, type ConnModel, type ServerGroup, type TimeUnit } from "./data";
import * as fmt from "./format";
import { iwHasNumber, iwShort } from "./iw";
import { barColor, tickColor, tickKinds, type TickKind } from "./palette";
import { plotLayers, zoomable } from "./plot";
import type { Tooltip, TooltipRows } from "./tooltip";

const axisHeight = 30;
const groupRowHeight = 24;
const laneHeight = 40;
const maxZoom = 1e5;

type Row = { kind: "group"; group: ServerGroup; y: number } | { kind: "conn"; model: ConnModel; y: number };

interface Bar {
  model: ConnModel;
  kind: "tls" | "http";
  startMs: number; // from the connection's start
  endMs: number;
  title: string;
  rows: TooltipRows;
}

const tickPriority: TickKind[] = ["rst", "syn", "fin", "retx", "psh", "data", "ack"];

export class Timeline {
  readonly section: HTMLElement;
  private readonly plot: HTMLDivElement;
  private readonly canvas: HTMLCanvasElement;
  private readonly svg: Selection<SVGSVGElement, unknown, null, undefined>;
  private readonly back: Selection<SVGSVGElement, unknown, null, undefined>;
  private readonly rows: Row[] = [];
  private readonly bars: Bar[] = [];
  private readonly zoomBehavior: ZoomBehavior<SVGSVGElement, unknown>;
  private transform: ZoomTransform = zoomIdentity;
  private unit: TimeUnit = "ms";
  private selected = 0;
  private width = 0;
  private height = 0;
  private labelWidth = 180;
  private baseX: ScaleLinear<number, number> = scaleLinear();

  constructor(
    parent: HTMLElement,
    groups: ServerGroup[],
    private readonly tooltip: Tooltip,
    private readonly onSelect: (index: number) => void,
  ) {
    this.section = el("section", "card timeline");
    this.section.dataset.testid = "timeline";
    parent.appendChild(this.section);

    const head = el("div", "card-head");
    head.appendChild(el("h2", "", "Connections"));
    const zoomButtons = el("div", "button-row");
    for (const [label, title, fn] of [
      ["+", "zoom in", () => this.zoomBy(2)],
      ["−", "zoom out", () => this.zoomBy(0.5)],
      ["reset", "show everything", () => this.resetZoom()],
    ] as [string, string, () => void][]) {
      const b = el("button", "", label);
      b.type = "button";
      b.title = title;
      b.setAttribute("aria-label", `timeline: ${title}`);
      b.dataset.testid = `timeline-${title.replace(/ /g, "-")}`;
      b.addEventListener("click", fn);
      zoomButtons.appendChild(b);
    }
    head.appendChild(zoomButtons);
    this.section.appendChild(head);
    this.section.appendChild(this.legend());

    let y = axisHeight;
    for (const g of groups) {
      this.rows.push({ kind: "group", group: g, y });
      y += groupRowHeight;
      for (const m of g.conns) {
        this.rows.push({ kind: "conn", model: m, y });
        y += laneHeight;
        this.bars.push(...barsOf(m));
      }
    }
    this.height = y + 6;

    // Three layers: backgrounds (SVG), ticks (canvas), labels, bars and axis (SVG).
    const layers = plotLayers("timeline of every connection's packets");
    this.plot = layers.plot;
    this.back = layers.back;
    this.canvas = layers.canvas;
    this.svg = layers.svg;
    this.section.appendChild(this.plot);

    this.zoomBehavior = zoomable(
      this.svg,
      maxZoom,
      (t) => {
        this.transform = t;
        this.tooltip.hide();
        this.draw();
      },
      (e) => this.hover(e),
      () => this.tooltip.hide(),
    );
    this.svg.node()?.addEventListener("click", (e) => this.click(e));

    this.section.dataset.connections = String(groups.reduce((n, g) => n + g.conns.length, 0));
    this.section.dataset.groups = String(groups.length);
    this.section.dataset.packets = String(this.rows.reduce((n, r) => n + (r.kind === "conn" ? r.model.packets.length : 0), 0));
    this.section.dataset.bars = String(this.bars.length);
  }

  setUnit(unit: TimeUnit): void {
    this.unit = unit;
    this.transform = zoomIdentity;
    this.svg.call(this.zoomBehavior.transform, zoomIdentity);
    this.layout();
  }

  setSelected(index: number): void {
    this.selected = index;
    this.draw();
  }

  zoomBy(factor: number): void {
    this.svg.call(this.zoomBehavior.scaleBy, factor);
  }

  resetZoom(): void {
    this.svg.call(this.zoomBehavior.transform, zoomIdentity);
  }

  /** Lays the plot out for the current width; call on resize. */
  layout(): void {
    this.width = Math.max(320, this.plot.clientWidth);
    this.labelWidth = this.width < 600 ? 118 : 190;
    const left = this.labelWidth;
    const right = this.width - 14;
    for (const layer of [this.svg, this.back]) {
      layer.attr("width", this.width).attr("height", this.height).attr("viewBox", `0 0 ${this.width} ${this.height}`);
    }
    this.plot.style.height = `${this.height}px`;
    let maxValue = 0;
    for (const r of this.rows) {
      if (r.kind !== "conn") continue;
      const c = r.model.conn;
      const last = Math.max(c.duration_ms, r.model.times.length ? r.model.times[r.model.times.length - 1] : 0);
      maxValue = Math.max(maxValue, this.value(r.model, last));
    }
    this.baseX = scaleLinear()
      .domain([0, maxValue > 0 ? maxValue * 1.02 : 1])
      .range([left, right]);
    const extent: [[number, number], [number, number]] = [
      [left, 0],
      [right, this.height],
    ];
    this.zoomBehavior.extent(extent).translateExtent(extent);
    this.draw();
  }

  /** The axis value of time t (ms from the connection's start). */
  private value(m: ConnModel, t: number): number {
    return this.unit === "ms" ? m.conn.start_ms + t : t / m.rttMs;
  }

  /** The connection-relative time of axis value v. */
  private timeOf(m: ConnModel, v: number): number {
    return this.unit === "ms" ? v - m.conn.start_ms : v * m.rttMs;
  }

  private xScale(): ScaleLinear<number, number> {
    return this.transform.rescaleX(this.baseX);
  }

  private draw(): void {
    if (this.width === 0) return;
    const x = this.xScale();
    const [d0, d1] = x.domain();
    this.section.dataset.domainStart = String(d0);
    this.section.dataset.domainEnd = String(d1);
    this.section.dataset.unit = this.unit;
    this.drawSvg(x);
    this.drawTicks(x);
  }

  private drawSvg(x: ScaleLinear<number, number>): void {
    const svg = this.svg;
    svg.selectAll("*").remove();
    const back = this.back;
    back.selectAll("*").remove();
    const left = this.labelWidth;
    const right = this.width - 14;
    const clipId = "timeline-clip";
    svg
      .append("defs")
      .append("clipPath")
      .attr("id", clipId)
      .append("rect")
      .attr("x", left)
      .attr("y", 0)
      .attr("width", right - left)
      .attr("height", this.height);

    // Row backgrounds and labels.
    const rowsG = svg.append("g").attr("class", "rows");
    const backG = back.append("g");
    for (const r of this.rows) {
      if (r.kind === "group") {
        const n = r.group.conns.length;
        backG
          .append("rect")
          .attr("class", "group-bg")
          .attr("x", 0)
          .attr("y", r.y)
          .attr("width", this.width)
          .attr("height", groupRowHeight);
        rowsG
          .append("text")
          .attr("class", "group-label")
          .attr("x", 6)
          .attr("y", r.y + 16)
          .text(`server ${r.group.server} · ${fmt.plural(n, "connection")}`);
        continue;
      }
      const c = r.model.conn;
      const g = rowsG
        .append("g")
        .attr("class", c.index === this.selected ? "conn-row selected" : "conn-row")
        .attr("data-testid", "conn-row")
        .attr("data-index", c.index);
      backG
        .append("rect")
        .attr("class", c.index === this.selected ? "row-bg selected" : "row-bg")
        .attr("x", 0)
        .attr("y", r.y)
        .attr("width", this.width)
        .attr("height", laneHeight);
      g.append("rect")
        .attr("class", "row-hit")
        .attr("x", 0)
        .attr("y", r.y)
        .attr("width", this.labelWidth)
        .attr("height", laneHeight);
      const port = c.client.slice(c.client.lastIndexOf(":"));
      g.append("text")
        .attr("class", "conn-label")
        .attr("x", 10)
        .attr("y", r.y + 17)
        .text(`#${c.index}  ${this.width < 600 ? port : c.client}`);
      const iw = c.initial_window;
      const sub = [
        iwHasNumber(iw) ? `IW ${iwShort(iw)}` : "",
        `${fmt.plural(c.round_trips.total, "RTT")}`,
      ]
        .filter(Boolean)
        .join(" · ");
      g.append("text")
        .attr("class", "conn-sub")
        .attr("x", 10)
        .attr("y", r.y + 32)
        .text(sub);
      backG
        .append("line")
        .attr("class", "lane-mid")
        .attr("x1", left)
        .attr("x2", right)
        .attr("y1", r.y + laneHeight / 2)
        .attr("y2", r.y + laneHeight / 2);
    }

    // Bars: the TLS handshake and HTTP messages.
    const barsG = svg.append("g").attr("clip-path", `url(#${clipId})`);
    const rowY = new Map<ConnModel, number>();
    for (const r of this.rows) if (r.kind === "conn") rowY.set(r.model, r.y);
    let drawn = 0;
    this.bars.forEach((b, i) => {
      const y = rowY.get(b.model)!;
      const x0 = x(this.value(b.model, b.startMs));
      const x1 = x(this.value(b.model, b.endMs));
      if (x1 < left || x0 > right) return;
      drawn++;
      barsG
        .append("rect")
        .attr("class", `bar bar-${b.kind}`)
        .attr("data-testid", `bar-${b.kind}`)
        .attr("data-bar", i)
        .attr("x", x0)
        .attr("width", Math.max(2, x1 - x0))
        .attr("y", y + laneHeight / 2 - 4)
        .attr("height", 8)
        .attr("rx", 2)
        .attr("fill", b.kind === "tls" ? barColor.tls : barColor.http)
        .attr("stroke", b.kind === "tls" ? "#7a3f63" : barColor.httpStroke);
    });
    this.section.dataset.barsDrawn = String(drawn);

    // The axis.
    const ticks = Math.max(2, Math.floor((right - left) / 90));
    const axis = axisTop(x)
      .ticks(ticks)
      .tickSizeOuter(0)
      .tickFormat((v) => (this.unit === "ms" ? `${+v}` : `${+v}`));
    svg
      .append("g")
      .attr("class", "axis")
      .attr("transform", `translate(0,${axisHeight - 4})`)
      .call(axis);
    back
      .append("g")
      .attr("class", "grid")
      .selectAll("line")
      .data(x.ticks(ticks))
      .join("line")
      .attr("x1", (d) => x(d))
      .attr("x2", (d) => x(d))
      .attr("y1", axisHeight)
      .attr("y2", this.height);
    svg
      .append("text")
      .attr("class", "axis-label")
      .attr("x", 6)
      .attr("y", 13)
      .text(this.unit === "ms" ? "time (ms)" : "round trips");
  }

  private drawTicks(x: ScaleLinear<number, number>): void {
    const ctx = sizeCanvas(this.canvas, this.width, this.height);
    const left = this.labelWidth;
    const right = this.width - 14;
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, 0, right - left, this.height);
    ctx.clip();
    let visible = 0;
    let drawnTicks = 0;
    for (const r of this.rows) {
      if (r.kind !== "conn") continue;
      const m = r.model;
      const t0 = this.timeOf(m, x.invert(left));
      const t1 = this.timeOf(m, x.invert(right));
      const i0 = lowerBound(m.times, t0);
      const i1 = lowerBound(m.times, t1 + 1e-9);
      const n = i1 - i0;
      visible += n;
      const mid = r.y + laneHeight / 2;
      const decimate = n > (right - left) * 1.5;
      if (!decimate) {
        for (let i = i0; i < i1; i++) {
          const p = m.packets[i];
          drawTick(ctx, x(this.value(m, p.t_ms)), mid, p.dir === "c2s", m.kinds[i], true);
          drawnTicks++;
        }
        continue;
      }
      // Decimated: one tick per pixel column, direction and kind.
      const seen = new Map<number, number>(); // column*2+dir -> bitmask of kinds
      for (let i = i0; i < i1; i++) {
        const p = m.packets[i];
        const col = Math.round(x(this.value(m, p.t_ms)));
        const key = col * 2 + (p.dir === "c2s" ? 0 : 1);
        const bit = 1 << tickPriority.indexOf(m.kinds[i]);
        const had = seen.get(key) ?? 0;
        if (had & bit) continue;
        seen.set(key, had | bit);
        drawTick(ctx, col, mid, p.dir === "c2s", m.kinds[i], false);
        drawnTicks++;
      }
    }
    ctx.restore();
    this.section.dataset.visiblePackets = String(visible);
    this.section.dataset.ticksDrawn = String(drawnTicks);
  }

  private rowAt(y: number): Row | undefined {
    for (const r of this.rows) {
      const h = r.kind === "group" ? groupRowHeight : laneHeight;
      if (y >= r.y && y < r.y + h) return r;
    }
    return undefined;
  }

  private hover(e: PointerEvent): void {
    const target = e.target as Element;
    const barIndex = target.getAttribute?.("data-bar");
    if (barIndex !== null && barIndex !== undefined) {
      const b = this.bars[+barIndex];
      this.tooltip.show(e.clientX, e.clientY, b.title, b.rows);
      return;
    }
    const box = (this.svg.node() as SVGSVGElement).getBoundingClientRect();
    const px = e.clientX - box.left;
    const py = e.clientY - box.top;
    const r = this.rowAt(py);
    if (!r || r.kind !== "conn" || px < this.labelWidth) {
      this.tooltip.hide();
      return;
    }
    const m = r.model;
    const x = this.xScale();
    const t0 = this.timeOf(m, x.invert(px - 5));
    const t1 = this.timeOf(m, x.invert(px + 5));
    const c2s = py < r.y + laneHeight / 2;
    let best = -1;
    let bestDist = Infinity;
    for (let i = lowerBound(m.times, t0); i < m.times.length && m.times[i] <= t1; i++) {
      if ((m.packets[i].dir === "c2s") !== c2s) continue;
      const d = Math.abs(x(this.value(m, m.times[i])) - px);
      if (d < bestDist) {
        bestDist = d;
        best = i;
      }
    }
    if (best < 0) {
      this.tooltip.hide();
      return;
    }
    const p = m.packets[best];
    this.tooltip.show(e.clientX, e.clientY, `#${m.conn.index} ${p.dir === "c2s" ? "client → server" : "server → client"} ${p.flags}`, packetRows(m, p));
  }

  private click(e: MouseEvent): void {
    const box = (this.svg.node() as SVGSVGElement).getBoundingClientRect();
    const r = this.rowAt(e.clientY - box.top);
    if (r && r.kind === "conn") this.onSelect(r.model.conn.index);
  }

  private legend(): HTMLElement {
    const box = el("div", "legend");
    box.setAttribute("aria-label", "legend");
    for (const k of tickKinds) {
      const item = el("span", "legend-item");
      const c = el("canvas", "legend-swatch");
      const ctx = sizeCanvas(c, 12, 16);
      drawTick(ctx, 6, 8, false, k.kind, true, 0.5);
      item.appendChild(c);
      item.appendChild(document.createTextNode(k.label));
      item.title = k.shape;
      box.appendChild(item);
    }
    for (const [label, fill] of [
      ["TLS handshake", barColor.tls],
      ["HTTP message", barColor.http],
    ]) {
      const item = el("span", "legend-item");
      const sw = el("span", "legend-bar");
      sw.style.background = fill;
      item.appendChild(sw);
      item.appendChild(document.createTextNode(label));
      box.appendChild(item);
    }
    box.appendChild(el("span", "legend-note", "above each lane: client → server; below: server → client"));
    return box;
  }
}

/** Draws one tick from the lane's middle, up for client-to-server packets. */
function drawTick(
  ctx: CanvasRenderingContext2D,
  x: number,
  mid: number,
  up: boolean,
  kind: TickKind,
  caps: boolean,
  scale = 1,
): void {
  const dir = up ? -1 : 1;
  const base = mid + dir * 5 * scale;
  const tall = kind === "syn" || kind === "fin" || kind === "rst" || kind === "retx";
  const len = (tall ? 13 : kind === "ack" ? 5 : 10) * scale;
  const tip = base + dir * len;
  ctx.strokeStyle = tickColor[kind];
  ctx.fillStyle = tickColor[kind];
  ctx.lineWidth = tall ? 1.6 : 1;
  ctx.beginPath();
  ctx.moveTo(x + 0.5, base);
  ctx.lineTo(x + 0.5, tip);
  ctx.stroke();
  if (!caps && !tall) return;
  const s = 3 * Math.max(scale, 0.8);
  ctx.beginPath();
  switch (kind) {
    case "syn":
      ctx.rect(x + 0.5 - s, tip - s, 2 * s, 2 * s);
      ctx.fill();
      break;
    case "fin":
      ctx.moveTo(x + 0.5 - s, tip);
      ctx.lineTo(x + 0.5 + s, tip);
      ctx.lineTo(x + 0.5, tip - dir * 2 * s);
      ctx.closePath();
      ctx.fill();
      break;
    case "rst":
      ctx.moveTo(x + 0.5 - s, tip - s);
      ctx.lineTo(x + 0.5 + s, tip + s);
      ctx.moveTo(x + 0.5 + s, tip - s);
      ctx.lineTo(x + 0.5 - s, tip + s);
      ctx.lineWidth = 1.6;
      ctx.stroke();
      break;
    case "retx":
      ctx.moveTo(x + 0.5, tip - s);
      ctx.lineTo(x + 0.5 + s, tip);
      ctx.lineTo(x + 0.5, tip + s);
      ctx.lineTo(x + 0.5 - s, tip);
      ctx.closePath();
      ctx.fill();
      break;
    case "psh":
      ctx.arc(x + 0.5, tip, s * 0.7, 0, 2 * Math.PI);
      ctx.fill();
      break;
  }
}

export function packetRows(m: ConnModel, p: { t_ms: number; seq: number; len: number; ack: number; win: number; flags: string; retx?: boolean; ooo?: boolean; round?: number }): TooltipRows {
  const rows: TooltipRows = [
    ["time", `${fmt.ms(p.t_ms)} (${fmt.rtts(p.t_ms / m.rttMs)})`],
    ["flags", p.flags],
    ["seq", fmt.int(p.seq)],
    ["length", fmt.bytesExact(p.len)],
    ["ack", p.ack < 0 ? "–" : fmt.int(p.ack)],
    ["window", fmt.bytesExact(p.win)],
  ];
  if (p.round) rows.push(["round", String(p.round)]);
  if (p.retx) rows.push(["retransmission", "yes"]);
  if (p.ooo) rows.push(["out of order", "yes"]);
  return rows;
}

/** The TLS handshake bar and the HTTP message bars of a connection. */
function barsOf(m: ConnModel): Bar[] {
  const c = m.conn;
  const bars: Bar[] = [];
  const rounds = c.rounds ?? [];
  const tlsRounds = rounds.filter((r) => r.phase === "tls");
  if (c.tls && tlsRounds.length > 0) {
    const firstClientData = m.packets.find((p) => p.dir === "c2s" && p.len > 0);
    const start = firstClientData ? Math.min(firstClientData.t_ms, tlsRounds[0].start_ms) : tlsRounds[0].start_ms;
    const end = tlsRounds[tlsRounds.length - 1].end_ms;
    bars.push({
      model: m,
      kind: "tls",
      startMs: start,
      endMs: end,
      title: `#${c.index} TLS ${c.tls.version || "(version unknown)"} handshake`,
      rows: [
        ["from", fmt.ms(start)],
        ["to (server's last flight)", fmt.ms(end)],
        ["round trips", String(c.tls.handshake_round_trips)],
        ["server flight", `${fmt.bytesExact(c.tls.server_flight_bytes)}, ${fmt.plural(c.tls.server_flight_segments, "segment")}`],
      ],
    });
  }
  for (const h of c.http ?? []) {
    const start = h.request_ms ?? h.first_byte_ms;
    const end = h.last_byte_ms ?? h.first_byte_ms ?? start;
    if (start === null || end === null) continue;
    bars.push({
      model: m,
      kind: "http",
      startMs: start,
      endMs: end,
      title: `#${c.index} ${h.method} ${h.path} → ${h.status || "no response"}`,
      rows: [
        ["request", fmt.ms(h.request_ms)],
        ["first byte", fmt.ms(h.first_byte_ms)],
        ["last byte", fmt.ms(h.last_byte_ms)],
        ["response", fmt.bytesExact(h.bytes)],
        ["body", fmt.bytesExact(h.body_bytes)],
        ...(h.chunked ? ([["transfer", "chunked"]] as TooltipRows) : []),
        ...(h.incomplete ? ([["note", "partly outside the capture"]] as TooltipRows) : []),
      ],
    });
  }
  return bars;
}
