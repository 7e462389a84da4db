package report

import (
	"reflect"
	"testing"
)

func TestSummaryInitialWindow(t *testing.T) {
	n := func(v int) *int { return &v }
	for _, c := range []struct {
		name  string
		iw    *InitialWindow
		want  IWReading
		bound bool
		text  string
		exact bool
	}{
		{"no reading", nil, IWReading{}, false, "", false},
		{"exact", &InitialWindow{Segments: 10, Verdict: VerdictExact}, IWReading{Verdict: VerdictExact, Segments: n(10)}, false, "10", true},
		{"range keeps both ends", &InitialWindow{Segments: 4, SegmentsMax: 10, Verdict: VerdictRange, ExactIf: "linux_cubic_or_reno"},
			IWReading{Verdict: VerdictRange, Segments: n(4), SegmentsMax: n(10), ExactIf: "linux_cubic_or_reno"}, false, "4-10", false},
		{"range without its upper end is a bound", &InitialWindow{Segments: 4, Verdict: VerdictRange},
			IWReading{Verdict: VerdictRange, Segments: n(4)}, true, "≥ 4", false},
		{"lower bound", &InitialWindow{Segments: 3, Verdict: VerdictLowerBound}, IWReading{Verdict: VerdictLowerBound, Segments: n(3)}, true, "≥ 3", false},
		{"receive window", &InitialWindow{Segments: 7, Verdict: VerdictRwndLimited}, IWReading{Verdict: VerdictRwndLimited, Segments: n(7)}, true, "≥ 7", false},
		{"ambiguous has no number", &InitialWindow{Segments: 9, Verdict: VerdictAmbiguous}, IWReading{Verdict: VerdictAmbiguous}, false, "", false},
		{"none has no number", &InitialWindow{Verdict: VerdictNone}, IWReading{Verdict: VerdictNone}, false, "", false},
		{"an unknown verdict has no number", &InitialWindow{Segments: 5, Verdict: "guess"}, IWReading{Verdict: "guess"}, false, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Summary(&Connection{InitialWindow: c.iw}).IW
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("reading %+v, want %+v", got, c.want)
			}
			if got.IsBound() != c.bound || got.Text() != c.text {
				t.Errorf("bound %v text %q, want %v %q", got.IsBound(), got.Text(), c.bound, c.text)
			}
			if v, ok := got.Exact(); ok != c.exact || (ok && v != *c.want.Segments) {
				t.Errorf("Exact() = %d, %v", v, ok)
			}
		})
	}
}

// TestIWReadingTextIsConservative: a number stored under a verdict that is not
// exact (as rows written by other versions may hold) is read as a bound.
func TestIWReadingTextIsConservative(t *testing.T) {
	five := 5
	r := IWReading{Verdict: "guess", Segments: &five}
	if !r.IsBound() || r.Text() != "≥ 5" {
		t.Errorf("bound %v, text %q", r.IsBound(), r.Text())
	}
	if _, ok := r.Exact(); ok {
		t.Error("an unknown verdict is not exact")
	}
}

func TestSummaryValues(t *testing.T) {
	rtt, tlsMs := 40.5, 81.0
	n := func(v int) *int { return &v }
	f := func(v float64) *float64 { return &v }
	full := Connection{
		HandshakeRTTMs: &rtt, MSS: 1448,
		TLS:        &TLS{ServerFlightBytes: 4100},
		Rounds:     []Round{{Index: 1, Phase: PhaseTLS, Bytes: 4100}, {Index: 2, Phase: PhaseHTTP, Bytes: 14480}, {Index: 3, Phase: PhaseHTTP, Bytes: 28960}},
		RoundTrips: RoundTrips{TCP: 1, TLS: 1, HTTP: 2, Total: 4},
		ClientTiming: &ClientTiming{URL: "https://a.example/", Protocol: "HTTP/2", Status: 200, ConnectMs: 40.9, TLSMs: &tlsMs,
			FirstByteAtMs: 130, LastByteAtMs: 210, BodyBytes: 43000},
	}
	body := int64(43000)
	for _, c := range []struct {
		name string
		conn Connection
		want SummaryRow
	}{
		{"a whole page load", full, SummaryRow{URL: "https://a.example/", HandshakeRTTMs: f(40.5), MSS: n(1448), FirstRoundBytes: n(14480),
			TLSFlightBytes: n(4100), TLSRoundTrips: n(1), RoundTrips: n(4), Protocol: "HTTP/2", ConnectMs: f(40.9), TLSMs: f(81),
			Status: n(200), BodyBytes: &body, FirstByteMs: f(130), LastByteMs: f(210)}},
		{"no response", Connection{HandshakeRTTMs: &rtt, RoundTrips: RoundTrips{TCP: 1, Total: 1},
			ClientTiming: &ClientTiming{URL: "http://b.example/", Protocol: "HTTP/1.1"}},
			SummaryRow{URL: "http://b.example/", HandshakeRTTMs: f(40.5), TLSRoundTrips: n(0), RoundTrips: n(1), Protocol: "HTTP/1.1"}},
		{"nothing seen", Connection{}, SummaryRow{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Summary(&c.conn); !reflect.DeepEqual(got, c.want) {
				t.Errorf("\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}
