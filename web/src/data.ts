// Loading the Report and the derived values every view shares.
import type { Connection, Packet, PageLoad, Report } from "./types";
import type { TickKind } from "./palette";

/**
 * Reads the Report: from the page itself (a self-contained HTML file carries it in
 * <script type="application/json" id="slowstart-report">) or from the server that
 * serves the page (/api/report).
 */
export async function loadReport(doc: Document): Promise<Report> {
  const inline = doc.getElementById("slowstart-report");
  let rep: Report;
  if (inline && inline.textContent && inline.textContent.trim() !== "") {
    rep = JSON.parse(inline.textContent) as Report;
  } else {
    const res = await fetch("api/report", { headers: { Accept: "application/json" } });
    if (!res.ok) throw new Error(`loading the report: HTTP ${res.status} ${res.statusText}`);
    rep = (await res.json()) as Report;
  }
  if (!rep.schema || !rep.schema.startsWith("slowstart.report/")) {
    throw new Error(`not a slowstart Report (schema ${JSON.stringify(rep.schema)})`);
  }
  return rep;
}

/**
 * Reads the page load that goes with the Report, if any: from the page itself
 * (<script type="application/json" id="slowstart-page">) or from the server
 * (api/page; 404 when the Report is not a page load's).
 */
export async function loadPageLoad(doc: Document, served: boolean): Promise<PageLoad | null> {
  const inline = doc.getElementById("slowstart-page");
  let page: PageLoad | null = null;
  if (inline && inline.textContent && inline.textContent.trim() !== "") {
    page = JSON.parse(inline.textContent) as PageLoad;
  } else if (served) {
    const res = await fetch("api/page", { headers: { Accept: "application/json" } });
    if (!res.ok) throw new Error(`loading the page load: HTTP ${res.status} ${res.statusText}`);
    page = (await res.json()) as PageLoad | null;
  }
  if (page && (!page.schema || !page.schema.startsWith("slowstart.pageload/"))) {
    throw new Error(`not a slowstart page load (schema ${JSON.stringify(page.schema)})`);
  }
  return page;
}

/** A connection with its packets sorted by time and typed arrays for fast drawing. */
export interface ConnModel {
  conn: Connection;
  packets: Packet[];
  times: Float64Array; // packets[i].t_ms, ascending
  kinds: TickKind[];
  /** The round trip time that the "round trips" axis divides by. */
  rttMs: number;
}

export interface ServerGroup {
  server: string;
  conns: ConnModel[];
}

export function tickKind(p: Packet): TickKind {
  const f = p.flags;
  if (f.includes("R")) return "rst";
  if (f.includes("S")) return "syn";
  if (f.includes("F")) return "fin";
  if (p.retx) return "retx";
  if (p.len > 0) return f.includes("P") ? "psh" : "data";
  return "ack";
}

/**
 * The connection the page opens on: the one whose server sent the most bytes
 * (the page's main transfer, not a preconnect or an OCSP check), the first of
 * them in order on a tie; undefined for none.
 */
export function mostInteresting(models: ConnModel[]): ConnModel | undefined {
  let best: ConnModel | undefined;
  for (const m of models) {
    if (!best || m.conn.bytes_to_client > best.conn.bytes_to_client) best = m;
  }
  return best;
}

export function connModel(conn: Connection): ConnModel {
  const packets = (conn.packets ?? []).slice().sort((a, b) => a.t_ms - b.t_ms);
  const times = new Float64Array(packets.length);
  packets.forEach((p, i) => (times[i] = p.t_ms));
  const rtt = conn.handshake_rtt_ms ?? conn.min_rtt_ms;
  return {
    conn,
    packets,
    times,
    kinds: packets.map(tickKind),
    rttMs: rtt && rtt > 0 ? rtt : 1,
  };
}

/** Groups connections by server, in order of each server's first connection. */
export function groupByServer(models: ConnModel[]): ServerGroup[] {
  const groups = new Map<string, ServerGroup>();
  for (const m of models) {
    let g = groups.get(m.conn.server);
    if (!g) {
      g = { server: m.conn.server, conns: [] };
      groups.set(m.conn.server, g);
    }
    g.conns.push(m);
  }
  return [...groups.values()];
}

/** The first index i with times[i] >= t (times ascending). */
export function lowerBound(times: Float64Array, t: number): number {
  let lo = 0;
  let hi = times.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (times[mid] < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The time unit of the horizontal axes. */
export type TimeUnit = "ms" | "rtt";
