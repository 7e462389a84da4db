package probe

import (
	"fmt"
	"mime"
	"strings"

	"github.com/slowstart/slowstart/model"
	"github.com/slowstart/slowstart/report"
)

// Diagnosis kinds.
const (
	DiagnosisCertificateChain = "certificate_chain" // the TLS flight did not fit in the IW
	DiagnosisInitialWindow    = "initial_window"    // a larger IW would save data rounds
	DiagnosisTLSVersion       = "tls_version"       // TLS 1.2's handshake takes one round trip more than 1.3's
	DiagnosisRedirect         = "redirect"          // a redirect costs a connection of its own
	DiagnosisReceiveWindow    = "receive_window"    // the client's receive window held rounds back
	DiagnosisLoss             = "loss"              // retransmissions cost rounds
	DiagnosisServerPause      = "server_pause"      // the server had room but nothing to send
	DiagnosisCompression      = "compression"       // a text body sent uncompressed
	DiagnosisLocalPath        = "local_path"        // loopback or a sub-millisecond path: rounds say nothing of a real one
)

// A path this short (or a segment this large, loopback's 64 KB MTU) is local: its
// rounds and segment counts say nothing about a real network path.
const (
	localPathMaxRTTMs = 1.0
	localPathMinMSS   = 9000
)

// IsLocalPath reports whether the connection ran over loopback or a path under a
// millisecond, where window advice does not apply.
func IsLocalPath(c *report.Connection) bool {
	rtt := rttMs(c)
	return (rtt > 0 && rtt < localPathMaxRTTMs) || c.MSS > localPathMinMSS
}

// Alternative initial windows the diagnoses compare with: the RFC 6928 default
// and what large CDNs use.
var alternativeIWs = [...]int{10, 32}

// assumedTextCompressionRatio is how much smaller a text body gets compressed; a
// typical figure for HTML, CSS and JavaScript with gzip (brotli does better).
const assumedTextCompressionRatio = 3

// addDiagnoses attaches diagnoses to every connection of res.
func addDiagnoses(res *Result, o *Options) {
	conns := res.Report.Connections
	for _, hops := range res.Runs {
		for i, idx := range hops {
			c := &conns[idx]
			c.Diagnoses = diagnose(c, diagnosisContext{
				redirect:           i < len(hops)-1,
				offeredCompression: !o.NoCompress,
				tlsVersionFree:     o.TLSVersion == "",
			})
		}
	}
}

// diagnosisContext is what the diagnoses need to know besides the connection.
type diagnosisContext struct {
	redirect           bool // the connection answered with a redirect the probe followed
	offeredCompression bool // the request offered compressed encodings
	tlsVersionFree     bool // the TLS version was negotiated, not imposed
}

// rttMs is the connection's round-trip time for costs in milliseconds.
func rttMs(c *report.Connection) float64 {
	if c.HandshakeRTTMs != nil {
		return *c.HandshakeRTTMs
	}
	return c.MinRTTMs
}

// dataRounds counts the rounds that carried the response (not the TLS handshake)
// and their bytes.
func dataRounds(c *report.Connection) (rounds int, bytes int64) {
	for _, r := range c.Rounds {
		if r.Phase != report.PhaseTLS {
			rounds++
			bytes += int64(r.Bytes)
		}
	}
	return rounds, bytes
}

// RoundsNeeded is the number of round trips slow start needs to deliver size bytes
// starting from a window of iw segments of mss bytes that doubles every round, with
// no receive-window limit and no loss (model.RoundsNeeded).
func RoundsNeeded(sizeBytes int64, iw, mss int) int { return model.RoundsNeeded(sizeBytes, iw, mss) }

