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

// diagnose finds what cost the connection round trips, in the order a reader
// would fix them: a redirect, then (on a real network path) the TLS handshake,
// the initial window, what held the window back (the receive window, loss, the
// server's pauses) and an uncompressed text body.
func diagnose(c *report.Connection, ctx diagnosisContext) []report.Diagnosis {
	d := newDiagnosis(c, ctx)
	out := append([]report.Diagnosis{}, d.redirect()...)
	if IsLocalPath(c) {
		// No advice about windows or round trips applies here.
		return append(out, d.localPath())
	}
	out = append(out, d.tlsHandshake()...)
	out = append(out, d.initialWindow()...)
	out = append(out, d.heldBack()...)
	out = append(out, d.serverPause()...)
	return append(out, d.compression()...)
}

// diagnosis is one connection being diagnosed, with the readings the diagnoses
// share.
type diagnosis struct {
	c      *report.Connection
	ctx    diagnosisContext
	rttMs  float64
	timing *report.ClientTiming
	iw     *report.InitialWindow
	mss    int
	// rounds and bytes are the data rounds (not the TLS handshake's) and their bytes.
	rounds int
	bytes  int64
}

func newDiagnosis(c *report.Connection, ctx diagnosisContext) *diagnosis {
	d := &diagnosis{c: c, ctx: ctx, rttMs: rttMs(c), timing: c.ClientTiming, iw: c.InitialWindow, mss: c.MSS}
	d.rounds, d.bytes = dataRounds(c)
	return d
}

// cost is a diagnosis that costs rts round trips.
func (d *diagnosis) cost(kind, text string, rts int) report.Diagnosis {
	return report.Diagnosis{Kind: kind, Text: text, CostRoundTrips: rts, CostMs: round1(float64(rts) * d.rttMs)}
}

// windowKnown says whether the initial window and the segment size are known, as
// the diagnoses counting rounds need.
func (d *diagnosis) windowKnown() bool { return d.iw != nil && d.iw.Segments > 0 && d.mss > 0 }

// redirect: the connection only answered with a redirect the probe followed.
func (d *diagnosis) redirect() []report.Diagnosis {
	if !d.ctx.redirect || d.timing == nil {
		return nil
	}
	rts := d.c.RoundTrips.Total
	r := d.cost(DiagnosisRedirect, fmt.Sprintf("%s redirects to %s: a connection of its own before the page, %s", d.timing.URL, d.timing.Location, roundTripsText(rts)), rts)
	r.CostMs = round1(d.timing.LastByteAtMs)
	return []report.Diagnosis{r}
}

// localPath says why a loopback or sub-millisecond path gets no advice.
func (d *diagnosis) localPath() report.Diagnosis {
	return report.Diagnosis{Kind: DiagnosisLocalPath, Text: fmt.Sprintf(
		"this path is local (round trip %.3f ms, segments of %d bytes): its rounds say nothing about a real network path, and no initcwnd change would matter on it; probe the site over the network, or emulate a path with slowstart lab", d.rttMs, d.c.MSS)}
}

// tlsHandshake: a TLS flight larger than the initial window, and TLS 1.2 where the
// client let the server choose.
func (d *diagnosis) tlsHandshake() []report.Diagnosis {
	t := d.c.TLS
	if t == nil {
		return nil
	}
	var out []report.Diagnosis
	base := 2
	if t.Version == "1.3" {
		base = 1
	}
	if extra := t.HandshakeRoundTrips - base; extra > 0 && t.InitialWindow != nil && t.InitialWindow.Verdict == report.VerdictExact {
		what := fmt.Sprintf("the server's TLS flight (%s)", report.Size(int64(t.ServerFlightBytes)))
		if d.timing != nil && d.timing.ChainBytes > 0 {
			what = fmt.Sprintf("the certificate chain (%s)", report.Size(int64(d.timing.ChainBytes)))
		}
		w := t.InitialWindow
		out = append(out, d.cost(DiagnosisCertificateChain, fmt.Sprintf("%s is larger than the initial window (%d segments, %s): +%s; a shorter chain (fewer intermediates, ECDSA keys) or a larger initial window saves it",
			what, w.Segments, report.Size(int64(w.Bytes)), roundTripsText(extra)), extra))
	}
	if d.ctx.tlsVersionFree && t.Version == "1.2" {
		out = append(out, d.cost(DiagnosisTLSVersion, "the server negotiated TLS 1.2, whose full handshake takes 2 round trips; TLS 1.3 takes 1: +1 round trip", 1))
	}
	return out
}

