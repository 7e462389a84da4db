package report

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	gojson "github.com/goccy/go-json"
)

// StreamWriter writes a Report as it is made: the head first, each connection as
// it is finished, the source and the warnings at the end (what the whole input
// said is known only then). It holds one connection at a time.
type StreamWriter interface {
	// Begin starts the output of a Report of this schema and tool.
	Begin(tool string) error
	// Connection writes one connection; the writer does not keep it.
	Connection(c *Connection) error
	// End writes what is known at the end and flushes.
	End(source Source, warnings []string) error
}

// Flusher is a StreamWriter that buffers its output: Flush writes out what it
// holds (after each connection, when the input is a capture being written and
// someone reads the output as it comes).
type Flusher interface {
	Flush() error
}

// NewJSONStream writes one JSON document, the Report of docs/report.md, with its
// members in this order: schema, tool, connections (written as they finish, in
// the order they are given), source, warnings. It is indented like WriteJSON.
func NewJSONStream(w io.Writer) StreamWriter {
	s := &jsonStream{w: bufio.NewWriterSize(w, 64<<10)}
	s.enc = gojson.NewEncoder(&s.buf)
	s.enc.SetIndent("    ", "  ")
	return s
}

type jsonStream struct {
	w     *bufio.Writer
	count int
	// out holds each connection's JSON (appendConnectionJSON); buf and enc
	// encode one with goccy where that cannot.
	out []byte
	buf bytes.Buffer
	enc *gojson.Encoder
}

func (s *jsonStream) Begin(tool string) error {
	fmt.Fprintf(s.w, "{\n  \"schema\": %q,\n  \"tool\": %s,\n  \"connections\": [", Schema, jsonString(tool))
	return nil
}

func (s *jsonStream) Connection(c *Connection) error {
	b, ok := appendConnectionJSON(s.out[:0], c, true, "    ")
	s.out = b
	if !ok {
		s.buf.Reset()
		if err := s.enc.Encode(c); err != nil {
			return fmt.Errorf("encoding connection %d: %w", c.Index, err)
		}
		b = bytes.TrimSuffix(s.buf.Bytes(), []byte("\n"))
	}
	if s.count > 0 {
		s.w.WriteByte(',')
	}
	s.count++
	s.w.WriteString("\n    ")
	s.w.Write(b)
	return nil
}

func (s *jsonStream) End(source Source, warnings []string) error {
	if s.count > 0 {
		s.w.WriteString("\n  ")
	}
	s.w.WriteString("],\n  \"source\": ")
	b, err := gojson.MarshalIndent(source, "  ", "  ")
	if err != nil {
		return err
	}
	s.w.Write(b)
	s.w.WriteString(",\n  \"warnings\": ")
	if warnings == nil {
		warnings = []string{}
	}
	b, err = gojson.MarshalIndent(warnings, "  ", "  ")
	if err != nil {
		return err
	}
	s.w.Write(b)
	s.w.WriteString("\n}\n")
	return s.w.Flush()
}

func (s *jsonStream) Flush() error { return s.w.Flush() }

func jsonString(s string) string {
	b, _ := gojson.Marshal(s)
	return string(b)
}

// ConnectionLineSchema names the JSON Lines format: one connection of the Report
// per line (docs/report.md's Connection, with this schema member added).
const ConnectionLineSchema = "slowstart.connection/v1"

// NewJSONLStream writes JSON Lines: each connection on a line of its own, with a
// "schema" member; the source and warnings go nowhere (the caller says them).
func NewJSONLStream(w io.Writer) StreamWriter {
	s := &jsonlStream{w: bufio.NewWriterSize(w, 64<<10)}
	s.enc = gojson.NewEncoder(&s.buf)
	return s
}

type jsonlStream struct {
	w   *bufio.Writer
	out []byte // see jsonStream
	buf bytes.Buffer
	enc *gojson.Encoder
}

func (s *jsonlStream) Begin(string) error { return nil }

func (s *jsonlStream) Connection(c *Connection) error {
	b, ok := appendConnectionJSON(s.out[:0], c, false, "")
	s.out = b
	if !ok {
		s.buf.Reset()
		if err := s.enc.Encode(c); err != nil {
			return fmt.Errorf("encoding connection %d: %w", c.Index, err)
		}
		b = bytes.TrimSuffix(s.buf.Bytes(), []byte("\n"))
	}
	s.w.WriteString(`{"schema":"` + ConnectionLineSchema + `",`)
	s.w.Write(b[1:])
	s.w.WriteByte('\n')
	return nil
}

func (s *jsonlStream) End(Source, []string) error { return s.w.Flush() }

func (s *jsonlStream) Flush() error { return s.w.Flush() }

