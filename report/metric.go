package report

import "slices"

// This file holds the one table of what a summary row carries (SummaryColumns)
// and of the quantities the verbs compare, store and chart (Metrics): a new
// value of a connection gets a column here, and a row that carries it, a
// comparison that takes it or a store that keeps it reads it through the table
// instead of naming the field again.

// SummaryColumn is one value of a SummaryRow as rows, files and stores carry it:
// its key (the JSON key, CSV and SQLite column of the rows that carry it under
// this name) and where it lives in the row.
type SummaryColumn struct {
	Name string
	// Field points at the value in row: a **float64, **int or **int64 (nil: no
	// value) or a *string ("": no value).
	Field func(row *SummaryRow) any
}

// SummaryColumns are the values of a SummaryRow, by the names rows give them.
var SummaryColumns = slices.Concat(
	// Texts: the URL fetched and the protocol spoken.
	[]SummaryColumn{
		{"url", func(r *SummaryRow) any { return &r.URL }},
		{"protocol", func(r *SummaryRow) any { return &r.Protocol }},
	},
	// The initial window's reading.
	[]SummaryColumn{
		{"iw_verdict", func(r *SummaryRow) any { return &r.IW.Verdict }},
		{"iw_segments", func(r *SummaryRow) any { return &r.IW.Segments }},
		{"iw_segments_max", func(r *SummaryRow) any { return &r.IW.SegmentsMax }},
		{"iw_exact_if", func(r *SummaryRow) any { return &r.IW.ExactIf }},
	},
	// Times, in milliseconds.
	[]SummaryColumn{
		{"handshake_rtt_ms", func(r *SummaryRow) any { return &r.HandshakeRTTMs }},
		{"connect_ms", func(r *SummaryRow) any { return &r.ConnectMs }},
		{"tls_ms", func(r *SummaryRow) any { return &r.TLSMs }},
		{"first_byte_ms", func(r *SummaryRow) any { return &r.FirstByteMs }},
		{"last_byte_ms", func(r *SummaryRow) any { return &r.LastByteMs }},
	},
	// Sizes, in bytes.
	[]SummaryColumn{
		{"mss", func(r *SummaryRow) any { return &r.MSS }},
		{"first_round_bytes", func(r *SummaryRow) any { return &r.FirstRoundBytes }},
		{"tls_flight_bytes", func(r *SummaryRow) any { return &r.TLSFlightBytes }},
		{"body_bytes", func(r *SummaryRow) any { return &r.BodyBytes }},
	},
	// Counts: round trips and the response's status.
	[]SummaryColumn{
		{"tls_round_trips", func(r *SummaryRow) any { return &r.TLSRoundTrips }},
		{"round_trips", func(r *SummaryRow) any { return &r.RoundTrips }},
		{"status", func(r *SummaryRow) any { return &r.Status }},
	},
)

// SummaryColumnNamed returns the column of that name.
func SummaryColumnNamed(name string) (SummaryColumn, bool) {
	for _, c := range SummaryColumns {
		if c.Name == name {
			return c, true
		}
	}
	return SummaryColumn{}, false
}

// Better says which way a metric improves, for a comparison's verdict.
type Better int

const (
	// Neither: a change is a difference, not in itself better or worse (a
	// count that moves with the page's size, a window, a number of bytes).
	Neither Better = iota
	// Lower: less is better whatever else changed, as a time a user waits.
	Lower
)

// Metric is a quantity the verbs compare (compare --metric), store (watch)
// and chart (watch's histograms): its name, unit and direction, and how a
// summary row gives it.
type Metric struct {
	// Name is what --metric takes and the comparisons print: "last_byte".
	Name string
	// Column is the key of the value in rows and files: the SummaryColumn it
	// reads from a summary row, or the lab's trial rows' and field's own key.
	Column string
	Unit   string // "ms", "round trips", "segments", "bytes"
	About  string
	Better Better
	// Value reads the metric from a summary row; ok is false when the row has
	// none. Nil for a metric no summary row carries (the lab's flow completion
	// times, field's per-response values).
	Value func(row SummaryRow) (v float64, ok bool)
}

