package pageload

import (
	"math"

	"github.com/slowstart/slowstart/report"
)

// clockMatchNs is how near a SYN a request's connection start must lie to count
// as the same event.
const clockMatchNs = 20e6

// EstimateClockOffset estimates how far the capture's clock is ahead of the
// browser's (a HAR written on another machine, or by a browser whose times are
// off), for Input.ClockOffsetNs: of the offsets that put a request's connection
// start on a SYN to its server, the one that puts the most of them within 20 ms
// of such a SYN, the smallest of equals. Offsets under 5 ms are taken as 0. It
// returns 0 when no request tells (none opened a connection, or none names its
// server).
func EstimateClockOffset(rep *report.Report, in Input) int64 {
	type start struct {
		server string
		ns     int64
	}
	var syns []start
	for _, c := range rep.Connections {
		if c.MidStream || c.Transport == report.TransportQUIC {
			continue
		}
		a, ok := parseAddrPort(c.Server)
		if !ok {
			continue
		}
		syns = append(syns, start{a.String(), rep.Source.StartUnixNs + int64(c.StartMs*1e6)})
	}
	var opens []start
	for _, r := range in.Requests {
		a, ok := parseAddrPort(r.RemoteAddr)
		if r.ConnectStartNs == 0 || !ok {
			continue
		}
		opens = append(opens, start{a.String(), r.ConnectStartNs})
	}
	score := func(off int64) int {
		n := 0
		for _, o := range opens {
			for _, s := range syns {
				if s.server == o.server && absNs(o.ns+off-s.ns) <= clockMatchNs {
					n++
					break
				}
			}
		}
		return n
	}
	best, bestScore := int64(0), score(0)
	for _, o := range opens {
		for _, s := range syns {
			if s.server != o.server {
				continue
			}
			off := s.ns - o.ns
			sc := score(off)
			if sc > bestScore || (sc == bestScore && sc > 0 && absNs(off) < absNs(best)) {
				best, bestScore = off, sc
			}
		}
	}
	if math.Abs(float64(best)) < 5e6 {
		return 0
	}
	return best
}
