// The Report (schema slowstart.report/v1), as documented in docs/report.md.

export interface Report {
  schema: string;
  tool: string;
  source: Source;
  connections: Connection[] | null;
  warnings: string[] | null;
}

export interface Source {
  kind: string;
  path?: string;
  format?: string;
  link_types?: string[];
  packets: number;
  tcp_packets: number;
  snaplen?: number;
  truncated: boolean;
  start_unix_ns: number;
  duration_ms: number;
}

export interface Endpoint {
  mss: number;
  window_scale: number;
  sack_permitted: boolean;
  timestamps: boolean;
}

export interface InitialWindow {
  segments: number;
  bytes: number;
  verdict: "exact" | "lower_bound" | "rwnd_limited" | "ambiguous" | "none" | string;
  source: string;
  reason: string;
}

export interface TLS {
  version: string;
  server_flight_bytes: number;
  server_flight_segments: number;
  handshake_round_trips: number;
  initial_window: InitialWindow | null;
}

export interface Round {
  index: number;
  start_ms: number;
  end_ms: number;
  start_rtts: number;
  segments: number;
  bytes: number;
  cumulative_bytes: number;
  packets: number;
  retransmissions: number;
  in_flight_bytes: number;
  receive_window_bytes: number;
  window_full: boolean;
  limit: "cwnd" | "rwnd" | "app" | "loss" | "end" | string;
  phase: "tls" | "http" | "data" | string;
}

export interface HTTPMessage {
  method: string;
  path: string;
  status: number;
  request_ms: number | null;
  first_byte_ms: number | null;
  last_byte_ms: number | null;
  bytes: number;
  body_bytes: number;
  chunked: boolean;
  incomplete: boolean;
}

export interface Packet {
  t_ms: number;
  dir: "c2s" | "s2c";
  seq: number;
  len: number;
  ack: number;
  win: number;
  flags: string;
  retx?: boolean;
  ooo?: boolean;
  round?: number;
}

export interface Connection {
  index: number;
  client: string;
  server: string;
  vantage: string;
  start_ms: number;
  duration_ms: number;
  handshake_rtt_ms: number | null;
  min_rtt_ms: number;
  mss: number;
  client_syn: Endpoint;
  server_syn: Endpoint;
  client_window: { initial_bytes: number; min_bytes: number; max_bytes: number };
  mid_stream: boolean;
  closed: string;
  bytes_to_server: number;
  bytes_to_client: number;
  retransmissions: number;
  out_of_order: number;
  tls: TLS | null;
  initial_window: InitialWindow | null;
  round_trips: { tcp: number; tls: number; http: number; total: number };
  round_method: string;
  rounds: Round[] | null;
  http: HTTPMessage[] | null;
  notes: string[] | null;
  packets?: Packet[] | null;
}

/** The status of a live capture (`slowstart view --live`), sent as "status" events. */
export interface LiveStatus {
  capturing: boolean;
  interface: string;
  filter: string;
  packets: number;
  kernel_drops: number;
  /** Every connection reported so far, kept or not. */
  connections: number;
  /** Older connections no longer kept. */
  dropped: number;
  /** The indexes of the connections kept. */
  kept: number[];
  message?: string;
}

// A page load (schema slowstart.pageload/v1), as documented in docs/browser.md:
// the browser's requests on the Report's connections.

export interface PageLoad {
  schema: string;
  url: string;
  source: string;
  browser?: string;
  start_unix_ns: number;
  capture_start_ms: number;
  first_paint_ms: number | null;
  first_contentful_paint_ms: number | null;
  dom_content_loaded_ms: number | null;
  load_ms: number | null;
  requests: PageRequest[];
  connections: PageConnection[];
  critical_path: CriticalPath;
  timing_agreement: { compared: number; max_diff_ms: number; tolerance_ms: number; agree: boolean };
  warnings: string[];
}

export interface PageRequest {
  index: number;
  url: string;
  method: string;
  host: string;
  path: string;
  type: string;
  status: number;
  content_type?: string;
  protocol?: string;
  render_blocking: string;
  blocking: boolean;
  critical: boolean;
  initiator: number;
  connection: number;
  new_connection: boolean;
  rounds: number[];
  bytes: number;
  start_ms: number;
  request_ms: number | null;
  first_byte_ms: number | null;
  last_byte_ms: number | null;
  browser: { request_ms: number | null; first_byte_ms: number | null; last_byte_ms: number | null };
}

export interface PageConnection {
  connection: number;
  host: string;
  server: string;
  client: string;
  start_ms: number;
  tls_version: string;
  alpn: string;
  handshake_rtt_ms: number | null;
  tls_round_trips: number;
  initial_window: InitialWindow | null;
  rounds: number;
  requests: number[];
}

export interface CriticalStep {
  request: number;
  connection: number;
  why: string;
  handshake_round_trips: number;
  data_round_trips: number;
  round_trips: number;
  first_round: number;
  last_round: number;
  partial: boolean;
  start_ms: number;
  end_ms: number;
  browser_ms: number;
}

export interface CriticalPath {
  round_trips: number;
  ms: number;
  rtt_ms: number;
  steps: CriticalStep[];
  savings: { kind: string; request: number; text: string; cost_round_trips: number; cost_ms: number }[];
  notes: string[];
  predicted?: { round_trips: number; min: number; max: number; ms: number };
}
