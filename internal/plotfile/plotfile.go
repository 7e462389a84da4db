// Package plotfile writes a gonum plot to a file the same way everywhere: an SVG
// carries its font (so its titles and legends have the widths they were laid out
// with, whatever fonts the viewer has), a PNG is drawn at twice the usual density
// (sharp on high-density screens and in print), and the legend goes below the
// axes, never over the data.
//
// It draws what it is given; it decides nothing about what a plot shows.
package plotfile

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// PNGDPI is the density of PNG plots: twice the 96 dots per inch of a screen.
const PNGDPI = 2 * vgimg.DefaultDPI

// legendGap separates the axes from the legend below them, margin keeps the
// legend's last line and the title off the file's edges, and entryGap separates
// the legend's lines.
const (
	legendGap = 3 * vg.Millimeter
	margin    = 2 * vg.Millimeter
	entryGap  = vg.Millimeter
)

// CheckPath says whether Save can write a plot of this name: .svg or .png.
func CheckPath(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg", ".png":
		return nil
	}
	return fmt.Errorf("plot %q: give a .png or .svg file name", path)
}

// Save draws p into path, .svg or .png. The axes take w × h; the legend, when p
// has entries, is drawn below them (the file is that much taller). Save takes the
// legend's entries off p.
func Save(p *plot.Plot, w, h vg.Length, path string) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	legend := p.Legend
	p.Legend = plot.NewLegend() // nothing over the data
	legend.Top, legend.Left = true, true
	legend.XOffs, legend.YOffs = 0, 0
	legend.Padding = entryGap
	if p.Title.Text != "" && p.Title.Padding < margin {
		p.Title.Padding = margin
	}

	// The legend's height, measured on a canvas of the plot's size.
	measure := draw.New(vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(vgimg.DefaultDPI)))
	legendHeight := vg.Length(0)
	if r := legend.Rectangle(measure); r.Size().Y > 0 {
		legendHeight = legendGap + r.Size().Y + margin
	}
	total := h + legendHeight

	var canvas vg.CanvasWriterTo
	if strings.EqualFold(filepath.Ext(path), ".svg") {
		canvas = vgsvg.NewWith(vgsvg.UseWH(w, total), vgsvg.EmbedFonts(true))
	} else {
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, total), vgimg.UseDPI(PNGDPI))}
	}
	dc := draw.New(canvas)
	axes := draw.Crop(dc, 0, -margin, legendHeight, 0)
	p.Draw(axes)
	if legendHeight > 0 {
		// Under the axes, from the left edge of the data area.
		area := draw.Crop(dc, 0, 0, 0, -(h + legendGap))
		legend.XOffs = p.DataCanvas(axes).Min.X - area.Min.X
		legend.Draw(area)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing the plot %s: %w", path, err)
	}
	bw := bufio.NewWriter(f)
	if _, err := canvas.WriteTo(bw); err != nil {
		f.Close()
		return fmt.Errorf("writing the plot %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("writing the plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the plot %s: %w", path, err)
	}
	return nil
}
