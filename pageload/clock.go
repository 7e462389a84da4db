package pageload

import (
	"math"
	"net/netip"
	"slices"

	"github.com/slowstart/slowstart/report"
)

// clockMatchNs is how near a SYN a request's connection start must lie to count
// as the same event.
const clockMatchNs = 20e6

// clockPairBudget bounds the (request, SYN) pairs EstimateClockOffset weighs:
// the requests that opened a connection are taken in order of time while their
// pairs with the SYNs to their servers fit in it.
const clockPairBudget = 1 << 20

// EstimateClockOffset estimates how far the capture's clock is ahead of the
// browser's (a HAR written on another machine, or by a browser whose times are
// off), for Input.ClockOffsetNs: of the offsets that put a request's connection
// start on a SYN to its server, the one that puts the most of them within 20 ms
// of such a SYN, the smallest of equals. Offsets under 5 ms are taken as 0. It
// returns 0 when no request tells (none opened a connection, or none names its
// server).
//
// Each (request, SYN) pair of a server gives the offsets that put that request
// on that SYN, an interval 40 ms wide; an offset's score is the number of
// requests whose intervals hold it. One sweep over the intervals' ends scores
// every candidate, in O(P log P) for P pairs (at most clockPairBudget; the
// earliest requests first), where trying each candidate against every pair
// took O(P²) and more.
func EstimateClockOffset(rep *report.Report, in Input) int64 {
	syns := map[netip.AddrPort][]int64{}
	for _, c := range rep.Connections {
		if c.MidStream || c.Transport == report.TransportQUIC {
			continue
		}
		a, ok := parseAddrPort(c.Server)
		if !ok {
			continue
		}
		syns[a] = append(syns[a], rep.Source.StartUnixNs+int64(c.StartMs*1e6))
	}
	for _, s := range syns {
		slices.Sort(s)
	}
	type open struct {
		server netip.AddrPort
		ns     int64
	}
	var opens []open
	for _, r := range in.Requests {
		a, ok := parseAddrPort(r.RemoteAddr)
		if r.ConnectStartNs == 0 || !ok || len(syns[a]) == 0 {
			continue
		}
		opens = append(opens, open{a, r.ConnectStartNs})
	}
	slices.SortStableFunc(opens, func(a, b open) int { return cmpInt64(a.ns, b.ns) })

	// The events of the sweep: where a request's interval starts, a candidate
	// offset, where an interval ends (in that order at one place: the ends are
	// inclusive). A request's intervals are merged first, so that it counts once
	// however many SYNs it is near.
	const (
		intervalStart = iota
		candidate
		intervalEnd
	)
	type event struct {
		at   int64
		kind int8
	}
	events := []event{{0, candidate}}
	pairs := 0
	for _, o := range opens {
		s := syns[o.server]
		if pairs+len(s) > clockPairBudget {
			break
		}
		pairs += len(s)
		lo, hi := s[0]-o.ns-clockMatchNs, s[0]-o.ns+clockMatchNs
		for _, ns := range s {
			off := ns - o.ns
			events = append(events, event{off, candidate})
			if off-clockMatchNs > hi {
				events = append(events, event{lo, intervalStart}, event{hi, intervalEnd})
				lo = off - clockMatchNs
			}
			hi = off + clockMatchNs
		}
		events = append(events, event{lo, intervalStart}, event{hi, intervalEnd})
	}
	slices.SortFunc(events, func(a, b event) int {
		if c := cmpInt64(a.at, b.at); c != 0 {
			return c
		}
		return int(a.kind) - int(b.kind)
	})
	best, bestScore, covering := int64(0), -1, 0
	zeroScore := 0
	for _, e := range events {
		switch e.kind {
		case intervalStart:
			covering++
		case intervalEnd:
			covering--
		case candidate:
			if e.at == 0 {
				zeroScore = covering
			}
			if covering > bestScore || (covering == bestScore && absNs(e.at) < absNs(best)) {
				best, bestScore = e.at, covering
			}
		}
	}
	if bestScore <= zeroScore || math.Abs(float64(best)) < 5e6 {
		return 0
	}
	return best
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
