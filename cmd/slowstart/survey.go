package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/survey"
)

// surveyFlags are the flags of slowstart survey, read into survey.SurveyOptions.
type surveyFlags struct {
	o                  survey.SurveyOptions
	netns, rate, shard string
	resolves           []string
}

func newSurveyCommand() *cobra.Command {
	var f surveyFlags
	cmd := &cobra.Command{
		Use:   "survey FILE|-",
		Short: "Measure the initial window and first round of many sites, one row each",
		Long: `Measure many sites side by side: for each URL of FILE (or standard input with -),
the server's initial window (IW) exactly, and a first visit's page load.

The initial window is what a server may send on a new connection before it waits
a round trip for acknowledgements (Linux: 10 segments, about 14.6 KB); it decides
how many round trips a page costs over a long path.

FILE holds one URL per line, optionally after a label:
    # hosting providers to compare
    provider-a https://a.example/
    provider-b https://b.example/landing
    https://c.example/
Blank lines and # comments are skipped. The list is checked whole before anything
is measured, then read as the survey goes: a list of millions of URLs costs no
more memory than a short one.

Each row shows: the exact IW (segments and bytes, with its verdict: a small MSS
announced, no ACKs, the distinct bytes counted until the server retransmits; on the
TLS server flight over https, on the response over http), and from a normal page
load: its own IW reading, the bytes of the first data round, the TLS server flight,
the round trips and the handshake RTT. A URL that fails gets its error in its row;
the survey goes on. When an answer is too short to fill the window, the exact
measurement asks again for a long made-up path (http), then with the smallest MSS.

Without --store, the rows are kept and printed at the end (a table, --csv or --json).
With --store STORE, each row is written to the store as it finishes (SQLite by
default; .jsonl and .csv files too) and a summary is printed at the end (as
survey report STORE prints it). Run the same command again after a Ctrl-C or a
kill: the survey resumes, and no target is measured twice.

At most --parallel URLs are measured at once, one at a time per server address,
with --pause between two connections to one address; --max-rate limits the whole
survey (connections and packets per second). --shard I/N measures one of N
disjoint parts of the list (I from 0, as a Kubernetes Indexed Job numbers them);
survey merge --store OUT joins the parts' stores. Progress (targets done, rate, time left,
errors by kind) goes to standard error.

It needs root, or the capabilities CAP_NET_RAW (both methods capture packets),
CAP_NET_ADMIN (the exact measurement adds its connections to one nftables table,
made at the start and removed at the end; not with --no-exact) and CAP_SYS_ADMIN
(with --netns). Details: docs/survey.md, docs/scale.md.

It exits 1 when some URLs failed (see their error column; with --store, only when
every URL failed), 4 when some could not be measured for want of privileges.`,
		Example: `  sudo slowstart survey sites.txt
  sudo slowstart survey sites.txt --csv > sites.csv
  sudo slowstart survey sites.txt --json --parallel 8
  printf 'a https://a.example/\nb https://b.example/\n' | sudo slowstart survey -
  sudo slowstart survey fleet.txt --no-passive --exact-runs 5
  sudo slowstart survey fleet.txt --resolve www.example.com:443:192.0.2.7
  sudo slowstart survey top1m.txt --store top1m.db --parallel 512 --max-rate 500conn/s,50000pkt/s
  sudo slowstart survey top1m.txt --store shard3.db --shard 3/16 --vantage eu-west
  slowstart survey merge --store all.db shard*.db
  slowstart survey report all.db --by label --plot iw.svg`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options(args[0], cmd.InOrStdin())
			if err != nil {
				return err
			}
			return survey.Survey(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	m := &f.o.Options
	fl.BoolVar(&f.o.CSV, "csv", false, "print CSV (a header, then one line per URL; bytes and milliseconds)")
	fl.BoolVar(&f.o.JSON, "json", false, "print JSON (schema slowstart.survey/v1; with --store, the summary: slowstart.survey-summary/v1)")
	fl.IntVar(&m.Concurrency, "parallel", survey.DefaultConcurrency, fmt.Sprintf("URLs measured at once (1 to %d)", survey.MaxConcurrency))
	fl.IntVar(&m.PageLoads, "parallel-page-loads", 0, fmt.Sprintf("page loads under way at once, each with a capture buffer of about 2 MB (default: --parallel, at most %d)", survey.DefaultPageLoads))
	fl.IntVar(&m.DNSConcurrency, "parallel-dns", survey.DefaultDNSConcurrency, "DNS lookups at once (answers are cached for the survey)")
	fl.StringVar(&f.rate, "max-rate", "", "limit the whole survey: new connections and/or packets (both ways) per second, e.g. 200conn/s or 200conn/s,20000pkt/s")
	fl.DurationVar(&m.Pause, "pause", 200*time.Millisecond, "wait this long between two connections to the same server address")
	fl.IntVar(&m.ExactRuns, "exact-runs", exact.DefaultRuns, "fresh connections per exact measurement; the IW is exact only when they agree")
	fl.IntVar(&m.MSS, "exact-mss", exact.DefaultMSS, fmt.Sprintf("MSS the exact measurement announces in its SYN, in bytes (%d to %d)", exact.MinMSS, exact.MaxMSS))
	fl.BoolVar(&m.NoRetries, "no-retries", false, "do not measure again (long path, smallest MSS) when an answer is too short to fill the window")
	fl.DurationVar(&m.Timeout, "timeout", 30*time.Second, "give up on a page load, or on an exact run's connection, after this long")
	fl.BoolVar(&m.NoExact, "no-exact", false, "skip the exact measurement (the page load only)")
	fl.BoolVar(&m.NoPassive, "no-passive", false, "skip the page load (the exact IW only)")
	fl.StringArrayVar(&f.resolves, "resolve", nil, "HOST:PORT:ADDRESS: connect to ADDRESS for HOST:PORT, without DNS (repeatable)")
	addNetnsFlag(fl, &f.netns)
	fl.BoolVarP(&m.Insecure, "insecure", "k", false, "do not verify certificates in the page load (the exact measurement never does)")
	fl.StringVar(&f.o.Store, "store", "", "write each row to this store as it finishes, and resume from it (SQLite; .jsonl, .csv files too)")
	fl.StringVar(&f.o.Format, "format", "", "store format: sqlite, jsonl or csv (default: by --store's extension, else sqlite)")
	fl.StringVar(&f.shard, "shard", "", "measure one of N disjoint parts of the list: I/N, I from 0 to N-1 (e.g. $(JOB_COMPLETION_INDEX)/16)")
	fl.StringVar(&m.Vantage, "vantage", "", "name where this survey runs from (a region); written in every row")
	addSummaryFlags(fl, &f.o.Summary)
	for old, new := range map[string]string{"concurrency": "parallel", "page-loads": "parallel-page-loads", "dns-concurrency": "parallel-dns",
		"rate": "max-rate", "mss": "exact-mss", "out": "store"} {
		renamed(fl, old, new)
	}
	cmd.AddCommand(newSurveyMergeCommand(), newSurveyReportCommand())
	return cmd
}

// options reads the flags of a survey of list (in: standard input, for "-").
func (f *surveyFlags) options(list string, in io.Reader) (survey.SurveyOptions, error) {
	o := f.o
	o.List, o.In = list, in
	switch {
	case o.CSV && o.JSON:
		return o, withCode(exitUsage, errors.New("--csv and --json exclude each other"))
	case o.Store != "" && o.CSV:
		return o, withCode(exitUsage, errors.New("--csv prints the rows at the end, --store writes them to a store: give one (the store can be a .csv file)"))
	case o.Store == "" && o.Summary != (survey.SummaryOptions{}):
		return o, withCode(exitUsage, errors.New("--by, --asn and --plot shape the summary of a survey with --store (or survey report STORE)"))
	}
	m := &o.Options
	var err error
	if m.Netns, err = netnsPath(f.netns); err != nil {
		return o, err
	}
	m.Tool = "slowstart " + version
	if m.ConnectionsPerSecond, m.PacketsPerSecond, err = survey.ParseRate(f.rate); err != nil {
		return o, withCode(exitUsage, err)
	}
	if f.shard != "" {
		if m.Shard, err = survey.ParseShard(f.shard); err != nil {
			return o, withCode(exitUsage, fmt.Errorf("--shard: %w", err))
		}
	}
	if m.Resolve, err = parseResolves(f.resolves); err != nil {
		return o, err
	}
	if _, err := m.Settings(); err != nil {
		return o, withCode(exitUsage, err)
	}
	return o, nil
}

func addSummaryFlags(fl *pflag.FlagSet, o *survey.SummaryOptions) {
	fl.StringVar(&o.GroupBy, "by", "", "group the summary's table by label or asn (default: label when the rows have labels, asn with --asn)")
	fl.StringVar(&o.ASNFile, "asn", "", "a table of prefixes and ASNs (PREFIX/LEN ASN per line, or CAIDA's pfx2as) to group the rows by ASN")
	fl.StringVar(&o.Plot, "plot", "", "draw the histogram of the exact IW readings into this .svg or .png file")
}

func newSurveyMergeCommand() *cobra.Command {
	var format, out string
	cmd := &cobra.Command{
		Use:   "merge --store OUT STORE...",
		Short: "Join the stores of a survey's shards (or vantage points) into one",
		Long: `Join the rows of survey stores into a new store (--store OUT): the shards of one list
(survey --shard I/N), or surveys of one list from several vantage points
(--vantage). A target is its vantage, its place in the list and its URL; one found
in two stores is an error and nothing is written. SQLite stores must be of the same
list, and a shard missing from the split is named. The stores may mix formats. A
directory stands for the stores in it (.db, .sqlite, .jsonl, .csv files, not its
subdirectories).`,
		Example: `  slowstart survey merge --store all.db shard-0.db shard-1.db shard-2.db shard-3.db
  slowstart survey merge --store all.jsonl /results/*.db`,
		Args:        cobra.MinimumNArgs(1),
		Annotations: abandonOnInterrupt,
		RunE: func(cmd *cobra.Command, args []string) error {
			out, stores, err := mergeArgs(cmd, "store", out, args)
			if err != nil {
				return err
			}
			return survey.MergeStores(out, format, stores, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&out, "store", "", "the new store to write (required)")
	cmd.Flags().StringVar(&format, "format", "", "the new store's format: sqlite, jsonl or csv (default: by its extension, else sqlite)")
	return cmd
}

func newSurveyReportCommand() *cobra.Command {
	var asJSON bool
	var o survey.SummaryOptions
	cmd := &cobra.Command{
		Use:   "report STORE",
		Short: "Sum up a survey's store: IW distribution, no-answer share and why, by provider",
		Long: `Sum up the rows of a survey store (SQLite, JSONL or CSV, a shard's or a merged
one): the exact initial windows found, as a histogram, with how sure each is (exact,
a lower bound); the page loads' own readings (ranges shown as a-b, either end
possible); the share of targets that gave no reading and why (the error that stopped
the measurement, or the runs' outcome); and a table by provider, as the published
surveys lay it out: by the rows' labels, or by ASN with --asn.`,
		Example: `  slowstart survey report sites.db
  slowstart survey report sites.db --asn pfx2as.txt --plot iw.png
  slowstart survey report sites.jsonl --json`,
		Args:        cobra.ExactArgs(1),
		Annotations: abandonOnInterrupt,
		RunE: func(cmd *cobra.Command, args []string) error {
			return survey.Report(args[0], o, asJSON, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON (schema slowstart.survey-summary/v1)")
	addSummaryFlags(cmd.Flags(), &o)
	return cmd
}
