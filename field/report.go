package field

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/slowstart/slowstart/compare"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/tune"
)

// ReportOptions select what Report reads of a store.
type ReportOptions struct {
	// Query is the period, and optionally one network.
	Query Query
	// IWs are the windows to price (DefaultIWs when empty).
	IWs []int
	// Top is how many networks to list (DefaultTop when 0).
	Top int
	// SampleCap bounds the stored connections each network's intervals rest
	// on (a uniform subsample past it; DefaultSampleCap when 0).
	SampleCap int
	Seed      uint64
}

// DefaultSampleCap bounds the stored connections a network's confidence
// intervals rest on in a report.
const DefaultSampleCap = 4000

func (o *ReportOptions) normalize() {
	if len(o.IWs) == 0 {
		o.IWs = DefaultIWs
	}
	if o.Top == 0 {
		o.Top = DefaultTop
	}
	if o.SampleCap == 0 {
		o.SampleCap = DefaultSampleCap
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
}

// Report summarizes a period of a store as Run summarizes a run: the counts
// and histograms of every interval in the period, and the confidence
// intervals from the connections kept, each weighted by the connections of
// its network and interval it stands for.
func Report(ctx context.Context, st *Store, opts ReportOptions) (*Summary, error) {
	opts.normalize()
	q := opts.Query
	rows, err := st.intervals(ctx, q)
	if err != nil {
		return nil, err
	}
	samples, err := st.samples(ctx, Query{From: q.From, To: q.To, Network: q.Network})
	if err != nil {
		return nil, err
	}
	meta, err := st.Meta(ctx)
	if err != nil {
		return nil, err
	}
	marks, err := st.Marks(ctx, Query{From: q.From, To: q.To})
	if err != nil {
		return nil, err
	}
	status, sources, err := st.statusSum(ctx, Query{From: q.From, To: q.To})
	if err != nil {
		return nil, err
	}
	s := &Summary{Schema: Schema, Report: ReportSummary, Source: strings.Join(sources, ","), Ports: []int{}, Grouping: meta["grouping"], IWs: opts.IWs,
		Networks: []NetworkSummary{}, Marks: marks, Notes: []string{}}
	for _, p := range strings.Split(meta["ports"], ",") {
		if n, err := strconv.Atoi(p); err == nil {
			s.Ports = append(s.Ports, n)
		}
	}
	s.Prefix4, _ = strconv.Atoi(meta["prefix4"])
	s.Prefix6, _ = strconv.Atoi(meta["prefix6"])
	s.From, s.To = q.From, q.To
	all := newNetStats(0)
	byNetwork := map[string]*netStats{}
	for _, r := range rows {
		if s.From.IsZero() || r.start < s.From.UnixNano() {
			s.From = time.Unix(0, r.start).UTC()
		}
		if s.To.IsZero() || r.end > s.To.UnixNano() {
			s.To = time.Unix(0, r.end).UTC()
		}
		if r.network == AllNetworks {
			if q.Network == "" {
				all.merge(r.stats)
			}
			continue
		}
		n := byNetwork[r.network]
		if n == nil {
			n = newNetStats(0)
			byNetwork[r.network] = n
		}
		n.merge(r.stats)
		if q.Network != "" {
			all.merge(r.stats)
		}
	}
	s.From, s.To = s.From.UTC(), s.To.UTC()
	rng := rand.New(rand.NewPCG(opts.Seed, 0x4e90))
	ci := defaultCI
	ci.seed = opts.Seed
	sampleOf := func(rows []storedSample) ([]sample, []float64) {
		if len(rows) > opts.SampleCap {
			rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
			rows = rows[:opts.SampleCap]
		}
		xs := make([]sample, len(rows))
		ws := make([]float64, len(rows))
		for i, r := range rows {
			xs[i], ws[i] = r.sample, r.weight
		}
		return xs, ws
	}
	perNetwork := map[string][]storedSample{}
	for _, x := range samples {
		perNetwork[x.network] = append(perNetwork[x.network], x)
	}
	xs, ws := sampleOf(samples)
	s.All = summarize("", all, xs, ws, opts.IWs, ci)
	names := make([]string, 0, len(byNetwork))
	for name := range byNetwork {
		names = append(names, name)
	}
	sortNetworks(names, func(name string) uint64 { return byNetwork[name].Connections })
	if len(names) > opts.Top {
		s.NetworksOmitted = len(names) - opts.Top
		names = names[:opts.Top]
	}
	for _, name := range names {
		xs, ws := sampleOf(perNetwork[name])
		s.Networks = append(s.Networks, summarize(name, byNetwork[name], xs, ws, opts.IWs, ci))
	}
	s.Counts = Counts{Followed: status.followed, Measured: status.measured, NoRequest: status.noRequest, NoResponse: status.noResponse}
	s.Drops = Drops{EventsLost: status.eventsLost, EventsRead: status.eventsRead, ConnectionsNotFollowed: status.notFollowed,
		ConnectionsPooled: status.pooled, PacketsDropped: status.packetsDropped}
	if strings.Contains(s.Source, SourcePackets) {
		s.Source = SourcePackets
	}
	s.Notes = notes(s)
	return s, nil
}

// Values reads one metric of the stored connections of a period (and
// network): the values, the connections each stands for, and how many had no
// value (responses not seen to their end, for round_trips and response).
func Values(ctx context.Context, st *Store, q Query, metric string) (values, weights []float64, skipped int, err error) {
	rows, err := st.samples(ctx, q)
	if err != nil {
		return nil, nil, 0, err
	}
	values = []float64{}
	for _, r := range rows {
		v, ok := 0.0, false
		switch metric {
		case "round_trips":
			v, ok = float64(r.roundTrips), r.roundTrips >= 0
		case "response":
			v, ok = r.responseMs, r.responseMs >= 0
		case "handshake_rtt":
			v, ok = float64(r.rttUs)/1e3, r.rttUs > 0
		case "round1_bytes":
			v, ok = float64(r.round1Bytes), r.round1Bytes >= 0
		case "iw":
			v, ok = float64(r.iw), r.iw > 0
		default:
			return nil, nil, 0, fmt.Errorf("metric %q is not one of a field store's", metric)
		}
		if !ok {
			skipped++
			continue
		}
		values = append(values, v)
		weights = append(weights, r.weight)
	}
	return values, weights, skipped, nil
}

// NetworksOf lists the networks of a period, most connections first.
func NetworksOf(ctx context.Context, st *Store, q Query) ([]string, map[string]uint64, error) {
	rows, err := st.intervals(ctx, Query{From: q.From, To: q.To})
	if err != nil {
		return nil, nil, err
	}
	conns := map[string]uint64{}
	for _, r := range rows {
		if r.network != AllNetworks {
			conns[r.network] += r.stats.Connections
		}
	}
	names := make([]string, 0, len(conns))
	for n := range conns {
		names = append(names, n)
	}
	sortNetworks(names, func(n string) uint64 { return conns[n] })
	return names, conns, nil
}

// LatestMark is the newest mark of the store before to (zero: any), or false.
func LatestMark(ctx context.Context, st *Store, to time.Time) (tune.Mark, bool, error) {
	marks, err := st.Marks(ctx, Query{To: to})
	if err != nil || len(marks) == 0 {
		return tune.Mark{}, false, err
	}
	return marks[len(marks)-1], true, nil
}

// NetworkComparison is one network's before and after.
type NetworkComparison struct {
	Network string `json:"network"`
	// RoundTrips and Response compare the round trips per first response and
	// the response times (compare.Compare: medians, their difference with a
	// bootstrap interval, the rank test).
	RoundTrips *compare.Result `json:"round_trips"`
	Response   *compare.Result `json:"response_ms"`
}

// CompareOptions choose the two periods of CompareNetworks.
type CompareOptions struct {
	Before, After Query
	Top           int
	Compare       compare.Options
}

// CompareNetworks compares two periods of a store network by network (the
// busiest Top, and all pooled first), in round trips and response time.
func CompareNetworks(ctx context.Context, st *Store, opts CompareOptions) ([]NetworkComparison, error) {
	if opts.Top == 0 {
		opts.Top = DefaultTop
	}
	names, _, err := NetworksOf(ctx, st, Query{From: opts.Before.From, To: opts.After.To})
	if err != nil {
		return nil, err
	}
	if len(names) > opts.Top {
		names = names[:opts.Top]
	}
	out := []NetworkComparison{}
networks:
	for _, name := range append([]string{""}, names...) {
		nc := NetworkComparison{Network: name}
		for _, m := range []struct {
			metric string
			into   **compare.Result
		}{{"round_trips", &nc.RoundTrips}, {"response", &nc.Response}} {
			before, err := StoreSample(ctx, st, withNetwork(opts.Before, name), m.metric)
			if err != nil {
				return nil, err
			}
			after, err := StoreSample(ctx, st, withNetwork(opts.After, name), m.metric)
			if err != nil {
				return nil, err
			}
			if len(before.Values) == 0 || len(after.Values) == 0 {
				if name == "" {
					return nil, fmt.Errorf("no %s values in %s: %d before, %d after", m.metric, st.Path(), len(before.Values), len(after.Values))
				}
				continue networks // a network seen on one side only
			}
			*m.into = compare.Compare(before, after, opts.Compare)
		}
		out = append(out, nc)
	}
	return out, nil
}

func withNetwork(q Query, network string) Query {
	q.Network = network
	return q
}

// StoreSample is one period's values of a metric as compare takes them.
func StoreSample(ctx context.Context, st *Store, q Query, metric string) (*compare.Sample, error) {
	m, _ := report.MetricNamed(metric)
	unit := m.Unit
	values, weights, skipped, err := Values(ctx, st, q, metric)
	if err != nil {
		return nil, err
	}
	network := q.Network
	if network == "" {
		network = "all networks"
	}
	s := &compare.Sample{Source: fmt.Sprintf("%s, %s, %s", st.Path(), network, compare.Window{From: q.From, To: q.To}),
		Kind: compare.KindField, Metric: metric, Unit: unit, Values: values, Skipped: skipped}
	if skipped > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: %d connections without a %s value left out (responses not seen to their end)", network, skipped, metric))
	}
	if lo, hi := minMax(weights); len(weights) > 0 && hi > 2*lo {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: the store keeps a sample of each minute's connections; busier minutes stand for up to %.0f× more connections per row, and weigh the same here", network, hi/lo))
	}
	return s, nil
}

func minMax(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}
