package model

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/slowstart/slowstart/internal/texttable"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/units"
)

// WriteText renders out for people: the path, then per IW the round trips by
// phase, the times, Equation 1 beside them, and the bytes each round carries.
func WriteText(w io.Writer, out *Output) error {
	if len(out.Runs) == 0 {
		return errors.New("model: no prediction to write")
	}
	runs, bodyBytes := out.Runs, out.Path.BodyBytes
	p := runs[0].Result.Params
	path := fmt.Sprintf("path: RTT %s ms", strconv.FormatFloat(float64(p.RTTNs)/1e6, 'f', -1, 64))
	if p.RateBitsPerSecond > 0 {
		bdp := p.RateBitsPerSecond / 8 * p.RTTNs / 1e9
		path += fmt.Sprintf(", %s (BDP %s, %s)", units.FormatRate(p.RateBitsPerSecond), units.FormatSize(bdp), report.Count(int(bdp/int64(p.MSS)), "segment", "segments"))
	} else {
		path += ", no rate limit"
	}
	fmt.Fprintln(w, path)
	win := "a Linux client's default receive window (64 KB, autotuned after a round trip)"
	if p.RwndBytes > 0 {
		win = "receive window " + units.FormatSize(p.RwndBytes)
	}
	proto := "HTTP/1.1 in the clear"
	if p.TLS != "" {
		r := runs[0].Result
		proto = fmt.Sprintf("HTTP/1.1 over TLS %s (certificate chain %s; server flight about %s, %s)", p.TLS, units.FormatSize(int64(p.ChainBytes)), units.FormatSize(int64(r.ServerFlightBytes)), report.Count(r.ServerFlightSegments, "segment", "segments"))
	}
	acks := "an ACK per segment"
	if p.DelayedACK {
		acks = "delayed ACKs"
	}
	fmt.Fprintf(w, "response: %s of body + %s of headers over %s; MSS %d; %s; %s; %s\n\n", units.FormatSize(bodyBytes),
		units.FormatSize(p.SizeBytes-bodyBytes), proto, p.MSS, win, acks, p.CC)

	tb := texttable.New("  ", texttable.R("IW"), texttable.R("TCP"), texttable.R("TLS"), texttable.R("HTTP"), texttable.R("total RTs"),
		texttable.R("first byte ms"), texttable.R("last byte ms"), texttable.R("first→last ms"), texttable.R("Eq. 1 rounds"), texttable.R("Eq. 1 ms"))
	for _, r := range runs {
		rt := r.Result.RoundTrips
		tb.Row(strconv.Itoa(r.IW), strconv.Itoa(rt.TCP), strconv.Itoa(rt.TLS), strconv.Itoa(rt.HTTP), strconv.Itoa(rt.Total),
			fmt.Sprintf("%.0f", r.Result.FirstByteMs), fmt.Sprintf("%.0f", r.Result.LastByteMs), fmt.Sprintf("%.0f", r.Result.FCTPaperMs),
			strconv.Itoa(r.ClosedForm.Rounds), fmt.Sprintf("%.0f", r.ClosedForm.LatencyMs))
	}
	if err := tb.Write(w); err != nil {
		return err
	}
	for _, r := range runs {
		fmt.Fprintf(w, "\nIW %d:\n", r.IW)
		phaseStart := 0
		for i, b := range r.Result.Rounds {
			if i > 0 && b.Phase != r.Result.Rounds[i-1].Phase {
				phaseStart = i
			}
			first := r.Result.Rounds[phaseStart].Index
			label := fmt.Sprintf("round %d carries", b.Index)
			if b.Index != first {
				label = fmt.Sprintf("rounds %d-%d carry", first, b.Index)
			}
			fmt.Fprintf(w, "  %s %s (%s in this round, %s)\n", label, units.FormatSize(b.CumulativeBytes), report.Count(b.Segments, "segment", "segments"), phaseLimit(b))
		}
		if r.Result.RateLimitedFromRound > 0 {
			fmt.Fprintf(w, "  the link is busy without a pause from round %d: rate-limited from there (the response alone takes %.0f ms on the link)\n", r.Result.RateLimitedFromRound, r.Result.SerializationMs)
		} else if r.Result.SerializationMs > 0 {
			fmt.Fprintf(w, "  window-limited to the end (the response alone takes %.0f ms on the link)\n", r.Result.SerializationMs)
		}
		if r.Result.Params.TLS != "" && r.Result.ServerFlightSegments > r.IW {
			fmt.Fprintf(w, "  the TLS server flight (%s) is larger than the IW: it costs an extra round trip\n", report.Count(r.Result.ServerFlightSegments, "segment", "segments"))
		}
		if r.Result.HyStartExitRound > 0 {
			fmt.Fprintf(w, "  HyStart leaves slow start in HTTP round %d\n", r.Result.HyStartExitRound)
		}
		if r.Result.HTTPRoundsMin != r.Result.HTTPRoundsMax {
			fmt.Fprintf(w, "  %d or %d HTTP rounds: the last segments go out in the round before or after a boundary as timing noise decides\n", r.Result.HTTPRoundsMin, r.Result.HTTPRoundsMax)
		}
	}
	return nil
}

func phaseLimit(r Round) string {
	limit := map[string]string{"cwnd": "cut by the congestion window", "rwnd": "cut by the receive window", "rate": "link busy", "end": "the end of the message"}[r.Limit]
	if r.Phase == "tls" {
		return "TLS, " + limit
	}
	return limit
}
