package field

import (
	"math"
	"sort"
	"time"

	"github.com/slowstart/slowstart/stats"
	"github.com/slowstart/slowstart/tune"
)

// Schema names the JSON of a field summary (field --json, field report
// --json; docs/schemas/field.json).
const Schema = "slowstart.field/v1"

// Summary is what field measured over a period: every network's statistics,
// the counts of what it could not follow, and the marks of changes.
type Summary struct {
	Schema string `json:"schema"` // Schema
	// Report is "summary" (a Comparison is "comparison").
	Report string `json:"report"`
	// Source is SourceKernel or SourcePackets; SourceNote says why the packet
	// source was used, when it was.
	Source     string `json:"source"`
	SourceNote string `json:"source_note,omitempty"`
	// Ports are the local ports followed.
	Ports []int `json:"ports"`
	// From and To bound the period.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Grouping says how clients are grouped: "prefix" (Prefix4 and Prefix6
	// bits) or "asn" (by the pfx2as file, the prefix where it knows nothing).
	Grouping string `json:"grouping"`
	Prefix4  int    `json:"prefix4"`
	Prefix6  int    `json:"prefix6"`
	// IWs are the initial windows priced in Savings.
	IWs []int `json:"iws"`
	// All is every network pooled; Networks the busiest ones, most
	// connections first (at most Options.Top; NetworksOmitted counts the rest).
	All             NetworkSummary   `json:"all"`
	Networks        []NetworkSummary `json:"networks"`
	NetworksOmitted int              `json:"networks_omitted"`
	// Counts are the connections seen and what became of them.
	Counts Counts `json:"counts"`
	// Drops are what field could not see or keep; all zero when it saw
	// everything.
	Drops Drops `json:"drops"`
	// Marks are the changes recorded in the period (tune apply and revert).
	Marks []tune.Mark `json:"marks"`
	// Notes are sentences a reader should not miss.
	Notes []string `json:"notes"`
}

// Counts are the connections seen and what became of them.
type Counts struct {
	// Followed: new connections followed. Measured: their first responses
	// handed over (whole, or cut short: NetworkSummary.CutShort).
	Followed uint64 `json:"followed"`
	Measured uint64 `json:"measured"`
	// NoRequest: closed or idle before the client sent data; NoResponse: the
	// server answered nothing.
	NoRequest  uint64 `json:"no_request"`
	NoResponse uint64 `json:"no_response"`
}

// Drops are what field could not see or keep.
type Drops struct {
	// EventsLost are kernel events dropped because the ring buffer was full
	// (the reader fell behind); their connections' readings may be wrong.
	EventsLost uint64 `json:"events_lost"`
	// EventsRead are the kernel events read, for scale.
	EventsRead uint64 `json:"events_read"`
	// ConnectionsNotFollowed were established while the table of open
	// connections was full (Options.MaxConns).
	ConnectionsNotFollowed uint64 `json:"connections_not_followed"`
	// ConnectionsPooled were counted under OtherNetworks because the table of
	// networks was full (Options.MaxNetworks).
	ConnectionsPooled uint64 `json:"connections_pooled"`
	// PacketsDropped are packets the kernel dropped from the capture (the packet
	// source only).
	PacketsDropped uint64 `json:"packets_dropped"`
	// StoreErrors counts intervals that could not be written to the store.
	StoreErrors uint64 `json:"store_errors"`
}

// Any says something was dropped.
func (d Drops) Any() bool {
	return d.EventsLost+d.ConnectionsNotFollowed+d.PacketsDropped+d.StoreErrors > 0
}

