// Colors and tick kinds. The palette is Okabe and Ito's, distinguishable with the
// common forms of color blindness; every kind also differs in shape or height so
// that color is never the only cue.

export const color = {
  black: "#000000",
  orange: "#E69F00",
  sky: "#56B4E9",
  green: "#009E73",
  yellow: "#F0E442",
  blue: "#0072B2",
  vermillion: "#D55E00",
  purple: "#CC79A7",
  grey: "#8c8c8c",
};

/** What a packet is drawn as on the timeline. */
export type TickKind = "syn" | "fin" | "rst" | "retx" | "psh" | "data" | "ack";

export const tickKinds: { kind: TickKind; label: string; color: string; shape: string }[] = [
  { kind: "syn", label: "SYN", color: color.blue, shape: "tall tick, square cap" },
  { kind: "fin", label: "FIN", color: color.orange, shape: "tall tick, triangle cap" },
  { kind: "rst", label: "RST", color: color.black, shape: "tall tick, cross" },
  { kind: "retx", label: "retransmission", color: color.vermillion, shape: "tall tick, diamond" },
  { kind: "psh", label: "data with PSH", color: color.green, shape: "tick, dot" },
  { kind: "data", label: "data", color: color.sky, shape: "tick" },
  { kind: "ack", label: "pure ACK", color: color.grey, shape: "short tick" },
];

export const tickColor: Record<TickKind, string> = Object.fromEntries(
  tickKinds.map((k) => [k.kind, k.color]),
) as Record<TickKind, string>;

/** Colors of round limits (why a round ended). */
export const limitColor: Record<string, string> = {
  cwnd: color.blue,
  rwnd: color.orange,
  app: color.green,
  loss: color.vermillion,
  end: color.grey,
};

export const limitText: Record<string, string> = {
  cwnd: "congestion window",
  rwnd: "receive window",
  app: "application (nothing to send)",
  loss: "loss",
  end: "end of data",
};

/** The timeline's bars. */
export const barColor = {
  tls: color.purple,
  http: color.yellow,
  httpStroke: "#8a7d00",
};
