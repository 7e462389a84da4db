package reproduce

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/slowstart/slowstart/internal/plotfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// seriesKind says how a series is drawn.
type seriesKind int

const (
	kindLab       seriesKind = iota // filled markers joined by a line, with 95% error bars
	kindModel                       // dashed line
	kindPublished                   // open markers, no line
)

// xyPoint is one point of a series; Err is the half-width of its error bar.
type xyPoint struct{ X, Y, Err float64 }

type series struct {
	Name   string
	Kind   seriesKind
	Points []xyPoint
}

// figure is one plot.
type figure struct {
	Name           string // file stem
	Title          string
	XLabel, YLabel string
	LogX, LogY     bool
	Series         []series
}

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 255},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 255},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 255},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 255},
}

// render draws f and saves it as DIR/NAME.svg and DIR/NAME.png. It returns a note
// for every series with points a log axis can't show (a value of 0 or less), which
// it leaves out: the caller must say so.
func (f figure) render(dir string) (notes []string, err error) {
	p := plot.New()
	p.Title.Text = f.Title
	p.X.Label.Text = f.XLabel
	p.Y.Label.Text = f.YLabel
	if f.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if f.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks{}, plainTicks{}
	if f.LogX {
		p.X.Tick.Marker = ticks125{}
	}
	if f.LogY {
		p.Y.Tick.Marker = ticks125{}
	}
	p.Add(plotter.NewGrid())
	colors := map[string]color.Color{}
	for _, s := range f.Series {
		var xys plotter.XYs
		var errs plotter.YErrors
		var unplottable []string
		for _, pt := range s.Points {
			if math.IsNaN(pt.Y) || math.IsInf(pt.Y, 0) {
				continue // not measured
			}
			if (f.LogY && pt.Y <= 0) || (f.LogX && pt.X <= 0) {
				unplottable = append(unplottable, fmt.Sprintf("(%g, %g)", pt.X, pt.Y))
				continue
			}
			xys = append(xys, plotter.XY{X: pt.X, Y: pt.Y})
			lo, hi := pt.Err, pt.Err
			if f.LogY && pt.Y-lo <= 0 {
				lo = pt.Y * 0.5
			}
			errs = append(errs, struct{ Low, High float64 }{lo, hi})
		}
		if len(unplottable) > 0 {
			axis := "y"
			if f.LogX {
				axis = "x"
			}
			if f.LogX && f.LogY {
				axis = "x or y"
			}
			name := s.Name
			if name == "" {
				name = "published"
			}
			notes = append(notes, fmt.Sprintf("%s: %d point(s) of %q are not drawn, because the log %s axis can't show a value of 0 or less: %s",
				f.Name, len(unplottable), name, axis, strings.Join(unplottable, ", ")))
		}
		if len(xys) == 0 {
			continue
		}
		// A quantity's lab, model and published series share its color.
		c, ok := colors[s.Name]
		if !ok {
			c = palette[len(colors)%len(palette)]
			colors[s.Name] = c
		}
		switch s.Kind {
		case kindLab:
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return notes, err
			}
			line.Color, points.Color = c, c
			line.Width = vg.Points(1.2)
			points.Shape = draw.CircleGlyph{}
			points.Radius = vg.Points(2.5)
			bars, err := plotter.NewYErrorBars(struct {
				plotter.XYs
				plotter.YErrors
			}{xys, errs})
			if err != nil {
				return notes, err
			}
			bars.Color = c
			bars.CapWidth = vg.Points(4)
			p.Add(line, points, bars)
			p.Legend.Add(s.Name+" (lab, median ± 95% CI)", line, points)
		case kindModel:
			line, err := plotter.NewLine(xys)
			if err != nil {
				return notes, err
			}
			line.Color = c
			line.Width = vg.Points(1.5)
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			p.Add(line)
			p.Legend.Add(s.Name+" (model)", line)
		case kindPublished:
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return notes, err
			}
			sc.Color = c
			sc.Shape = draw.BoxGlyph{}
			sc.Radius = vg.Points(3.5)
			if s.Name != "" {
				sc.Shape = draw.TriangleGlyph{}
			}
			p.Add(sc)
			p.Legend.Add(s.Name, sc)
		}
	}
	for _, ext := range []string{"svg", "png"} {
		if err := plotfile.Save(p, 7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, f.Name+"."+ext)); err != nil {
			return notes, err
		}
	}
	return notes, nil
}

// ticks125 marks a log axis at 1, 2 and 5 times the powers of ten, labeled.
type ticks125 struct{}

func (ticks125) Ticks(minValue, maxValue float64) []plot.Tick {
	if minValue <= 0 {
		minValue = math.SmallestNonzeroFloat64
	}
	var out []plot.Tick
	for exp := math.Floor(math.Log10(minValue)); math.Pow(10, exp) <= maxValue; exp++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, exp)
			if v < minValue || v > maxValue {
				continue
			}
			out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
		}
		for m := 3.0; m < 10; m++ {
			if m == 5 {
				continue
			}
			if v := m * math.Pow(10, exp); v >= minValue && v <= maxValue {
				out = append(out, plot.Tick{Value: v}) // minor tick
			}
		}
	}
	return out
}

// plainTicks are gonum's default linear ticks labeled without trailing zeros.
type plainTicks struct{}

func (plainTicks) Ticks(minValue, maxValue float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(minValue, maxValue)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(math.Round(ticks[i].Value*1e6)/1e6, 'f', -1, 64)
		}
	}
	return ticks
}
