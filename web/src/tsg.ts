// View 2: one connection's time-sequence graph (server-to-client data): each data
// segment a vertical line from its first to its last byte, the client's ACK line and
// receive-window line (ACK + window), rounds shaded and labeled, retransmissions
// marked. Drawn on a canvas, decimated per pixel column when zoomed out.
import { axisBottom, axisLeft } from "d3-axis";
import { format } from "d3-format";
import { scaleLinear, type ScaleLinear } from "d3-scale";
import type { Selection } from "d3-selection";
import { zoomIdentity, type ZoomBehavior, type ZoomTransform } from "d3-zoom";

import { el, sizeCanvas } from "./canvas";
import { lowerBound, type ConnModel, type TimeUnit } from "./data";
import * as fmt from "./format";
import { color, limitText } from "./palette";
import { plotLayers, zoomable } from "./plot";
import { packetRows } from "./timeline";
import type { Tooltip, TooltipRows } from "./tooltip";
import type { Packet, Round } from "./types";

const margin = { top: 40, right: 16, bottom: 40, left: 64 };
const maxZoom = 1e5;

/** Points of one direction, sorted by time, in parallel arrays. */
interface Series {
  times: Float64Array;
  packets: Packet[];
}

function series(packets: Packet[]): Series {
  return { times: Float64Array.from(packets, (p) => p.t_ms), packets };
}

export class TimeSequenceGraph {
  readonly section: HTMLElement;
  private readonly title: HTMLHeadingElement;
  private readonly plot: HTMLDivElement;
  private readonly canvas: HTMLCanvasElement;
  private readonly svg: Selection<SVGSVGElement, unknown, null, undefined>;
  private readonly back: Selection<SVGSVGElement, unknown, null, undefined>;
  private readonly empty: HTMLParagraphElement;
  private readonly zoomBehavior: ZoomBehavior<SVGSVGElement, unknown>;
  private transform: ZoomTransform = zoomIdentity;
  private model: ConnModel | null = null;
  private data: Series = series([]);
  private acks: Series = series([]);
  private unit: TimeUnit = "ms";
  private width = 0;
  private height = 0;
  private baseX: ScaleLinear<number, number> = scaleLinear();
  private y: ScaleLinear<number, number> = scaleLinear();

  constructor(
    parent: HTMLElement,
    private readonly tooltip: Tooltip,
  ) {
    this.section = el("section", "card tsg");
    this.section.dataset.testid = "tsg";
    parent.appendChild(this.section);
    const head = el("div", "card-head");
    this.title = el("h2", "", "Time–sequence graph");
    head.appendChild(this.title);
    const buttons = el("div", "button-row");
    for (const [label, title, fn] of [
      ["+", "zoom in", () => this.svg.call(this.zoomBehavior.scaleBy, 2)],
      ["−", "zoom out", () => this.svg.call(this.zoomBehavior.scaleBy, 0.5)],
      ["reset", "show everything", () => this.svg.call(this.zoomBehavior.transform, zoomIdentity)],
    ] as [string, string, () => void][]) {
      const b = el("button", "", label);
      b.type = "button";
      b.title = title;
      b.setAttribute("aria-label", `time-sequence graph: ${title}`);
      b.dataset.testid = `tsg-${title.replace(/ /g, "-")}`;
      b.addEventListener("click", fn);
      buttons.appendChild(b);
    }
    head.appendChild(buttons);
    this.section.appendChild(head);
    this.section.appendChild(this.legend());
    this.empty = el("p", "empty", "");
    this.empty.hidden = true;
    this.section.appendChild(this.empty);
    // Three layers: round bands (SVG), segments and lines (canvas), axes, labels and
    // the bands' hover areas (SVG).
    const layers = plotLayers("time-sequence graph of the server's data");
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
  }

