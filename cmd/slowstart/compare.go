package main

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/compare"
	"github.com/slowstart/slowstart/field"
	"github.com/slowstart/slowstart/internal/jsonout"
	"github.com/slowstart/slowstart/internal/outpath"
	"github.com/slowstart/slowstart/internal/texttable"
	"github.com/slowstart/slowstart/watch"
)

func newCompareCommand() *cobra.Command {
	var (
		metric, plotPath   string
		asJSON             bool
		storePath, url     string
		network            string
		beforeWin, afterWn string
		resamples          int
		seed               uint64
		alpha              float64
	)
	cmd := &cobra.Command{
		Use:   "compare BEFORE AFTER | compare --store FILE --before T --after T",
		Short: "Did load times really change? Two samples, medians, a confidence interval and a rank test",
		Long: `Compare two sets of measurements of the same page or path, say before and after
raising the server's initial window (IW: what a new connection may send before it
waits a round trip; ip route change ... initcwnd N), and say whether the change is
real or noise.

BEFORE and AFTER are files, recognized by their content:
  - slowstart probe URL --runs N --json (one value per run: the page's final hop);
    several such outputs appended to one file are read as one sample;
  - slowstart lab run --json, or the results.jsonl or results.csv of lab sweep (one
    value per successful trial); a file with several points takes a filter:
    results.jsonl@iw=10 (keys are the row's fields: iw, rtt_ms, size_bytes, point...).
Or windows of a watch store: --store FILE --before T --after T, where T is a time
(RFC3339, "2026-11-08 14:00" or a date) or a range A..B ("2026-11-01..2026-11-07"
includes the 7th); a single T means everything before T (--before) or from T on
(--after). A field store (slowstart field --store) works the same, one value per
connection the store kept, all client networks or --network NET; there
--before mark --after mark takes the same length of time on either side of the
store's newest mark (a tune apply or revert). field report --at-mark shows every
network at once.

It prints n, median, p90 and p99 of each, the difference of the medians with a 95%
bootstrap confidence interval (seeded: the same input gives the same interval), the
two-sided Mann-Whitney U (Wilcoxon rank-sum) p-value, and a sentence. A difference
is called real when p < alpha and the interval excludes 0. Load times are skewed
with long tails, so medians and ranks are used, not means and t-tests.

Metrics (--metric): probe: last_byte (default; fct is the same), first_byte,
connect, tls, handshake_rtt, rounds, iw. Lab: fct_user (default; fct), fct_paper,
first_byte, last_byte, connect, tls. Store: last_byte (default), first_byte, tls,
handshake_rtt, rounds, iw, bytes. Field store: round_trips (default), response,
handshake_rtt, round1_bytes, iw.

It exits 0 whatever the verdict; an input that gives no values exits 3.`,
		Example: `  slowstart compare before.json after.json                    # probe --runs 20 --json, twice
  slowstart compare iw3/results.jsonl iw10/results.jsonl --metric fct_paper
  slowstart compare sweep/results.csv@iw=3 sweep/results.csv@iw=10 --plot cdf.png
  slowstart compare --store site.db --before 2026-11-01..2026-11-07 --after 2026-11-09.. --json
  slowstart compare --store site.db --before 2026-11-08T14:00:00Z --after 2026-11-08T14:00:00Z --plot cdf.svg`,
		Annotations: abandonOnInterrupt,
		RunE: func(cmd *cobra.Command, args []string) error {
			var before, after *compare.Sample
			var err error
			if plotPath != "" {
				if err := compare.CheckPlotPath(plotPath); err != nil {
					return withCode(exitUsage, err)
				}
				if err := outpath.CheckFile("plot", plotPath); err != nil {
					return err
				}
			}
			if storePath != "" {
				if len(args) != 0 {
					return withCode(exitUsage, errors.New("give either BEFORE AFTER files or --store, not both"))
				}
				if beforeWin == "" || afterWn == "" {
					return withCode(exitUsage, errors.New("--store needs --before and --after (a time or a range A..B each)"))
				}
				if field.IsStore(storePath) {
					before, after, err = fieldStoreSamples(cmd, storePath, network, metric, beforeWin, afterWn)
				} else if network != "" {
					return withCode(exitUsage, errors.New("--network goes with a field store (slowstart field --store)"))
				} else {
					before, after, err = storeSamples(cmd, storePath, url, metric, beforeWin, afterWn)
				}
			} else {
				if len(args) != 2 {
					return withCode(exitUsage, fmt.Errorf("give two inputs, BEFORE and AFTER (got %d), or --store FILE --before T --after T", len(args)))
				}
				if beforeWin != "" || afterWn != "" || url != "" {
					return withCode(exitUsage, errors.New("--before, --after and --url go with --store"))
				}
				before, after, err = fileSamples(args[0], args[1], metric)
			}
			if err != nil {
				return err
			}
			for _, s := range []struct {
				name string
				s    *compare.Sample
			}{{"BEFORE", before}, {"AFTER", after}} {
				if len(s.s.Values) == 0 {
					return withCode(exitFile, fmt.Errorf("%s (%s) has no %s values (%d measurements without one)", s.name, s.s.Source, s.s.Metric, s.s.Skipped))
				}
			}
			if resamples < 100 {
				return withCode(exitUsage, errors.New("--resamples must be 100 or more"))
			}
			if alpha <= 0 || alpha >= 0.5 {
				return withCode(exitUsage, errors.New("--alpha must be between 0 and 0.5"))
			}
			res := compare.Compare(before, after, compare.Options{Resamples: resamples, Seed: seed, Alpha: alpha})
			if plotPath != "" {
				if err := compare.WriteCDF(plotPath, before, after, res); err != nil {
					return fileError(err)
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return jsonout.Write(out, res)
			}
			if err := writeComparison(out, res); err != nil {
				return err
			}
			if plotPath != "" {
				fmt.Fprintf(out, "plot: %s\n", plotPath)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&metric, "metric", "", "what to compare: fct (default: last_byte for probes and stores, fct_user for lab results), first_byte, last_byte, fct_paper, tls, connect, handshake_rtt, rounds, iw, bytes")
	fl.BoolVar(&asJSON, "json", false, "print the comparison as JSON")
	fl.StringVar(&plotPath, "plot", "", "draw the CDF of both samples into this file (.png or .svg)")
	fl.StringVar(&storePath, "store", "", "compare two windows of this watch store")
	fl.StringVar(&beforeWin, "before", "", "with --store: the BEFORE window, a range A..B or a time T (everything before T)")
	fl.StringVar(&afterWn, "after", "", "with --store: the AFTER window, a range A..B or a time T (everything from T on)")
	fl.StringVar(&url, "url", "", "with --store: only this URL (needed when the store holds several)")
	fl.StringVar(&network, "network", "", "with a field store: only this client network (default: all of them)")
	fl.IntVar(&resamples, "resamples", 10000, "bootstrap resamples of the confidence interval")
	fl.Uint64Var(&seed, "seed", 1, "seed of the bootstrap (the same seed gives the same interval)")
	fl.Float64Var(&alpha, "alpha", 0.05, "significance level of the test")
	return cmd
}

// fileSamples loads both files, each with its own kind's metric.
func fileSamples(beforePath, afterPath, metric string) (*compare.Sample, *compare.Sample, error) {
	load := func(spec, name string) (*compare.Sample, error) {
		s, err := compare.Load(spec, metric)
		if err != nil {
			if errors.Is(err, compare.ErrBadArgument) {
				return nil, withCode(exitUsage, err)
			}
			return nil, withCode(exitFile, fmt.Errorf("%s: %w", name, err))
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

// storeSamples reads the two windows of a watch store.
func storeSamples(cmd *cobra.Command, path, url, metric, beforeSpec, afterSpec string) (*compare.Sample, *compare.Sample, error) {
	m, err := compare.ResolveMetric(compare.KindStore, metric)
	if err != nil {
		return nil, nil, withCode(exitUsage, err)
	}
	bw, err := compare.ParseWindow(beforeSpec, "before")
	if err != nil {
		return nil, nil, withCode(exitUsage, err)
	}
	aw, err := compare.ParseWindow(afterSpec, "after")
	if err != nil {
		return nil, nil, withCode(exitUsage, err)
	}
	st, err := watch.OpenStore(path, true)
	if err != nil {
		return nil, nil, withCode(exitFile, err)
	}
	defer st.Close()
	ctx := cmd.Context()
	if url == "" {
		urls, err := st.URLs(ctx)
		if err != nil {
			return nil, nil, withCode(exitFile, err)
		}
		if len(urls) > 1 {
			var list []string
			for u, n := range urls {
				list = append(list, fmt.Sprintf("%s (%d rows)", u, n))
			}
			sort.Strings(list)
			return nil, nil, withCode(exitUsage, fmt.Errorf("%s holds %d URLs; pick one with --url: %s", path, len(urls), strings.Join(list, ", ")))
		}
	}
	read := func(w compare.Window) (*compare.Sample, error) {
		rows, err := st.Rows(ctx, watch.Query{URL: url, From: w.From, To: w.To})
		if err != nil {
			return nil, withCode(exitFile, err)
		}
		s := &compare.Sample{Source: fmt.Sprintf("%s, %s", path, w), Kind: compare.KindStore, Metric: m.Name, Unit: m.Unit, Values: []float64{}}
		failed := 0
		for _, r := range rows {
			if r.Error != "" {
				failed++
				continue
			}
			v, ok := storeValue(r, m.Name)
			if !ok {
				s.Skipped++
				continue
			}
			s.Values = append(s.Values, v)
		}
		if failed > 0 {
			s.Notes = append(s.Notes, fmt.Sprintf("%s: %d failed probes left out", w, failed))
		}
		s.Skipped += failed
		return s, nil
	}
	before, err := read(bw)
	if err != nil {
		return nil, nil, err
	}
	after, err := read(aw)
	if err != nil {
		return nil, nil, err
	}
	if overlap(bw, aw) {
		after.Notes = append(after.Notes, "the BEFORE and AFTER windows overlap")
	}
	return before, after, nil
}

func overlap(a, b compare.Window) bool {
	aEndsBeforeB := !a.To.IsZero() && !b.From.IsZero() && !a.To.After(b.From)
	bEndsBeforeA := !b.To.IsZero() && !a.From.IsZero() && !b.To.After(a.From)
	return !aEndsBeforeB && !bEndsBeforeA
}

func storeValue(r watch.Row, metric string) (float64, bool) {
	f := func(p *float64) (float64, bool) {
		if p == nil {
			return 0, false
		}
		return *p, true
	}
	i := func(p *int) (float64, bool) {
		if p == nil || *p == 0 {
			return 0, false
		}
		return float64(*p), true
	}
	switch metric {
	case "last_byte":
		return f(r.LastByteMs)
	case "first_byte":
		return f(r.FirstByteMs)
	case "tls":
		return f(r.TLSMs)
	case "handshake_rtt":
		return f(r.HandshakeRTTMs)
	case "rounds":
		return i(r.RoundTrips)
	case "iw":
		// Exact readings only, as for probe Reports: a bound or a range is no value.
		iw, ok := r.IWReading().Exact()
		return float64(iw), ok && iw > 0
	case "bytes":
		if r.BodyBytes == nil {
			return 0, false
		}
		return float64(*r.BodyBytes), true
	}
	return 0, false
}

// writeComparison prints the comparison as a table and a sentence.
func writeComparison(w io.Writer, r *compare.Result) error {
	fmt.Fprintf(w, "%s (%s)\n", r.Metric, r.Unit)
	tb := texttable.New("  ", texttable.L(""), texttable.R("n"), texttable.R("median"), texttable.R("p90"), texttable.R("p99"))
	for _, s := range []struct {
		name string
		s    compare.Summary
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
	fmt.Fprintf(w, "Mann-Whitney U = %.1f, %s (two-sided, %s); P(AFTER > BEFORE) = %.2f\n", r.Test.U, compare.FormatP(r.Test.P), how, r.Test.ProbabilityGreater)
	fmt.Fprintf(w, "%s\n", r.Sentence)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// fieldStoreSamples reads two periods of a field store: one value per stored
// connection, of all networks or one.
func fieldStoreSamples(cmd *cobra.Command, path, network, metric, beforeSpec, afterSpec string) (*compare.Sample, *compare.Sample, error) {
	m, err := compare.ResolveMetric(compare.KindField, metric)
	if err != nil {
		return nil, nil, withCode(exitUsage, err)
	}
	st, err := field.OpenStore(path, false)
	if err != nil {
		return nil, nil, withCode(exitFile, err)
	}
	defer st.Close()
	ctx := cmd.Context()
	var bw, aw compare.Window
	if beforeSpec == "mark" || afterSpec == "mark" {
		if beforeSpec != afterSpec {
			return nil, nil, withCode(exitUsage, errors.New("--before mark goes with --after mark"))
		}
		if bw, aw, err = field.AroundMark(ctx, st); err != nil {
			return nil, nil, withCode(exitFile, err)
		}
	} else {
		if bw, err = compare.ParseWindow(beforeSpec, "before"); err != nil {
			return nil, nil, withCode(exitUsage, err)
		}
		if aw, err = compare.ParseWindow(afterSpec, "after"); err != nil {
			return nil, nil, withCode(exitUsage, err)
		}
	}
	read := func(w compare.Window) (*compare.Sample, error) {
		s, err := field.StoreSample(ctx, st, field.Query{From: w.From, To: w.To, Network: network}, m.Name)
		if err != nil {
			return nil, withCode(exitFile, err)
		}
		return s, nil
	}
	before, err := read(bw)
	if err != nil {
		return nil, nil, err
	}
	after, err := read(aw)
	if err != nil {
		return nil, nil, err
	}
	if overlap(bw, aw) {
		after.Notes = append(after.Notes, "the BEFORE and AFTER windows overlap")
	}
	return before, after, nil
}