// RoundsCSVHeader are the columns of the rounds CSV: one row per round, with the
// connection it belongs to and the connection's initial-window reading.
var RoundsCSVHeader = []string{"connection", "client", "server", "vantage", "handshake_rtt_ms", "mss",
	"iw_verdict", "iw_segments", "iw_segments_max", "round", "start_ms", "end_ms", "start_rtts", "segments",
	"loss_probe_segments", "bytes", "cumulative_bytes", "packets", "retransmissions", "capture_gaps",
	"in_flight_bytes", "receive_window_bytes", "window_full", "limit", "phase"}

// NewRoundsCSVStream writes the rounds of every connection as CSV.
func NewRoundsCSVStream(w io.Writer) StreamWriter { return &csvStream{w: csv.NewWriter(w)} }

type csvStream struct{ w *csv.Writer }

func (s *csvStream) Begin(string) error { return s.w.Write(RoundsCSVHeader) }

func (s *csvStream) Connection(c *Connection) error {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	rtt, verdict, iwSegs, iwMax := "", "", "", ""
	if c.HandshakeRTTMs != nil {
		rtt = f(*c.HandshakeRTTMs)
	}
	if iw := c.InitialWindow; iw != nil {
		verdict, iwSegs = iw.Verdict, strconv.Itoa(iw.Segments)
		if iw.SegmentsMax > 0 {
			iwMax = strconv.Itoa(iw.SegmentsMax)
		}
	}
	for _, r := range c.Rounds {
		row := []string{strconv.Itoa(c.Index), c.Client, c.Server, c.Vantage, rtt, strconv.Itoa(c.MSS),
			verdict, iwSegs, iwMax, strconv.Itoa(r.Index), f(r.StartMs), f(r.EndMs), f(r.StartRTTs), strconv.Itoa(r.Segments),
			strconv.Itoa(r.LossProbeSegments), strconv.Itoa(r.Bytes), strconv.FormatInt(r.CumulativeBytes, 10), strconv.Itoa(r.Packets),
			strconv.Itoa(r.Retransmissions), strconv.Itoa(r.CaptureGaps), strconv.Itoa(r.InFlightBytes), strconv.Itoa(r.ReceiveWindowBytes),
			strconv.FormatBool(r.WindowFull), r.Limit, r.Phase}
		if err := s.w.Write(row); err != nil {
			return err
		}
	}
	return nil
}

func (s *csvStream) End(Source, []string) error { return s.Flush() }

func (s *csvStream) Flush() error {
	s.w.Flush()
	return s.w.Error()
}

// NewTextStream writes the Report for people, connection by connection as they
// finish; the capture's summary (format, link types, packets) and the warnings
// come last, once the whole input was read.
func NewTextStream(w io.Writer) StreamWriter {
	s := &textStream{out: w}
	s.w = &ErrWriter{W: &s.buf}
	return s
}

// textStream lays out each connection (and the end) in buf and writes it to
// out in one Write: a writer that escapes or a pipe sees whole connections,
// not one write per line.
type textStream struct {
	out     io.Writer
	buf     bytes.Buffer
	w       *ErrWriter // onto buf
	scratch textScratch
	count   int
	err     error
}

func (s *textStream) Begin(string) error { return nil }

func (s *textStream) Connection(c *Connection) error {
	if s.count > 0 {
		s.buf.WriteByte('\n')
	}
	s.count++
	writeConnection(s.w, c, &s.scratch)
	return s.emit()
}

// emit writes what buf holds to out.
func (s *textStream) emit() error {
	if s.err == nil {
		_, s.err = s.out.Write(s.buf.Bytes())
	}
	s.buf.Reset()
	return s.err
}

func (s *textStream) End(src Source, warnings []string) error {
	if s.count > 0 {
		s.buf.WriteByte('\n')
	}
	if line := sourceLine(src); line != "" {
		s.w.Printf("%s: %s\n", line, plural(s.count, "connection", "connections"))
	} else if s.count == 0 {
		s.w.Printf("No TCP connections found.\n")
	}
	for _, warn := range warnings {
		s.w.Printf("warning: %s\n", warn)
	}
	return s.emit()
}

// sourceLine describes a capture file in a line ("" for other sources).
func sourceLine(src Source) string {
	if src.Kind != "file" {
		return ""
	}
	bits := []string{src.Format}
	bits = append(bits, src.LinkTypes...)
	bits = append(bits, plural(int(src.Packets), "packet", "packets"))
	if src.Snaplen > 0 && src.Snaplen < 65535 {
		bits = append(bits, fmt.Sprintf("snaplen %d", src.Snaplen))
	}
	name := filepath.Base(src.Path)
	if len(src.Paths) > 1 {
		name = filepath.Base(src.Paths[0]) + " and " + plural(len(src.Paths)-1, "more file", "more files")
	}
	return fmt.Sprintf("%s (%s)", name, strings.Join(bits, ", "))
}
