// View 4: one connection in words: the initial window and its verdict, the handshake
// round trip, TLS round trips, and what limited the transfer, with what would help.
import { el } from "./canvas";
import type { ConnModel } from "./data";
import * as fmt from "./format";
import { iwHasNumber, iwLabel, iwShort, verdictWords as verdictText } from "./iw";
import type { Connection } from "./types";

const linuxDefaultIW = 10;

/** Data rounds slow start needs to deliver dataBytes from an initial window of iw segments. */
export function roundsNeeded(dataBytes: number, iwSegments: number, mss: number): number {
  if (dataBytes <= 0 || iwSegments <= 0 || mss <= 0) return 0;
  let sent = 0;
  let window = iwSegments;
  let rounds = 0;
  while (sent < dataBytes && rounds < 64) {
    sent += window * mss;
    window *= 2;
    rounds++;
  }
  return rounds;
}

/** The text with one final period. */
function sentence(s: string): string {
  const t = s.trim();
  return t.endsWith(".") ? t : `${t}.`;
}

function listRounds(indexes: number[]): string {
  const names = indexes.map((i) => String(i));
  if (names.length === 1) return `round ${names[0]}`;
  return `rounds ${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
}

/** What the Report says of a connection, as sentences. */
export function diagnoses(c: Connection): string[] {
  const out: string[] = [];
  const rounds = c.rounds ?? [];
  const iw = c.initial_window;
  const rtt = c.handshake_rtt_ms ?? (c.min_rtt_ms > 0 ? c.min_rtt_ms : null);
  const dataRounds = rounds.filter((r) => r.phase !== "tls");
  const dataBytes = dataRounds.reduce((n, r) => n + r.bytes, 0);

  if (c.mid_stream) out.push("The capture started after the handshake: there is no round trip time from the handshake, and round 1 may not be the connection's first.");
  if (iw) {
    switch (iw.verdict) {
      case "exact": {
        out.push(`The server's initial window is ${fmt.plural(iw.segments, "segment")} (${fmt.bytes(iw.bytes)}): ${sentence(iw.reason)}`);
        if (iw.segments < linuxDefaultIW && dataBytes > 0 && c.mss > 0) {
          const now = dataRounds.length;
          const better = roundsNeeded(dataBytes, linuxDefaultIW, c.mss);
          if (better < now) {
            const saved = now - better;
            out.push(
              `That is below Linux's default of ${linuxDefaultIW}. From an initial window of ${linuxDefaultIW}, the ${fmt.bytes(dataBytes)} of data would need about ${fmt.plural(better, "round trip")} instead of ${now}` +
                (rtt ? `, ${fmt.ms(saved * rtt)} sooner` : "") +
                `. On the server: ip route change <its route> initcwnd ${linuxDefaultIW}.`,
            );
          }
        }
        break;
      }
      case "lower_bound":
        out.push(`The initial window is at least ${fmt.plural(iw.segments, "segment")} (${fmt.bytes(iw.bytes)}): ${sentence(iw.reason)}`);
        break;
      case "rwnd_limited":
        out.push(`The client's receive window capped the first round at ${fmt.plural(iw.segments, "segment")}: ${sentence(iw.reason)} The server's initial window is not known; the client should advertise a larger window (initrwnd on its route, net.ipv4.tcp_rmem).`);
        break;
      case "range":
        out.push(`The initial window is ${iwLabel(iw)} segments: ${sentence(iw.reason)}`);
        break;
      case "ambiguous":
        out.push(`The initial window can't be read: ${sentence(iw.reason)}`);
        break;
      default:
        out.push(`No initial window: ${sentence(iw.reason || "the server sent no data, or the handshake was not captured")}`);
    }
  }

  if (c.tls) {
    const expected = c.tls.version === "1.3" ? 1 : 2;
    const extra = c.tls.handshake_round_trips - expected;
    if (extra > 0) {
      out.push(
        `The server's TLS flight (${fmt.bytes(c.tls.server_flight_bytes)}, ${fmt.plural(c.tls.server_flight_segments, "segment")}) did not fit in its initial window and cost ${fmt.plural(extra, "extra round trip")}: a shorter certificate chain (no root, ECDSA keys) or a larger initial window would save it.`,
      );
    }
    if (c.tls.version === "1.2") {
      out.push("TLS 1.2 takes 2 round trips before the request can go out; TLS 1.3 takes 1.");
    }
  }

  const rwnd = rounds.filter((r) => r.limit === "rwnd").map((r) => r.index);
  if (rwnd.length > 0) {
    out.push(
      `The client's receive window (up to ${fmt.bytes(c.client_window.max_bytes)}) limited ${listRounds(rwnd)}: the server had more to send and room in its congestion window. A larger receive window at the client (initrwnd, net.ipv4.tcp_rmem) would help.`,
    );
  }
  const loss = rounds.filter((r) => r.limit === "loss").map((r) => r.index);
  if (loss.length > 0 || c.retransmissions > 0) {
    out.push(
      `${fmt.plural(c.retransmissions, "retransmission")}${loss.length ? ` (in ${listRounds(loss)})` : ""}: each loss costs at least one more round trip and shrinks the congestion window.`,
    );
  }
  const app = rounds.filter((r) => r.limit === "app").map((r) => r.index);
  if (app.length > 0) {
    out.push(`In ${listRounds(app)} the server had room to send more but nothing ready: server think time or a streamed response, not TCP, set the pace there.`);
  }
  if (c.round_method === "gaps") {
    out.push("Rounds were estimated from gaps in the sending (the ACK clock could not be used): treat round boundaries as an estimate.");
  }
  const rt = c.round_trips;
  if (rt.total > 0) {
    out.push(
      `In all: ${rt.tcp} TCP + ${rt.tls} TLS + ${rt.http} data = ${fmt.plural(rt.total, "round trip")}` +
        (rtt ? `, at least ${fmt.ms(rt.total * rtt)} of waiting at a ${fmt.ms(rtt)} round trip.` : "."),
    );
  }
  return out;
}