// initialWindow: the larger initial windows (alternativeIWs) that would deliver the
// page in fewer rounds.
func (d *diagnosis) initialWindow() []report.Diagnosis {
	if d.rounds == 0 || d.ctx.redirect || !d.windowKnown() {
		return nil
	}
	current := d.iw.Segments
	var better []string
	best := d.rounds
	for _, alt := range alternativeIWs {
		if alt <= current {
			continue
		}
		if n := RoundsNeeded(d.bytes, alt, d.mss); n < d.rounds {
			better = append(better, fmt.Sprintf("%d at IW %d", n, alt))
			best = min(best, n)
		}
	}
	if len(better) == 0 {
		return nil
	}
	at := fmt.Sprintf("IW %d", current)
	if d.iw.Verdict != report.VerdictExact {
		at = fmt.Sprintf("an IW of at least %d", current)
	}
	return []report.Diagnosis{d.cost(DiagnosisInitialWindow, fmt.Sprintf("the page (%s) needs %s at %s; %s: raise initcwnd (ip route change ... initcwnd %d) to save %s",
		report.Size(d.bytes), plural(d.rounds, "round", "rounds"), at, strings.Join(better, "; "), alternativeIWs[len(alternativeIWs)-1], roundTripsText(d.rounds-best)), d.rounds-best)}
}

// heldBack: the client's receive window or loss held the window back. The rounds
// beyond what slow start from the initial window needs are charged to the receive
// window when it capped a round, else to loss.
func (d *diagnosis) heldBack() []report.Diagnosis {
	var rwndRounds, lossRounds int
	for _, r := range d.c.Rounds {
		switch r.Limit {
		case report.LimitRwnd:
			rwndRounds++
		case report.LimitLoss:
			lossRounds++
		}
	}
	excess := 0
	if d.windowKnown() {
		if expected := RoundsNeeded(d.bytes, d.iw.Segments, d.mss); expected > 0 {
			excess = max(d.rounds-expected, 0)
		}
	}
	var out []report.Diagnosis
	if rwndRounds > 0 && excess > 0 {
		out = append(out, d.cost(DiagnosisReceiveWindow, fmt.Sprintf("the client's receive window (%s at first) capped %s: the client, not the server, held the transfer back; +%s",
			report.Size(int64(d.c.ClientWindow.InitialBytes)), plural(rwndRounds, "round", "rounds"), roundTripsText(excess)), excess))
		excess = 0
	}
	if lossRounds > 0 || d.c.Retransmission > 0 {
		out = append(out, d.cost(DiagnosisLoss, fmt.Sprintf("%s: loss cut the window; +%s",
			plural(d.c.Retransmission, "segment was retransmitted", "segments were retransmitted"), roundTripsText(excess)), excess))
	}
	return out
}

// serverPause: the time the server sent nothing although its window had room
// (application-limited rounds followed by a gap longer than a round trip).
func (d *diagnosis) serverPause() []report.Diagnosis {
	var pauseMs float64
	for i, r := range d.c.Rounds {
		if r.Limit == report.LimitApp && i+1 < len(d.c.Rounds) {
			if gap := d.c.Rounds[i+1].StartMs - r.EndMs - d.rttMs; gap > 0 {
				pauseMs += gap
			}
		}
	}
	if pauseMs < 1 {
		return nil
	}
	return []report.Diagnosis{{Kind: DiagnosisServerPause, Text: fmt.Sprintf("the server paused %.0f ms with room in its window (think time, a slow back end, or a response streamed as it was made)", pauseMs), CostMs: round1(pauseMs)}}
}

// compression: a text body sent uncompressed although the request offered
// compression, when a third of its size would take fewer rounds.
func (d *diagnosis) compression() []report.Diagnosis {
	t := d.timing
	if !d.ctx.offeredCompression || t == nil || t.ContentEncoding != "" || !isText(t.ContentType) || d.bytes <= 0 || !d.windowKnown() || d.ctx.redirect {
		return nil
	}
	n := RoundsNeeded(d.bytes/assumedTextCompressionRatio, d.iw.Segments, d.mss)
	if n >= d.rounds {
		return nil
	}
	return []report.Diagnosis{d.cost(DiagnosisCompression, fmt.Sprintf("the %s body (%s) came uncompressed although the request offered gzip and brotli; at about a third of the size it would need %s: %s to gain",
		t.ContentType, report.Size(d.bytes), plural(n, "round", "rounds"), roundTripsText(d.rounds-n)), d.rounds-n)}
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
