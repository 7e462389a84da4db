// The frame of a zoomable plot, shared by the timeline and the time-sequence graph.
import { select, type Selection } from "d3-selection";
import { zoom, type ZoomBehavior, type ZoomTransform } from "d3-zoom";

import { el, svgNS } from "./canvas";

export type Svg = Selection<SVGSVGElement, unknown, null, undefined>;

/** A plot's three stacked layers, in a div of class "plot". */
export interface PlotLayers {
  plot: HTMLDivElement;
  /** Behind: backgrounds and bands (hidden from assistive technology). */
  back: Svg;
  /** The many marks (packets, segments), drawn on a canvas. */
  canvas: HTMLCanvasElement;
  /** In front: axes, labels and hover areas; the image that label names. */
  svg: Svg;
}

export function plotLayers(label: string): PlotLayers {
  const plot = el("div", "plot");
  const backEl = document.createElementNS(svgNS, "svg");
  backEl.setAttribute("aria-hidden", "true");
  plot.appendChild(backEl);
  const canvas = el("canvas");
  plot.appendChild(canvas);
  const svgEl = document.createElementNS(svgNS, "svg");
  plot.appendChild(svgEl);
  const svg = select(svgEl);
  svg.attr("role", "img").attr("aria-label", label);
  return { plot, back: select(backEl), canvas, svg };
}

/**
 * Makes the front layer zoom and pan (up to maxZoom, not on double-click; one finger
 * scrolls the page up and down, sideways drags and pinches zoom and pan) and report
 * the pointer: onZoom gets each new transform, hover each move and leave its exit.
 */
export function zoomable(
  svg: Svg,
  maxZoom: number,
  onZoom: (t: ZoomTransform) => void,
  hover: (e: PointerEvent) => void,
  leave: () => void,
): ZoomBehavior<SVGSVGElement, unknown> {
  const behavior = zoom<SVGSVGElement, unknown>()
    .scaleExtent([1, maxZoom])
    .on("zoom", (event: { transform: ZoomTransform }) => onZoom(event.transform));
  svg.call(behavior);
  svg.on("dblclick.zoom", null);
  svg.style("touch-action", "pan-y");
  const node = svg.node();
  if (node) {
    node.addEventListener("pointermove", hover);
    node.addEventListener("pointerleave", leave);
  }
  return behavior;
}