export class Summary {
  readonly section: HTMLElement;

  constructor(parent: HTMLElement) {
    this.section = el("section", "card summary");
    this.section.dataset.testid = "summary";
    parent.appendChild(this.section);
  }

  setConnection(m: ConnModel): void {
    const c = m.conn;
    const s = this.section;
    s.replaceChildren();
    s.dataset.connection = String(c.index);
    s.appendChild(el("h2", "", `Connection #${c.index}: ${c.client} → ${c.server}`));

    const facts = el("div", "facts");
    const iw = c.initial_window;
    const fact = (label: string, value: string, detail: string, testid: string) => {
      const f = el("div", "fact");
      f.dataset.testid = testid;
      f.appendChild(el("div", "fact-label", label));
      f.appendChild(el("div", "fact-value", value));
      f.appendChild(el("div", "fact-detail", detail));
      facts.appendChild(f);
      return f;
    };
    const iwValue = iwHasNumber(iw) ? `${iwShort(iw)} seg` : "–";
    const iwFact = fact(
      "initial window",
      iwValue,
      iw ? `${iw.verdict === "none" ? "" : fmt.bytesExact(iw.bytes) + " · "}${verdictText[iw.verdict] ?? iw.verdict}${iw.source ? ` (from ${iw.source === "tls" ? "the TLS flight" : "the first data round"})` : ""}` : "not known",
      "fact-iw",
    );
    if (iw) {
      const badge = el("span", `verdict verdict-${iw.verdict}`, verdictText[iw.verdict] ?? iw.verdict);
      badge.dataset.testid = "verdict";
      iwFact.appendChild(badge);
    }
    fact(
      "handshake RTT",
      c.handshake_rtt_ms === null ? "–" : fmt.ms(c.handshake_rtt_ms),
      `captured at the ${c.vantage === "unknown" ? "(unknown vantage point)" : c.vantage}; MSS ${fmt.int(c.mss)} B`,
      "fact-rtt",
    );
    fact(
      "TLS",
      c.tls ? `${c.tls.handshake_round_trips} RTT` : "none",
      c.tls ? `TLS ${c.tls.version || "?"}; server flight ${fmt.bytes(c.tls.server_flight_bytes)} in ${fmt.plural(c.tls.server_flight_segments, "segment")}` : "cleartext",
      "fact-tls",
    );
    fact(
      "round trips",
      String(c.round_trips.total),
      `${c.round_trips.tcp} TCP + ${c.round_trips.tls} TLS + ${c.round_trips.http} data; rounds by ${c.round_method.replace("_", " ")}`,
      "fact-round-trips",
    );
    fact(
      "data",
      fmt.bytes(c.bytes_to_client),
      `${fmt.bytesExact(c.bytes_to_client)} to the client, ${fmt.bytesExact(c.bytes_to_server)} to the server; ${fmt.ms(c.duration_ms)}; closed: ${c.closed}`,
      "fact-data",
    );
    s.appendChild(facts);

    s.appendChild(el("h3", "", "Diagnosis"));
    const list = el("ul", "diagnoses");
    list.dataset.testid = "diagnoses";
    for (const d of diagnoses(c)) list.appendChild(el("li", "", d));
    s.appendChild(list);

    const notes = c.notes ?? [];
    if (notes.length > 0) {
      s.appendChild(el("h3", "", "Notes"));
      const ul = el("ul", "notes");
      for (const n of notes) ul.appendChild(el("li", "", n));
      s.appendChild(ul);
    }
  }
}
