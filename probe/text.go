package probe

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/report"
)

// WriteText writes a probe's result for people: per connection a timeline (DNS,
// TCP, TLS, first byte, each data round with its window and limit, last byte),
// the initial-window verdict and the diagnoses; then the runs' summary.
func WriteText(w io.Writer, res *Result) error {
	ew := &report.ErrWriter{W: w}
	rep := res.Report
	for _, warn := range rep.Warnings {
		ew.Printf("warning: %s\n", textsafe.Escape(warn))
	}
	for run, hops := range res.Runs {
		if len(res.Runs) > 1 {
			ew.Printf("\n== run %d of %d\n", run+1, len(res.Runs))
		}
		for _, idx := range hops {
			ew.Printf("\n")
			writeConnection(ew, &rep.Connections[idx])
		}
	}
	if s := rep.Runs; s != nil {
		writeRunSummary(ew, s)
	}
	return ew.Err
}

func writeConnection(ew *report.ErrWriter, c *report.Connection) {
	t := c.ClientTiming
	if t == nil {
		t = &report.ClientTiming{}
	}
	head := fmt.Sprintf("%s → %d, %s", t.URL, t.Status, t.Protocol)
	if t.TLSVersion != "" {
		head += ", TLS " + t.TLSVersion
	}
	if t.Incomplete != "" {
		if t.ExpectedBodyBytes != nil {
			head += fmt.Sprintf(", incomplete: %d of %d body bytes, %s", t.BodyBytes, *t.ExpectedBodyBytes, t.Incomplete)
		} else {
			head += fmt.Sprintf(", incomplete: %d body bytes, %s", t.BodyBytes, t.Incomplete)
		}
	} else {
		head += fmt.Sprintf(", %s body", report.Size(t.BodyBytes))
	}
	if t.ContentEncoding != "" {
		head += " (" + t.ContentEncoding + ")"
	}
	if t.Location != "" {
		head += " → redirects to " + t.Location
	}
	ew.Printf("%s\n", textsafe.Escape(head)) // the URL and the server's headers
	facts := []string{fmt.Sprintf("%s from %s", c.Server, c.Client), fmt.Sprintf("MSS %d", c.MSS)}
	if c.HandshakeRTTMs != nil {
		facts = append(facts, fmt.Sprintf("RTT %.1f ms", *c.HandshakeRTTMs))
	}
	if c.Retransmission > 0 {
		facts = append(facts, plural(c.Retransmission, "retransmission", "retransmissions"))
	}
	ew.Printf("  %s\n\n", strings.Join(facts, ", "))

	// Rounds are timed from the SYN; the client's timeline from the request's start.
	synAtMs := t.ConnectAtMs - t.ConnectMs
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  step\tat ms\ttook ms\tround trips\tdetail\n")
	if t.DNSMs != nil {
		fmt.Fprintf(tw, "  DNS\t%.1f\t%.1f\t\t\n", *t.DNSMs, *t.DNSMs)
	} else {
		fmt.Fprintf(tw, "  DNS\t-\t-\t\tno lookup (address given)\n")
	}
	fmt.Fprintf(tw, "  TCP connect\t%.1f\t%.1f\t%d\t\n", t.ConnectAtMs, t.ConnectMs, c.RoundTrips.TCP)
	if t.TLSMs != nil && t.TLSAtMs != nil {
		detail := ""
		if c.TLS != nil {
			detail = fmt.Sprintf("server flight %s in %s", report.Size(int64(c.TLS.ServerFlightBytes)), plural(c.TLS.ServerFlightSegments, "segment", "segments"))
		}
		if t.ChainBytes > 0 {
			detail += fmt.Sprintf("; certificate chain %s", report.Size(int64(t.ChainBytes)))
		}
		fmt.Fprintf(tw, "  TLS handshake\t%.1f\t%.1f\t%d\t%s\n", *t.TLSAtMs, *t.TLSMs, c.RoundTrips.TLS, detail)
	}
	fmt.Fprintf(tw, "  first byte\t%.1f\t%.1f\t\tafter the request was sent\n", t.FirstByteAtMs, t.FirstByteAtMs-t.RequestSentMs)
	var prev, dataIndex int
	for _, r := range c.Rounds {
		if r.Phase == report.PhaseTLS {
			continue
		}
		growth := ""
		if prev > 0 {
			growth = fmt.Sprintf(", ×%.1f", float64(r.Segments)/float64(prev))
		}
		prev = r.Segments
		dataIndex++
		limit := r.Limit
		if r.WindowFull {
			limit += ", window full"
		}
		fmt.Fprintf(tw, "  data round %d\t%.1f\t%.1f\t1\t%s (%s)%s, ended by %s\n", dataIndex, synAtMs+r.StartMs, r.EndMs-r.StartMs,
			plural(r.Segments, "segment", "segments"), report.Size(int64(r.Bytes)), growth, limit)
	}
	fmt.Fprintf(tw, "  last byte\t%.1f\t\t\t\n", t.LastByteAtMs)
	fmt.Fprintf(tw, "  total\t%.1f\t\t%d\t%d TCP + %d TLS + %d data\n", t.LastByteAtMs, c.RoundTrips.Total, c.RoundTrips.TCP, c.RoundTrips.TLS, c.RoundTrips.HTTP)
	tw.Flush()
	ew.Printf("\n")
	if iw := c.InitialWindow; iw != nil {
		ew.Printf("  %s\n", iw.Sentence())
	}
	for _, n := range c.Notes {
		ew.Printf("  note: %s\n", n)
	}
	if len(c.Diagnoses) > 0 {
		ew.Printf("  What it cost:\n")
		for _, d := range c.Diagnoses {
			ew.Printf("    - %s", d.Text)
			if d.CostMs > 0 {
				ew.Printf(" (%.0f ms)", d.CostMs)
			}
			ew.Printf("\n")
		}
	}
}

func writeRunSummary(ew *report.ErrWriter, s *report.RunSummary) {
	ew.Printf("\nOver %d runs (fresh connections):\n", s.Runs)
	var readings []string
	for i, n := range s.IWSegments {
		v := s.IWVerdicts[i]
		switch v {
		case report.VerdictExact:
			readings = append(readings, fmt.Sprint(n))
		case report.VerdictLowerBound:
			readings = append(readings, fmt.Sprintf("≥%d", n))
		default:
			readings = append(readings, v)
		}
	}
	ew.Printf("  initial window (segments): %s\n", strings.Join(readings, ", "))
	ew.Printf("  min %d, median %g, mode %d, spread %d\n", s.IWMin, s.IWMedian, s.IWMode, s.IWSpread)
	for _, x := range []struct {
		name string
		s    report.Spread
	}{{"handshake RTT", s.HandshakeRTTMs}, {"first byte", s.FirstByteMs}, {"last byte", s.LastByteMs}} {
		if x.s.N > 0 {
			ew.Printf("  %s: min %.1f, median %.1f, max %.1f ms (stddev %.1f)\n", x.name, x.s.Min, x.s.Median, x.s.Max, x.s.Stddev)
		}
	}
	for _, n := range s.Notes {
		ew.Printf("  note: %s\n", n)
	}
}
