package report

import "testing"

// TestMetricsReadTheirColumn: every metric a summary row carries reads the
// value of its column (SummaryColumns), and no value where the row has none
// or where the value is no measurement (a time from the request's start of
// 0, a bound or a range of the initial window).
func TestMetricsReadTheirColumn(t *testing.T) {
	p := func(v float64) *float64 { return &v }
	n := func(v int) *int { return &v }
	body := int64(5000)
	row := SummaryRow{LastByteMs: p(400), FirstByteMs: p(160), ConnectMs: p(40.5), TLSMs: p(0), HandshakeRTTMs: p(40.25),
		RoundTrips: n(6), BodyBytes: &body, IW: IWReading{Verdict: VerdictExact, Segments: n(10)}}
	want := map[string]float64{"last_byte": 400, "first_byte": 160, "connect": 40.5, "tls": 0, "handshake_rtt": 40.25,
		"rounds": 6, "iw": 10, "bytes": 5000}
	names := map[string]bool{}
	for _, m := range Metrics {
		if names[m.Name] {
			t.Errorf("metric %s twice", m.Name)
		}
		names[m.Name] = true
		if m.Value == nil {
			if _, ok := want[m.Name]; ok {
				t.Errorf("%s reads nothing from a summary row", m.Name)
			}
			continue
		}
		if _, ok := SummaryColumnNamed(m.Column); !ok {
			t.Errorf("%s's column %s is not a column of the summary row", m.Name, m.Column)
		}
		if v, ok := m.Value(row); !ok || v != want[m.Name] {
			t.Errorf("%s = %v (%v), want %v", m.Name, v, ok, want[m.Name])
		}
		if v, ok := m.Value(SummaryRow{}); ok {
			t.Errorf("%s of an empty row = %v, want no value", m.Name, v)
		}
	}
	if len(names) != len(want)+5 {
		t.Errorf("%d metrics, want the %d of a summary row and the lab's and field's 5", len(names), len(want))
	}
	for name, r := range map[string]SummaryRow{
		"last_byte": {LastByteMs: p(0)},
		"iw":        {IW: IWReading{Verdict: VerdictLowerBound, Segments: n(10)}},
		"rounds":    {RoundTrips: n(0)},
	} {
		m, _ := MetricNamed(name)
		if v, ok := m.Value(r); ok {
			t.Errorf("%s of %+v = %v, want no value", name, r, v)
		}
	}
}

// TestSummaryColumnsPointIntoTheRow: each column points at a field of its own.
func TestSummaryColumnsPointIntoTheRow(t *testing.T) {
	var row SummaryRow
	seen := map[any]string{}
	for _, c := range SummaryColumns {
		ptr := c.Field(&row)
		if other, dup := seen[ptr]; dup {
			t.Errorf("%s and %s point at the same field", c.Name, other)
		}
		seen[ptr] = c.Name
	}
}
