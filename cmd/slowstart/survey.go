package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/survey"
)

func newSurveyCommand() *cobra.Command {
	var (
		asCSV, asJSON      bool
		concurrency        int
		exactRuns, mss     int
		timeout            time.Duration
		noExact, noPassive bool
		resolves           []string
		netns              string
		insecure           bool
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
Blank lines and # comments are skipped.

Each row shows: the exact IW (segments and bytes, with its verdict: a small MSS
announced, no ACKs, the distinct bytes counted until the server retransmits; on the
TLS server flight over https, on the response over http), and from a normal page
load: its own IW reading, the bytes of the first data round, the TLS server flight,
the round trips and the handshake RTT. A URL that fails gets its error in its row;
the survey goes on. The table goes to standard output, a progress bar to standard
error (on a terminal). Ctrl-C stops the survey and prints the rows finished.

It needs root, or the capabilities CAP_NET_RAW (both methods capture packets),
CAP_NET_ADMIN (the exact measurement installs an nftables table per connection,
removed when it ends; not with --no-exact) and CAP_SYS_ADMIN (with --netns).
Details: docs/survey.md.

It exits 1 when some URLs failed (see their error column), 4 when some could
not be measured for want of privileges.`,
		Example: `  sudo slowstart survey sites.txt
  sudo slowstart survey sites.txt --csv > sites.csv
  sudo slowstart survey sites.txt --json --concurrency 8
  printf 'a https://a.example/\nb https://b.example/\n' | sudo slowstart survey -
  sudo slowstart survey fleet.txt --no-passive --exact-runs 5
  sudo slowstart survey fleet.txt --resolve www.example.com:443:192.0.2.7`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asCSV && asJSON {
				return withCode(exitUsage, errors.New("--csv and --json exclude each other"))
			}
			netns, err := netnsPath(netns)
			if err != nil {
				return err
			}
			opts := survey.Options{Concurrency: concurrency, NoExact: noExact, NoPassive: noPassive,
				ExactRuns: exactRuns, MSS: mss, Timeout: timeout, Netns: netns, Insecure: insecure,
				Tool: "slowstart " + version, Resolve: map[string]netip.Addr{}}
			for _, r := range resolves {
				key, addr, err := probe.ParseResolve(r)
				if err != nil {
					return withCode(exitUsage, err)
				}
				opts.Resolve[key] = addr
			}
			targets, err := readSurveyList(cmd, args[0])
			if err != nil {
				return err
			}
			if err := surveyPrivileges(opts); err != nil {
				return withCode(exitPermission, err)
			}
			cleanStaleExact(cmd, netns)
			return runSurvey(cmd, targets, opts, asCSV, asJSON)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&asCSV, "csv", false, "print CSV (a header, then one line per URL; bytes and milliseconds)")
	fl.BoolVar(&asJSON, "json", false, "print JSON (schema slowstart.survey/v1)")
	fl.IntVar(&concurrency, "concurrency", survey.DefaultConcurrency, fmt.Sprintf("URLs measured at once (1 to %d)", survey.MaxConcurrency))
	fl.IntVar(&exactRuns, "exact-runs", exact.DefaultRuns, "fresh connections per exact measurement; the IW is exact only when they agree")
	fl.IntVar(&mss, "mss", exact.DefaultMSS, fmt.Sprintf("MSS the exact measurement announces in its SYN, in bytes (%d to %d)", exact.MinMSS, exact.MaxMSS))
	fl.DurationVar(&timeout, "timeout", 30*time.Second, "give up on a page load, or on an exact run's connection, after this long")
	fl.BoolVar(&noExact, "no-exact", false, "skip the exact measurement (the page load only)")
	fl.BoolVar(&noPassive, "no-passive", false, "skip the page load (the exact IW only)")
	fl.StringArrayVar(&resolves, "resolve", nil, "HOST:PORT:ADDRESS: connect to ADDRESS for HOST:PORT, without DNS (repeatable)")
	addNetnsFlag(fl, &netns)
	fl.BoolVarP(&insecure, "insecure", "k", false, "do not verify certificates in the page load (the exact measurement never does)")
	return cmd
}

// readSurveyList reads and parses the list at path ("-": standard input).
func readSurveyList(cmd *cobra.Command, path string) ([]survey.Target, error) {
	var r io.Reader = cmd.InOrStdin()
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, withCode(exitFile, fmt.Errorf("reading the list: %w", err))
		}
		defer f.Close()
		r = f
	}
	targets, err := survey.ParseInput(r)
	if err != nil {
		var ie *survey.InputError
		if errors.As(err, &ie) {
			return nil, withCode(exitUsage, fmt.Errorf("%s: %w", path, err))
		}
		return nil, withCode(exitFile, fmt.Errorf("%s: %w", path, err))
	}
	return targets, nil
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
	fmt.Fprintf(cmd.ErrOrStderr(), "Surveying %d URLs (%s each, %d at a time)...\n", len(targets), what, min(conc, len(targets)))
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
		need = append(need, requirement{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN", "installs an nftables table per exact connection"})
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
