package field

import (
	"math/rand/v2"
	"sort"
)

// The histograms' buckets: upper bounds, inclusive, as Prometheus's "le"; a
// last bucket past the final bound counts the rest. They are part of the
// store's format (docs/field.md): change them only with a new store version.
var (
	// RTTBoundsMs bound the handshake RTT histogram (ms).
	RTTBoundsMs = []float64{1, 2, 5, 10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000}
	// RoundTripBounds bound the histogram of round trips per first response.
	RoundTripBounds = []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20}
	// Round1BoundsBytes bound the histogram of round 1's bytes.
	Round1BoundsBytes = []float64{1500, 3000, 6000, 15000, 30000, 60000, 120000, 250000}
	// ResponseBoundsMs bound the histogram of response times (ms).
	ResponseBoundsMs = []float64{10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}
)

// hist is a histogram over fixed bounds.
type hist struct {
	Counts []uint64 // len(bounds) + 1
	Sum    float64
	N      uint64
}

func newHist(bounds []float64) hist { return hist{Counts: make([]uint64, len(bounds)+1)} }

func (h *hist) add(bounds []float64, v float64) {
	i := sort.SearchFloat64s(bounds, v) // the first bound >= v
	h.Counts[i]++
	h.Sum += v
	h.N++
}

func (h *hist) merge(o hist) {
	for i := range h.Counts {
		if i < len(o.Counts) {
			h.Counts[i] += o.Counts[i]
		}
	}
	h.Sum += o.Sum
	h.N += o.N
}

// quantile estimates the q-quantile by linear interpolation inside its bucket
// (the first bucket from 0, the last one reported at its lower bound).
func (h *hist) quantile(bounds []float64, q float64) (float64, bool) {
	if h.N == 0 {
		return 0, false
	}
	rank := q * float64(h.N)
	var cum float64
	for i, c := range h.Counts {
		if c == 0 {
			continue
		}
		if cum+float64(c) >= rank {
			if i == len(bounds) {
				return bounds[len(bounds)-1], true
			}
			lower := 0.0
			if i > 0 {
				lower = bounds[i-1]
			}
			return lower + (bounds[i]-lower)*(rank-cum)/float64(c), true
		}
		cum += float64(c)
	}
	return bounds[len(bounds)-1], true
}

// Round 1 limits, in the order netStats counts them.
var limitOrder = []string{LimitCwnd, LimitRwnd, LimitApp, LimitEnd, LimitUnknown}

func limitIndex(l string) int {
	for i, name := range limitOrder {
		if name == l {
			return i
		}
	}
	return len(limitOrder) - 1
}

// sample is one connection as the aggregates keep it: what the summaries'
// quantiles and confidence intervals, and the store's rows, need.
type sample struct {
	unixNs        int64
	rttUs         uint32
	mss, iw       uint32
	cwndAtRequest uint32
	rwndAtRequest uint32
	bytes         int64
	round1Bytes   int64 // -1: round 1 never closed
	round1Cwnd    uint32
	roundTrips    int32   // -1: the end was not seen
	responseMs    float64 // -1: unknown
	limit         uint8   // index in limitOrder
	cut           uint8   // index in cutOrder
	retransmitted bool
}

// Reasons of Conn.CutShort, in the order samples number them ("" first).
var cutOrder = []string{"", CutServerClosed, CutClientClosed, CutReset, CutIdle, CutEnded}

func cutIndex(c string) uint8 {
	for i, name := range cutOrder {
		if name == c {
			return uint8(i)
		}
	}
	return uint8(len(cutOrder) - 1)
}

func sampleOf(r *record) sample {
	s := sample{
		unixNs: r.establishedUnixNs, rttUs: r.rttUs, mss: r.mss, iw: r.iw, cwndAtRequest: r.cwndAtRequest,
		rwndAtRequest: r.rwndAtRequest, bytes: r.responseBytes, round1Bytes: r.round1Bytes(),
		roundTrips: int32(r.roundTrips()), responseMs: -1, limit: uint8(limitIndex(r.round1Limit)),
		cut: cutIndex(r.cut), retransmitted: r.retransmitted,
	}
	if len(r.rounds) > 0 {
		s.round1Cwnd = r.rounds[0].Cwnd
	}
	if r.complete && r.responseNs > 0 {
		s.responseMs = float64(r.responseNs) / 1e6
	}
	return s
}

// record rebuilds enough of a record from a sample to price windows on it.
func (s *sample) record() record {
	return record{rttUs: s.rttUs, mss: s.mss, iw: s.iw, cwndAtRequest: s.cwndAtRequest, rwndAtRequest: s.rwndAtRequest, responseBytes: s.bytes}
}

func (s *sample) windowLimited() bool {
	return limitOrder[s.limit] == LimitCwnd || limitOrder[s.limit] == LimitRwnd
}