// NetworkSummary is one network's statistics (or all networks', Network "").
type NetworkSummary struct {
	Network string `json:"network"`
	// Connections are the first responses measured; CutShort of them were
	// not seen to their end (their round trips are left out); Retransmitted
	// had a retransmission.
	Connections   uint64 `json:"connections"`
	CutShort      uint64 `json:"cut_short"`
	Retransmitted uint64 `json:"retransmitted"`
	// CutShortBy counts the responses cut short by why: server_closed,
	// client_closed, reset, idle, ended.
	CutShortBy map[string]uint64 `json:"cut_short_by"`
	// Round1Limits counts what limited round 1: cwnd, rwnd, app, end, unknown.
	Round1Limits map[string]uint64 `json:"round1_limits"`
	// WindowLimited is the share of first responses whose round 1 a window
	// (cwnd or rwnd) cut, with its confidence interval.
	WindowLimited Share `json:"window_limited"`
	// Distributions of the handshake RTT, the round trips per first response,
	// round 1's bytes and the response time.
	HandshakeRTTMs Distribution `json:"handshake_rtt_ms"`
	RoundTrips     Distribution `json:"round_trips"`
	Round1Bytes    Distribution `json:"round1_bytes"`
	ResponseMs     Distribution `json:"response_ms"`
	// Savings are what each window of Summary.IWs would save per first
	// response, by the model, with confidence intervals.
	Savings []SavingSummary `json:"savings"`
	// Sample is how many connections the quantiles and intervals rest on (a
	// uniform sample of at most Options.SampleSize per network).
	Sample int `json:"sample"`
}

// Share is a proportion with its confidence interval (bootstrap).
type Share struct {
	Value float64        `json:"value"`
	CI    stats.Interval `json:"ci"`
}

