package watch

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/slowstart/slowstart/compare"
	"github.com/slowstart/slowstart/internal/fault"
)

// CompareStore is the watch store at path as compare reads it: two windows of
// one URL's probes, one value per probe without an error. The store is opened
// when the query has been checked.
func CompareStore(path string) compare.Store { return comparedStore(path) }

type comparedStore string

// Samples reads the two windows of q. Its errors are marked: a bad query is
// a usage error, a store that can't be read a file error.
func (path comparedStore) Samples(ctx context.Context, q compare.StoreQuery) (*compare.Sample, *compare.Sample, error) {
	if q.Network != "" {
		return nil, nil, fault.Usagef("--network goes with a field store (slowstart field --store)")
	}
	m, err := compare.ResolveMetric(compare.KindStore, q.Metric)
	if err != nil {
		return nil, nil, fault.Mark(fault.Usage, err)
	}
	bw, aw, err := compare.ParseWindows(q.Before, q.After)
	if err != nil {
		return nil, nil, err
	}
	st, err := OpenStore(string(path), true)
	if err != nil {
		return nil, nil, fault.Mark(fault.File, err)
	}
	defer st.Close()
	if q.URL == "" {
		urls, err := st.URLs(ctx)
		if err != nil {
			return nil, nil, fault.Mark(fault.File, err)
		}
		if len(urls) > 1 {
			var list []string
			for u, n := range urls {
				list = append(list, fmt.Sprintf("%s (%d rows)", u, n))
			}
			sort.Strings(list)
			return nil, nil, fault.Usagef("%s holds %d URLs; pick one with --url: %s", path, len(urls), strings.Join(list, ", "))
		}
	}
	return compare.Windows(bw, aw, func(w compare.Window) (*compare.Sample, error) {
		rows, err := st.Rows(ctx, Query{URL: q.URL, From: w.From, To: w.To})
		if err != nil {
			return nil, fault.Mark(fault.File, err)
		}
		s := &compare.Sample{Source: fmt.Sprintf("%s, %s", path, w), Kind: compare.KindStore, Metric: m.Name, Unit: m.Unit, Values: []float64{}}
		failed := 0
		for _, r := range rows {
			if r.Error != "" {
				failed++
				continue
			}
			v, ok := m.Value(r.SummaryRow)
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
	})
}
