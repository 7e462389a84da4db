// The slowstart view: loads a Report and lays out its four views (the connections'
// timeline, one connection's time-sequence graph, windows per round, the summary).
import "./style.css";

import { el } from "./canvas";
import { connModel, groupByServer, mostInteresting, loadPageLoad, loadReport, type ConnModel, type TimeUnit } from "./data";
import { loadField, showField } from "./field";
import * as fmt from "./format";
import { PageView } from "./pageview";
import { Summary } from "./summary";
import { Timeline } from "./timeline";
import { Tooltip } from "./tooltip";
import { TimeSequenceGraph } from "./tsg";
import type { Connection, LiveStatus, PageLoad, Report } from "./types";
import { WindowsChart } from "./windows";

function header(rep: Report, models: ConnModel[]): HTMLElement {
  const h = el("header", "page-head");
  const title = el("h1", "", "slowstart");
  h.appendChild(title);
  const src = rep.source;
  const parts = [
    src.path ? src.path.split("/").pop()! : src.kind,
    src.format ?? "",
    src.link_types?.join(", ") ?? "",
    `${fmt.plural(src.packets, "packet")}`,
    `${fmt.plural(models.length, "connection")}`,
    fmt.ms(src.duration_ms),
  ].filter(Boolean);
  const p = el("p", "source", parts.join(" · "));
  p.dataset.testid = "source";
  if (src.path) p.title = src.path;
  h.appendChild(p);
  return h;
}

function unitToggle(initial: TimeUnit, onChange: (u: TimeUnit) => void): HTMLElement {
  const box = el("fieldset", "unit-toggle");
  box.appendChild(el("legend", "", "time axis"));
  for (const [value, label] of [
    ["ms", "milliseconds"],
    ["rtt", "round trips"],
  ] as [TimeUnit, string][]) {
    const lab = el("label");
    const input = el("input");
    input.type = "radio";
    input.name = "unit";
    input.value = value;
    input.checked = value === initial;
    input.dataset.testid = `unit-${value}`;
    input.addEventListener("change", () => input.checked && onChange(value));
    lab.appendChild(input);
    lab.appendChild(document.createTextNode(` ${label}`));
    box.appendChild(lab);
  }
  return box;
}

/** What survives a redraw of a live page: the chosen connection and time unit. */
interface ViewState {
  selected?: number;
  unit: TimeUnit;
  /** Undoes what the last render hooked up outside #app. */
  cleanup?: () => void;
}

/** Draws the page for rep into #app; head is the header to show; page, the page load of rep. */
function render(rep: Report, head: HTMLElement, state: ViewState, emptyText: string, page?: PageLoad | null): void {
  state.cleanup?.();
  state.cleanup = undefined;
  const app = document.getElementById("app")!;
  app.replaceChildren();
  const models = (rep.connections ?? []).map(connModel);
  app.appendChild(head);

  for (const w of rep.warnings ?? []) {
    const p = el("p", "warning", `Warning: ${w}`);
    p.setAttribute("role", "alert");
    app.appendChild(p);
  }
  if (models.length === 0) {
    const p = el("p", "empty", emptyText);
    p.dataset.testid = "empty";
    app.appendChild(p);
    document.body.dataset.ready = "true";
    return;
  }

  const tooltip = new Tooltip(document.body);
  const controls = el("div", "controls");
  const select = el("select");
  select.dataset.testid = "connection-select";
  select.setAttribute("aria-label", "connection");
  for (const m of models) {
    const o = el("option", "", `#${m.conn.index} ${m.conn.client} → ${m.conn.server}`);
    o.value = String(m.conn.index);
    select.appendChild(o);
  }
  const selectLabel = el("label", "conn-select", "connection ");
  selectLabel.appendChild(select);
  controls.appendChild(selectLabel);
  app.appendChild(controls);

  const pageView = page ? new PageView(app, page, rep, tooltip) : null;
  const timeline = new Timeline(app, groupByServer(models), tooltip, (i) => choose(i));
  const detail = el("div", "detail");
  app.appendChild(detail);
  const summary = new Summary(detail);
  const windows = new WindowsChart(detail, tooltip);
  const tsg = new TimeSequenceGraph(app, tooltip);
  controls.prepend(
    unitToggle(state.unit, (u) => {
      state.unit = u;
      pageView?.setUnit(u);
      timeline.setUnit(u);
      tsg.setUnit(u);
    }),
  );
  if (state.unit !== "ms") {
    pageView?.setUnit(state.unit);
    timeline.setUnit(state.unit);
    tsg.setUnit(state.unit);
  }

  function choose(index: number): void {
    const m = models.find((x) => x.conn.index === index);
    if (!m) return;
    state.selected = index;
    select.value = String(index);
    timeline.setSelected(index);
    summary.setConnection(m);
    windows.setConnection(m);
    tsg.setConnection(m);
    document.body.dataset.selected = String(index);
  }
  select.addEventListener("change", () => choose(+select.value));

  pageView?.layout();
  timeline.layout();
  const keep = models.find((m) => m.conn.index === state.selected) ?? mostInteresting(models)!;
  choose(keep.conn.index);

  let pending = false;
  let lastWidth = app.clientWidth;
  const observer = new ResizeObserver(() => {
    if (pending || app.clientWidth === lastWidth) return;
    lastWidth = app.clientWidth;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      pageView?.layout();
      timeline.layout();
      windows.layout();
      tsg.layout();
    });
  });
  observer.observe(app);
  state.cleanup = () => {
    observer.disconnect();
    tooltip.el.remove();
  };
  document.body.dataset.ready = "true";
}

