package quicprobe

// This file runs probe --http3 and --protocols as slowstart probe does:
// the probe, its output, and the exit kinds of its errors (package fault).

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/slowstart/slowstart/h3client"
	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/privatefile"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/report"
)

// Print probes opts.URL over HTTP/3 and prints the Report, as text or JSON,
// to out. Its errors are marked fault.Network.
func Print(ctx context.Context, opts h3client.Options, asJSON bool, out io.Writer) error {
	res, err := h3client.Run(ctx, opts)
	if res != nil && res.Report != nil && len(res.Report.Connections) > 0 {
		var werr error
		if asJSON {
			werr = report.WriteJSON(out, res.Report)
		} else {
			werr = report.WriteText(out, res.Report)
		}
		if err == nil {
			err = werr
		}
	}
	return fault.Mark(fault.Network, err)
}

// PrintExact measures the initial window actively over HTTP/3 (Exact), runs
// times over fresh connections, and prints what each run saw (or, as JSON, a
// Report of their connections with their readings) to out; errOut is told
// what is measured. Its errors are marked: Interrupted, or Network when no
// run gave a result.
func PrintExact(ctx context.Context, opts h3client.Options, runs int, asJSON bool, out, errOut io.Writer) error {
	runs = max(runs, 1)
	if !asJSON {
		fmt.Fprintf(errOut, "Measuring the initial window of %s over HTTP/3, %d fresh connections (nothing acknowledged after the request)...\n", opts.URL, runs)
	}
	var results []*ExactResult
	rep := &report.Report{Schema: report.Schema, Tool: opts.Tool, Source: report.Source{Kind: "live", LinkTypes: []string{"socket"}},
		Connections: []report.Connection{}, Warnings: []string{}}
	var lastErr error
	for range runs {
		r, err := Exact(ctx, opts)
		if ctx.Err() != nil {
			return fault.Interruptedf("interrupted; nothing left behind")
		}
		if err != nil {
			lastErr = err
		}
		if r == nil {
			continue
		}
		results = append(results, r)
		if r.Probe != nil && r.Probe.Report != nil {
			for _, c := range r.Probe.Report.Connections {
				c.Index = len(rep.Connections) + 1
				c.InitialWindow = r.InitialWindow()
				rep.Connections = append(rep.Connections, c)
			}
			if rep.Source.StartUnixNs == 0 {
				rep.Source.StartUnixNs = r.Probe.Report.Source.StartUnixNs
			}
		}
	}
	if len(results) == 0 {
		return fault.Mark(fault.Network, lastErr)
	}
	if asJSON {
		return report.WriteJSON(out, rep)
	}
	return WriteExactText(out, opts.URL, results)
}

// PrintChoice probes as a browser speaking these protocols does (Choose) and
// prints the Report (text, or JSON) to out, its warnings to errOut, and the
// page through writeHTML when set. Its errors are the probes'; a signal's is
// marked fault.Interrupted.
func PrintChoice(ctx context.Context, opts ChooseOptions, asJSON bool, writeHTML func(*report.Report) error, out, errOut io.Writer) error {
	ch, err := Choose(ctx, opts)
	if ctx.Err() != nil {
		return fault.Interruptedf("interrupted; nothing left behind")
	}
	if ch == nil || ch.Report == nil {
		return err
	}
	return probe.PrintReport(ch.Report, err, asJSON, func(w io.Writer) error { return WriteChoiceText(w, ch) }, writeHTML, out, errOut)
}

// KeylogFile is a key log opened for appending when the probe first writes
// to it (Options.Keylog); Close closes it when it was opened.
type KeylogFile struct {
	Path string
	f    *os.File
}

func (k *KeylogFile) Write(b []byte) (int, error) {
	if k.f == nil {
		f, err := privatefile.Append(k.Path)
		if err != nil {
			return 0, err
		}
		k.f = f
	}
	return k.f.Write(b)
}

// Close closes the file when it was opened.
func (k *KeylogFile) Close() error {
	if k.f == nil {
		return nil
	}
	return k.f.Close()
}
