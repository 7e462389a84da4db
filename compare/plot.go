package compare

import (
	"fmt"
	"image/color"
	"slices"

	"github.com/slowstart/slowstart/internal/plotfile"
	"github.com/slowstart/slowstart/stats"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WriteCDF draws the empirical CDFs of both samples into path (.png or .svg), each
// median marked on its curve, with the medians and the p-value in the title.
func WriteCDF(path string, before, after *Sample, res *Result) error {
	if err := CheckPlotPath(path); err != nil {
		return err
	}
	unit := after.Unit
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, before and after", after.Metric)
	if res != nil && res.Before.N > 0 && res.After.N > 0 {
		p.Title.Text = fmt.Sprintf("%s: median %s → %s (%s)", after.Metric,
			formatValue(res.Before.Median, unit), formatValue(res.After.Median, unit), FormatP(res.Test.P))
	}
	p.X.Label.Text = fmt.Sprintf("%s (%s)", axisLabel(after.Metric), unit)
	p.Y.Label.Text = "fraction of samples ≤ x"
	p.Y.Min, p.Y.Max = 0, 1
	p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 0.25, Label: "0.25"},
		{Value: 0.5, Label: "0.5"}, {Value: 0.75, Label: "0.75"}, {Value: 1, Label: "1"}})
	p.Add(plotter.NewGrid())

	colors := []color.Color{color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}}
	for i, s := range []*Sample{before, after} {
		if len(s.Values) == 0 {
			continue
		}
		line, err := plotter.NewLine(cdfPoints(s.Values))
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		line.Color = colors[i]
		line.Width = vg.Points(2)
		name := "AFTER"
		if i == 0 {
			name = "BEFORE"
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		med := stats.Median(s.Values)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (n=%d, median %s)", name, len(s.Values), formatValue(med, unit)), line)
		mark, err := plotter.NewScatter(plotter.XYs{{X: med, Y: 0.5}})
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		mark.GlyphStyle.Color = colors[i]
		mark.GlyphStyle.Radius = vg.Points(4)
		mark.GlyphStyle.Shape = draw.CircleGlyph{}
		p.Add(mark)
	}
	return plotfile.Save(p, 16*vg.Centimeter, 10*vg.Centimeter, path)
}

// CheckPlotPath says whether WriteCDF can draw into a file of this name: it
// takes .png and .svg.
func CheckPlotPath(path string) error { return plotfile.CheckPath(path) }

// axisLabel names a metric for people.
func axisLabel(metric string) string {
	switch metric {
	case "fct_user":
		return "flow completion time, connect to last byte"
	case "fct_paper":
		return "flow completion time, first to last byte"
	case "last_byte":
		return "time to the last byte"
	case "first_byte":
		return "time to the first byte"
	case "connect":
		return "TCP connect"
	case "tls":
		return "TLS handshake"
	case "handshake_rtt":
		return "handshake round-trip time"
	case "rounds":
		return "round trips"
	case "iw":
		return "initial window"
	case "bytes":
		return "bytes received"
	}
	return metric
}

// cdfPoints is the empirical CDF as a step line: for each sorted value, a point at
// the fraction below it and one at the fraction up to it.
func cdfPoints(xs []float64) plotter.XYs {
	s := slices.Sorted(slices.Values(xs))
	n := float64(len(s))
	pts := make(plotter.XYs, 0, 2*len(s))
	for i, x := range s {
		pts = append(pts, plotter.XY{X: x, Y: float64(i) / n}, plotter.XY{X: x, Y: float64(i+1) / n})
	}
	return pts
}