/** Shows a Report from a file (with its page load, if it is one's): drawn once. */
function showReport(rep: Report, page: PageLoad | null): void {
  const models = rep.connections ?? [];
  const head = header(rep, models.map(connModel));
  if (page) {
    const u = el("p", "page-url", page.url);
    u.dataset.testid = "page-url";
    head.insertBefore(u, head.children[1] ?? null);
  }
  render(rep, head, { unit: "ms" }, "The capture holds no TCP connections.", page);
}

/**
 * Shows a live capture: connections arrive as Server-Sent Events from
 * api/events ("conn": one Connection, new or updated; "status": LiveStatus) and
 * the page is redrawn with them, keeping the chosen connection and time unit.
 */
function showLive(rep: Report): void {
  const conns = new Map<number, Connection>();
  let status: LiveStatus | undefined;
  let stream: "open" | "connecting" | "closed" = "connecting";
  const state: ViewState = { unit: "ms" };
  let timer: number | undefined;

  function liveHeader(): HTMLElement {
    const h = el("header", "page-head");
    h.appendChild(el("h1", "", "slowstart"));
    const capturing = status ? status.capturing && stream !== "closed" : stream !== "closed";
    const badge = el("span", capturing ? "live-badge" : "live-badge stopped", capturing ? "live" : "stopped");
    badge.dataset.testid = "live";
    badge.dataset.state = capturing ? (stream === "open" ? "capturing" : "connecting") : "stopped";
    badge.title = capturing ? "new connections appear as they complete" : (status?.message ?? "the capture stopped");
    h.appendChild(badge);
    const count = el("span", "live-count", fmt.plural(conns.size, "connection"));
    count.dataset.testid = "live-count";
    count.dataset.count = String(conns.size);
    count.dataset.total = String(status?.connections ?? conns.size);
    h.appendChild(count);
    const parts = [
      `on ${status?.interface ?? rep.source.path ?? "?"}`,
      status?.filter ?? "",
      status ? fmt.plural(status.packets, "TCP packet") : "",
      status && status.kernel_drops > 0 ? `${fmt.plural(status.kernel_drops, "packet")} dropped by the kernel` : "",
    ].filter(Boolean);
    const p = el("p", "source", parts.join(" · "));
    p.dataset.testid = "source";
    h.appendChild(p);
    if (status && status.dropped > 0) {
      const d = el("p", "warning live-dropped", `Showing the latest ${fmt.plural(conns.size, "connection")}: ${fmt.plural(status.dropped, "older connection")} dropped to bound memory.`);
      d.dataset.testid = "live-dropped";
      d.dataset.dropped = String(status.dropped);
      h.appendChild(d);
    }
    return h;
  }

  function draw(): void {
    timer = undefined;
    const list = [...conns.values()].sort((a, b) => a.index - b.index);
    const shown: Report = { ...rep, connections: list };
    const waiting = status && !status.capturing ? "The capture stopped before any connection completed." : `Waiting for connections on ${status?.interface ?? rep.source.path ?? "the interface"}: they appear here when they complete (FIN or RST, or idle for a few seconds).`;
    render(shown, liveHeader(), state, waiting);
  }
  function schedule(): void {
    if (timer === undefined) timer = window.setTimeout(draw, 100);
  }

  draw();
  const events = new EventSource("api/events");
  events.addEventListener("open", () => {
    stream = "open";
    schedule();
  });
  events.addEventListener("conn", (e) => {
    const c = JSON.parse((e as MessageEvent<string>).data) as Connection;
    conns.set(c.index, c);
    schedule();
  });
  events.addEventListener("status", (e) => {
    status = JSON.parse((e as MessageEvent<string>).data) as LiveStatus;
    const kept = new Set(status.kept);
    for (const i of [...conns.keys()]) if (!kept.has(i)) conns.delete(i);
    if (!status.capturing) {
      stream = "closed";
      events.close();
    }
    schedule();
  });
  events.addEventListener("error", () => {
    // The browser reconnects by itself unless the stream was closed for good.
    stream = events.readyState === EventSource.CLOSED ? "closed" : "connecting";
    schedule();
  });
}

const served = !document.getElementById("slowstart-report")?.textContent?.trim();
loadReport(document)
  .then(async (rep) => {
    if (rep.source.kind === "field_store") return showField(await loadField(document));
    return rep.source.kind === "live_feed" ? showLive(rep) : showReport(rep, await loadPageLoad(document, served));
  })
  .catch((err: unknown) => {
    const app = document.getElementById("app")!;
    const p = el("p", "error", `Can't show the report: ${err instanceof Error ? err.message : String(err)}`);
    p.setAttribute("role", "alert");
    app.replaceChildren(p);
    document.body.dataset.error = "true";
  });
