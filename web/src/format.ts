// Number formatting shared by the views: exact values in tooltips, short ones on axes.
import { format } from "d3-format";

const groupedInt = format(",d");
const oneDecimal = format(",.1f");

/** An exact integer with thousands separators: 4,344. */
export function int(n: number): string {
  return groupedInt(n);
}

/** Milliseconds with one decimal: "81.7 ms". */
export function ms(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return "–";
  return `${oneDecimal(n)} ms`;
}

/** A byte count in the largest fitting unit (decimal, like the text report): "4.3 KB". */
export function bytes(n: number): string {
  const abs = Math.abs(n);
  if (abs < 1000) return `${groupedInt(n)} B`;
  if (abs < 1e6) return `${oneDecimal(n / 1e3)} KB`;
  if (abs < 1e9) return `${oneDecimal(n / 1e6)} MB`;
  return `${oneDecimal(n / 1e9)} GB`;
}

/** An exact byte count and its short form: "4,344 B (4.3 KB)". */
export function bytesExact(n: number): string {
  return n < 1000 ? `${groupedInt(n)} B` : `${groupedInt(n)} B (${bytes(n)})`;
}

/** Round trips with two decimals. */
export function rtts(n: number): string {
  return `${format(".2f")(n)} RTT`;
}

/** Pluralizes a noun by count: plural(3, "segment") is "3 segments". */
export function plural(n: number, noun: string): string {
  return `${groupedInt(n)} ${noun}${n === 1 ? "" : "s"}`;
}
