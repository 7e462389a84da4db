package pageload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/slowstart/slowstart/report"
)

// estimateByTrying is EstimateClockOffset as it was written first, trying every
// candidate against every pair: the reference the sweep must agree with.
func estimateByTrying(rep *report.Report, in Input) int64 {
	type start struct {
		server string
		ns     int64
	}
	var syns, opens []start
	for _, c := range rep.Connections {
		if a, ok := parseAddrPort(c.Server); ok {
			syns = append(syns, start{a.String(), rep.Source.StartUnixNs + int64(c.StartMs*1e6)})
		}
	}
	for _, r := range in.Requests {
		if a, ok := parseAddrPort(r.RemoteAddr); ok && r.ConnectStartNs != 0 {
			opens = append(opens, start{a.String(), r.ConnectStartNs})
		}
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

// randomPage is a page of n requests over conns connections to a few servers,
// its browser's clock offNs behind the capture's, with jitter and strays.
func randomPage(rng *rand.Rand, n, conns int, offNs int64) (*report.Report, Input) {
	servers := []string{"192.0.2.1:443", "192.0.2.2:443", "198.51.100.7:80"}
	r := rep()
	var in Input
	for i := range conns {
		startMs := float64(rng.IntN(3000)) + rng.Float64()
		r.Connections = append(r.Connections, conn(i+1, fmt.Sprintf("10.0.0.1:%d", 40000+i), servers[rng.IntN(len(servers))], startMs, 1, 2))
	}
	for i := range n {
		c := r.Connections[rng.IntN(conns)]
		synNs := t0 + int64(c.StartMs*1e6)
		q := Request{URL: fmt.Sprintf("https://a.test/r%d", i), Method: "GET", RemoteAddr: c.Server, StartNs: synNs - offNs}
		if rng.IntN(3) > 0 {
			q.ConnectStartNs = synNs - offNs + int64(rng.IntN(30e6)) - 15e6
		}
		if rng.IntN(10) == 0 { // a stray: its connection is not in the capture
			q.ConnectStartNs = t0 + int64(rng.IntN(5000))*1e6
		}
		in.Requests = append(in.Requests, q)
	}
	return r, in
}

// TestClockOffsetAgreesWithTrying: the sweep finds the offset that trying every
// candidate finds (or one as near 0 with the same score, where the two are
// equally far on either side).
func TestClockOffsetAgreesWithTrying(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		offNs := []int64{0, 3e6, 250e6, -1800e6, 3600e9}[trial%5]
		r, in := randomPage(rng, 1+rng.IntN(40), 1+rng.IntN(25), offNs)
		got, want := EstimateClockOffset(r, in), estimateByTrying(r, in)
		if got != want && got != -want {
			t.Fatalf("trial %d (browser %d ms behind): offset %d ns, trying every candidate gives %d ns", trial, offNs/1e6, got, want)
		}
	}
}

// nearestByScanning is the placement by address as it was written first,
// every connection of the capture weighed for every request: the reference.
func nearestByScanning(b *builder, rs *reqState) *connState {
	off := b.in.ClockOffsetNs
	remote, _ := parseAddrPort(rs.in.RemoteAddr)
	var best *connState
	bestScore := int64(math.MaxInt64)
	for _, cs := range b.conns {
		if cs.server != remote || len(cs.c.HTTP) > 0 {
			continue
		}
		var score int64
		switch {
		case rs.in.ConnectStartNs != 0:
			score = absNs(cs.startNs - (rs.in.ConnectStartNs + off))
		default:
			sent := addOffset(max(rs.in.SentNs, rs.in.StartNs), off)
			end := cs.startNs + int64(cs.c.DurationMs*1e6)
			if sent < cs.startNs || (sent > end && cs.c.Closed != "open") {
				continue
			}
			score = sent - cs.startNs
		}
		tolerance := int64(AgreementToleranceMs * 1e6)
		if rs.in.FirstByteNs != 0 && cs.bytesBetween(rs.in.FirstByteNs+off-tolerance, rs.in.LastByteNs+off+tolerance) < rs.in.EncodedBytes/2 {
			score += 1e15
		}
		if score < bestScore {
			best, bestScore = cs, score
		}
	}
	return best
}

// TestPlacementAgreesWithScanning: placing a request on the connections to its
// server nearest it in time gives the connection weighing all of them gives
// (the same score: where two are equally near, either).
func TestPlacementAgreesWithScanning(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		r, in := randomPage(rng, 1+rng.IntN(40), 1+rng.IntN(25), 0)
		for i := range in.Requests {
			q := &in.Requests[i]
			q.SentNs = q.StartNs + int64(rng.IntN(500))*1e6
			q.FirstByteNs, q.LastByteNs = q.SentNs+int64(rng.IntN(400))*1e6, q.SentNs+int64(500+rng.IntN(400))*1e6
			q.EncodedBytes = int64(rng.IntN(60000))
		}
		b := &builder{rep: r, in: in}
		b.build()
		for _, rs := range b.reqs {
			want := nearestByScanning(b, rs)
			got := rs.conn
			if got == want {
				continue
			}
			if got == nil || want == nil || placementScore(b, rs, got) != placementScore(b, rs, want) {
				t.Fatalf("trial %d, request %d: placed on %v, weighing every connection gives %v", trial, rs.out.Index, connName(got), connName(want))
			}
		}
	}
}

func placementScore(b *builder, rs *reqState, cs *connState) int64 {
	saved := b.conns
	b.conns = []*connState{cs}
	defer func() { b.conns = saved }()
	if nearestByScanning(b, rs) == nil {
		return -1
	}
	off := b.in.ClockOffsetNs
	if rs.in.ConnectStartNs != 0 {
		return absNs(cs.startNs - (rs.in.ConnectStartNs + off))
	}
	return addOffset(max(rs.in.SentNs, rs.in.StartNs), off) - cs.startNs
}

func connName(cs *connState) string {
	if cs == nil {
		return "none"
	}
	return fmt.Sprintf("connection %d (%s)", cs.c.Index, cs.c.Client)
}
