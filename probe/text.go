package probe

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/internal/texttable"
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
	tb := texttable.New("  ", texttable.L("step"), texttable.R("at ms"), texttable.R("took ms"), texttable.R("round trips"), texttable.L("detail"))
	if t.DNSMs != nil {
		tb.Row("DNS", ms1(*t.DNSMs), ms1(*t.DNSMs))
	} else {
		tb.Row("DNS", "-", "-", "", "no lookup (address given)")
	}
	tb.Row("TCP connect", ms1(t.ConnectAtMs), ms1(t.ConnectMs), strconv.Itoa(c.RoundTrips.TCP))
	if t.TLSMs != nil && t.TLSAtMs != nil {
		detail := ""
		if c.TLS != nil {
			detail = fmt.Sprintf("server flight %s in %s", report.Size(int64(c.TLS.ServerFlightBytes)), plural(c.TLS.ServerFlightSegments, "segment", "segments"))
		}
		if t.ChainBytes > 0 {
			detail += fmt.Sprintf("; certificate chain %s", report.Size(int64(t.ChainBytes)))
		}
		tb.Row("TLS handshake", ms1(*t.TLSAtMs), ms1(*t.TLSMs), strconv.Itoa(c.RoundTrips.TLS), detail)
	}
	tb.Row("first byte", ms1(t.FirstByteAtMs), ms1(t.FirstByteAtMs-t.RequestSentMs), "", "after the request was sent")
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
		end := RoundEnd(r.Limit)
		if r.WindowFull {
			end += ", window full"
		}
		tb.Row(fmt.Sprintf("data round %d", dataIndex), ms1(synAtMs+r.StartMs), ms1(r.EndMs-r.StartMs), "1",
			fmt.Sprintf("%s (%s)%s, %s", plural(r.Segments, "segment", "segments"), report.Size(int64(r.Bytes)), growth, end))
	}
	tb.Row("last byte", ms1(t.LastByteAtMs))
	tb.Row("total", ms1(t.LastByteAtMs), "", strconv.Itoa(c.RoundTrips.Total),
		fmt.Sprintf("%d TCP + %d TLS + %d data", c.RoundTrips.TCP, c.RoundTrips.TLS, c.RoundTrips.HTTP))
	ew.Printf("%s", tb.String())
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

// ms1 writes milliseconds with one decimal.
func ms1(ms float64) string { return strconv.FormatFloat(ms, 'f', 1, 64) }

// RoundEnd says in words why a round ended, its limit's name in brackets.
func RoundEnd(limit string) string {
	switch limit {
	case report.LimitCwnd:
		return "cut by the congestion window (cwnd)"
	case report.LimitRwnd:
		return "cut by the receive window (rwnd)"
	case report.LimitApp:
		return "the server had nothing more yet (app)"
	case report.LimitLoss:
		return "with a retransmission (loss)"
	case report.LimitEnd:
		return "the response ended (end)"
	case report.LimitRate:
		return "held by the link's rate (rate)"
	case report.LimitIncomplete:
		return "the capture ends inside it (incomplete)"
	case report.LimitAmplification:
		return "cut by the amplification limit (amplification)"
	case report.LimitPacing:
		return "still pacing when the acknowledgement came (pacing)"
	}
	return "ended by " + limit
}
