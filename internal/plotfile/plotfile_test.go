package plotfile

import (
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var magenta = color.RGBA{R: 255, G: 0, B: 255, A: 255}

// samplePlot has one magenta point at the top left of its data, where a legend
// used to be drawn, and that point's legend entry.
func samplePlot(t *testing.T) *plot.Plot {
	t.Helper()
	p := plot.New()
	p.Title.Text = "a title long enough to reach the edges of a narrow plot if it were clipped"
	p.X.Label.Text, p.Y.Label.Text = "x (ms)", "y"
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 10, 0, 10
	sc, err := plotter.NewScatter(plotter.XYs{{X: 1, Y: 9}})
	if err != nil {
		t.Fatal(err)
	}
	sc.Color, sc.Shape, sc.Radius = magenta, draw.CircleGlyph{}, vg.Points(4)
	p.Add(sc)
	p.Legend.Add("the point", sc)
	return p
}

// TestPNGAtTwiceTheDensityWithTheLegendBelow: the PNG has 192 dots per inch, and
// the legend's entry lies below the axes, the data point inside them.
func TestPNGAtTwiceTheDensityWithTheLegendBelow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.png")
	w, h := 10*vg.Centimeter, 6*vg.Centimeter
	if err := Save(samplePlot(t), w, h, path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	if want := int(math.Round(float64(w/vg.Inch) * PNGDPI)); abs(b.Dx()-want) > 1 {
		t.Errorf("width %d pixels, want %d (%g in at %d dpi)", b.Dx(), want, float64(w/vg.Inch), PNGDPI)
	}
	axesRows := int(math.Round(float64(h/vg.Inch) * PNGDPI))
	if b.Dy() <= axesRows {
		t.Fatalf("height %d pixels: no room below the %d rows of the axes for the legend", b.Dy(), axesRows)
	}
	inside, below := magentaRows(img, 0, axesRows), magentaRows(img, axesRows, b.Dy())
	if inside == 0 || below == 0 {
		t.Errorf("magenta rows: %d within the axes (the point), %d below them (the legend's entry); want both", inside, below)
	}
}

func magentaRows(img image.Image, from, to int) int {
	rows := 0
	for y := from; y < to; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 > 200 && g>>8 < 60 && bl>>8 > 200 {
				rows++
				break
			}
		}
	}
	return rows
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// TestSVGCarriesItsFont: every font family the SVG's text names is embedded in
// it, so that it renders with the widths it was laid out with, whatever fonts the
// viewer has.
func TestSVGCarriesItsFont(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.svg")
	if err := Save(samplePlot(t), 10*vg.Centimeter, 6*vg.Centimeter, path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(data)
	embedded := map[string]bool{}
	for _, m := range regexp.MustCompile(`@font-face\{\s*font-family:"([^"]+)";[^}]*src: url\(data:font/ttf;charset=utf-8;base64,`).FindAllStringSubmatch(svg, -1) {
		embedded[m[1]] = true
	}
	used := regexp.MustCompile(`font-family:([^;"]+);`).FindAllStringSubmatch(svg, -1)
	if len(used) == 0 || len(embedded) == 0 {
		t.Fatalf("%d texts name a font, %d fonts embedded", len(used), len(embedded))
	}
	for _, m := range used {
		if !embedded[strings.TrimSpace(m[1])] {
			t.Errorf("text in font %q, which the SVG does not embed", m[1])
		}
	}
	if !strings.Contains(svg, "the point") || !strings.Contains(svg, "a title long enough") {
		t.Errorf("the legend or the title is missing")
	}
}

func TestCheckPath(t *testing.T) {
	for path, ok := range map[string]bool{"a.png": true, "b.SVG": true, "c.pdf": false, "d": false} {
		if err := CheckPath(path); (err == nil) != ok {
			t.Errorf("CheckPath(%q) = %v", path, err)
		}
	}
}
