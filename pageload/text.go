package pageload

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/internal/texttable"
	"github.com/slowstart/slowstart/report"
)

// WriteText writes the page load for people: its connections, every request on
// its connection with its rounds, the critical path with what each step cost, what
// would save round trips, and whether the browser's timings agree with the
// capture's.
func WriteText(w io.Writer, p *Page) error {
	ew := &report.ErrWriter{W: w}
	who := "a browser"
	if p.Browser != "" {
		who = p.Browser
	}
	ew.Printf("Page %s, loaded by %s as a first visit\n", textsafe.Escape(p.URL), textsafe.Escape(who))
	var events []string
	for _, e := range []struct {
		name string
		ms   *float64
	}{{"first paint", p.FirstPaintMs}, {"first contentful paint", p.FirstContentfulPaintMs}, {"DOMContentLoaded", p.DOMContentLoadedMs}, {"load", p.LoadMs}} {
		if e.ms != nil {
			events = append(events, fmt.Sprintf("%s %.0f ms", e.name, *e.ms))
		}
	}
	if len(events) > 0 {
		ew.Printf("%s\n", strings.Join(events, ", "))
	}
	ew.Printf("%s on %s\n\n", plural(len(p.Requests), "request", "requests"), plural(len(p.Connections), "connection", "connections"))

	ew.Printf("Connections\n")
	tb := texttable.New("  ", texttable.R("#"), texttable.L("host"), texttable.L("server"), texttable.L("TLS"), texttable.L("ALPN"),
		texttable.R("RTT ms"), texttable.R("TLS RTs"), texttable.L("initial window"), texttable.R("rounds"), texttable.L("requests"))
	for _, c := range p.Connections {
		tlsVersion := c.TLSVersion
		if tlsVersion == "" {
			tlsVersion = "-"
		}
		rtt := "-"
		if c.HandshakeRTTMs != nil {
			rtt = fmt.Sprintf("%.1f", *c.HandshakeRTTMs)
		}
		requests := intList(c.Requests)
		if len(c.Requests) == 0 {
			requests = "none (opened ahead: a preconnect)"
		}
		tb.Row(strconv.Itoa(c.Connection), textsafe.Escape(c.Host), c.Server, tlsVersion, orDash(c.ALPN), rtt,
			strconv.Itoa(c.TLSRoundTrips), IWText(c.InitialWindow), strconv.Itoa(c.Rounds), requests)
	}
	ew.Printf("%s", tb.String())

	ew.Printf("\nRequests, each on its connection with the rounds its response arrived in\n")
	tb = texttable.New("  ", texttable.R("#"), texttable.L("conn"), texttable.L("type"), texttable.L("status"), texttable.R("bytes"),
		texttable.L("rounds"), texttable.R("start ms"), texttable.R("last byte ms"), texttable.L("first render"), texttable.L("URL"))
	for _, r := range p.Requests {
		conn := "-"
		if r.Connection > 0 {
			conn = strconv.Itoa(r.Connection)
			if r.NewConnection {
				conn += " new"
			}
		}
		last := "-"
		switch {
		case r.LastByteMs != nil:
			last = fmt.Sprintf("%.1f", *r.LastByteMs)
		case r.Browser.LastByteMs != nil:
			last = fmt.Sprintf("%.1f (browser)", *r.Browser.LastByteMs)
		}
		render := ""
		switch {
		case r.Critical:
			render = "critical"
		case r.Blocking:
			render = "waited"
		}
		status := strconv.Itoa(r.Status)
		if r.Browser.FromCache {
			status += " cache"
		}
		tb.Row(strconv.Itoa(r.Index), conn, orDash(r.Type), status, report.Size(r.Bytes),
			roundsText(r.Rounds), fmt.Sprintf("%.1f", r.StartMs), last, render, textsafe.Escape(shorten(r.URL, 70)))
	}
	ew.Printf("%s", tb.String())

	cp := p.CriticalPath
	ew.Printf("\nCritical path to the first render: %s, %.0f ms", roundTripsText(cp.RoundTrips), cp.Ms)
	if cp.RTTMs > 0 {
		ew.Printf(" (RTT %.1f ms)", cp.RTTMs)
	}
	ew.Printf("\n")
	byIndex := map[int]*PageRequest{}
	for i := range p.Requests {
		byIndex[p.Requests[i].Index] = &p.Requests[i]
	}
	for i, s := range cp.Steps {
		r := byIndex[s.Request]
		var parts []string
		if s.HandshakeRoundTrips > 0 {
			parts = append(parts, fmt.Sprintf("a new connection (#%d): %s of handshake", s.Connection, roundTripsText(s.HandshakeRoundTrips)))
		}
		switch {
		case s.DataRoundTrips > 0 && s.Partial:
			parts = append(parts, fmt.Sprintf("%s (%s on #%d) until the next step was requested", plural(s.DataRoundTrips, "round", "rounds"), roundsName(s.FirstRound, s.LastRound), s.Connection))
		case s.DataRoundTrips > 0:
			parts = append(parts, fmt.Sprintf("%s (%s on #%d)", plural(s.DataRoundTrips, "round", "rounds"), roundsName(s.FirstRound, s.LastRound), s.Connection))
		case s.Connection > 0:
			parts = append(parts, "no round of its own (it came in rounds already counted)")
		}
		browser := ""
		if s.BrowserMs >= 1 {
			browser = fmt.Sprintf(", asked for %.0f ms after", s.BrowserMs)
		}
		ew.Printf("  %d. %s %s: %s = %s (%.0f → %.0f ms%s)\n", i+1, s.Why, textsafe.Escape(shorten(r.Path, 60)), strings.Join(parts, " + "),
			roundTripsText(s.RoundTrips), s.StartMs, s.EndMs, browser)
	}
	for _, n := range cp.Notes {
		ew.Printf("  (%s)\n", n)
	}
	if pr := cp.Predicted; pr != nil {
		rng := ""
		if pr.Min != pr.Max {
			rng = fmt.Sprintf(", %d to %d as the responses' sizes move a little: the page sits on a round's boundary", pr.Min, pr.Max)
		}
		ew.Printf("  The model predicts %s (%.0f ms)%s for this page.\n", roundTripsText(pr.RoundTrips), pr.Ms, rng)
	}
	if len(cp.Savings) > 0 {
		ew.Printf("\nWhat would save round trips on it:\n")
		for _, s := range cp.Savings {
			ew.Printf("  - %s (%s, %.0f ms)\n", textsafe.Escape(s.Text), roundTripsText(s.CostRoundTrips), s.CostMs)
		}
	}
	a := p.Agreement
	switch {
	case a.Compared == 0:
		ew.Printf("\nThe browser's timings could not be compared with the capture's (no request was decrypted).\n")
	case a.Agree:
		ew.Printf("\nThe browser's timings agree with the capture's within %.1f ms (%d compared, tolerance %.0f ms).\n", a.MaxDiffMs, a.Compared, a.ToleranceMs)
	default:
		ew.Printf("\nThe browser's timings differ from the capture's by up to %.1f ms (%d of %d beyond %.0f ms):\n", a.MaxDiffMs, len(a.Differences), a.Compared, a.ToleranceMs)
		for i, d := range a.Differences {
			if i == 5 {
				ew.Printf("  ...\n")
				break
			}
			ew.Printf("  request %d %s: browser %.1f ms, capture %.1f ms\n", d.Request, strings.ReplaceAll(d.What, "_", " "), d.BrowserMs, d.CaptureMs)
		}
	}
	for _, w := range p.Warnings {
		ew.Printf("warning: %s\n", textsafe.Escape(w))
	}
	return ew.Err
}

// IWText says an initial-window reading in a few words (report.InitialWindow.Label),
// "-" when there is none.
func IWText(iw *report.InitialWindow) string {
	if iw == nil {
		return "-"
	}
	return iw.Label()
}

func roundsText(rounds []int) string {
	if len(rounds) == 0 {
		return "-"
	}
	lo, hi := rounds[0], rounds[0]
	contiguous := true
	for i, r := range rounds {
		lo, hi = min(lo, r), max(hi, r)
		if i > 0 && r != rounds[i-1]+1 {
			contiguous = false
		}
	}
	if contiguous {
		return span(lo, hi)
	}
	return intList(rounds)
}

// roundsName is "round 3" or "rounds 3-5".
func roundsName(a, b int) string {
	if a == b {
		return fmt.Sprintf("round %d", a)
	}
	return fmt.Sprintf("rounds %d-%d", a, b)
}

func span(a, b int) string {
	if a == b {
		return strconv.Itoa(a)
	}
	return fmt.Sprintf("%d-%d", a, b)
}

func intList(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