// netStats aggregates the connections of one network (or of all of them).
type netStats struct {
	Connections   uint64
	Limits        [5]uint64 // by limitOrder
	Cut           [6]uint64 // by cutOrder ([0]: seen to the end)
	CutShort      uint64
	Retransmitted uint64
	RTT           hist
	RoundTrips    hist
	Round1Bytes   hist
	ResponseMs    hist
	// reservoir is a uniform sample of the connections (Algorithm R), at most
	// its capacity.
	reservoir []sample
	capacity  int
}

func newNetStats(capacity int) *netStats {
	return &netStats{
		RTT: newHist(RTTBoundsMs), RoundTrips: newHist(RoundTripBounds), Round1Bytes: newHist(Round1BoundsBytes),
		ResponseMs: newHist(ResponseBoundsMs), capacity: capacity,
	}
}

func (n *netStats) add(s *sample, rng *rand.Rand) {
	n.Connections++
	n.Limits[s.limit]++
	n.Cut[s.cut]++
	if s.cut != 0 {
		n.CutShort++
	}
	if s.retransmitted {
		n.Retransmitted++
	}
	if s.rttUs > 0 {
		n.RTT.add(RTTBoundsMs, float64(s.rttUs)/1e3)
	}
	if s.roundTrips >= 0 {
		n.RoundTrips.add(RoundTripBounds, float64(s.roundTrips))
	}
	if s.round1Bytes >= 0 {
		n.Round1Bytes.add(Round1BoundsBytes, float64(s.round1Bytes))
	}
	if s.responseMs >= 0 {
		n.ResponseMs.add(ResponseBoundsMs, s.responseMs)
	}
	if n.capacity <= 0 {
		return
	}
	if len(n.reservoir) < n.capacity {
		n.reservoir = append(n.reservoir, *s)
	} else if j := rng.Uint64N(n.Connections); j < uint64(n.capacity) {
		n.reservoir[j] = *s
	}
}

// merge adds o's counts and histograms (not its sample).
func (n *netStats) merge(o *netStats) {
	n.Connections += o.Connections
	for i := range n.Limits {
		n.Limits[i] += o.Limits[i]
	}
	for i := range n.Cut {
		n.Cut[i] += o.Cut[i]
	}
	n.CutShort += o.CutShort
	n.Retransmitted += o.Retransmitted
	n.RTT.merge(o.RTT)
	n.RoundTrips.merge(o.RoundTrips)
	n.Round1Bytes.merge(o.Round1Bytes)
	n.ResponseMs.merge(o.ResponseMs)
}

func (n *netStats) windowLimited() uint64 { return n.Limits[0] + n.Limits[1] }

// OtherNetworks names the networks past Options.MaxNetworks, pooled.
const OtherNetworks = "(other networks)"

// AllNetworks names the pool of every network (the store's rows of totals).
const AllNetworks = ""

// aggregator keeps the statistics of every network since the start (for the
// summary and the metrics), and of the interval under way (for the store).
type aggregator struct {
	maxNetworks     int
	runCapacity     int // sample per network, since the start
	intervalSamples int // sample per network, per interval
	rng             *rand.Rand

	total    *netStats
	networks map[string]*netStats

	intervalTotal    *netStats
	intervalNetworks map[string]*netStats
	// pooled counts the connections counted under OtherNetworks because the
	// table of networks was full.
	pooled uint64
}

func newAggregator(maxNetworks, runCapacity, intervalSamples int, seed uint64) *aggregator {
	a := &aggregator{maxNetworks: maxNetworks, runCapacity: runCapacity, intervalSamples: intervalSamples,
		rng: rand.New(rand.NewPCG(seed, 0xf1e1d)), total: newNetStats(runCapacity), networks: map[string]*netStats{}}
	a.resetInterval()
	return a
}

func (a *aggregator) resetInterval() {
	a.intervalTotal = newNetStats(a.runCapacity)
	a.intervalNetworks = map[string]*netStats{}
}

// add counts one connection of network.
func (a *aggregator) add(network string, s *sample) {
	run, ok := a.networks[network]
	if !ok {
		if len(a.networks) >= a.maxNetworks {
			network = OtherNetworks
			a.pooled++
			run = a.networks[network]
		}
		if run == nil {
			run = newNetStats(a.runCapacity)
			a.networks[network] = run
		}
	}
	a.total.add(s, a.rng)
	run.add(s, a.rng)
	a.intervalTotal.add(s, a.rng)
	iv := a.intervalNetworks[network]
	if iv == nil {
		iv = newNetStats(a.intervalSamples)
		a.intervalNetworks[network] = iv
	}
	iv.add(s, a.rng)
}

// takeInterval returns the interval's statistics by network (AllNetworks
// for the pool) and starts a new interval.
func (a *aggregator) takeInterval() map[string]*netStats {
	out := a.intervalNetworks
	out[AllNetworks] = a.intervalTotal
	a.resetInterval()
	return out
}
