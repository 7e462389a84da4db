// Package watch probes a URL on a schedule and keeps one row per probe in an
// embedded SQLite store (see Store for the schema), so that a change on the origin
// (a new initcwnd, a smaller certificate chain) can be judged later on real
// measurements, before and after, with package compare. It also serves the last
// probe as Prometheus metrics.
//
// It does not analyze packets or fetch pages itself (package probe does) and it
// does no statistics (package compare does).
package watch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slowstart/slowstart/internal/redact"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/report"
)

// Config describes a watch.
type Config struct {
	// Probe configures each probe; Runs is forced to 1 (one row per probe).
	Probe probe.Options
	// Every is the time from the start of one probe to the start of the next.
	Every time.Duration
	// Count stops the watch after this many probes; 0: until ctx ends.
	Count int
	// Store receives one row per probe.
	Store *Store
	// Label names the watch in the store and the metrics instead of its URL.
	Label string
	// Metrics, when set, is updated after every probe.
	Metrics *Metrics
	// OnProbe, when set, is called after each probe is stored.
	OnProbe func(Row)
	// Fatal, when set, tells the errors that stop the watch instead of being
	// stored (a malformed URL, missing privileges): no later probe would do better.
	Fatal func(error) bool
	// Now and Probe replace the clock and probe.Run in tests; nil for the real ones.
	Now    func() time.Time
	Prober func(context.Context, probe.Options) (*probe.Result, error)
}

// Run probes until Count probes are done or ctx ends; a probe that fails is stored
// with its error and the watch goes on. It returns nil when Count probes were
// done, ctx.Err() when ctx ended first, and an error when the store can't be
// written.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Every <= 0 {
		return errors.New("the interval between probes must be positive")
	}
	if cfg.Store == nil {
		return errors.New("no store to write to")
	}
	now, prober := cfg.Now, cfg.Prober
	if now == nil {
		now = time.Now
	}
	if prober == nil {
		prober = probe.Run
	}
	opts := cfg.Probe
	opts.Runs = 1
	next := now()
	for done := 0; cfg.Count == 0 || done < cfg.Count; done++ {
		if done > 0 {
			next = next.Add(cfg.Every)
			// A probe that took longer than the interval delays the next one,
			// rather than firing a burst to catch up.
			if t := now(); next.Before(t) {
				next = t
			}
			timer := time.NewTimer(next.Sub(now()))
			select {
			case <-ctx.Done():
				timer.Stop()
				return ctx.Err()
			case <-timer.C:
			}
		}
		started := now()
		res, err := prober(ctx, opts)
		if ctx.Err() != nil {
			// An interrupted probe is not a measurement: it is not stored.
			return ctx.Err()
		}
		if err != nil && cfg.Fatal != nil && cfg.Fatal(err) {
			return err
		}
		row := RowFromResult(started, opts.URL, res, err)
		row.Label = cfg.Label
		id, werr := cfg.Store.Insert(context.WithoutCancel(ctx), row)
		if werr != nil {
			return werr
		}
		row.ID = id
		if cfg.Metrics != nil {
			cfg.Metrics.Observe(row)
		}
		if cfg.OnProbe != nil {
			cfg.OnProbe(row)
		}
	}
	return nil
}

// RowFromResult turns a probe's result into a row: the final hop (the page
// itself, after redirects) of the first run gives the values. The URL, and
// every URL and secret of it in the error (a redirect's target too), is
// redacted (package redact).
func RowFromResult(at time.Time, url string, res *probe.Result, err error) Row {
	row := Row{Time: at.UTC(), URL: redact.URL(url)}
	if err != nil {
		row.Error = redact.Text(err.Error(), url)
	}
	var conn *report.Connection
	if res != nil {
		conn = res.Final(0)
	}
	if conn == nil {
		if row.Error == "" {
			row.Error = "the probe gave no connection"
		}
		return row
	}
	// The same projection survey shows (report.Summary), its stored columns.
	row.SummaryRow = keep(report.Summary(conn))
	if row.Status != nil && *row.Status >= 400 && row.Error == "" {
		row.Error = fmt.Sprintf("HTTP status %d", *row.Status)
	}
	return row
}
