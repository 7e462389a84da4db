// View 3: the segments of each round as bars against ideal slow start from the
// measured initial window (the window doubles each round), with cumulative bytes.
import { axisBottom, axisLeft, axisRight } from "d3-axis";
import { format } from "d3-format";
import { scaleBand, scaleLinear } from "d3-scale";
import { select, type Selection } from "d3-selection";

import { el, svgNS } from "./canvas";
import type { ConnModel } from "./data";
import * as fmt from "./format";
import { color, limitColor, limitText } from "./palette";
import type { Tooltip } from "./tooltip";
import { roundRows } from "./tsg";
import type { Connection, Round } from "./types";

const margin = { top: 16, right: 64, bottom: 44, left: 52 };

/** The initial window the ideal curve starts from, in segments (0: none). */
export function idealStart(c: Connection): number {
  const iw = c.initial_window;
  if (iw && iw.verdict !== "none" && iw.segments > 0) return iw.segments;
  const first = (c.rounds ?? [])[0];
  return first ? first.segments : 0;
}

/**
 * Segments ideal slow start allows in round r of a connection: in a round of
 * the TLS handshake the initial window; in the k-th round of data the window
 * the handshake left, doubled k-1 times. Slow start adds a segment for every
 * segment acknowledged, so the handshake's flight (acknowledged before the
 * data) leaves IW plus its segments: the handshake's round trips are not
 * counted as rounds of doubling. 0 without an initial window.
 */
export function idealFor(rounds: readonly Round[], iw: number, r: Round): number {
  if (iw <= 0) return 0;
  if (r.phase === "tls") return iw;
  const handshake = rounds.filter((x) => x.phase === "tls").reduce((n, x) => n + x.segments, 0);
  const k = rounds.filter((x) => x.phase !== "tls" && x.index <= r.index).length;
  return (iw + handshake) * 2 ** (k - 1);
}

export class WindowsChart {
  readonly section: HTMLElement;
  private readonly title: HTMLHeadingElement;
  private readonly plot: HTMLDivElement;
  private readonly svg: Selection<SVGSVGElement, unknown, null, undefined>;
  private readonly empty: HTMLParagraphElement;
  private model: ConnModel | null = null;

  constructor(
    parent: HTMLElement,
    private readonly tooltip: Tooltip,
  ) {
    this.section = el("section", "card windows");
    this.section.dataset.testid = "windows";
    parent.appendChild(this.section);
    this.title = el("h2", "", "Windows per round");
    this.section.appendChild(this.title);
    const legend = el("div", "legend");
    for (const [limit, c] of Object.entries(limitColor)) {
      const item = el("span", "legend-item");
      const sw = el("span", "legend-bar");
      sw.style.background = c;
      item.appendChild(sw);
      item.appendChild(document.createTextNode(`${limit}: ${limitText[limit]}`));
      legend.appendChild(item);
    }
    for (const [label, cls, c] of [
      ["ideal slow start from the IW", "legend-line dashed", color.black],
      ["cumulative bytes (right axis)", "legend-line solid", color.purple],
    ]) {
      const item = el("span", "legend-item");
      const sw = el("span", cls);
      sw.style.borderColor = c;
      item.appendChild(sw);
      item.appendChild(document.createTextNode(label));
      legend.appendChild(item);
    }
    this.section.appendChild(legend);
    this.empty = el("p", "empty", "No data rounds from the server.");
    this.empty.hidden = true;
    this.section.appendChild(this.empty);
    this.plot = el("div", "plot");
    const svgEl = document.createElementNS(svgNS, "svg");
    this.plot.appendChild(svgEl);
    this.section.appendChild(this.plot);
    this.svg = select(svgEl);
    this.svg.attr("role", "img").attr("aria-label", "segments per round against ideal slow start");
    svgEl.addEventListener("pointermove", (e) => this.hover(e));
    svgEl.addEventListener("pointerleave", () => this.tooltip.hide());
  }

  setConnection(m: ConnModel): void {
    this.model = m;
    this.title.textContent = `Connection #${m.conn.index}: windows per round`;
    this.layout();
  }

