package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"

	gojson "github.com/goccy/go-json"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/internal/texttable"
)

// WriteJSON writes the Report as indented JSON. Connections are encoded in chunks,
// on every core, and written in order as they are ready: the memory it needs is a
// few chunks, not the whole document.
func WriteJSON(w io.Writer, r *Report) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	envelope := *r
	envelope.Connections = nil
	head, err := json.MarshalIndent(envelope, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	const empty = `"connections": null`
	before, after, found := bytes.Cut(head, []byte(empty))
	if !found {
		return fmt.Errorf("encoding the report: no %s to fill", empty)
	}
	bw.Write(before)
	bw.WriteString(`"connections": [`)
	if err := writeConnections(bw, r.Connections); err != nil {
		return err
	}
	if len(r.Connections) > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteByte(']')
	bw.Write(after)
	bw.WriteByte('\n')
	return bw.Flush()
}

// writeConnections encodes conns as the elements of an indented JSON array.
func writeConnections(w io.Writer, conns []Connection) error {
	const chunkSize = 64
	type chunk struct {
		buf bytes.Buffer
		err error
	}
	chunks := (len(conns) + chunkSize - 1) / chunkSize
	workers := min(runtime.GOMAXPROCS(0), max(chunks, 1))
	// results[i] delivers chunk i; at most 2*workers chunks are encoded ahead of the
	// writer.
	results := make([]chan *chunk, chunks)
	for i := range results {
		results[i] = make(chan *chunk, 1)
	}
	next := make(chan int)
	done := make(chan struct{})
	defer close(done)
	sem := make(chan struct{}, 2*workers)
	go func() {
		defer close(next)
		for i := 0; i < chunks; i++ {
			select {
			case sem <- struct{}{}:
			case <-done:
				return
			}
			select {
			case next <- i:
			case <-done:
				return
			}
		}
	}()
	for range workers {
		go func() {
			for i := range next {
				c := &chunk{}
				enc := gojson.NewEncoder(&c.buf)
				enc.SetIndent("    ", "  ")
				for j := i * chunkSize; j < min((i+1)*chunkSize, len(conns)); j++ {
					if j > 0 {
						c.buf.WriteByte(',')
					}
					c.buf.WriteString("\n    ")
					if c.err = enc.Encode(&conns[j]); c.err != nil {
						c.err = fmt.Errorf("encoding connection %d: %w", conns[j].Index, c.err)
						break
					}
					c.buf.Truncate(c.buf.Len() - 1) // the Encoder's newline
				}
				results[i] <- c
			}
		}()
	}
	for i := range results {
		c := <-results[i]
		<-sem
		if c.err != nil {
			return c.err
		}
		if _, err := w.Write(c.buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// Size formats a byte count for people: "812 B", "14.5 KB", "1.20 MB" (decimal units).
func Size(n int64) string {
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10) + " B"
	case n < 1000*1000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + " KB"
	case n < 1000*1000*1000:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 2, 64) + " MB"
	}
	return strconv.FormatFloat(float64(n)/1e9, 'f', 2, 64) + " GB"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// WriteText writes the Report for people.
func WriteText(w io.Writer, r *Report) error {
	bw := &ErrWriter{W: w}
	if line := sourceLine(r.Source); line != "" {
		bw.Printf("%s\n", line)
	}
	for _, warn := range r.Warnings {
		bw.Printf("warning: %s\n", warn)
	}
	if len(r.Connections) == 0 {
		bw.Printf("No TCP connections found.\n")
	}
	var scratch textScratch
	for i := range r.Connections {
		bw.Printf("\n")
		writeConnection(bw, &r.Connections[i], &scratch)
	}
	return bw.Err
}

// textScratch is what writeConnection reuses from one connection to the next.
type textScratch struct {
	rounds *texttable.Table
	line   []byte
}

func newRoundsTable() *texttable.Table {
	return texttable.New("    ", texttable.R("round"), texttable.R("start ms"), texttable.R("start RTTs"), texttable.R("segments"),
		texttable.R("bytes"), texttable.R("cum %"), texttable.R("growth"), texttable.L("limit"), texttable.L("phase"))
}

func writeConnection(bw *ErrWriter, c *Connection, scratch *textScratch) {
	head := fmt.Sprintf("Connection %d: %s → %s", c.Index, c.Client, c.Server)
	var facts []string
	switch c.Vantage {
	case VantageClient:
		facts = append(facts, "captured at the client")
	case VantageServer:
		facts = append(facts, "captured at the server")
	}
	if c.HandshakeRTTMs != nil {
		facts = append(facts, fmt.Sprintf("handshake RTT %.1f ms", *c.HandshakeRTTMs))
	}
	if c.Transport == TransportQUIC {
		facts = append(facts, fmt.Sprintf("QUIC, datagrams up to %d B", c.MSS))
	} else {
		facts = append(facts, fmt.Sprintf("MSS %d", c.MSS))
	}
	if c.TLS != nil {
		v := c.TLS.Version
		if v == "" {
			v = "?"
		}
		facts = append(facts, "TLS "+v)
	}
	if c.Retransmission > 0 {
		facts = append(facts, plural(c.Retransmission, "retransmission", "retransmissions"))
	}
	bw.Printf("%s\n  %s\n", head, strings.Join(facts, "; "))

	line := scratch.line
	for _, m := range c.HTTP {
		line = append(line[:0], "  HTTP "...)
		line = append(line, textsafe.Escape(m.Method)...) // bytes of the capture
		line = append(line, ' ')
		line = append(line, textsafe.Escape(m.Path)...)
		if m.Status > 0 {
			line = append(line, " → "...)
			line = strconv.AppendInt(line, int64(m.Status), 10)
			line = append(line, ", "...)
			line = append(line, Size(m.Bytes)...)
		}
		if m.FirstByteMs != nil && m.LastByteMs != nil {
			line = append(line, ", first byte at "...)
			line = strconv.AppendFloat(line, *m.FirstByteMs, 'f', 1, 64)
			line = append(line, " ms, last at "...)
			line = strconv.AppendFloat(line, *m.LastByteMs, 'f', 1, 64)
			line = append(line, " ms"...)
		}
		if n := len(m.Rounds); n == 1 {
			line = append(line, ", round "...)
			line = strconv.AppendInt(line, int64(m.Rounds[0]), 10)
		} else if n > 1 {
			line = append(line, ", rounds "...)
			line = strconv.AppendInt(line, int64(m.Rounds[0]), 10)
			line = append(line, '-')
			line = strconv.AppendInt(line, int64(m.Rounds[n-1]), 10)
		}
		if m.Incomplete {
			line = append(line, " (partly outside the capture)"...)
		}
		line = append(line, '\n')
		_, _ = bw.Write(line) // an error stays in bw
	}
	scratch.line = line
	if c.QUIC != nil {
		writeQUIC(bw, c.QUIC)
	}
	if c.TLS != nil && c.TLS.ServerFlightSegments > 0 {
		bw.Printf("  TLS handshake: %s; the server's flight was %s in %s\n",
			plural(c.TLS.HandshakeRoundTrips, "round trip", "round trips"),
			Size(int64(c.TLS.ServerFlightBytes)), plural(c.TLS.ServerFlightSegments, "segment", "segments"))
	}

	if len(c.Rounds) > 0 {
		bw.Printf("\n")
		if scratch.rounds == nil {
			scratch.rounds = newRoundsTable()
		}
		tb := scratch.rounds
		tb.Reset()
		total := c.Rounds[len(c.Rounds)-1].CumulativeBytes
		for i, r := range c.Rounds {
			tb.EndCell(strconv.AppendInt(tb.Buf(), int64(r.Index), 10))
			tb.EndCell(strconv.AppendFloat(tb.Buf(), r.StartMs, 'f', 1, 64))
			if c.HandshakeRTTMs != nil {
				tb.EndCell(strconv.AppendFloat(tb.Buf(), r.StartRTTs, 'f', 2, 64))
			} else {
				tb.EndCell(append(tb.Buf(), '-'))
			}
			b := tb.Buf()
			if r.LossProbeSegments > 0 {
				b = strconv.AppendInt(b, int64(r.Segments-r.LossProbeSegments), 10)
				b = append(b, '+')
				b = strconv.AppendInt(b, int64(r.LossProbeSegments), 10)
				b = append(b, " probe"...)
			} else {
				b = strconv.AppendInt(b, int64(r.Segments), 10)
			}
			tb.EndCell(b)
			tb.EndCell(strconv.AppendInt(tb.Buf(), int64(r.Bytes), 10))
			pct := 100.0
			if total > 0 {
				pct = 100 * float64(r.CumulativeBytes) / float64(total)
			}
			tb.EndCell(strconv.AppendFloat(tb.Buf(), pct, 'f', 1, 64))
			if i > 0 && c.Rounds[i-1].Segments > 0 {
				growth := float64(r.Segments) / float64(c.Rounds[i-1].Segments)
				tb.EndCell(append(strconv.AppendFloat(tb.Buf(), growth, 'f', 1, 64), "×"...))
			} else {
				tb.EndCell(append(tb.Buf(), '-'))
			}
			if r.WindowFull {
				tb.EndCell(append(append(tb.Buf(), r.Limit...), " (window full)"...))
			} else {
				tb.EndCell(append(tb.Buf(), r.Limit...))
			}
			tb.EndCell(append(tb.Buf(), r.Phase...))
		}
		_ = tb.Write(bw) // an error stays in bw
	}
	bw.Printf("\n")
	if iw := c.InitialWindow; iw != nil {
		bw.Printf("  %s\n", iw.Sentence())
	}
	if c.TLS != nil && c.TLS.InitialWindow != nil && c.InitialWindow != nil && c.InitialWindow.Source != "tls" {
		bw.Printf("  From the TLS flight alone: %s\n", c.TLS.InitialWindow.Sentence())
	}
	if s := Meaning(c); s != "" {
		bw.Printf("  %s\n", s)
	}
	for _, n := range c.Notes {
		bw.Printf("  note: %s\n", n)
	}
}

// Short is the reading in a few characters, for a table cell or a label: "10"
// (exact), "4-10" (a range), "≥ 10" (a lower bound, or capped by the receive
// window), "ambiguous", or "none". IWReading.Text is the same for a summary row.
func (iw *InitialWindow) Short() string {
	if iw == nil {
		return VerdictNone
	}
	if text := shortText(iw.Verdict, iw.Segments, iw.SegmentsMax); text != "" {
		return text
	}
	return iw.Verdict
}

// Label is the reading with its verdict in words, for a table or a list: "10
// (exact)", "4-10 (10 on Linux CUBIC or Reno)", "≥ 10 (lower bound)", "≥ 10
// (receive window)", "ambiguous", "none".
func (iw *InitialWindow) Label() string {
	if iw == nil {
		return VerdictNone
	}
	short := iw.Short()
	switch iw.Verdict {
	case VerdictExact:
		return short + " (exact)"
	case VerdictRange:
		if iw.ExactIf == ExactIfLinuxCubicOrReno {
			return fmt.Sprintf("%s (%d on Linux CUBIC or Reno)", short, iw.SegmentsMax)
		}
		return short + " (range)"
	case VerdictLowerBound:
		return short + " (lower bound)"
	case VerdictRwndLimited:
		return short + " (receive window)"
	}
	return short
}

// shortText is Short's number for a verdict and its segments ("" when the verdict
// gives none).
func shortText(verdict string, segments, segmentsMax int) string {
	switch verdict {
	case VerdictExact:
		return strconv.Itoa(segments)
	case VerdictRange:
		if segmentsMax > 0 {
			return fmt.Sprintf("%d-%d", segments, segmentsMax)
		}
		return fmt.Sprintf("≥ %d", segments)
	case VerdictLowerBound, VerdictRwndLimited:
		return fmt.Sprintf("≥ %d", segments)
	}
	return ""
}

// Sentence says the reading in a sentence: the window, its verdict, where it was
// read and why.
func (iw *InitialWindow) Sentence() string {
	from := "the first data round"
	if iw.Source == "tls" {
		from = "the server's TLS flight"
	}
	size := fmt.Sprintf("%s (%s)", plural(iw.Segments, "segment", "segments"), Size(int64(iw.Bytes)))
	switch iw.Verdict {
	case VerdictExact:
		return fmt.Sprintf("Initial window: %s, exact, from %s: %s.", size, from, iw.Reason)
	case VerdictLowerBound:
		return fmt.Sprintf("Initial window: at least %s, from %s: %s.", size, from, iw.Reason)
	case VerdictRwndLimited:
		return fmt.Sprintf("Initial window: not measurable, %s was capped by the receive window at %s: %s.", from, size, iw.Reason)
	case VerdictAmbiguous:
		return fmt.Sprintf("Initial window: ambiguous, %s carried %s: %s.", from, size, iw.Reason)
	case VerdictRange:
		return fmt.Sprintf("Initial window: %d to %d segments (%s to %s), from %s: %s.", iw.Segments, iw.SegmentsMax, Size(int64(iw.Bytes)), Size(int64(iw.BytesMax)), from, iw.Reason)
	}
	return fmt.Sprintf("Initial window: unknown: %s.", iw.Reason)
}

// Meaning sums up the connection's round trips in a sentence.
func Meaning(c *Connection) string {
	var http []Round
	for _, r := range c.Rounds {
		if r.Phase != PhaseTLS {
			http = append(http, r)
		}
	}
	if len(http) == 0 {
		return ""
	}
	s := fmt.Sprintf("The server's data needed %s; the first %s arrived in the first.",
		plural(len(http), "round trip", "round trips"), Size(int64(http[0].Bytes)))
	rt := c.RoundTrips
	if rt.TCP > 0 {
		s += fmt.Sprintf(" In all: %d TCP + %d TLS + %d data = %s.", rt.TCP, rt.TLS, rt.HTTP, plural(rt.Total, "round trip", "round trips"))
	}
	return s
}

// ErrWriter keeps the first write error, so that rendering code can print
// without checking each call: every write after a failure does nothing.
type ErrWriter struct {
	W   io.Writer
	Err error // the first error
}

func (e *ErrWriter) Write(p []byte) (int, error) {
	if e.Err != nil {
		return 0, e.Err
	}
	n, err := e.W.Write(p)
	e.Err = err
	return n, err
}

// Printf writes like fmt.Fprintf.
func (e *ErrWriter) Printf(format string, args ...any) {
	fmt.Fprintf(e, format, args...)
}
