package main

import (
	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/compare"
	"github.com/slowstart/slowstart/field"
	"github.com/slowstart/slowstart/watch"
)

func newCompareCommand() *cobra.Command {
	o := compare.RunOptions{OpenStore: openCompareStore}
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
			o.Files = args
			return compare.Run(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Metric, "metric", "", "what to compare: fct (default: last_byte for probes and stores, fct_user for lab results), first_byte, last_byte, fct_paper, tls, connect, handshake_rtt, rounds, iw, bytes")
	fl.BoolVar(&o.JSON, "json", false, "print the comparison as JSON")
	fl.StringVar(&o.Plot, "plot", "", "draw the CDF of both samples into this file (.png or .svg)")
	fl.StringVar(&o.StorePath, "store", "", "compare two windows of this watch store")
	fl.StringVar(&o.Query.Before, "before", "", "with --store: the BEFORE window, a range A..B or a time T (everything before T)")
	fl.StringVar(&o.Query.After, "after", "", "with --store: the AFTER window, a range A..B or a time T (everything from T on)")
	fl.StringVar(&o.Query.URL, "url", "", "with --store: only this URL (needed when the store holds several)")
	fl.StringVar(&o.Query.Network, "network", "", "with a field store: only this client network (default: all of them)")
	fl.IntVar(&o.Resamples, "resamples", 10000, "bootstrap resamples of the confidence interval")
	fl.Uint64Var(&o.Seed, "seed", 1, "seed of the bootstrap (the same seed gives the same interval)")
	fl.Float64Var(&o.Alpha, "alpha", 0.05, "significance level of the test")
	return cmd
}

// openCompareStore is the store compare --store reads: a field store, or
// else a watch store.
func openCompareStore(path string) compare.Store {
	if field.IsStore(path) {
		return field.CompareStore(path)
	}
	return watch.CompareStore(path)
}
