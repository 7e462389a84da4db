package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/internal/plotfile"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/survey"
)

func newSurveyCommand() *cobra.Command {
	var (
		asCSV, asJSON      bool
		concurrency        int
		pageLoads, dnsConc int
		exactRuns, mss     int
		timeout, pause     time.Duration
		noExact, noPassive bool
		noRetries          bool
		resolves           []string
		netns              string
		insecure           bool
		out, format        string
		shard, vantage     string
		rate               string
		groupBy, asnFile   string
		plotPath           string
	)
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

Without --out, the rows are kept and printed at the end (a table, --csv or --json).
With --out STORE, each row is written to the store as it finishes (SQLite by
default; .jsonl and .csv files too) and a summary is printed at the end (as
survey report STORE prints it). Run the same command again after a Ctrl-C or a
kill: the survey resumes, and no target is measured twice.

At most --concurrency URLs are measured at once, one at a time per server address,
with --pause between two connections to one address; --rate limits the whole
survey (connections and packets per second). --shard I/N measures one of N
disjoint parts of the list (I from 0, as a Kubernetes Indexed Job numbers them);
survey merge joins the parts' stores. Progress (targets done, rate, time left,
errors by kind) goes to standard error.

It needs root, or the capabilities CAP_NET_RAW (both methods capture packets),
CAP_NET_ADMIN (the exact measurement adds its connections to one nftables table,
made at the start and removed at the end; not with --no-exact) and CAP_SYS_ADMIN
(with --netns). Details: docs/survey.md, docs/scale.md.