  setConnection(m: ConnModel): void {
    this.model = m;
    this.data = series(m.packets.filter((p) => p.dir === "s2c" && p.len > 0));
    this.acks = series(m.packets.filter((p) => p.dir === "c2s" && p.ack >= 0 && !p.flags.includes("S")));
    const c = m.conn;
    this.title.textContent = `Connection #${c.index}: time–sequence graph (server → client)`;
    this.section.dataset.connection = String(c.index);
    this.section.dataset.segments = String(this.data.packets.length);
    this.section.dataset.rounds = String((c.rounds ?? []).length);
    const noPackets = m.packets.length === 0;
    this.empty.hidden = !noPackets;
    this.empty.textContent = noPackets
      ? "This Report carries no packets, so there is no time–sequence graph: open the capture itself with slowstart view to see one."
      : "";
    this.transform = zoomIdentity;
    this.svg.call(this.zoomBehavior.transform, zoomIdentity);
    this.layout();
  }

  setUnit(unit: TimeUnit): void {
    this.unit = unit;
    this.transform = zoomIdentity;
    this.svg.call(this.zoomBehavior.transform, zoomIdentity);
    this.layout();
  }

  layout(): void {
    if (!this.model) return;
    this.width = Math.max(300, this.plot.clientWidth);
    this.height = this.width < 600 ? 300 : 380;
    this.plot.style.height = `${this.height}px`;
    for (const layer of [this.svg, this.back]) {
      layer.attr("width", this.width).attr("height", this.height).attr("viewBox", `0 0 ${this.width} ${this.height}`);
    }
    const m = this.model;
    const last = Math.max(m.conn.duration_ms, m.times.length ? m.times[m.times.length - 1] : 0);
    const left = margin.left;
    const right = this.width - margin.right;
    this.baseX = scaleLinear()
      .domain([0, this.value(last > 0 ? last * 1.02 : 1)])
      .range([left, right]);
    const extent: [[number, number], [number, number]] = [
      [left, 0],
      [right, this.height],
    ];
    this.zoomBehavior.extent(extent).translateExtent(extent);
    this.draw();
  }

  private value(t: number): number {
    return this.unit === "ms" ? t : t / (this.model?.rttMs ?? 1);
  }

  private timeOf(v: number): number {
    return this.unit === "ms" ? v : v * (this.model?.rttMs ?? 1);
  }

