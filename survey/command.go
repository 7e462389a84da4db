package survey

// This file runs the survey verbs as slowstart survey, survey merge and survey
// report do: their lists and stores, their progress on standard error and
// their outcome as an error of its fault kind (package fault).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/progress"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/report"
)

// SurveyOptions are a survey as slowstart survey runs it.
type SurveyOptions struct {
	// List is the file of targets, or "-" for In.
	List string
	In   io.Reader
	// Options measure the targets.
	Options Options
	// Store, when set, receives each row as it finishes (Format: sqlite, jsonl
	// or csv; "" by its extension) and a summary is printed at the end;
	// otherwise the rows are printed at the end, a table, CSV or JSON.
	Store, Format string
	CSV, JSON     bool
	// Summary shapes the summary of a survey into a store (or survey report).
	Summary SummaryOptions
}

// SummaryOptions shape a store's summary: its table's grouping (label or
// asn), a pfx2as file to group by ASN, a histogram to draw.
type SummaryOptions struct {
	GroupBy, ASNFile, Plot string
}

// Survey measures o.List's targets, printing the rows (or, into a store, the
// summary) to out and its progress to errOut. It exits through its error: a
// usage, file or permission error before any measurement; Failed when URLs
// failed; Interrupted when a signal stopped it.
func Survey(ctx context.Context, o SurveyOptions, out, errOut io.Writer) error {
	sum, err := newSummarizer(o.Summary)
	if err != nil {
		return err
	}
	list, info, closeList, err := openList(o.List, o.In, o.Options.Shard)
	if err != nil {
		return err
	}
	defer closeList()
	if err := CheckPrivileges(o.Options); err != nil {
		return fault.Mark(fault.Permission, err)
	}
	exact.CleanStale(ctx, o.Options.Netns, errOut)
	if o.Store == "" {
		targets, err := ParseInput(list)
		if err != nil {
			return fault.Filef("%s: %w", o.List, err)
		}
		return runToTable(ctx, targets, o, out, errOut)
	}
	return runToStore(ctx, list, info, o, sum, out, errOut)
}

// ParseRate reads a survey's rate limit (--max-rate): one or two comma-separated
// limits, each a number followed by conn/s or pkt/s.
func ParseRate(s string) (connections, packets float64, err error) {
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		value, unit := part, ""
		for _, u := range []string{"conn/s", "pkt/s", "pps"} {
			if v, ok := strings.CutSuffix(part, u); ok {
				value, unit = v, u
				break
			}
		}
		n, perr := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if unit == "" || perr != nil || n <= 0 {
			return 0, 0, fmt.Errorf("--max-rate %q: write a positive number and its unit, e.g. 200conn/s or 20000pkt/s (both: 200conn/s,20000pkt/s)", s)
		}
		if unit == "conn/s" {
			connections = n
		} else {
			packets = n
		}
	}
	return connections, packets, nil
}

// openList checks the list whole (every malformed line is reported
// before anything is measured) and returns it ready to be read again from its
// start. Standard input is spooled to a temporary file first.
func openList(path string, in io.Reader, shard Shard) (io.ReadSeeker, ListInfo, func(), error) {
	var f *os.File
	if path == "-" {
		tmp, err := os.CreateTemp("", "slowstart-survey-list-*")
		if err != nil {
			return nil, ListInfo{}, nil, fault.Mark(fault.File, fmt.Errorf("spooling the list from standard input: %w", err))
		}
		os.Remove(tmp.Name()) // gone when closed
		if _, err := io.Copy(tmp, in); err != nil {
			tmp.Close()
			return nil, ListInfo{}, nil, fault.Mark(fault.File, fmt.Errorf("reading the list from standard input: %w", err))
		}
		f = tmp
	} else {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, ListInfo{}, nil, fault.Mark(fault.File, fmt.Errorf("reading the list: %w", err))
		}
	}
	cleanup := func() { f.Close() }
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, ListInfo{}, nil, fault.Mark(fault.File, err)
	}
	info, err := CheckList(f, shard)
	if err != nil {
		cleanup()
		var ie *InputError
		if errors.As(err, &ie) {
			return nil, ListInfo{}, nil, fault.Mark(fault.Usage, fmt.Errorf("%s: %w", path, err))
		}
		return nil, ListInfo{}, nil, fault.Mark(fault.File, fmt.Errorf("%s: %w", path, err))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, ListInfo{}, nil, fault.Mark(fault.File, err)
	}
	return f, info, cleanup, nil
}