// Metrics are every metric of the verbs. compare names, for each kind of input,
// those it offers (compare.ResolveMetric).
var Metrics = slices.Concat(
	// Times a user waits, from the client's timing and the packets.
	[]Metric{
		timeMetric("last_byte", "last_byte_ms", "the last body byte, from the start of the request (curl's time_total)", true, func(r *SummaryRow) *float64 { return r.LastByteMs }),
		timeMetric("first_byte", "first_byte_ms", "the first response byte, from the start of the request (curl's time_starttransfer)", true, func(r *SummaryRow) *float64 { return r.FirstByteMs }),
		timeMetric("connect", "connect_ms", "the TCP handshake's duration, as the client timed it", true, func(r *SummaryRow) *float64 { return r.ConnectMs }),
		timeMetric("tls", "tls_ms", "the TLS handshake's duration", false, func(r *SummaryRow) *float64 { return r.TLSMs }),
		timeMetric("handshake_rtt", "handshake_rtt_ms", "the TCP handshake's round-trip time, from the packets", false, func(r *SummaryRow) *float64 { return r.HandshakeRTTMs }),
	},
	// Counts, which move with the page as much as with the path.
	[]Metric{
		{Name: "rounds", Column: "round_trips", Unit: "round trips", About: "the connection's round trips in all (TCP + TLS + HTTP)",
			Value: func(r SummaryRow) (float64, bool) { return positiveInt(r.RoundTrips) }},
		{Name: "iw", Column: "iw_segments", Unit: "segments", About: "the server's initial window, when the reading is exact (a bound or a range is no value to take a median of)",
			Value: func(r SummaryRow) (float64, bool) { iw, ok := r.IW.Exact(); return float64(iw), ok && iw > 0 }},
		{Name: "bytes", Column: "body_bytes", Unit: "bytes", About: "the response body's bytes as received (compressed if it was)",
			Value: func(r SummaryRow) (float64, bool) { return presentInt64(r.BodyBytes) }},
	},
	// Those no summary row carries: the lab's trials' and field's connections' own.
	[]Metric{
		{"fct_user", "fct_user_ms", "ms", "flow completion time from the connect to the last byte, as a user waits (the lab's trials)", Lower, nil},
		{"fct_paper", "fct_paper_ms", "ms", "flow completion time from the first response byte to the last (Dukkipati et al.; the lab's trials)", Lower, nil},
		{"round_trips", "round_trips", "round trips", "round trips per first response, responses seen to their end (field)", Neither, nil},
		{"response", "response_ms", "ms", "from the request's arrival at the server to the ACK of the response's last byte (field)", Lower, nil},
		{"round1_bytes", "round1_bytes", "bytes", "bytes the server sent in round 1 (field)", Neither, nil},
	},
)

// timeMetric is a time in milliseconds, where less is better, read from the
// field at; 0 is no value when positiveOnly (a time from the request's start
// is never 0; a handshake's duration may round to it).
func timeMetric(name, column, about string, positiveOnly bool, at func(*SummaryRow) *float64) Metric {
	return Metric{Name: name, Column: column, Unit: "ms", About: about, Better: Lower, Value: func(r SummaryRow) (float64, bool) {
		if positiveOnly {
			return positive(at(&r))
		}
		return present(at(&r))
	}}
}

// MetricNamed returns the metric of that name.
func MetricNamed(name string) (Metric, bool) {
	for _, m := range Metrics {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// positive reads a time that counts from the request's start: 0 is no value.
func positive(v *float64) (float64, bool) {
	if v == nil || *v <= 0 {
		return 0, false
	}
	return *v, true
}

func present(v *float64) (float64, bool) {
	if v == nil {
		return 0, false
	}
	return *v, true
}

func presentInt64(v *int64) (float64, bool) {
	if v == nil {
		return 0, false
	}
	return float64(*v), true
}

func positiveInt(v *int) (float64, bool) {
	if v == nil || *v == 0 {
		return 0, false
	}
	return float64(*v), true
}