  private draw(): void {
    const m = this.model;
    if (!m || this.width === 0) return;
    const x = this.transform.rescaleX(this.baseX);
    const left = margin.left;
    const right = this.width - margin.right;
    const top = margin.top;
    const bottom = this.height - margin.bottom;
    const t0 = this.timeOf(x.invert(left));
    const t1 = this.timeOf(x.invert(right));
    this.section.dataset.domainStart = String(x.domain()[0]);
    this.section.dataset.domainEnd = String(x.domain()[1]);

    // Fit the sequence axis to what is visible: data and ACKs, and the receive
    // window line up to half the data's range above them.
    const d0 = lowerBound(this.data.times, t0);
    const d1 = lowerBound(this.data.times, t1 + 1e-9);
    const a0 = Math.max(0, lowerBound(this.acks.times, t0) - 1);
    const a1 = lowerBound(this.acks.times, t1 + 1e-9);
    let lo = Infinity;
    let hi = -Infinity;
    let winHi = -Infinity;
    for (let i = d0; i < d1; i++) {
      const p = this.data.packets[i];
      lo = Math.min(lo, p.seq);
      hi = Math.max(hi, p.seq + p.len);
    }
    for (let i = a0; i < a1; i++) {
      const p = this.acks.packets[i];
      lo = Math.min(lo, p.ack);
      hi = Math.max(hi, p.ack);
      winHi = Math.max(winHi, p.ack + p.win);
    }
    if (!Number.isFinite(lo)) {
      lo = 0;
      hi = Math.max(1, m.conn.bytes_to_client);
    }
    if (winHi > hi) hi = Math.min(winHi, hi + (hi - lo) * 0.5);
    if (hi <= lo) hi = lo + 1;
    this.y = scaleLinear()
      .domain([lo, hi + (hi - lo) * 0.03])
      .range([bottom, top])
      .nice();
    const y = this.y;

    // SVG: round bands, axes, labels.
    const svg = this.svg;
    svg.selectAll("*").remove();
    this.back.selectAll("*").remove();
    const rounds = m.conn.rounds ?? [];
    const shadeG = this.back.append("g").attr("class", "round-bands");
    const bandsG = svg.append("g").attr("class", "round-hits");
    let bandsDrawn = 0;
    rounds.forEach((r, i) => {
      const next = rounds[i + 1];
      const endT = next ? next.start_ms : Math.max(r.end_ms, r.start_ms + (m.rttMs || 1) * 0.5);
      let bx0 = x(this.value(r.start_ms));
      let bx1 = x(this.value(endT));
      if (bx1 < left || bx0 > right) return;
      bx0 = Math.max(left, bx0);
      bx1 = Math.min(right, Math.max(bx1, bx0 + 3));
      bandsDrawn++;
      const g = bandsG.append("g").attr("data-testid", "round-band").attr("data-round", r.index);
      shadeG
        .append("rect")
        .attr("class", i % 2 === 0 ? "band band-even" : "band band-odd")
        .attr("x", bx0)
        .attr("y", top - 30)
        .attr("width", bx1 - bx0)
        .attr("height", bottom - top + 30);
      g.append("rect")
        .attr("class", "band-hit")
        .attr("x", bx0)
        .attr("y", top - 30)
        .attr("width", bx1 - bx0)
        .attr("height", bottom - top + 30)
        .attr("data-round", r.index);
      const w = bx1 - bx0;
      const line1 = `R${r.index} · ${r.limit}`;
      const line2 = `${r.segments} seg · ${fmt.bytes(r.bytes)}`;
      if (w > `R${r.index}`.length * 7.5 + 6) {
        g.append("text")
          .attr("class", "band-label")
          .attr("x", bx0 + 4)
          .attr("y", top - 18)
          .attr("data-round", r.index)
          .text(w > line1.length * 6.4 + 6 ? line1 : `R${r.index}`);
      }
      if (w > line2.length * 6 + 6) {
        g.append("text")
          .attr("class", "band-sub")
          .attr("x", bx0 + 4)
          .attr("y", top - 5)
          .attr("data-round", r.index)
          .text(line2);
      }
    });
    this.section.dataset.roundsDrawn = String(bandsDrawn);

    const xTicks = Math.max(2, Math.floor((right - left) / 80));
    svg
      .append("g")
      .attr("class", "axis")
      .attr("transform", `translate(0,${bottom})`)
      .call(axisBottom(x).ticks(xTicks).tickSizeOuter(0));
    svg
      .append("g")
      .attr("class", "axis")
      .attr("transform", `translate(${left},0)`)
      .call(
        axisLeft(y)
          .ticks(Math.max(3, Math.floor((bottom - top) / 50)))
          .tickFormat((v) => seqFormat(+v)),
      );
    svg
      .append("text")
      .attr("class", "axis-label")
      .attr("x", (left + right) / 2)
      .attr("y", this.height - 6)
      .attr("text-anchor", "middle")
      .text(this.unit === "ms" ? "time since the connection's first packet (ms)" : "time since the connection's first packet (round trips)");
    svg
      .append("text")
      .attr("class", "axis-label")
      .attr("transform", `translate(14,${(top + bottom) / 2}) rotate(-90)`)
      .attr("text-anchor", "middle")
      .text("sequence offset (bytes)");

    // Canvas: segments, ACK and window lines.
    const ctx = sizeCanvas(this.canvas, this.width, this.height);
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top - 2, right - left, bottom - top + 4);
    ctx.clip();
    this.drawStep(ctx, x, a0, a1, (p) => p.ack + p.win, color.green, [5, 3]);
    this.drawStep(ctx, x, a0, a1, (p) => p.ack, color.orange, []);
    const drawn = this.drawSegments(ctx, x, d0, d1);
    ctx.restore();
    this.section.dataset.visibleSegments = String(d1 - d0);
    this.section.dataset.segmentsDrawn = String(drawn);
  }

  /** A step line through the ACKs' values; decimated to one min-max per column. */
  private drawStep(
    ctx: CanvasRenderingContext2D,
    x: ScaleLinear<number, number>,
    i0: number,
    i1: number,
    valueOf: (p: Packet) => number,
    stroke: string,
    dash: number[],
  ): void {
    if (i1 - i0 < 1) return;
    const y = this.y;
    ctx.strokeStyle = stroke;
    ctx.lineWidth = 1.5;
    ctx.setLineDash(dash);
    ctx.beginPath();
    const pts = this.acks.packets;
    const decimate = i1 - i0 > (this.width - margin.left - margin.right) * 2;
    let prevY = NaN;
    let col = NaN;
    let colMin = 0;
    let colMax = 0;
    for (let i = i0; i < i1; i++) {
      const px = x(this.value(pts[i].t_ms));
      const py = y(valueOf(pts[i]));
      if (Number.isNaN(prevY)) {
        ctx.moveTo(px, py);
      } else if (!decimate) {
        ctx.lineTo(px, prevY);
        ctx.lineTo(px, py);
      } else {
        const c = Math.round(px);
        if (c !== col) {
          if (!Number.isNaN(col)) {
            ctx.lineTo(col, colMin);
            ctx.lineTo(col, colMax);
          }
          ctx.lineTo(c, prevY);
          col = c;
          colMin = py;
          colMax = py;
        }
        colMin = Math.min(colMin, py);
        colMax = Math.max(colMax, py);
      }
      prevY = py;
    }
    if (!Number.isNaN(prevY)) ctx.lineTo(this.width - margin.right, prevY);
    ctx.stroke();
    ctx.setLineDash([]);
  }

  /** Draws data segments; returns how many marks were drawn. */
  private drawSegments(ctx: CanvasRenderingContext2D, x: ScaleLinear<number, number>, i0: number, i1: number): number {
    const y = this.y;
    const pts = this.data.packets;
    const decimate = i1 - i0 > this.width - margin.left - margin.right;
    let drawn = 0;
    ctx.lineWidth = 1.4;
    if (!decimate) {
      for (let i = i0; i < i1; i++) {
        const p = pts[i];
        const px = Math.round(x(this.value(p.t_ms))) + 0.5;
        const ya = y(p.seq);
        const yb = y(p.seq + p.len);
        ctx.strokeStyle = p.retx ? color.vermillion : color.blue;
        ctx.beginPath();
        ctx.moveTo(px, ya);
        ctx.lineTo(px, yb);
        ctx.moveTo(px - 2, yb);
        ctx.lineTo(px + 2, yb);
        ctx.moveTo(px - 2, ya);
        ctx.lineTo(px + 2, ya);
        ctx.stroke();
        if (p.retx) retxMark(ctx, px, yb);
        drawn++;
      }
      return drawn;
    }
    // One envelope per pixel column, retransmissions on top.
    let col = NaN;
    let lo = 0;
    let hi = 0;
    const flush = () => {
      if (Number.isNaN(col)) return;
      ctx.strokeStyle = color.blue;
      ctx.beginPath();
      ctx.moveTo(col + 0.5, y(lo));
      ctx.lineTo(col + 0.5, Math.min(y(hi), y(lo) - 1));
      ctx.stroke();
      drawn++;
    };
    for (let i = i0; i < i1; i++) {
      const p = pts[i];
      const c = Math.round(x(this.value(p.t_ms)));
      if (c !== col) {
        flush();
        col = c;
        lo = p.seq;
        hi = p.seq + p.len;
      }
      lo = Math.min(lo, p.seq);
      hi = Math.max(hi, p.seq + p.len);
    }
    flush();
    for (let i = i0; i < i1; i++) {
      const p = pts[i];
      if (!p.retx) continue;
      retxMark(ctx, Math.round(x(this.value(p.t_ms))) + 0.5, y(p.seq + p.len));
      drawn++;
    }
    return drawn;
  }

  private hover(e: PointerEvent): void {
    const m = this.model;
    if (!m) return;
    const box = (this.svg.node() as SVGSVGElement).getBoundingClientRect();
    const px = e.clientX - box.left;
    const py = e.clientY - box.top;
    if (px < margin.left || px > this.width - margin.right) {
      this.tooltip.hide();
      return;
    }
    const x = this.transform.rescaleX(this.baseX);
    // The nearest data segment within a few pixels.
    const t0 = this.timeOf(x.invert(px - 6));
    const t1 = this.timeOf(x.invert(px + 6));
    let best: Packet | null = null;
    let bestDist = 8;
    for (let i = lowerBound(this.data.times, t0); i < this.data.times.length && this.data.times[i] <= t1; i++) {
      const p = this.data.packets[i];
      const ya = this.y(p.seq);
      const yb = this.y(p.seq + p.len);
      const dy = py > ya ? py - ya : py < yb ? yb - py : 0;
      const d = Math.abs(x(this.value(p.t_ms)) - px) + dy;
      if (d < bestDist) {
        bestDist = d;
        best = p;
      }
    }
    if (best) {
      this.tooltip.show(e.clientX, e.clientY, `#${m.conn.index} data segment${best.retx ? " (retransmission)" : ""}`, [
        ...packetRows(m, best),
        ["bytes", `${fmt.int(best.seq)} – ${fmt.int(best.seq + best.len)}`],
      ]);
      return;
    }
    const target = e.target as Element;
    const roundAttr = target.getAttribute?.("data-round");
    const round = roundAttr ? (m.conn.rounds ?? []).find((r) => r.index === +roundAttr) : undefined;
    if (round) {
      this.tooltip.show(e.clientX, e.clientY, `Round ${round.index} (${round.phase})`, roundRows(round, m.conn.mss));
      return;
    }
    this.tooltip.hide();
  }

  private legend(): HTMLElement {
    const box = el("div", "legend");
    const items: [string, string, string][] = [
      ["data segment", color.blue, "solid"],
      ["retransmission", color.vermillion, "solid"],
      ["ACK line", color.orange, "solid"],
      ["receive window (ACK + window)", color.green, "dashed"],
    ];
    for (const [label, c, style] of items) {
      const item = el("span", "legend-item");
      const sw = el("span", `legend-line ${style}`);
      sw.style.borderColor = c;
      item.appendChild(sw);
      item.appendChild(document.createTextNode(label));
      box.appendChild(item);
    }
    const band = el("span", "legend-item");
    band.appendChild(el("span", "legend-band"));
    band.appendChild(document.createTextNode("rounds (R1, R2, …; label: why the round ended)"));
    box.appendChild(band);
    return box;
  }
}