It exits 1 when some URLs failed (see their error column; with --out, only when
every URL failed), 4 when some could not be measured for want of privileges.`,
		Example: `  sudo slowstart survey sites.txt
  sudo slowstart survey sites.txt --csv > sites.csv
  sudo slowstart survey sites.txt --json --concurrency 8
  printf 'a https://a.example/\nb https://b.example/\n' | sudo slowstart survey -
  sudo slowstart survey fleet.txt --no-passive --exact-runs 5
  sudo slowstart survey fleet.txt --resolve www.example.com:443:192.0.2.7
  sudo slowstart survey top1m.txt --out top1m.db --concurrency 512 --rate 500conn/s,50000pkt/s
  sudo slowstart survey top1m.txt --out shard3.db --shard 3/16 --vantage eu-west
  slowstart survey merge all.db shard*.db
  slowstart survey report all.db --by label --plot iw.svg`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asCSV && asJSON {
				return withCode(exitUsage, errors.New("--csv and --json exclude each other"))
			}
			if out != "" && asCSV {
				return withCode(exitUsage, errors.New("--csv prints the rows at the end, --out writes them to a store: give one (the store can be a .csv file)"))
			}
			if out == "" && (groupBy != "" || asnFile != "" || plotPath != "") {
				return withCode(exitUsage, errors.New("--by, --asn and --plot shape the summary of a survey with --out (or survey report STORE)"))
			}
			netns, err := netnsPath(netns)
			if err != nil {
				return err
			}
			opts := survey.Options{Concurrency: concurrency, PageLoads: pageLoads, DNSConcurrency: dnsConc,
				NoExact: noExact, NoPassive: noPassive, NoRetries: noRetries, Pause: pause,
				ExactRuns: exactRuns, MSS: mss, Timeout: timeout, Netns: netns, Insecure: insecure,
				Tool: "slowstart " + version, Resolve: map[string]netip.Addr{}, Vantage: vantage}
			if opts.ConnectionsPerSecond, opts.PacketsPerSecond, err = parseSurveyRate(rate); err != nil {
				return withCode(exitUsage, err)
			}
			if shard != "" {
				if opts.Shard, err = survey.ParseShard(shard); err != nil {
					return withCode(exitUsage, fmt.Errorf("--shard: %w", err))
				}
			}
			for _, r := range resolves {
				key, addr, err := probe.ParseResolve(r)
				if err != nil {
					return withCode(exitUsage, err)
				}
				opts.Resolve[key] = addr
			}
			if _, err := opts.Settings(); err != nil {
				return withCode(exitUsage, err)
			}
			sum, err := newSurveySummarizer(groupBy, asnFile, plotPath)
			if err != nil {
				return err
			}
			list, info, cleanup, err := openSurveyList(cmd, args[0], opts.Shard)
			if err != nil {
				return err
			}
			defer cleanup()
			if err := surveyPrivileges(opts); err != nil {
				return withCode(exitPermission, err)
			}
			cleanStaleExact(cmd, netns)
			if out == "" {
				targets, err := survey.ParseInput(list)
				if err != nil {
					return withCode(exitFile, fmt.Errorf("%s: %w", args[0], err))
				}
				return runSurvey(cmd, targets, opts, asCSV, asJSON)
			}
			return runSurveyToStore(cmd, list, info, opts, out, format, sum, asJSON, plotPath)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&asCSV, "csv", false, "print CSV (a header, then one line per URL; bytes and milliseconds)")
	fl.BoolVar(&asJSON, "json", false, "print JSON (schema slowstart.survey/v1; with --out, the summary: slowstart.survey-summary/v1)")
	fl.IntVar(&concurrency, "concurrency", survey.DefaultConcurrency, fmt.Sprintf("URLs measured at once (1 to %d)", survey.MaxConcurrency))
	fl.IntVar(&pageLoads, "page-loads", 0, fmt.Sprintf("page loads under way at once, each with a capture buffer of about 2 MB (default: the concurrency, at most %d)", survey.DefaultPageLoads))
	fl.IntVar(&dnsConc, "dns-concurrency", survey.DefaultDNSConcurrency, "DNS lookups at once (answers are cached for the survey)")
	fl.StringVar(&rate, "rate", "", "limit the whole survey: new connections and/or packets (both ways) per second, e.g. 200conn/s or 200conn/s,20000pkt/s")
	fl.DurationVar(&pause, "pause", 200*time.Millisecond, "wait this long between two connections to the same server address")
	fl.IntVar(&exactRuns, "exact-runs", exact.DefaultRuns, "fresh connections per exact measurement; the IW is exact only when they agree")
	fl.IntVar(&mss, "mss", exact.DefaultMSS, fmt.Sprintf("MSS the exact measurement announces in its SYN, in bytes (%d to %d)", exact.MinMSS, exact.MaxMSS))
	fl.BoolVar(&noRetries, "no-retries", false, "do not measure again (long path, smallest MSS) when an answer is too short to fill the window")
	fl.DurationVar(&timeout, "timeout", 30*time.Second, "give up on a page load, or on an exact run's connection, after this long")
	fl.BoolVar(&noExact, "no-exact", false, "skip the exact measurement (the page load only)")
	fl.BoolVar(&noPassive, "no-passive", false, "skip the page load (the exact IW only)")
	fl.StringArrayVar(&resolves, "resolve", nil, "HOST:PORT:ADDRESS: connect to ADDRESS for HOST:PORT, without DNS (repeatable)")
	addNetnsFlag(fl, &netns)
	fl.BoolVarP(&insecure, "insecure", "k", false, "do not verify certificates in the page load (the exact measurement never does)")
	fl.StringVar(&out, "out", "", "write each row to this store as it finishes, and resume from it (SQLite; .jsonl, .csv files too)")
	fl.StringVar(&format, "format", "", "store format: sqlite, jsonl or csv (default: by --out's extension, else sqlite)")
	fl.StringVar(&shard, "shard", "", "measure one of N disjoint parts of the list: I/N, I from 0 to N-1 (e.g. $(JOB_COMPLETION_INDEX)/16)")
	fl.StringVar(&vantage, "vantage", "", "name where this survey runs from (a region); written in every row")
	addSummaryFlags(fl, &groupBy, &asnFile, &plotPath)
	cmd.AddCommand(newSurveyMergeCommand(), newSurveyReportCommand())
	return cmd
}

func addSummaryFlags(fl *pflag.FlagSet, groupBy, asnFile, plotPath *string) {
	fl.StringVar(groupBy, "by", "", "group the summary's table by label or asn (default: label when the rows have labels, asn with --asn)")
	fl.StringVar(asnFile, "asn", "", "a table of prefixes and ASNs (PREFIX/LEN ASN per line, or CAIDA's pfx2as) to group the rows by ASN")
	fl.StringVar(plotPath, "plot", "", "draw the histogram of the exact IW readings into this .svg or .png file")
}

// parseSurveyRate reads --rate: one or two comma-separated limits, each a
// number followed by conn/s or pkt/s.
func parseSurveyRate(s string) (connections, packets float64, err error) {
	for _, part := range splitList(s) {
		value, unit := part, ""
		for _, u := range []string{"conn/s", "pkt/s", "pps"} {
			if v, ok := strings.CutSuffix(part, u); ok {
				value, unit = v, u
				break
			}
		}
		n, perr := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if unit == "" || perr != nil || n <= 0 {
			return 0, 0, fmt.Errorf("--rate %q: write a positive number and its unit, e.g. 200conn/s or 20000pkt/s (both: 200conn/s,20000pkt/s)", s)
		}
		if unit == "conn/s" {
			connections = n
		} else {
			packets = n
		}
	}
	return connections, packets, nil
}

// openSurveyList checks the list whole (every malformed line is reported
// before anything is measured) and returns it ready to be read again from its
// start. Standard input is spooled to a temporary file first.
func openSurveyList(cmd *cobra.Command, path string, shard survey.Shard) (io.ReadSeeker, survey.ListInfo, func(), error) {
	var f *os.File
	if path == "-" {
		tmp, err := os.CreateTemp("", "slowstart-survey-list-*")
		if err != nil {
			return nil, survey.ListInfo{}, nil, withCode(exitFile, fmt.Errorf("spooling the list from standard input: %w", err))
		}
		os.Remove(tmp.Name()) // gone when closed
		if _, err := io.Copy(tmp, cmd.InOrStdin()); err != nil {
			tmp.Close()
			return nil, survey.ListInfo{}, nil, withCode(exitFile, fmt.Errorf("reading the list from standard input: %w", err))
		}
		f = tmp
	} else {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, survey.ListInfo{}, nil, withCode(exitFile, fmt.Errorf("reading the list: %w", err))
		}
	}
	cleanup := func() { f.Close() }
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, survey.ListInfo{}, nil, withCode(exitFile, err)
	}
	info, err := survey.CheckList(f, shard)
	if err != nil {
		cleanup()
		var ie *survey.InputError
		if errors.As(err, &ie) {
			return nil, survey.ListInfo{}, nil, withCode(exitUsage, fmt.Errorf("%s: %w", path, err))
		}
		return nil, survey.ListInfo{}, nil, withCode(exitFile, fmt.Errorf("%s: %w", path, err))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, survey.ListInfo{}, nil, withCode(exitFile, err)
	}
	return f, info, cleanup, nil
}

// newSurveySummarizer makes the summary's counter from --by and --asn.
func newSurveySummarizer(groupBy, asnFile, plotPath string) (*survey.Summarizer, error) {
	if plotPath != "" {
		if err := plotfile.CheckPath(plotPath); err != nil {
			return nil, withCode(exitUsage, fmt.Errorf("--plot: %w", err))
		}
	}
	var asns *survey.PrefixTable
	if asnFile != "" {
		f, err := os.Open(asnFile)
		if err != nil {
			return nil, withCode(exitFile, fmt.Errorf("--asn: %w", err))
		}
		defer f.Close()
		if asns, err = survey.ReadPrefixTable(f); err != nil {
			return nil, withCode(exitFile, fmt.Errorf("--asn %s: %w", asnFile, err))
		}
		if groupBy == "" {
			groupBy = "asn"
		}
	}
	if groupBy == "" {
		groupBy = "label"
	}
	sum, err := survey.NewSummarizer(groupBy, asns)
	if err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("--by: %w", err))
	}
	return sum, nil
}

// runSurveyToStore streams the list's targets through the survey into the
// store, with progress on standard error, then prints the summary of the
// whole store.
func runSurveyToStore(cmd *cobra.Command, list io.Reader, info survey.ListInfo, opts survey.Options, out, format string,
	sum *survey.Summarizer, asJSON bool, plotPath string) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	format, err := survey.FormatOf(out, format)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("--format: %w", err))
	}
	settings, _ := opts.Settings()
	meta := survey.StoreMeta{Tool: opts.Tool, StartedAt: time.Now().UTC(), Settings: settings,
		ListSHA256: info.SHA256, ListTargets: info.Targets, ShardTargets: info.InShard}
	store, err := survey.OpenStore(out, format, meta)
	if err != nil {
		var me *survey.StoreMismatchError
		if errors.As(err, &me) {
			return withCode(exitUsage, err)
		}
		return withCode(exitFile, fmt.Errorf("--out: %w", err))
	}
	defer store.Close()
	opts.Done = store.Done
	progress := &survey.Progress{}
	opts.Progress = progress
	before := store.Rows()
	stderr := cmd.ErrOrStderr()
	what := "a page load and the exact IW"
	switch {
	case opts.NoExact:
		what = "a page load"
	case opts.NoPassive:
		what = "the exact IW"
	}
	shardText := ""
	if opts.Shard.Count > 1 {
		shardText = fmt.Sprintf(" (shard %s of %d targets)", opts.Shard, info.Targets)
	}
	resumed := ""
	if before > 0 {
		resumed = fmt.Sprintf(", resuming: %d already in %s", before, out)
	}
	fmt.Fprintf(stderr, "Surveying %s%s into %s (%s each, %d at a time%s)...\n", report.Count(info.InShard, "URL", "URLs"), shardText, out, what, settings.Concurrency, resumed)
	status := startSurveyStatus(stderr, progress, info.InShard-before)
	_, runErr := survey.Stream(ctx, survey.NewListSource(list), store, opts)
	status.stop()
	rows := store.Rows()
	if err := store.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("closing %s: %w", out, err)
	}
	var oe *survey.OptionsError
	switch {
	case errors.As(runErr, &oe):
		return withCode(exitUsage, runErr)
	case runErr != nil && ctx.Err() != nil:
		return interrupted("interrupted; %d of %d URLs are in %s: run the same command again to resume (no firewall table left)", rows, info.InShard, out)
	case runErr != nil:
		return withCode(exitFile, runErr)
	}
	if _, err := survey.ReadStore(out, func(r survey.Row) error { sum.Add(r); return nil }); err != nil {
		return withCode(exitFile, fmt.Errorf("reading %s for the summary: %w", out, err))
	}
	s := sum.Summary()
	if err := writeSurveySummary(cmd.OutOrStdout(), s, asJSON, plotPath); err != nil {
		return err
	}
	denied := 0
	for _, c := range s.Errors {
		if c.Name == probe.KindPermission {
			denied = c.Count
		}
	}
	switch {
	case denied > 0:
		return withCode(exitPermission, fmt.Errorf("%d of %d URLs could not be measured for want of privileges (CAP_NET_ADMIN, CAP_NET_RAW; CAP_SYS_ADMIN with --netns)", denied, s.Rows))
	case s.Rows > 0 && s.Failed == s.Rows:
		return withCode(exitFailure, fmt.Errorf("every one of the %d URLs failed (see their error column in %s)", s.Rows, out))
	}
	return nil
}

func writeSurveySummary(w io.Writer, s survey.Summary, asJSON bool, plotPath string) error {
	var err error
	if asJSON {
		err = survey.WriteSummaryJSON(w, s)
	} else {
		err = survey.WriteSummaryText(w, s)
	}
	if err != nil {
		return err
	}
	if plotPath != "" {
		if err := survey.SaveHistogram(plotPath, s); err != nil {
			return withCode(exitFailure, fmt.Errorf("--plot: %w", err))
		}
		if !asJSON {
			fmt.Fprintf(w, "histogram: %s\n", plotPath)
		}
	}
	return nil
}

func newSurveyMergeCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "merge OUT STORE...",
		Short: "Join the stores of a survey's shards (or vantage points) into one",
		Long: `Join the rows of survey stores into a new store OUT: the shards of one list