  layout(): void {
    const m = this.model;
    if (!m) return;
    const c = m.conn;
    const rounds = c.rounds ?? [];
    this.section.dataset.connection = String(c.index);
    this.section.dataset.rounds = String(rounds.length);
    this.empty.hidden = rounds.length > 0;
    const width = Math.max(300, this.plot.clientWidth);
    const height = width < 600 ? 240 : 280;
    this.plot.style.height = `${height}px`;
    const svg = this.svg;
    svg.selectAll("*").remove();
    svg.attr("width", width).attr("height", height).attr("viewBox", `0 0 ${width} ${height}`);
    if (rounds.length === 0) return;

    const iw = idealStart(c);
    const left = margin.left;
    const right = width - margin.right;
    const top = margin.top;
    const bottom = height - margin.bottom;
    const x = scaleBand<number>()
      .domain(rounds.map((r) => r.index))
      .range([left, right])
      .paddingInner(0.25)
      .paddingOuter(0.15);
    const maxSegments = Math.max(...rounds.map((r) => r.segments));
    // The ideal curve grows fast: show it up to twice the tallest bar so the bars stay readable.
    const ideal = (r: Round) => idealFor(rounds, iw, r);
    const yMax = Math.max(maxSegments, Math.min(ideal(rounds[rounds.length - 1]), maxSegments * 2), 1);
    const y = scaleLinear().domain([0, yMax]).range([bottom, top]).nice();
    const totalBytes = Math.max(1, ...rounds.map((r) => r.cumulative_bytes));
    const yBytes = scaleLinear().domain([0, totalBytes]).range([bottom, top]).nice();

    svg
      .append("g")
      .attr("class", "grid")
      .selectAll("line")
      .data(y.ticks(5))
      .join("line")
      .attr("x1", left)
      .attr("x2", right)
      .attr("y1", (d) => y(d))
      .attr("y2", (d) => y(d));

    const pattern = svg
      .append("defs")
      .append("pattern")
      .attr("id", "tls-hatch")
      .attr("patternUnits", "userSpaceOnUse")
      .attr("width", 6)
      .attr("height", 6)
      .attr("patternTransform", "rotate(45)");
    pattern.append("line").attr("x1", 0).attr("y1", 0).attr("x2", 0).attr("y2", 6).attr("stroke", "#ffffff").attr("stroke-width", 2.5);
    const bars = svg.append("g");
    for (const r of rounds) {
      const bx = x(r.index)!;
      const g = bars.append("g").attr("data-testid", "round-bar").attr("data-round", r.index);
      g.append("rect")
        .attr("class", "round-bar")
        .attr("x", bx)
        .attr("width", x.bandwidth())
        .attr("y", y(r.segments))
        .attr("height", Math.max(1, bottom - y(r.segments)))
        .attr("fill", limitColor[r.limit] ?? color.grey)
        .attr("data-round", r.index);
      if (r.phase === "tls") {
        // Hatching tells handshake rounds apart without relying on color.
        g.append("rect")
          .attr("class", "tls-hatch")
          .attr("fill", "url(#tls-hatch)")
          .attr("x", bx)
          .attr("width", x.bandwidth())
          .attr("y", y(r.segments))
          .attr("height", Math.max(1, bottom - y(r.segments)))
          .attr("data-round", r.index);
      }
      if (x.bandwidth() < 16) continue;
      g.append("text")
        .attr("class", "bar-value")
        .attr("x", bx + x.bandwidth() / 2)
        .attr("y", y(r.segments) - 4)
        .attr("text-anchor", "middle")
        .attr("data-round", r.index)
        .text(String(r.segments));
    }

    if (iw > 0) {
      // The ideal curve up to the top of the chart.
      const shown = rounds.filter((_, i) => i === 0 || ideal(rounds[i - 1]) <= y.domain()[1]);
      const pts = shown.map((r) => [x(r.index)! + x.bandwidth() / 2, y(Math.min(ideal(r), y.domain()[1]))]);
      svg
        .append("path")
        .attr("class", "ideal-line")
        .attr("d", "M" + pts.map((p) => p.join(",")).join("L"));
      svg
        .append("g")
        .selectAll("path")
        .data(shown.filter((r) => ideal(r) <= y.domain()[1]))
        .join("path")
        .attr("class", "ideal-point")
        .attr("data-testid", "ideal-point")
        .attr("data-round", (r) => r.index)
        .attr("data-segments", (r) => ideal(r))
        .attr("transform", (r) => `translate(${x(r.index)! + x.bandwidth() / 2},${y(Math.min(ideal(r), y.domain()[1]))})`)
        .attr("d", "M0,-4L4,0L0,4L-4,0Z");
    }
    const cum = rounds.map((r) => [x(r.index)! + x.bandwidth() / 2, yBytes(r.cumulative_bytes)]);
    svg
      .append("path")
      .attr("class", "cum-line")
      .attr("d", "M" + cum.map((p) => p.join(",")).join("L"));
    svg
      .append("g")
      .selectAll("circle")
      .data(cum)
      .join("circle")
      .attr("class", "cum-point")
      .attr("cx", (p) => p[0])
      .attr("cy", (p) => p[1])
      .attr("r", 3);

    svg
      .append("g")
      .attr("class", "axis")
      .attr("transform", `translate(0,${bottom})`)
      .call(
        axisBottom(x)
          .tickValues(x.domain().filter((d) => (d - 1) % Math.max(1, Math.ceil(28 / x.step())) === 0))
          .tickFormat((d) => `R${d}`),
      );
    svg.append("g").attr("class", "axis").attr("transform", `translate(${left},0)`).call(axisLeft(y).ticks(5));
    svg
      .append("g")
      .attr("class", "axis")
      .attr("transform", `translate(${right},0)`)
      .call(
        axisRight(yBytes)
          .ticks(5)
          .tickFormat((v) => format(".2~s")(+v) + "B"),
      );
    svg
      .append("text")
      .attr("class", "axis-label")
      .attr("x", (left + right) / 2)
      .attr("y", height - 6)
      .attr("text-anchor", "middle")
      .text(rounds.some((r) => r.phase === "tls")
        ? `round (ideal: IW ${iw} segments in the handshake, then doubling each data round)`
        : `round (ideal: IW ${iw} segments, doubling each round)`);
    svg
      .append("text")
      .attr("class", "axis-label")
      .attr("transform", `translate(14,${(top + bottom) / 2}) rotate(-90)`)
      .attr("text-anchor", "middle")
      .text("segments");
    svg
      .append("text")
      .attr("class", "axis-label")
      .attr("transform", `translate(${width - 8},${(top + bottom) / 2}) rotate(90)`)
      .attr("text-anchor", "middle")
      .text("cumulative bytes");
  }

  private hover(e: PointerEvent): void {
    const m = this.model;
    const attr = (e.target as Element).getAttribute?.("data-round");
    const r = m && attr ? (m.conn.rounds ?? []).find((x) => x.index === +attr) : undefined;
    if (!m || !r) {
      this.tooltip.hide();
      return;
    }
    const iw = idealStart(m.conn);
    this.tooltip.show(e.clientX, e.clientY, `Round ${r.index} (${r.phase})`, [
      ...roundRows(r, m.conn.mss),
      ["ideal slow start", iw > 0 ? `${fmt.plural(idealFor(m.conn.rounds ?? [], iw, r), "segment")}` : "–"],
    ]);
  }
}
