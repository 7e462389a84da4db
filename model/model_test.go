package model

import (
	"math"
	"testing"
)

func segmentsPerRound(r Result, phase string) []int {
	var out []int
	for _, x := range r.Rounds {
		if x.Phase == phase {
			out = append(out, x.Segments)
		}
	}
	return out
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSimulateRounds(t *testing.T) {
	const mss = DefaultMSS
	tests := []struct {
		name       string
		p          Params
		wantHTTP   []int // segments per HTTP round
		wantTLS    int   // TLS round trips
		wantLimits []string
	}{
		{"IW 10, 10 segments: one round", Params{RTTNs: 100e6, IW: 10, SizeBytes: 10 * mss}, []int{10}, 0, []string{"end"}},
		{"IW 3 doubles per round", Params{RTTNs: 100e6, IW: 3, SizeBytes: 45 * mss}, []int{3, 6, 12, 24}, 0, []string{"cwnd", "cwnd", "cwnd", "end"}},
		{"IW 10, 29 segments", Params{RTTNs: 500e6, IW: 10, SizeBytes: 29 * mss}, []int{10, 19}, 0, nil},
		{"fixed receive window of 8 segments", Params{RTTNs: 100e6, IW: 10, SizeBytes: 20 * mss, RwndBytes: 8 * mss}, []int{8, 8, 4}, 0, []string{"rwnd", "rwnd", "end"}},
		{"Linux client window caps IW 64 at 44 segments", Params{RTTNs: 100e6, IW: 64, SizeBytes: 60 * mss}, []int{44, 16}, 0, []string{"rwnd", "end"}},
		{"TLS 1.3 flight fits IW 10", Params{RTTNs: 100e6, IW: 10, SizeBytes: 5*mss - 100, TLS: "1.3", ChainBytes: 4000}, []int{5}, 1, nil},
		{"TLS 1.3 flight larger than IW 3 costs a round", Params{RTTNs: 100e6, IW: 3, SizeBytes: 5 * mss, TLS: "1.3", ChainBytes: 6900}, nil, 2, nil},
		{"TLS 1.2 takes two round trips", Params{RTTNs: 100e6, IW: 10, SizeBytes: 5 * mss, TLS: "1.2", ChainBytes: 4000}, nil, 2, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Simulate(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if got := segmentsPerRound(r, "http"); tc.wantHTTP != nil && !equalInts(got, tc.wantHTTP) {
				t.Errorf("HTTP rounds carry %v segments, want %v", got, tc.wantHTTP)
			}
			if r.RoundTrips.TLS != tc.wantTLS {
				t.Errorf("TLS rounds %d, want %d (rounds %+v)", r.RoundTrips.TLS, tc.wantTLS, r.Rounds)
			}
			if tc.wantLimits != nil {
				var got []string
				for _, x := range r.Rounds {
					got = append(got, x.Limit)
				}
				if len(got) != len(tc.wantLimits) {
					t.Fatalf("limits %v, want %v", got, tc.wantLimits)
				}
				for i := range got {
					if got[i] != tc.wantLimits[i] {
						t.Errorf("limits %v, want %v", got, tc.wantLimits)
						break
					}
				}
			}
			if r.RoundTrips.Total != r.RoundTrips.TCP+r.RoundTrips.TLS+r.RoundTrips.HTTP {
				t.Errorf("total %d is not the sum of %+v", r.RoundTrips.Total, r.RoundTrips)
			}
		})
	}
}

func TestSimulateTimes(t *testing.T) {
	const mss = DefaultMSS
	t.Run("no rate limit: one RTT per round", func(t *testing.T) {
		r, err := Simulate(Params{RTTNs: 100e6, IW: 3, SizeBytes: 45 * mss})
		if err != nil {
			t.Fatal(err)
		}
		// Handshake, request, and 4 rounds of which the first byte arrives in the first:
		// the last byte arrives 3 RTTs after the first.
		if math.Abs(r.FCTPaperMs-300) > 1 || math.Abs(r.FirstByteMs-200) > 1 {
			t.Errorf("first byte %.2f ms, FCT %.2f ms; want 200 and 300", r.FirstByteMs, r.FCTPaperMs)
		}
	})
	t.Run("rate-limited: serialization dominates", func(t *testing.T) {
		p := Params{RTTNs: 10e6, RateBitsPerSecond: 1e6, IW: 10, SizeBytes: 100 * mss}
		r, err := Simulate(p)
		if err != nil {
			t.Fatal(err)
		}
		wire := 100.0 * (mss + HeaderBytes) * 8 / 1e6 * 1e3
		if r.FCTPaperMs < wire*0.97 || r.FCTPaperMs > wire*1.03 {
			t.Errorf("FCT %.1f ms, want about the wire time %.1f ms", r.FCTPaperMs, wire)
		}
		if r.RateLimitedFromRound == 0 {
			t.Errorf("a 1 Mbit/s, 10 ms path should be rate-limited; rounds %+v", r.Rounds)
		}
	})
	t.Run("delayed ACKs never speed the transfer up", func(t *testing.T) {
		for _, segs := range []int64{5, 21, 41, 77} {
			p := Params{RTTNs: 50e6, IW: 3, SizeBytes: segs * mss}
			fast, err := Simulate(p)
			if err != nil {
				t.Fatal(err)
			}
			p.DelayedACK = true
			slow, err := Simulate(p)
			if err != nil {
				t.Fatal(err)
			}
			if slow.FCTUserMs < fast.FCTUserMs-0.01 {
				t.Errorf("%d segments: delayed ACKs %.1f ms, per-segment ACKs %.1f ms", segs, slow.FCTUserMs, fast.FCTUserMs)
			}
		}
	})
	t.Run("a larger IW is never slower without loss", func(t *testing.T) {
		prev := math.Inf(1)
		for _, iw := range []int{1, 2, 3, 4, 6, 10, 16, 32} {
			r, err := Simulate(Params{RTTNs: 80e6, RateBitsPerSecond: 20e6, IW: iw, SizeBytes: 120 * mss})
			if err != nil {
				t.Fatal(err)
			}
			if r.FCTUserMs > prev+0.5 {
				t.Errorf("IW %d: %.1f ms, slower than the smaller IW's %.1f ms", iw, r.FCTUserMs, prev)
			}
			prev = r.FCTUserMs
		}
	})
}

func TestClosedForm(t *testing.T) {
	tests := []struct {
		iw, segments int
		delayed      bool
		wantRounds   int
	}{
		{3, 29, false, 4},
		{10, 29, false, 2},
		{10, 10, false, 1},
		{3, 3, false, 1},
		{10, 29, true, 3},
	}
	for _, tc := range tests {
		got := ClosedForm(Params{RTTNs: 70e6, IW: tc.iw, SizeBytes: int64(tc.segments) * DefaultMSS, DelayedACK: tc.delayed})
		if got.Rounds != tc.wantRounds {
			t.Errorf("IW %d, %d segments, delayed %v: %d rounds, want %d", tc.iw, tc.segments, tc.delayed, got.Rounds, tc.wantRounds)
		}
		if want := float64(tc.wantRounds) * 70; math.Abs(got.LatencyMs-want) > 1e-9 {
			t.Errorf("latency %.1f ms, want %.1f (no rate term)", got.LatencyMs, want)
		}
	}
}

func TestSlowStartBudget(t *testing.T) {
	b := SlowStartBudget(10, DefaultMSS, 160_000, 0, 64)
	want := []int64{14480, 43440, 101360, 217200}
	if len(b) != len(want) {
		t.Fatalf("%d rounds, want %d: %+v", len(b), len(want), b)
	}
	for i := range want {
		if b[i].CumulativeBytes != want[i] {
			t.Errorf("rounds 1-%d carry %d bytes, want %d", i+1, b[i].CumulativeBytes, want[i])
		}
	}
	capped := SlowStartBudget(10, DefaultMSS, 160_000, 8*DefaultMSS, 64)
	if capped[0].Segments != 8 || capped[1].Segments != 8 {
		t.Errorf("a window of 8 segments should cap every round at 8: %+v", capped[:2])
	}
}

func TestNormalizeRejects(t *testing.T) {
	for _, p := range []Params{
		{RTTNs: -1, IW: 10},
		{RTTNs: 1e6, IW: 0},
		{RTTNs: 1e6, IW: 10, TLS: "1.1"},
		{RTTNs: 1e6, IW: 10, CC: "vegas"},
		{RTTNs: 1e6, IW: 10, RwndBytes: 100},
	} {
		if err := p.Normalize(); err == nil {
			t.Errorf("%+v: no error", p)
		}
	}
}
