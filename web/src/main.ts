// The slowstart view: loads a Report and lays out its four views (the connections'
// timeline, one connection's time-sequence graph, windows per round, the summary).
import "./style.css";

import { el } from "./canvas";
import { connModel, groupByServer, loadReport, type ConnModel, type TimeUnit } from "./data";
import * as fmt from "./format";
import { Summary } from "./summary";
import { Timeline } from "./timeline";
import { Tooltip } from "./tooltip";
import { TimeSequenceGraph } from "./tsg";
import type { Report } from "./types";
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

function unitToggle(onChange: (u: TimeUnit) => void): HTMLElement {
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
    input.checked = value === "ms";
    input.dataset.testid = `unit-${value}`;
    input.addEventListener("change", () => input.checked && onChange(value));
    lab.appendChild(input);
    lab.appendChild(document.createTextNode(` ${label}`));
    box.appendChild(lab);
  }
  return box;
}

function render(rep: Report): void {
  const app = document.getElementById("app")!;
  app.replaceChildren();
  const models = (rep.connections ?? []).map(connModel);
  app.appendChild(header(rep, models));

  for (const w of rep.warnings ?? []) {
    const p = el("p", "warning", `Warning: ${w}`);
    p.setAttribute("role", "alert");
    app.appendChild(p);
  }
  if (models.length === 0) {
    app.appendChild(el("p", "empty", "The capture holds no TCP connections."));
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

  const timeline = new Timeline(app, groupByServer(models), tooltip, (i) => choose(i));
  const detail = el("div", "detail");
  app.appendChild(detail);
  const summary = new Summary(detail);
  const windows = new WindowsChart(detail, tooltip);
  const tsg = new TimeSequenceGraph(app, tooltip);
  controls.prepend(
    unitToggle((u) => {
      timeline.setUnit(u);
      tsg.setUnit(u);
    }),
  );

  function choose(index: number): void {
    const m = models.find((x) => x.conn.index === index);
    if (!m) return;
    select.value = String(index);
    timeline.setSelected(index);
    summary.setConnection(m);
    windows.setConnection(m);
    tsg.setConnection(m);
    document.body.dataset.selected = String(index);
  }
  select.addEventListener("change", () => choose(+select.value));

  timeline.layout();
  choose(models[0].conn.index);

  let pending = false;
  let lastWidth = app.clientWidth;
  new ResizeObserver(() => {
    if (pending || app.clientWidth === lastWidth) return;
    lastWidth = app.clientWidth;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      timeline.layout();
      windows.layout();
      tsg.layout();
    });
  }).observe(app);
  document.body.dataset.ready = "true";
}

loadReport(document)
  .then(render)
  .catch((err: unknown) => {
    const app = document.getElementById("app")!;
    const p = el("p", "error", `Can't show the report: ${err instanceof Error ? err.message : String(err)}`);
    p.setAttribute("role", "alert");
    app.replaceChildren(p);
    document.body.dataset.error = "true";
  });
