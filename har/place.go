package har

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/gctune"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/live"
	"github.com/slowstart/slowstart/pageload"
	"github.com/slowstart/slowstart/report"
)

// PlaceOnCapture analyzes the whole capture in into one Report (a page load
// needs every connection at once) and places the requests of the HAR at path
// on it (analyze --har); write prints the page load. The HAR is read first:
// when its requests name their servers, the connections to other servers are
// counted and left out as they finish, so that memory holds the page's
// connections, not every one of a large capture. Warnings go to errOut; a
// damaged capture is returned (fault.File) after the page load is written.
func PlaceOnCapture(ctx context.Context, in *live.Input, opts analysis.StreamOptions, path string,
	write func(*pageload.Page) error, errOut io.Writer) error {
	harIn, err := loadInput(path)
	if err != nil {
		return err
	}
	servers, named := harIn.Servers()
	defer gctune.ForBatch()()
	var conns []report.Connection
	opts.Emit = func(c *report.Connection) error {
		if server, ok := pageload.ServerOf(c); named && ok && !servers[server] {
			harIn.LeftOut++
			return nil
		}
		conns = append(conns, *c)
		return nil
	}
	res, err := in.Feed(ctx, opts)
	if err != nil {
		return err
	}
	if res.Stopped {
		return fault.Interruptedf("interrupted while the capture was read; the page load needs all of it: nothing printed, nothing left behind")
	}
	rep := analysis.NewReport(opts.Tool, conns)
	rep.Source = live.Source(in.Paths(), in.Stats())
	rep.Warnings = append(rep.Warnings, res.Warnings...)
	for _, w := range rep.Warnings {
		fmt.Fprintf(errOut, "slowstart: warning: %s\n", textsafe.Escape(w))
	}
	harIn.ClockOffsetNs = pageload.EstimateClockOffset(rep, harIn)
	page := pageload.Build(rep, harIn)
	if harIn.ClockOffsetNs != 0 {
		page.Warnings = append(page.Warnings, fmt.Sprintf("the HAR's clock was %.1f ms off the capture's (estimated from its connections' starts): its times are shifted to the capture's", float64(harIn.ClockOffsetNs)/1e6))
	}
	if err := write(page); err != nil {
		return err
	}
	return res.Damaged
}

// loadInput reads the page of the HAR at path as the requests to place; its
// errors are marked fault.File.
func loadInput(path string) (pageload.Input, error) {
	h, err := ReadFile(path)
	if err != nil {
		return pageload.Input{}, fault.Filef("--har: %w", err)
	}
	in, err := ToInput(h)
	if err != nil {
		return pageload.Input{}, fault.Filef("--har %s: %w", path, err)
	}
	if len(in.Requests) == 0 {
		return pageload.Input{}, fault.Filef("--har %s holds no request", path)
	}
	return in, nil
}

// WriteFile writes the page load as a HAR file at path and says so on errOut.
// Its errors are marked fault.File.
func WriteFile(path string, page *pageload.Page, creator, version string, errOut io.Writer) error {
	f, err := os.Create(path)
	if err != nil {
		return fault.Filef("--har-save: %w", err)
	}
	if err := Write(f, FromPage(page, creator, version)); err != nil {
		f.Close()
		return fault.Filef("--har-save: %w", err)
	}
	if err := f.Close(); err != nil {
		return fault.Filef("--har-save: %w", err)
	}
	fmt.Fprintf(errOut, "slowstart: wrote %s (HAR 1.2, %d entries)\n", path, len(page.Requests))
	return nil
}