func diagnose(c *report.Connection, ctx diagnosisContext) []report.Diagnosis {
	out := []report.Diagnosis{}
	rtt := rttMs(c)
	cost := func(kind, text string, rts int) report.Diagnosis {
		return report.Diagnosis{Kind: kind, Text: text, CostRoundTrips: rts, CostMs: round1(float64(rts) * rtt)}
	}
	timing := c.ClientTiming
	if ctx.redirect && timing != nil {
		rts := c.RoundTrips.Total
		d := cost(DiagnosisRedirect, fmt.Sprintf("%s redirects to %s: a connection of its own before the page, %s", timing.URL, timing.Location, roundTripsText(rts)), rts)
		d.CostMs = round1(timing.LastByteAtMs)
		out = append(out, d)
	}

	if IsLocalPath(c) {
		// No advice about windows or round trips applies here.
		return append(out, report.Diagnosis{Kind: DiagnosisLocalPath, Text: fmt.Sprintf(
			"this path is local (round trip %.3f ms, segments of %d bytes): its rounds say nothing about a real network path, and no initcwnd change would matter on it; probe the site over the network, or emulate a path with slowstart lab", rtt, c.MSS)})
	}

	iw := c.InitialWindow
	if c.TLS != nil {
		base := 2
		if c.TLS.Version == "1.3" {
			base = 1
		}
		if extra := c.TLS.HandshakeRoundTrips - base; extra > 0 && c.TLS.InitialWindow != nil && c.TLS.InitialWindow.Verdict == report.VerdictExact {
			chain := c.TLS.ServerFlightBytes
			what := fmt.Sprintf("the server's TLS flight (%s)", report.Size(int64(chain)))
			if timing != nil && timing.ChainBytes > 0 {
				what = fmt.Sprintf("the certificate chain (%s)", report.Size(int64(timing.ChainBytes)))
			}
			w := c.TLS.InitialWindow
			out = append(out, cost(DiagnosisCertificateChain, fmt.Sprintf("%s is larger than the initial window (%d segments, %s): +%s; a shorter chain (fewer intermediates, ECDSA keys) or a larger initial window saves it",
				what, w.Segments, report.Size(int64(w.Bytes)), roundTripsText(extra)), extra))
		}
		if ctx.tlsVersionFree && c.TLS.Version == "1.2" {
			out = append(out, cost(DiagnosisTLSVersion, "the server negotiated TLS 1.2, whose full handshake takes 2 round trips; TLS 1.3 takes 1: +1 round trip", 1))
		}
	}

	rounds, bytes := dataRounds(c)
	mss := c.MSS
	if rounds > 0 && !ctx.redirect && iw != nil && iw.Segments > 0 && mss > 0 {
		current := iw.Segments
		var better []string
		best := rounds
		for _, alt := range alternativeIWs {
			if alt <= current {
				continue
			}
			n := RoundsNeeded(bytes, alt, mss)
			if n < rounds {
				better = append(better, fmt.Sprintf("%d at IW %d", n, alt))
				best = min(best, n)
			}
		}
		if len(better) > 0 {
			at := fmt.Sprintf("IW %d", current)
			if iw.Verdict != report.VerdictExact {
				at = fmt.Sprintf("an IW of at least %d", current)
			}
			out = append(out, cost(DiagnosisInitialWindow, fmt.Sprintf("the page (%s) needs %s at %s; %s: raise initcwnd (ip route change ... initcwnd %d) to save %s",
				report.Size(bytes), plural(rounds, "round", "rounds"), at, strings.Join(better, "; "), alternativeIWs[len(alternativeIWs)-1], roundTripsText(rounds-best)), rounds-best))
		}
	}

	var rwndRounds, lossRounds int
	var pauseMs float64
	for i, r := range c.Rounds {
		switch r.Limit {
		case report.LimitRwnd:
			rwndRounds++
		case report.LimitLoss:
			lossRounds++
		case report.LimitApp:
			if i+1 < len(c.Rounds) {
				if gap := c.Rounds[i+1].StartMs - r.EndMs - rtt; gap > 0 {
					pauseMs += gap
				}
			}
		}
	}
	expected := 0
	if iw != nil && iw.Segments > 0 && mss > 0 {
		expected = RoundsNeeded(bytes, iw.Segments, mss)
	}
	excess := max(rounds-expected, 0)
	if expected == 0 {
		excess = 0
	}
	if rwndRounds > 0 && excess > 0 {
		out = append(out, cost(DiagnosisReceiveWindow, fmt.Sprintf("the client's receive window (%s at first) capped %s: the client, not the server, held the transfer back; +%s",
			report.Size(int64(c.ClientWindow.InitialBytes)), plural(rwndRounds, "round", "rounds"), roundTripsText(excess)), excess))
		excess = 0
	}
	if lossRounds > 0 || c.Retransmission > 0 {
		out = append(out, cost(DiagnosisLoss, fmt.Sprintf("%s: loss cut the window; +%s",
			plural(c.Retransmission, "segment was retransmitted", "segments were retransmitted"), roundTripsText(excess)), excess))
	}
	if pauseMs >= 1 {
		d := report.Diagnosis{Kind: DiagnosisServerPause, Text: fmt.Sprintf("the server paused %.0f ms with room in its window (think time, a slow back end, or a response streamed as it was made)", pauseMs), CostMs: round1(pauseMs)}
		out = append(out, d)
	}
	if ctx.offeredCompression && timing != nil && timing.ContentEncoding == "" && isText(timing.ContentType) && bytes > 0 && iw != nil && iw.Segments > 0 && mss > 0 && !ctx.redirect {
		n := RoundsNeeded(bytes/assumedTextCompressionRatio, iw.Segments, mss)
		if n < rounds {
			out = append(out, cost(DiagnosisCompression, fmt.Sprintf("the %s body (%s) came uncompressed although the request offered gzip and brotli; at about a third of the size it would need %s: %s to gain",
				timing.ContentType, report.Size(bytes), plural(n, "round", "rounds"), roundTripsText(rounds-n)), rounds-n))
		}
	}
	return out
}

// isText tells content types that compress well.
func isText(contentType string) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch {
	case strings.HasPrefix(mediaType, "text/"), strings.HasSuffix(mediaType, "+json"), strings.HasSuffix(mediaType, "+xml"):
		return true
	}
	switch mediaType {
	case "application/json", "application/javascript", "application/xml", "image/svg+xml":
		return true
	}
	return false
}

func roundTripsText(n int) string { return plural(n, "round trip", "round trips") }

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

func round1(x float64) float64 {
	return float64(int64(x*10+0.5)) / 10
}
