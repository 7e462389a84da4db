package field

import (
	"context"
	"slices"
	"time"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/web"
)

// ViewOptions select what View shows of a store.
type ViewOptions struct {
	// From and To bound the period (zero: all of it).
	From, To time.Time
	// Top is how many networks get a panel besides all of them pooled
	// (DefaultViewTop when 0); MaxBuckets bounds the stretches of time per
	// panel (DefaultViewBuckets when 0): intervals are merged to fit.
	Top, MaxBuckets int
}

// Defaults of ViewOptions.
const (
	DefaultViewTop     = 12
	DefaultViewBuckets = 240
)

// View reads a store's intervals into the field view of package web: per
// network, each stretch of time's distributions, and the marks.
func View(ctx context.Context, st *Store, opts ViewOptions) (*web.FieldView, error) {
	if opts.Top == 0 {
		opts.Top = DefaultViewTop
	}
	if opts.MaxBuckets == 0 {
		opts.MaxBuckets = DefaultViewBuckets
	}
	rows, err := st.intervals(ctx, Query{From: opts.From, To: opts.To})
	if err != nil {
		return nil, err
	}
	marks, err := st.Marks(ctx, Query{From: opts.From, To: opts.To})
	if err != nil {
		return nil, err
	}
	v := &web.FieldView{Schema: web.FieldViewSchema, Store: st.Path(), Networks: []web.FieldNetwork{}, Marks: []web.FieldMark{}}
	if len(rows) == 0 {
		return v, nil
	}
	from, to := rows[0].start, rows[0].end
	shortest := rows[0].end - rows[0].start
	conns := map[string]uint64{}
	for _, r := range rows {
		from, to = min(from, r.start), max(to, r.end)
		if d := r.end - r.start; d > 0 && d < shortest {
			shortest = d
		}
		if r.network != AllNetworks {
			conns[r.network] += r.stats.Connections
		}
	}
	width := max(shortest, (to-from+int64(opts.MaxBuckets)-1)/int64(opts.MaxBuckets), int64(time.Second))
	v.FromUnixMs, v.ToUnixMs, v.BucketSeconds = from/1e6, to/1e6, float64(width)/1e9
	names := make([]string, 0, len(conns))
	for n := range conns {
		names = append(names, n)
	}
	sortNetworks(names, func(n string) uint64 { return conns[n] })
	if len(names) > opts.Top {
		v.NetworksOmitted = len(names) - opts.Top
		names = names[:opts.Top]
	}
	shown := map[string]int{AllNetworks: 0}
	v.Networks = append(v.Networks, web.FieldNetwork{Network: AllNetworks})
	for _, n := range names {
		shown[n] = len(v.Networks)
		v.Networks = append(v.Networks, web.FieldNetwork{Network: n, Connections: conns[n]})
	}
	// Each network's buckets: the intervals merged by stretch of time.
	buckets := make([]map[int64]*netStats, len(v.Networks))
	for i := range buckets {
		buckets[i] = map[int64]*netStats{}
	}
	for _, r := range rows {
		i, ok := shown[r.network]
		if !ok {
			continue
		}
		k := (r.start - from) / width
		b := buckets[i][k]
		if b == nil {
			b = newNetStats(0)
			buckets[i][k] = b
		}
		b.merge(r.stats)
	}
	for i := range v.Networks {
		keys := make([]int64, 0, len(buckets[i]))
		for k := range buckets[i] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		v.Networks[i].Buckets = []web.FieldBucket{}
		for _, k := range keys {
			b := buckets[i][k]
			if b.Connections == 0 {
				continue
			}
			if i == 0 {
				v.Networks[0].Connections += b.Connections
			}
			start := from + k*width
			fb := web.FieldBucket{StartUnixMs: start / 1e6, EndUnixMs: min(start+width, to) / 1e6, Connections: b.Connections,
				WindowLimited: float64(b.windowLimited()) / float64(b.Connections), CutShort: b.CutShort,
				HandshakeRTTMs: quantiles(b.RTT, RTTBoundsMs, false), RoundTrips: quantiles(b.RoundTrips, RoundTripBounds, true),
				Round1Bytes: quantiles(b.Round1Bytes, Round1BoundsBytes, false), ResponseMs: quantiles(b.ResponseMs, ResponseBoundsMs, false)}
			v.Networks[i].Buckets = append(v.Networks[i].Buckets, fb)
		}
	}
	for _, m := range marks {
		v.Marks = append(v.Marks, web.FieldMark{UnixMs: m.Time.UnixMilli(), Text: MarkText(m)})
	}
	return v, nil
}

// quantiles reads a histogram's quantiles; a discrete one (round trips) gives
// the bucket's bound, whole numbers, where a continuous one interpolates.
func quantiles(h hist, bounds []float64, discrete bool) web.FieldQuantiles {
	var q web.FieldQuantiles
	if h.N == 0 {
		return q
	}
	at := func(p float64) *float64 {
		var v float64
		if discrete {
			v = h.bucketBound(bounds, p)
		} else {
			v, _ = h.quantile(bounds, p)
		}
		return &v
	}
	mean := h.Sum / float64(h.N)
	q.P10, q.Median, q.P90, q.Mean = at(0.1), at(0.5), at(0.9), &mean
	return q
}

// bucketBound is the upper bound of the bucket holding the q-quantile (the
// last bucket's lower bound).
func (h *hist) bucketBound(bounds []float64, q float64) float64 {
	rank := q * float64(h.N)
	var cum float64
	for i, c := range h.Counts {
		cum += float64(c)
		if c > 0 && cum >= rank {
			return bounds[min(i, len(bounds)-1)]
		}
	}
	return bounds[len(bounds)-1]
}

// ViewStore reads the field store at path as the web page shows it (view
// FILE); ok is false when path is not a field store. Its errors are marked
// fault.File.
func ViewStore(ctx context.Context, path string) (v *web.FieldView, ok bool, err error) {
	if !IsStore(path) {
		return nil, false, nil
	}
	st, err := OpenStore(path, false)
	if err != nil {
		return nil, true, fault.Mark(fault.File, err)
	}
	defer st.Close()
	v, err = View(ctx, st, ViewOptions{})
	return v, true, fault.Mark(fault.File, err)
}