// Distribution is a quantity's histogram (bounds and counts: Counts[i]
// counts values up to Bounds[i], the last one the rest) and its quantiles from
// the sample.
type Distribution struct {
	N      uint64    `json:"n"`
	Mean   *float64  `json:"mean"`
	P10    *float64  `json:"p10"`
	Median *float64  `json:"median"`
	P90    *float64  `json:"p90"`
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"counts"`
}

// SavingSummary is what IW would save per first response, on average, with
// 95% bootstrap confidence intervals: in round trips and in milliseconds. A
// negative saving is a cost (a window smaller than the one in use).
type SavingSummary struct {
	IW           int            `json:"iw"`
	RoundTrips   float64        `json:"round_trips"`
	RoundTripsCI stats.Interval `json:"round_trips_ci"`
	Ms           float64        `json:"ms"`
	MsCI         stats.Interval `json:"ms_ci"`
	// Helped is the share of responses that would save a round trip or more.
	Helped float64 `json:"helped"`
	N      int     `json:"n"`
}

// ciOptions control the confidence intervals.
type ciOptions struct {
	resamples int
	level     float64
	seed      uint64
}

var defaultCI = ciOptions{resamples: 2000, level: 0.95, seed: 1}

// cutServerClosed counts the responses cut short by the server's close.
func (s NetworkSummary) cutServerClosed() uint64 { return s.CutShortBy[CutServerClosed] }

// summarize builds a network's summary from its counts and histograms and a
// sample of its connections: a uniform one (weights nil), or one whose rows
// stand for weights[i] connections each (the store's).
func summarize(name string, n *netStats, sample []sample, weights []float64, iws []int, ci ciOptions) NetworkSummary {
	s := NetworkSummary{
		Network: name, Connections: n.Connections, CutShort: n.CutShort, Retransmitted: n.Retransmitted,
		CutShortBy: map[string]uint64{}, Round1Limits: map[string]uint64{}, Sample: len(sample), Savings: []SavingSummary{},
	}
	for i, l := range limitOrder {
		s.Round1Limits[l] = n.Limits[i]
	}
	for i, c := range cutOrder[1:] {
		s.CutShortBy[c] = n.Cut[i+1]
	}
	var rtt, rounds, round1, response, limited []float64
	var rttW, roundsW, round1W, responseW []float64
	weight := func(i int) float64 {
		if weights == nil {
			return 1
		}
		return weights[i]
	}
	for i := range sample {
		x := &sample[i]
		if x.rttUs > 0 {
			rtt, rttW = append(rtt, float64(x.rttUs)/1e3), append(rttW, weight(i))
		}
		if x.roundTrips >= 0 {
			rounds, roundsW = append(rounds, float64(x.roundTrips)), append(roundsW, weight(i))
		}
		if x.round1Bytes >= 0 {
			round1, round1W = append(round1, float64(x.round1Bytes)), append(round1W, weight(i))
		}
		if x.responseMs >= 0 {
			response, responseW = append(response, x.responseMs), append(responseW, weight(i))
		}
		if x.windowLimited() {
			limited = append(limited, 1)
		} else {
			limited = append(limited, 0)
		}
	}
	if weights == nil {
		rttW, roundsW, round1W, responseW = nil, nil, nil, nil
	}
	s.HandshakeRTTMs = distribution(n.RTT, RTTBoundsMs, rtt, rttW)
	s.RoundTrips = distribution(n.RoundTrips, RoundTripBounds, rounds, roundsW)
	s.Round1Bytes = distribution(n.Round1Bytes, Round1BoundsBytes, round1, round1W)
	s.ResponseMs = distribution(n.ResponseMs, ResponseBoundsMs, response, responseW)
	if n.Connections > 0 {
		s.WindowLimited.Value = float64(n.windowLimited()) / float64(n.Connections)
	}
	s.WindowLimited.CI = finite(stats.BootstrapWeightedMean(limited, weights, ci.resamples, ci.level, ci.seed))
	for _, iw := range iws {
		var saved, ms, w []float64
		helpedWeight, totalWeight := 0.0, 0.0
		for i := range sample {
			r := sample[i].record()
			sv, ok := r.saving(iw)
			if !ok {
				continue
			}
			weight := 1.0
			if weights != nil {
				weight = weights[i]
				w = append(w, weight)
			}
			saved = append(saved, float64(sv.RoundTrips))
			ms = append(ms, sv.Ms)
			totalWeight += weight
			if sv.RoundTrips > 0 {
				helpedWeight += weight
			}
		}
		ss := SavingSummary{IW: iw, N: len(saved),
			RoundTripsCI: finite(stats.BootstrapWeightedMean(saved, w, ci.resamples, ci.level, ci.seed)),
			MsCI:         finite(stats.BootstrapWeightedMean(ms, w, ci.resamples, ci.level, ci.seed))}
		if len(saved) > 0 && totalWeight > 0 {
			ss.RoundTrips, ss.Ms = stats.WeightedMean(saved, w), stats.WeightedMean(ms, w)
			ss.Helped = helpedWeight / totalWeight
		}
		s.Savings = append(s.Savings, ss)
	}
	return s
}

// distribution describes a histogram, with the quantiles of values (sorted
// here; each weighing weights[i], or the same when weights is nil), or of the
// histogram when there are no values.
func distribution(h hist, bounds []float64, values, weights []float64) Distribution {
	d := Distribution{N: h.N, Bounds: bounds, Counts: h.Counts}
	if h.N > 0 {
		mean := h.Sum / float64(h.N)
		d.Mean = &mean
	}
	if len(values) == 0 {
		q := func(p float64) *float64 {
			v, ok := h.quantile(bounds, p)
			if !ok {
				return nil
			}
			return &v
		}
		d.P10, d.Median, d.P90 = q(0.1), q(0.5), q(0.9)
		return d
	}
	var q func(p float64) float64
	if weights == nil {
		sort.Float64s(values)
		q = func(p float64) float64 { return stats.Quantile(values, p) }
	} else {
		q = weightedQuantiles(values, weights)
	}
	at := func(p float64) *float64 {
		v := q(p)
		return &v
	}
	d.P10, d.Median, d.P90 = at(0.1), at(0.5), at(0.9)
	return d
}

// weightedQuantiles returns the quantile function of values weighing
// weights: the smallest value whose cumulative weight reaches p of the total.
func weightedQuantiles(values, weights []float64) func(p float64) float64 {
	idx := make([]int, len(values))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return values[idx[a]] < values[idx[b]] })
	cum := make([]float64, len(idx))
	total := 0.0
	for i, j := range idx {
		total += weights[j]
		cum[i] = total
	}
	return func(p float64) float64 {
		i := sort.SearchFloat64s(cum, p*total)
		return values[idx[min(i, len(idx)-1)]]
	}
}

// finite turns NaN bounds (an empty sample) into zeros for JSON, which has no
// NaN.
func finite(iv stats.Interval) stats.Interval {
	if math.IsNaN(iv.Low) || math.IsNaN(iv.High) {
		return stats.Interval{Level: iv.Level}
	}
	return iv
}
