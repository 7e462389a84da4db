package report

import "fmt"

// IWReading is an initial-window reading as a summary row carries it: a number
// only where the packets give one, and that number marked for what it is.
type IWReading struct {
	// Verdict is the InitialWindow's verdict; "" when the connection had no reading.
	Verdict string
	// Segments is the window (exact), the lower end of a range, or a lower bound
	// (lower_bound, rwnd_limited); nil when the verdict gives no number
	// (ambiguous, none, a verdict this version does not know).
	Segments *int
	// SegmentsMax is the upper end of a range; nil otherwise.
	SegmentsMax *int
	// ExactIf names, for a range, the congestion control under which the window
	// is exactly SegmentsMax (InitialWindow.ExactIf).
	ExactIf string
}

// IsBound reports whether Segments is only a lower bound of the window: the
// verdicts lower_bound and rwnd_limited, a range that lost its upper end, and any
// number under a verdict other than exact or range (read conservatively).
func (r IWReading) IsBound() bool {
	switch {
	case r.Segments == nil, r.Verdict == VerdictExact:
		return false
	case r.Verdict == VerdictRange:
		return r.SegmentsMax == nil
	}
	return true
}

// Exact returns the window when the reading is exact.
func (r IWReading) Exact() (int, bool) {
	if r.Verdict != VerdictExact || r.Segments == nil {
		return 0, false
	}
	return *r.Segments, true
}

// Text is the reading for a table cell: "10" (exact), "4-10" (range), "≥ 10" (a
// bound), or "" when there is no number.
func (r IWReading) Text() string {
	switch {
	case r.Segments == nil:
		return ""
	case r.IsBound():
		return fmt.Sprintf("≥ %d", *r.Segments)
	}
	segmentsMax := 0
	if r.SegmentsMax != nil {
		segmentsMax = *r.SegmentsMax
	}
	return shortText(r.Verdict, *r.Segments, segmentsMax)
}

// SummaryRow is one connection of a Report as one row of values: what watch
// stores for each probe, survey shows for each page load and compare compares.
// A nil field is a value the connection did not give. It is a projection for
// those callers, not part of the Report's JSON.
type SummaryRow struct {
	// URL is the URL the client fetched over the connection; "" for a capture.
	URL string
	IW  IWReading
	// HandshakeRTTMs is the TCP handshake's round trip.
	HandshakeRTTMs *float64
	// MSS is the server's segment size.
	MSS *int
	// FirstRoundBytes are the bytes of the response's first data round (after the
	// TLS handshake over https); TLSFlightBytes those of the server's first TLS
	// handshake flight.
	FirstRoundBytes *int
	TLSFlightBytes  *int
	// TLSRoundTrips and RoundTrips count the connection's round trips (TLS, and
	// TCP + TLS + HTTP); nil when the capture saw neither a handshake nor a round.
	TLSRoundTrips *int
	RoundTrips    *int
	// Protocol, ConnectMs (the TCP handshake as the client timed it) and TLSMs
	// come from the client's timing (ClientTiming).
	Protocol  string
	ConnectMs *float64
	TLSMs     *float64
	// Status, BodyBytes, FirstByteMs and LastByteMs describe the response; nil
	// when none came (status 0 and no time). The times count from the request's
	// start.
	Status      *int
	BodyBytes   *int64
	FirstByteMs *float64
	LastByteMs  *float64
}

// Summary projects a connection into its SummaryRow. The initial window keeps
// what its verdict allows: exact gives the window, range both ends, lower_bound
// and rwnd_limited a bound (IWReading.IsBound), ambiguous and none no number.
func Summary(c *Connection) SummaryRow {
	var row SummaryRow
	if iw := c.InitialWindow; iw != nil {
		row.IW.Verdict = iw.Verdict
		switch iw.Verdict {
		case VerdictExact, VerdictLowerBound, VerdictRwndLimited:
			row.IW.Segments = ptr(iw.Segments)
		case VerdictRange:
			row.IW.Segments = ptr(iw.Segments)
			if iw.SegmentsMax > 0 {
				row.IW.SegmentsMax = ptr(iw.SegmentsMax)
				row.IW.ExactIf = iw.ExactIf
			}
		}
	}
	if c.HandshakeRTTMs != nil {
		row.HandshakeRTTMs = ptr(*c.HandshakeRTTMs)
	}
	if c.MSS > 0 {
		row.MSS = ptr(c.MSS)
	}
	for _, r := range c.Rounds {
		if r.Phase != PhaseTLS {
			row.FirstRoundBytes = ptr(r.Bytes)
			break
		}
	}
	if c.TLS != nil && c.TLS.ServerFlightBytes > 0 {
		row.TLSFlightBytes = ptr(c.TLS.ServerFlightBytes)
	}
	if len(c.Rounds) > 0 || c.HandshakeRTTMs != nil {
		row.TLSRoundTrips, row.RoundTrips = ptr(c.RoundTrips.TLS), ptr(c.RoundTrips.Total)
	}
	if ct := c.ClientTiming; ct != nil {
		row.URL, row.Protocol = ct.URL, ct.Protocol
		if ct.ConnectMs > 0 {
			row.ConnectMs = ptr(ct.ConnectMs)
		}
		if ct.TLSMs != nil {
			row.TLSMs = ptr(*ct.TLSMs)
		}
		// A fetch that failed before the response has no status, no bytes and no
		// first or last byte; a time recorded without a status is kept.
		if ct.Status != 0 {
			row.Status, row.BodyBytes = ptr(ct.Status), ptr(ct.BodyBytes)
		}
		if ct.Status != 0 || ct.FirstByteAtMs > 0 {
			row.FirstByteMs = ptr(ct.FirstByteAtMs)
		}
		if ct.Status != 0 || ct.LastByteAtMs > 0 {
			row.LastByteMs = ptr(ct.LastByteAtMs)
		}
	}
	return row
}

func ptr[T any](v T) *T { return &v }
