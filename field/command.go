package field

// This file runs the field verbs as slowstart field and field report do, and
// reads the values of their flags. Its errors are marked with their fault
// kind (package fault) or are this package's typed errors.

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/slowstart/slowstart/compare"
	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/jsonout"
	"github.com/slowstart/slowstart/tune"
	"github.com/slowstart/slowstart/units"
)

// Follow runs field until o.Duration or ctx ends; a signal stops it after
// the last interval and the summary are written, with the count measured
// (fault.Interrupted).
func Follow(ctx context.Context, o Options) error {
	sum, err := Run(ctx, o)
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		kept := ""
		if o.StorePath != "" {
			kept = "; the store " + o.StorePath + " holds every interval"
		}
		measured := uint64(0)
		if sum != nil {
			measured = sum.Counts.Measured
		}
		return fault.Interruptedf("stopped; %d first responses measured%s", measured, kept)
	}
	return err
}

// ParsePorts reads --port: the server's local ports.
func ParsePorts(list []string) ([]uint16, error) {
	if len(list) == 0 {
		return nil, fault.Usagef("--port is required: the server's local ports, e.g. --port 443")
	}
	var out []uint16
	for _, p := range list {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
		if err != nil || n == 0 {
			return nil, fault.Usagef("--port %q: give port numbers 1 to 65535", p)
		}
		out = append(out, uint16(n))
	}
	return out, nil
}

// ParseWindows reads --iw: initial windows in segments.
func ParseWindows(list []string) ([]int, error) {
	var out []int
	for _, s := range list {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > tune.MaxForcedWindow {
			return nil, fault.Usagef("--iw %q: give windows in segments, e.g. --iw 10,16,32", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// ParsePrefixes reads --prefix: BITS4 or BITS4,BITS6, the client networks'
// prefix lengths (0 for one not given).
func ParsePrefixes(s string) (bits4, bits6 int, err error) {
	prefixes := strings.Split(s, ",")
	if len(prefixes) > 2 {
		return 0, 0, fault.Usagef("--prefix %q: give BITS4 or BITS4,BITS6", s)
	}
	for i, p := range prefixes {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || (i == 0 && n > 32) || n > 128 {
			return 0, 0, fault.Usagef("--prefix %q: give BITS4 (1-32) or BITS4,BITS6 (1-128)", s)
		}
		if i == 0 {
			bits4 = n
		} else {
			bits6 = n
		}
	}
	return bits4, bits6, nil
}

// ParseRetain reads a retention (--retain): a Go duration or a number of
// days ("14d").
func ParseRetain(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(strings.TrimSpace(s), "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err == nil && n > 0 {
			return time.Duration(n * 24 * float64(time.Hour)), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fault.Usagef("--retain %q: give a duration such as 36h or 14d", s)
	}
	return d, nil
}

// ParseRing reads --ring: the kernel's ring buffer, a power of two from 4 KiB
// to 1 GiB.
func ParseRing(s string) (int, error) {
	ring, err := units.ParseSize(s)
	if err != nil || ring < 4096 || ring&(ring-1) != 0 || ring > 1<<30 {
		return 0, fault.Usagef("--ring %q: give a power of two from 4KiB to 1GiB, e.g. 16MiB", s)
	}
	return int(ring), nil
}

// ReportStoreOptions are a field report: a period's summary (From, To), or
// two periods compared (Before and After, or AtMark).
type ReportStoreOptions struct {
	StorePath         string
	From, To, Network string
	Before, After     string
	AtMark, JSON      bool
	IWs               []string // --iw, as ParseWindows reads it
	Top               int
	Seed              uint64
}

// ReportStore prints what the store holds (field report).
func ReportStore(ctx context.Context, o ReportStoreOptions, out io.Writer) error {
	if o.StorePath == "" {
		return fault.Usagef("--store FILE is required (a store field wrote)")
	}
	ivs, err := ParseWindows(o.IWs)
	if err != nil {
		return err
	}
	comparing := o.AtMark || o.Before != "" || o.After != ""
	if comparing && (o.From != "" || o.To != "") {
		return fault.Usagef("--from and --to go with a summary; --before, --after and --at-mark compare two periods")
	}
	if (o.Before == "") != (o.After == "") || (o.AtMark && o.Before != "") {
		return fault.Usagef("give --before and --after together, or --at-mark")
	}
	st, err := OpenStore(o.StorePath, false)
	if err != nil {
		return fault.Mark(fault.File, err)
	}
	defer st.Close()
	if comparing {
		return comparePeriods(ctx, st, o, out)
	}
	var q Query
	if o.From != "" {
		w, err := compare.ParseWindow(o.From, "after")
		if err != nil {
			return fault.Usagef("--from: %w", err)
		}
		q.From = w.From
	}
	if o.To != "" {
		w, err := compare.ParseWindow(o.To, "before")
		if err != nil {
			return fault.Usagef("--to: %w", err)
		}
		q.To = w.To
	}
	q.Network = o.Network
	sum, err := Report(ctx, st, ReportOptions{Query: q, IWs: ivs, Top: o.Top, Seed: o.Seed})
	if err != nil {
		return fault.Mark(fault.File, err)
	}
	if o.JSON {
		return jsonout.Write(out, sum)
	}
	return WriteText(out, sum)
}

// comparePeriods compares --before and --after, or the periods around the
// newest mark, network by network.
func comparePeriods(ctx context.Context, st *Store, o ReportStoreOptions, out io.Writer) error {
	var bw, aw compare.Window
	var err error
	if o.AtMark {
		if bw, aw, err = AroundMark(ctx, st); err != nil {
			return fault.Mark(fault.File, err)
		}
	} else if bw, aw, err = compare.ParseWindows(o.Before, o.After); err != nil {
		return err
	}
	res, err := CompareNetworks(ctx, st, CompareOptions{
		Before: Query{From: bw.From, To: bw.To}, After: Query{From: aw.From, To: aw.To}, Top: o.Top,
		Compare: compare.Options{Seed: o.Seed}})
	if err != nil {
		return fault.Mark(fault.File, err)
	}
	if o.JSON {
		return jsonout.Write(out, NewComparisonOutput(bw, aw, res))
	}
	return WriteComparison(out, bw, aw, res)
}
