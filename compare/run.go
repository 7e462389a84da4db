package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/jsonout"
	"github.com/slowstart/slowstart/internal/outpath"
	"github.com/slowstart/slowstart/internal/texttable"
)

// A Store is a store of measurements over time that gives the samples of two
// windows of it: a watch store (package watch) or a field store (package
// field). Its errors are marked with their fault kind.
type Store interface {
	Samples(ctx context.Context, q StoreQuery) (before, after *Sample, err error)
}

// StoreQuery picks the windows and the values of a Store.
type StoreQuery struct {
	// Before and After are the windows, as ParseWindow reads them (a store may
	// take more: a field store's "mark").
	Before, After string
	Metric        string // as ResolveMetric takes it (RunOptions.Metric); "" for the default
	URL           string // only this URL (a watch store)
	Network       string // only this client network (a field store)
}

// RunOptions are a comparison as slowstart compare asks for it: two files, or
// two windows of a store.
type RunOptions struct {
	// Files are BEFORE and AFTER (Load's specs); none with StorePath.
	Files []string
	// StorePath, when set, is a store to compare two windows of (Query, whose
	// Metric is set from Metric), opened by OpenStore.
	StorePath string
	OpenStore func(path string) Store
	Query     StoreQuery
	// Metric is what to compare, as ResolveMetric takes it; "" for each kind's
	// default.
	Metric    string
	Resamples int
	Seed      uint64
	Alpha     float64
	// Plot, when set, is a .png or .svg file to draw both samples' CDFs into.
	Plot string
	// JSON prints the Result as JSON instead of a table and a sentence.
	JSON bool
}

// Run loads both samples, compares them and prints the comparison to out.
// Errors are marked with their fault kind: bad options are usage errors, a
// sample that can't be read or has no values a file error.
func Run(ctx context.Context, o RunOptions, out io.Writer) error {
	if o.Plot != "" {
		if err := CheckPlotPath(o.Plot); err != nil {
			return fault.Mark(fault.Usage, err)
		}
		if err := outpath.CheckFile("plot", o.Plot); err != nil {
			return err
		}
	}
	before, after, err := o.samples(ctx)
	if err != nil {
		return err
	}
	for _, s := range []struct {
		name string
		s    *Sample
	}{{"BEFORE", before}, {"AFTER", after}} {
		if len(s.s.Values) == 0 {
			return fault.Filef("%s (%s) has no %s values (%d measurements without one)", s.name, s.s.Source, s.s.Metric, s.s.Skipped)
		}
	}
	if o.Resamples < 100 {
		return fault.Usagef("--resamples must be 100 or more")
	}
	if o.Alpha <= 0 || o.Alpha >= 0.5 {
		return fault.Usagef("--alpha must be between 0 and 0.5")
	}
	res := Compare(before, after, Options{Resamples: o.Resamples, Seed: o.Seed, Alpha: o.Alpha})
	if o.Plot != "" {
		if err := WriteCDF(o.Plot, before, after, res); err != nil {
			return fault.Mark(fault.File, err)
		}
	}
	if o.JSON {
		return jsonout.Write(out, res)
	}
	if err := WriteText(out, res); err != nil {
		return err
	}
	if o.Plot != "" {
		fmt.Fprintf(out, "plot: %s\n", o.Plot)
	}
	return nil
}

// samples reads BEFORE and AFTER from the files or the store.
func (o RunOptions) samples(ctx context.Context) (*Sample, *Sample, error) {
	q := o.Query
	q.Metric = o.Metric
	if o.StorePath != "" {
		switch {
		case len(o.Files) != 0:
			return nil, nil, fault.Usagef("give either BEFORE AFTER files or --store, not both")
		case q.Before == "" || q.After == "":
			return nil, nil, fault.Usagef("--store needs --before and --after (a time or a range A..B each)")
		}
		return o.OpenStore(o.StorePath).Samples(ctx, q)
	}
	switch {
	case len(o.Files) != 2:
		return nil, nil, fault.Usagef("give two inputs, BEFORE and AFTER (got %d), or --store FILE --before T --after T", len(o.Files))
	case q.Before != "" || q.After != "" || q.URL != "":
		return nil, nil, fault.Usagef("--before, --after and --url go with --store")
	}
	return LoadPair(o.Files[0], o.Files[1], o.Metric)
}