// runToStore streams the list's targets through the survey into the
// store, with progress on standard error, then prints the summary of the
// whole store.
func runToStore(ctx context.Context, list io.Reader, info ListInfo, o SurveyOptions, sum *Summarizer, stdout, stderr io.Writer) error {
	opts, out := o.Options, o.Store
	format, err := FormatOf(out, o.Format)
	if err != nil {
		return fault.Mark(fault.Usage, fmt.Errorf("--format: %w", err))
	}
	settings, _ := opts.Settings()
	meta := StoreMeta{Tool: opts.Tool, StartedAt: time.Now().UTC(), Settings: settings,
		ListSHA256: info.SHA256, ListTargets: info.Targets, ShardTargets: info.InShard}
	store, err := OpenStore(out, format, meta)
	if err != nil {
		var me *StoreMismatchError
		if errors.As(err, &me) {
			return fault.Mark(fault.Usage, err)
		}
		return fault.Mark(fault.File, fmt.Errorf("--store: %w", err))
	}
	defer store.Close()
	opts.Done = store.Done
	prog := &Progress{}
	opts.Progress = prog
	before := store.Rows()
	shardText := ""
	if opts.Shard.Count > 1 {
		shardText = fmt.Sprintf(" (shard %s of %d targets)", opts.Shard, info.Targets)
	}
	resumed := ""
	if before > 0 {
		resumed = fmt.Sprintf(", resuming: %d already in %s", before, out)
	}
	fmt.Fprintf(stderr, "Surveying %s%s into %s (%s each, %d at a time%s)...\n", report.Count(info.InShard, "URL", "URLs"), shardText, out, opts.what(), settings.Concurrency, resumed)
	status := startStatus(stderr, prog, info.InShard-before)
	_, runErr := Stream(ctx, NewListSource(list), store, opts)
	status.stop()
	rows := store.Rows()
	if err := store.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("closing %s: %w", out, err)
	}
	var oe *OptionsError
	switch {
	case errors.As(runErr, &oe):
		return fault.Mark(fault.Usage, runErr)
	case runErr != nil && ctx.Err() != nil:
		return fault.Interruptedf("interrupted; %d of %d URLs are in %s: run the same command again to resume (no firewall table left)", rows, info.InShard, out)
	case runErr != nil:
		return fault.Mark(fault.File, runErr)
	}
	if _, err := ReadStore(out, func(r Row) error { sum.Add(r); return nil }); err != nil {
		return fault.Mark(fault.File, fmt.Errorf("reading %s for the summary: %w", out, err))
	}
	s := sum.Summary()
	if err := WriteSummary(stdout, s, o.JSON, o.Summary.Plot); err != nil {
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
		return fault.Mark(fault.Permission, fmt.Errorf("%d of %d URLs could not be measured for want of privileges (CAP_NET_ADMIN, CAP_NET_RAW; CAP_SYS_ADMIN with --netns)", denied, s.Rows))
	case s.Rows > 0 && s.Failed == s.Rows:
		return fault.Mark(fault.Failed, fmt.Errorf("every one of the %d URLs failed (see their error column in %s)", s.Rows, out))
	}
	return nil
}

// runToTable measures the targets with a progress bar and prints the rows.
func runToTable(ctx context.Context, targets []Target, o SurveyOptions, out, stderr io.Writer) error {
	opts := o.Options
	conc := opts.Concurrency
	if conc == 0 {
		conc = DefaultConcurrency
	}
	fmt.Fprintf(stderr, "Surveying %s (%s each, %d at a time)...\n", report.Count(len(targets), "URL", "URLs"), opts.what(), min(conc, len(targets)))
	bar := progress.NewCount(len(targets), "surveying", "URLs")
	opts.OnRow = func(Row) { bar.Add(1) }
	res, err := Run(ctx, targets, opts)
	bar.Finish()
	var oe *OptionsError
	if errors.As(err, &oe) {
		return fault.Mark(fault.Usage, err)
	}
	if res == nil {
		return err
	}
	var werr error
	switch {
	case o.JSON:
		werr = WriteJSON(out, res)
	case o.CSV:
		werr = WriteCSV(out, res)
	default:
		werr = WriteText(out, res)
	}
	switch {
	case err != nil:
		// Interrupted: what was done is printed; every measurement under way
		// removed its firewall table before Run returned.
		return fault.Interruptedf("interrupted; %d of %d URLs measured (their rows are above), no firewall table left", len(res.Rows), res.Total)
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
		return fault.Mark(fault.Permission, fmt.Errorf("%d of %d URLs could not be measured for want of privileges (CAP_NET_ADMIN, CAP_NET_RAW; CAP_SYS_ADMIN with --netns)", denied, res.Total))
	case res.Failed > 0:
		return fault.Mark(fault.Failed, fmt.Errorf("%d of %d URLs failed (see their error column)", res.Failed, res.Total))
	}
	return nil
}

// CheckPrivileges checks the capabilities the survey's measurements need,
// before any is started: CAP_NET_RAW for the captures, CAP_NET_ADMIN for the
// exact measurement's nftables table, CAP_SYS_ADMIN to enter --netns.
func CheckPrivileges(opts Options) error {
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

// what says what the survey measures of each URL.
func (o Options) what() string {
	switch {
	case o.NoExact:
		return "a page load"
	case o.NoPassive:
		return "the exact IW"
	}
	return "a page load and the exact IW"
}