(survey --shard I/N), or surveys of one list from several vantage points
(--vantage). A target is its vantage, its place in the list and its URL; one found
in two stores is an error and nothing is written. SQLite stores must be of the same
list, and a shard missing from the split is named. The stores may mix formats. A
directory stands for the stores in it (.db, .sqlite, .jsonl, .csv files, not its
subdirectories).`,
		Example: `  slowstart survey merge all.db shard-0.db shard-1.db shard-2.db shard-3.db
  slowstart survey merge all.jsonl /results/*.db`,
		Args:        cobra.MinimumNArgs(2),
		Annotations: abandonOnInterrupt,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := survey.FormatOf(args[0], format)
			if err != nil {
				return withCode(exitUsage, fmt.Errorf("--format: %w", err))
			}
			inputs, err := expandStoreDirs(args[1:], args[0])
			if err != nil {
				return withCode(exitFile, err)
			}
			if err := os.MkdirAll(filepath.Dir(args[0]), 0o755); err != nil {
				return withCode(exitFile, err)
			}
			res, err := survey.Merge(args[0], f, inputs)
			if err != nil {
				var de *survey.DuplicateError
				if errors.As(err, &de) {
					return withCode(exitFailure, err)
				}
				return withCode(exitFile, err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%d rows from %d stores into %s", res.Rows, res.Inputs, args[0])
			if len(res.Shards) > 0 {
				fmt.Fprintf(w, " (shards %s)", strings.Join(res.Shards, ", "))
			}
			if len(res.Vantages) > 0 {
				fmt.Fprintf(w, " from %s", strings.Join(res.Vantages, ", "))
			}
			fmt.Fprintln(w, ".")
			if len(res.MissingShards) > 0 {
				return withCode(exitFailure, fmt.Errorf("no store of shard %s was given: the merged survey lacks their targets", strings.Join(res.MissingShards, ", ")))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "OUT's format: sqlite, jsonl or csv (default: by its extension, else sqlite)")
	return cmd
}

// expandStoreDirs replaces each directory by the stores in it, sorted; out is
// never one of them.
func expandStoreDirs(paths []string, out string) ([]string, error) {
	var inputs []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("reading the store: %w", err)
		}
		if !st.IsDir() {
			inputs = append(inputs, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		found := 0
		for _, e := range entries {
			name := filepath.Join(p, e.Name())
			switch strings.ToLower(filepath.Ext(e.Name())) {
			case ".db", ".sqlite", ".sqlite3", ".jsonl", ".ndjson", ".csv":
				if e.Type().IsRegular() && filepath.Clean(name) != filepath.Clean(out) {
					inputs = append(inputs, name)
					found++
				}
			}
		}
		if found == 0 {
			return nil, fmt.Errorf("%s holds no store (.db, .sqlite, .jsonl, .csv)", p)
		}
	}
	return inputs, nil
}

func newSurveyReportCommand() *cobra.Command {
	var asJSON bool
	var groupBy, asnFile, plotPath string
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
			sum, err := newSurveySummarizer(groupBy, asnFile, plotPath)
			if err != nil {
				return err
			}
			if _, err := os.Stat(args[0]); err != nil {
				return withCode(exitFile, fmt.Errorf("reading the store: %w", err))
			}
			if _, err := survey.ReadStore(args[0], func(r survey.Row) error { sum.Add(r); return nil }); err != nil {
				return withCode(exitFile, fmt.Errorf("reading %s: %w", args[0], err))
			}
			return writeSurveySummary(cmd.OutOrStdout(), sum.Summary(), asJSON, plotPath)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON (schema slowstart.survey-summary/v1)")
	addSummaryFlags(cmd.Flags(), &groupBy, &asnFile, &plotPath)
	return cmd
}

// runSurvey measures the targets with a progress bar, prints the rows and maps
// the outcome to an exit code.
func runSurvey(cmd *cobra.Command, targets []survey.Target, opts survey.Options, asCSV, asJSON bool) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	what := "a page load and the exact IW"
	switch {
	case opts.NoExact:
		what = "a page load"
	case opts.NoPassive:
		what = "the exact IW"
	}
	conc := opts.Concurrency
	if conc == 0 {
		conc = survey.DefaultConcurrency
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Surveying %s (%s each, %d at a time)...\n", report.Count(len(targets), "URL", "URLs"), what, min(conc, len(targets)))
	bar := newProgress(len(targets), "surveying", "URLs")
	opts.OnRow = func(survey.Row) { bar.Add(1) }
	res, err := survey.Run(ctx, targets, opts)
	bar.Finish()
	var oe *survey.OptionsError
	if errors.As(err, &oe) {
		return withCode(exitUsage, err)
	}
	if res == nil {
		return err
	}
	out := cmd.OutOrStdout()
	var werr error
	switch {
	case asJSON:
		werr = survey.WriteJSON(out, res)
	case asCSV:
		werr = survey.WriteCSV(out, res)
	default:
		werr = survey.WriteText(out, res)
	}
	switch {
	case err != nil:
		// Interrupted: what was done is printed; every measurement under way
		// removed its firewall table before Run returned.
		return interrupted("interrupted; %d of %d URLs measured (their rows are above), no firewall table left", len(res.Rows), res.Total)
	case werr != nil:
		return werr
	}
	denied := 0
	for i := range res.Rows {
		if res.Rows[i].PermissionDenied() {
			denied++
		}
	}
	switch {
	case denied > 0:
		return withCode(exitPermission, fmt.Errorf("%d of %d URLs could not be measured for want of privileges (CAP_NET_ADMIN, CAP_NET_RAW; CAP_SYS_ADMIN with --netns)", denied, res.Total))
	case res.Failed > 0:
		return withCode(exitFailure, fmt.Errorf("%d of %d URLs failed (see their error column)", res.Failed, res.Total))
	}
	return nil
}

// surveyPrivileges checks the capabilities the survey's measurements need,
// before any is started: CAP_NET_RAW for the captures, CAP_NET_ADMIN for the
// exact measurement's nftables table, CAP_SYS_ADMIN to enter --netns.
func surveyPrivileges(opts survey.Options) error {
	type requirement struct {
		capability int
		name, why  string
	}
	need := []requirement{{unix.CAP_NET_RAW, "CAP_NET_RAW", "captures packets"}}
	if !opts.NoExact {
		need = append(need, requirement{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN", "adds its connections to an nftables table"})
	}
	if opts.Netns != "" {
		need = append(need, requirement{unix.CAP_SYS_ADMIN, "CAP_SYS_ADMIN", "enters the --netns namespace"})
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("reading the process's capabilities: %w", err)
	}
	var missing, why []string
	for _, n := range need {
		if data[n.capability/32].Effective&(1<<(uint(n.capability)%32)) == 0 {
			missing = append(missing, n.name)
			why = append(why, n.why)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("the survey %s, which needs %s: run sudo slowstart survey", strings.Join(why, ", "), strings.Join(missing, " and "))
}
