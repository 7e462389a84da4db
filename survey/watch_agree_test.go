package survey

import (
	"fmt"
	"testing"
	"time"

	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/watch"
)

// TestSurveyAndWatchAgree: for the same page load, the row survey shows and the
// row watch stores carry the same values (both come from report.Summary). They
// used to disagree on an ambiguous window, which watch kept as a number.
func TestSurveyAndWatchAgree(t *testing.T) {
	rtt, tlsMs := 52.5, 104.0
	const url = "https://a.example/"
	timing := func(status int) *report.ClientTiming {
		return &report.ClientTiming{Run: 1, Hop: 1, URL: url, Protocol: "HTTP/2", Status: status, TLSMs: &tlsMs,
			FirstByteAtMs: 160, LastByteAtMs: 270, BodyBytes: 52000}
	}
	rounds := []report.Round{{Index: 1, Phase: report.PhaseTLS, Bytes: 4200}, {Index: 2, Phase: report.PhaseHTTP, Bytes: 14480}}
	for _, c := range []struct {
		name string
		conn report.Connection
	}{
		{"exact", report.Connection{HandshakeRTTMs: &rtt, Rounds: rounds, RoundTrips: report.RoundTrips{TCP: 1, TLS: 1, HTTP: 3, Total: 5},
			InitialWindow: &report.InitialWindow{Segments: 10, Verdict: report.VerdictExact}, ClientTiming: timing(200)}},
		{"range", report.Connection{HandshakeRTTMs: &rtt, Rounds: rounds, RoundTrips: report.RoundTrips{Total: 5},
			InitialWindow: &report.InitialWindow{Segments: 4, SegmentsMax: 10, Verdict: report.VerdictRange, ExactIf: "linux_cubic_or_reno"}, ClientTiming: timing(200)}},
		{"lower bound", report.Connection{HandshakeRTTMs: &rtt, Rounds: rounds, RoundTrips: report.RoundTrips{Total: 4},
			InitialWindow: &report.InitialWindow{Segments: 3, Verdict: report.VerdictLowerBound}, ClientTiming: timing(200)}},
		{"ambiguous", report.Connection{HandshakeRTTMs: &rtt, Rounds: rounds, RoundTrips: report.RoundTrips{Total: 6},
			InitialWindow: &report.InitialWindow{Segments: 7, Verdict: report.VerdictAmbiguous}, ClientTiming: timing(200)}},
		{"none", report.Connection{HandshakeRTTMs: &rtt, RoundTrips: report.RoundTrips{TCP: 1, Total: 1},
			InitialWindow: &report.InitialWindow{Verdict: report.VerdictNone}, ClientTiming: timing(0)}},
		{"error status", report.Connection{HandshakeRTTMs: &rtt, Rounds: rounds, RoundTrips: report.RoundTrips{Total: 4},
			InitialWindow: &report.InitialWindow{Segments: 10, Verdict: report.VerdictExact}, ClientTiming: timing(503)}},
		{"nothing captured", report.Connection{ClientTiming: timing(200)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := &probe.Result{Report: &report.Report{Schema: report.Schema, Connections: []report.Connection{c.conn}}, Runs: [][]int{{0}}}
			w := watch.RowFromResult(time.Unix(1, 0), url, res, nil)
			var s Row
			s.URL = url
			fillPassive(&s, res)
			same := func(what string, a, b any) {
				if fmt.Sprint(deref(a)) != fmt.Sprint(deref(b)) {
					t.Errorf("%s: watch %v, survey %v", what, deref(a), deref(b))
				}
			}
			same("iw verdict", w.IW.Verdict, s.PassiveVerdict)
			same("iw segments", w.IW.Segments, s.PassiveIWSegments)
			same("iw segments max", w.IW.SegmentsMax, s.PassiveIWSegmentsMax)
			same("handshake rtt", w.HandshakeRTTMs, s.HandshakeRTTMs)
			same("round trips", w.RoundTrips, s.RoundTrips)
			same("status", w.Status, s.Status)
			same("body bytes", w.BodyBytes, s.BodyBytes)
			same("last byte", w.LastByteMs, s.LastByteMs)
			same("iw text", w.IW.Text(),
				report.IWReading{Verdict: s.PassiveVerdict, Segments: s.PassiveIWSegments, SegmentsMax: s.PassiveIWSegmentsMax}.Text())
			want := report.Summary(&c.conn)
			same("iw against report.Summary", w.IW.Segments, want.IW.Segments)
		})
	}
}

// deref shows a pointer's value, or <nil>.
func deref(v any) any {
	switch p := v.(type) {
	case *int:
		if p != nil {
			return *p
		}
	case *int64:
		if p != nil {
			return *p
		}
	case *float64:
		if p != nil {
			return *p
		}
	default:
		return v
	}
	return "<nil>"
}