// LoadPair loads both files, each with its own kind's metric, and notes when
// they are of different kinds.
func LoadPair(beforePath, afterPath, metric string) (*Sample, *Sample, error) {
	load := func(spec, name string) (*Sample, error) {
		s, err := Load(spec, metric)
		if err != nil {
			if errors.Is(err, ErrBadArgument) {
				return nil, fault.Mark(fault.Usage, err)
			}
			return nil, fault.Filef("%s: %w", name, err)
		}
		return s, nil
	}
	before, err := load(beforePath, "BEFORE")
	if err != nil {
		return nil, nil, err
	}
	after, err := load(afterPath, "AFTER")
	if err != nil {
		return nil, nil, err
	}
	if before.Kind != after.Kind {
		after.Notes = append(after.Notes, fmt.Sprintf("BEFORE is %s data and AFTER is %s data: make sure they measure the same thing", before.Kind, after.Kind))
	}
	return before, after, nil
}

// Windows reads the samples of two windows of a store with read, and notes
// when the windows overlap. read's errors are returned as they are.
func Windows(before, after Window, read func(Window) (*Sample, error)) (*Sample, *Sample, error) {
	b, err := read(before)
	if err != nil {
		return nil, nil, err
	}
	a, err := read(after)
	if err != nil {
		return nil, nil, err
	}
	if before.Overlaps(after) {
		a.Notes = append(a.Notes, "the BEFORE and AFTER windows overlap")
	}
	return b, a, nil
}

// ParseWindows reads --before and --after; its errors are usage errors.
func ParseWindows(before, after string) (Window, Window, error) {
	bw, err := ParseWindow(before, "before")
	if err != nil {
		return bw, bw, fault.Mark(fault.Usage, err)
	}
	aw, err := ParseWindow(after, "after")
	if err != nil {
		return bw, aw, fault.Mark(fault.Usage, err)
	}
	return bw, aw, nil
}

// WriteText prints the comparison as a table and a sentence.
func WriteText(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "%s (%s)\n", r.Metric, r.Unit)
	tb := texttable.New("  ", texttable.L(""), texttable.R("n"), texttable.R("median"), texttable.R("p90"), texttable.R("p99"))
	for _, s := range []struct {
		name string
		s    Summary
	}{{"BEFORE", r.Before}, {"AFTER", r.After}} {
		tb.Row(s.name, strconv.Itoa(s.s.N), fmt.Sprintf("%.1f", s.s.Median), fmt.Sprintf("%.1f", s.s.P90), fmt.Sprintf("%.1f", s.s.P99))
	}
	if err := tb.Write(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "  BEFORE: %s\n  AFTER:  %s\n", r.BeforeSource, r.AfterSource)
	fmt.Fprintf(w, "difference of medians (AFTER - BEFORE): %+.1f %s (%+.0f%%), %.0f%% CI %+.1f to %+.1f %s (bootstrap, %d resamples, seed %d)\n",
		r.MedianDiff, r.Unit, 100*r.RelativeDiff, 100*r.CI.Level, r.CI.Low, r.CI.High, r.Unit, r.Resamples, r.Seed)
	how := "normal approximation with tie correction"
	if r.Test.Exact {
		how = "exact"
	}
	fmt.Fprintf(w, "Mann-Whitney U = %.1f, %s (two-sided, %s); P(AFTER > BEFORE) = %.2f\n", r.Test.U, FormatP(r.Test.P), how, r.Test.ProbabilityGreater)
	fmt.Fprintf(w, "%s\n", r.Sentence)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