function retxMark(ctx: CanvasRenderingContext2D, x: number, y: number): void {
  const s = 4;
  ctx.fillStyle = color.vermillion;
  ctx.beginPath();
  ctx.moveTo(x, y - s);
  ctx.lineTo(x + s, y);
  ctx.lineTo(x, y + s);
  ctx.lineTo(x - s, y);
  ctx.closePath();
  ctx.fill();
}

const siFormat = format(".3~s");

function seqFormat(v: number): string {
  return Math.abs(v) < 1000 ? String(v) : siFormat(v).replace("k", " k").replace("M", " M");
}

/** A round's exact values, for tooltips. */
export function roundRows(r: Round, mss: number): TooltipRows {
  const rows: TooltipRows = [
    ["start", `${fmt.ms(r.start_ms)} (${fmt.rtts(r.start_rtts)})`],
    ["last segment", fmt.ms(r.end_ms)],
    ["segments", `${fmt.int(r.segments)}${mss ? ` of ${fmt.int(mss)} B` : ""}`],
    ["bytes", fmt.bytesExact(r.bytes)],
    ["cumulative", fmt.bytesExact(r.cumulative_bytes)],
    ["frames", fmt.int(r.packets)],
    ["in flight at end", fmt.bytesExact(r.in_flight_bytes)],
    ["receive window", fmt.bytesExact(r.receive_window_bytes) + (r.window_full ? " (full)" : "")],
    ["ended by", `${r.limit}: ${limitText[r.limit] ?? r.limit}`],
  ];
  if (r.retransmissions) rows.push(["retransmissions", fmt.int(r.retransmissions)]);
  return rows;
}
