package field

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/slowstart/slowstart/compare"
	"github.com/slowstart/slowstart/internal/fault"
)

// What a field JSON output is (Summary.Report, Comparison.Report).
const (
	ReportSummary    = "summary"
	ReportComparison = "comparison"
)

// Comparison is field report's before and after, network by network
// (field report --before --after --json, or --at-mark).
type Comparison struct {
	Schema string         `json:"schema"` // Schema
	Report string         `json:"report"` // ReportComparison
	Before compare.Window `json:"before"`
	After  compare.Window `json:"after"`
	// Networks: all networks pooled first (network ""), then the busiest.
	Networks []NetworkComparison `json:"networks"`
}

// NewComparisonOutput wraps CompareNetworks's result for JSON.
func NewComparisonOutput(before, after compare.Window, networks []NetworkComparison) Comparison {
	return Comparison{Schema: Schema, Report: ReportComparison, Before: before, After: after, Networks: networks}
}

// AroundMark returns the periods on either side of the store's newest mark,
// of the same length: as long as the store holds on its shorter side.
func AroundMark(ctx context.Context, st *Store) (before, after compare.Window, err error) {
	mark, ok, err := LatestMark(ctx, st, time.Time{})
	if err != nil {
		return before, after, err
	}
	if !ok {
		return before, after, errors.New("the store holds no mark: tune apply or revert records one in its journal, which field reads (--marks)")
	}
	rows, err := st.intervals(ctx, Query{Network: AllNetworks})
	if err != nil {
		return before, after, err
	}
	var first, last int64
	for _, r := range rows {
		if first == 0 || r.start < first {
			first = r.start
		}
		last = max(last, r.end)
	}
	at := mark.Time.UnixNano()
	span := min(at-first, last-at)
	if len(rows) == 0 || span <= 0 {
		return before, after, fmt.Errorf("the store holds no interval on both sides of its newest mark (%s)", MarkText(mark))
	}
	m := mark.Time.UTC()
	d := time.Duration(span)
	return compare.Window{From: m.Add(-d), To: m}, compare.Window{From: m, To: m.Add(d)}, nil
}

// WriteComparison prints CompareNetworks's result: a line per network.
func WriteComparison(w io.Writer, before, after compare.Window, networks []NetworkComparison) error {
	fmt.Fprintf(w, "BEFORE: %s\nAFTER:  %s\n", before, after)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "network\tn before\tn after\tround trips (median)\tdifference (95% CI)\tresponse ms (median)\tdifference (95% CI)\tverdict")
	for _, n := range networks {
		name := n.Network
		if name == "" {
			name = "all networks"
		}
		rt, ms := n.RoundTrips, n.Response
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", name, rt.Before.N, rt.After.N,
			medians(rt), diffText(rt), medians(ms), diffText(ms), ms.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range networks {
		if n.Network == "" {
			fmt.Fprintf(w, "round trips: %s\nresponse time: %s\n", n.RoundTrips.Sentence, n.Response.Sentence)
			for _, note := range append(n.RoundTrips.Notes, n.Response.Notes...) {
				fmt.Fprintf(w, "note: %s\n", note)
			}
		}
	}
	return nil
}

func medians(r *compare.Result) string {
	if r.Before.N == 0 || r.After.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.4g → %.4g", r.Before.Median, r.After.Median)
}

func diffText(r *compare.Result) string {
	if r.Before.N == 0 || r.After.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.4g (%+.4g to %+.4g)", r.MedianDiff, r.CI.Low, r.CI.High)
}

// CompareStore is the field store at path as compare reads it: two periods,
// one value per connection the store kept, of all client networks or
// q.Network; "mark" as both windows takes the same length of time on either
// side of the store's newest mark (AroundMark). The store is opened when the
// metric has been checked.
func CompareStore(path string) compare.Store { return comparedStore(path) }

type comparedStore string

// Samples reads the two periods of q. Its errors are marked: a bad query is
// a usage error, a store that can't be read a file error.
func (path comparedStore) Samples(ctx context.Context, q compare.StoreQuery) (*compare.Sample, *compare.Sample, error) {
	m, err := compare.ResolveMetric(compare.KindField, q.Metric)
	if err != nil {
		return nil, nil, fault.Mark(fault.Usage, err)
	}
	st, err := OpenStore(string(path), false)
	if err != nil {
		return nil, nil, fault.Mark(fault.File, err)
	}
	defer st.Close()
	var bw, aw compare.Window
	if q.Before == "mark" || q.After == "mark" {
		if q.Before != q.After {
			return nil, nil, fault.Usagef("--before mark goes with --after mark")
		}
		if bw, aw, err = AroundMark(ctx, st); err != nil {
			return nil, nil, fault.Mark(fault.File, err)
		}
	} else if bw, aw, err = compare.ParseWindows(q.Before, q.After); err != nil {
		return nil, nil, err
	}
	return compare.Windows(bw, aw, func(w compare.Window) (*compare.Sample, error) {
		s, err := StoreSample(ctx, st, Query{From: w.From, To: w.To, Network: q.Network}, m.Name)
		return s, fault.Mark(fault.File, err)
	})
}
