// The initial-window reading in words: the one place the web page says it, as the
// Go renderers do (report.InitialWindow.Short and .Label).
import type { InitialWindow } from "./types";

/** The reading in a few characters: "10", "4-10", "≥ 10", "ambiguous", "none". */
export function iwShort(iw: InitialWindow | null | undefined): string {
  if (!iw) return "none";
  switch (iw.verdict) {
    case "exact":
      return String(iw.segments);
    case "range":
      return iw.segments_max ? `${iw.segments}-${iw.segments_max}` : `≥ ${iw.segments}`;
    case "lower_bound":
    case "rwnd_limited":
      return `≥ ${iw.segments}`;
  }
  return iw.verdict;
}

/** The verdict in words: "exact", "lower bound", ... */
export const verdictWords: Record<string, string> = {
  exact: "exact",
  range: "range",
  lower_bound: "lower bound",
  rwnd_limited: "limited by the receive window",
  ambiguous: "ambiguous",
  none: "unknown",
};

/** The reading with its verdict: "10 (exact)", "4-10 (10 on Linux CUBIC or Reno)", "≥ 10 (lower bound)". */
export function iwLabel(iw: InitialWindow | null | undefined): string {
  if (!iw) return "none";
  const short = iwShort(iw);
  switch (iw.verdict) {
    case "exact":
      return `${short} (exact)`;
    case "range":
      return iw.exact_if === "linux_cubic_or_reno" ? `${short} (${iw.segments_max} on Linux CUBIC or Reno)` : `${short} (range)`;
    case "lower_bound":
      return `${short} (lower bound)`;
    case "rwnd_limited":
      return `${short} (receive window)`;
  }
  return short;
}

/** Whether the reading gives a number at all. */
export function iwHasNumber(iw: InitialWindow | null | undefined): iw is InitialWindow {
  return !!iw && iw.verdict !== "none" && iw.verdict !== "ambiguous" && iw.segments > 0;
}
