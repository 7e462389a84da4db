package report

import (
	"math"
	"math/bits"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	gojson "github.com/goccy/go-json"
)

// appendConnectionJSON appends c as JSON, byte for byte what goccy/go-json
// writes for it (the members in the order of the fields, omitempty, HTML
// characters escaped, floats as strconv's shortest form), indented with prefix
// and two spaces a level when indent is set, compact otherwise. A report is
// mostly its rounds and HTTP exchanges: written here member by member, the
// keys and their indentation as constant strings, they cost a third of what
// goccy's general encoder spends on them. The rare parts (QUIC, a probe's
// timing, diagnoses) are written by goccy. ok is false when c holds a value
// this writer does not write as goccy would (a NaN, an infinity), and when the
// Connection's types are not those it was written for (connectionTypesKnown):
// the caller then encodes c with goccy.
func appendConnectionJSON(b []byte, c *Connection, indent bool, prefix string) (_ []byte, ok bool) {
	if !connectionTypesKnown {
		return b, false
	}
	w := jsonWriter{b: b, indent: indent, prefix: prefix}
	if indent {
		w.lines = indentLinesFor(prefix)
	}
	w.connection(c)
	return w.b, !w.failed
}

// jsonWriter writes JSON values, indented as goccy's encoder indents them.
type jsonWriter struct {
	b      []byte
	indent bool
	prefix string
	// lines, when indenting: the start of a line at each depth (see
	// indentLines).
	lines *indentLines
	depth int
	// empty: the object or array opened last has no member yet.
	empty  bool
	failed bool
}

// newline starts a line at the current depth.
func (w *jsonWriter) newline() { w.b = w.appendNewline(w.b) }

// appendNewline is newline onto b: the line's start at the writer's depth,
// one string appended (a connection's members are some 5 levels deep, and a
// report of many rounds starts tens of thousands of lines). The writer's
// pieces append to a local slice and store it back once: appending to w.b
// piece by piece stored its length and read it back at each piece, a store
// the next load waited on.
func (w *jsonWriter) appendNewline(b []byte) []byte {
	if l := w.lines; l != nil && w.depth < len(l.line) {
		return append(b, l.line[w.depth]...)
	}
	b = append(b, '\n')
	b = append(b, w.prefix...)
	for range w.depth {
		b = append(b, "  "...)
	}
	return b
}

// indentLines holds, for each depth, a newline, the prefix and two spaces a
// level: the start of a line at that depth; and the same with the quote that
// opens a member's key after it (a member is then three appends: that, the
// key, and its end).
type indentLines struct {
	line, key [12]string
}

// indentLinesByPrefix holds the indentLines of each prefix a writer was made
// with (a *indentLines by string).
var indentLinesByPrefix sync.Map

// indentLinesFor returns the start of a line at each depth under prefix,
// made once for each prefix.
func indentLinesFor(prefix string) *indentLines {
	if l, ok := indentLinesByPrefix.Load(prefix); ok {
		return l.(*indentLines)
	}
	l := new(indentLines)
	for d := range l.line {
		l.line[d] = "\n" + prefix + strings.Repeat("  ", d)
		l.key[d] = l.line[d] + `"`
	}
	actual, _ := indentLinesByPrefix.LoadOrStore(prefix, l)
	return actual.(*indentLines)
}

func (w *jsonWriter) open(c byte) {
	w.b = append(w.b, c)
	w.depth++
	w.empty = true
}

func (w *jsonWriter) close(c byte) {
	w.depth--
	if !w.empty && w.indent {
		w.newline()
	}
	w.b = append(w.b, c)
	w.empty = false
}

// next starts a member or an element: the comma after the one before, and
// its line.
func (w *jsonWriter) next() { w.b = w.appendNext(w.b) }

func (w *jsonWriter) appendNext(b []byte) []byte {
	if !w.empty {
		b = append(b, ',')
	}
	w.empty = false
	if w.indent {
		b = w.appendNewline(b)
	}
	return b
}

// key starts member k (a plain ASCII name).
func (w *jsonWriter) key(k string) { w.b = w.appendKey(w.b, k) }

func (w *jsonWriter) appendKey(b []byte, k string) []byte {
	if l := w.lines; l != nil && w.depth < len(l.key) {
		// appendNext, written out: the comma and the line's start without
		// a call (appendNewline is past the inliner's budget), for the key
		// of every member (0.7% of edge2k's instructions, against calling
		// appendNext); the line's start and the key's quote in one string.
		if !w.empty {
			b = append(b, ',')
		}
		w.empty = false
		b = append(b, l.key[w.depth]...)
		b = append(b, k...)
		return append(b, '"', ':', ' ')
	}
	b = w.appendNext(b)
	b = append(b, '"')
	b = append(b, k...)
	if w.indent {
		return append(b, `": `...)
	}
	return append(b, `":`...)
}

// keyInt, keyStr and keyBool write member k and its value with one store
// of the buffer.
func (w *jsonWriter) keyInt(k string, v int64) {
	w.b = appendInt(w.appendKey(w.b, k), v)
}

func (w *jsonWriter) keyStr(k, v string) { w.b = w.appendStr(w.appendKey(w.b, k), v) }

func (w *jsonWriter) keyBool(k string, v bool) {
	w.b = strconv.AppendBool(w.appendKey(w.b, k), v)
}

func (w *jsonWriter) int(v int64) { w.b = appendInt(w.b, v) }

// appendInt is strconv.AppendInt in base 10, the numbers below 100 (most of
// a report's counts and indexes) appended as their digits at once, not
// copied from strconv's table by a call.
func appendInt(b []byte, v int64) []byte {
	if v >= 0 && v < 100 {
		if v < 10 {
			return append(b, byte('0'+v))
		}
		return append(b, byte('0'+v/10), byte('0'+v%10))
	}
	if v < 0 {
		b = append(b, '-')
		return appendUint(b, uint64(-v)) // (MinInt64's negation is itself, as a uint64 its magnitude)
	}
	return appendUint(b, uint64(v))
}

// appendUint writes u's decimal digits in place at the end of b, two at a
// time from the right: strconv.AppendInt writes them into a buffer of its own
// and copies them (on bench/shapes.sh edge, whose reports are mostly stream
// offsets, times and byte counts, strconv's formatting and copy were 5% of the
// instructions).
func appendUint(b []byte, u uint64) []byte {
	n := decimalDigits(u)
	b = slices.Grow(b, n)
	b = b[:len(b)+n]
	i := len(b)
	for u >= 100 {
		q := u / 100
		r := u - q*100
		i -= 2
		b[i], b[i+1] = digitPairs[2*r], digitPairs[2*r+1]
		u = q
	}
	if u >= 10 {
		b[i-2], b[i-1] = digitPairs[2*u], digitPairs[2*u+1]
	} else {
		b[i-1] = byte('0' + u)
	}
	return b
}

// digitPairs holds "00" to "99", one after the other.
const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// decimalDigits is how many digits u has in base 10 (1 for 0).
func decimalDigits(u uint64) int {
	// log10(2) ≈ 1233/4096: the digits of a number of that many bits, or one
	// more.
	n := (bits.Len64(u) * 1233) >> 12
	if n < len(powersOf10) && u >= powersOf10[n] {
		n++
	}
	return max(n, 1)
}

// powersOf10[i] is 10^i.
var powersOf10 = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

func (w *jsonWriter) null() { w.b = append(w.b, "null"...) }

// float writes v as goccy does: strconv's shortest form, with an exponent
// below 1e-6 and from 1e21 on.
func (w *jsonWriter) float(v float64) { w.b = w.appendFloat(w.b, v) }

func (w *jsonWriter) appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		w.failed = true // goccy refuses them: let it say so
		return b
	}
	if out, ok := appendMillionths(b, v); ok {
		return out
	}
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(b, v, format, -1, 64)
}

// keyFloat writes member k and v with one store of the buffer.
func (w *jsonWriter) keyFloat(k string, v float64) { w.b = w.appendFloat(w.appendKey(w.b, k), v) }

// appendMillionths appends v as strconv's shortest 'f' form does, when v is
// the float nearest a whole number of millionths below 10⁹ in magnitude (a
// time in milliseconds made from nanoseconds, most of a report's floats):
// that decimal, of 15 significant digits at most, is then the shortest that
// reads back as v (two such decimals are too far apart to round to one
// float64), so its digits are v's, written from the integer without
// strconv's search for them. ok is false for any other v (and for zero,
// whose sign strconv keeps).
func appendMillionths(b []byte, v float64) (_ []byte, ok bool) {
	x := v * 1e6
	if !(x > -1e15 && x < 1e15) || v == 0 {
		return b, false
	}
	n := int64(math.Round(x))
	if float64(n)/1e6 != v {
		return b, false
	}
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	b = appendInt(b, n/1e6)
	frac := n % 1e6
	if frac == 0 {
		return b, true
	}
	// The six digits of the fraction two at a time, from the right, then
	// the zeros at its end cut.
	var digits [7]byte
	digits[0] = '.'
	for i := 5; i >= 1; i -= 2 {
		q := frac / 100
		r := frac - q*100
		digits[i], digits[i+1] = digitPairs[2*r], digitPairs[2*r+1]
		frac = q
	}
	end := 7
	for digits[end-1] == '0' {
		end--
	}
	return append(b, digits[:end]...), true
}

func (w *jsonWriter) floatPtr(v *float64) {
	if v == nil {
		w.null()
		return
	}
	w.float(*v)
}

// str writes s quoted; a string with anything but plain printable ASCII that
// needs no escape is written by goccy (its escapes of HTML characters, control
// characters, U+2028 and U+2029, and invalid UTF-8).
func (w *jsonWriter) str(s string) { w.b = w.appendStr(w.b, s) }

func (w *jsonWriter) appendStr(b []byte, s string) []byte {
	i := 0
	// Eight bytes a step, then one: a report's strings are mostly its notes,
	// sentences of a hundred bytes and more.
	for ; i+8 <= len(s); i += 8 {
		if c := s[i : i+8]; !(jsonPlain[c[0]] && jsonPlain[c[1]] && jsonPlain[c[2]] && jsonPlain[c[3]] &&
			jsonPlain[c[4]] && jsonPlain[c[5]] && jsonPlain[c[6]] && jsonPlain[c[7]]) {
			break
		}
	}
	for ; i < len(s); i++ {
		if !jsonPlain[s[i]] {
			q, err := gojson.Marshal(s)
			if err != nil {
				w.failed = true
				return b
			}
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// jsonPlain tells the bytes a JSON string holds as they are, as goccy writes
// them: printable ASCII but the quote, the backslash and the HTML characters
// it escapes.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

func (w *jsonWriter) strings(list []string) {
	if list == nil {
		w.null()
		return
	}
	w.open('[')
	for _, s := range list {
		w.next()
		w.str(s)
	}
	w.close(']')
}

// other writes v with goccy, indented to the current depth.
func (w *jsonWriter) other(v any) {
	var b []byte
	var err error
	if w.indent {
		p := w.prefix
		for range w.depth {
			p += "  "
		}
		b, err = gojson.MarshalIndent(v, p, "  ")
	} else {
		b, err = gojson.Marshal(v)
	}
	if err != nil {
		w.failed = true
		return
	}
	w.b = append(w.b, b...)
}

func (w *jsonWriter) connection(c *Connection) {
	w.open('{')
	w.keyInt("index", int64(c.Index))
	w.keyStr("client", c.Client)
	w.keyStr("server", c.Server)
	w.keyStr("vantage", c.Vantage)
	w.keyFloat("start_ms", c.StartMs)
	w.keyFloat("duration_ms", c.DurationMs)
	w.key("handshake_rtt_ms")
	w.floatPtr(c.HandshakeRTTMs)
	w.keyFloat("min_rtt_ms", c.MinRTTMs)
	w.keyInt("mss", int64(c.MSS))
	w.key("client_syn")
	w.endpoint(&c.ClientSYN)
	w.key("server_syn")
	w.endpoint(&c.ServerSYN)
	w.key("client_window")
	w.open('{')
	w.keyInt("initial_bytes", int64(c.ClientWindow.InitialBytes))
	w.keyInt("min_bytes", int64(c.ClientWindow.MinBytes))
	w.keyInt("max_bytes", int64(c.ClientWindow.MaxBytes))
	w.close('}')
	w.keyBool("mid_stream", c.MidStream)
	w.keyStr("closed", c.Closed)
	w.keyInt("bytes_to_server", c.BytesToServer)
	w.keyInt("bytes_to_client", c.BytesToClient)
	w.keyInt("missing_bytes_to_server", c.MissingBytesToServer)
	w.keyInt("missing_bytes_to_client", c.MissingBytesToClient)
	w.keyInt("retransmissions", int64(c.Retransmission))
	w.keyInt("out_of_order", int64(c.OutOfOrder))
	w.key("tls")
	if t := c.TLS; t == nil {
		w.null()
	} else {
		w.open('{')
		w.keyStr("version", t.Version)
		w.keyInt("server_flight_bytes", int64(t.ServerFlightBytes))
		w.keyInt("server_flight_segments", int64(t.ServerFlightSegments))
		w.keyInt("handshake_round_trips", int64(t.HandshakeRoundTrips))
		w.key("initial_window")
		w.initialWindow(t.InitialWindow)
		w.close('}')
	}
	w.key("initial_window")
	w.initialWindow(c.InitialWindow)
	w.key("round_trips")
	w.open('{')
	w.keyInt("tcp", int64(c.RoundTrips.TCP))
	w.keyInt("tls", int64(c.RoundTrips.TLS))
	w.keyInt("http", int64(c.RoundTrips.HTTP))
	w.keyInt("total", int64(c.RoundTrips.Total))
	w.close('}')
	w.keyStr("round_method", c.RoundMethod)
	w.key("rounds")
	if c.Rounds == nil {
		w.null()
	} else {
		w.open('[')
		for i := range c.Rounds {
			w.next()
			w.round(&c.Rounds[i])
		}
		w.close(']')
	}
	w.key("http")
	if c.HTTP == nil {
		w.null()
	} else {
		w.open('[')
		for i := range c.HTTP {
			w.next()
			w.httpMessage(&c.HTTP[i])
		}
		w.close(']')
	}
	w.key("notes")
	w.strings(c.Notes)
	if len(c.Packets) > 0 {
		w.key("packets")
		w.open('[')
		for i := range c.Packets {
			w.next()
			w.packet(&c.Packets[i])
		}
		w.close(']')
	}
	if c.PacketStride != 0 {
		w.keyInt("packet_stride", int64(c.PacketStride))
	}
	if c.ClientTiming != nil {
		w.key("client_timing")
		w.other(c.ClientTiming)
	}
	if len(c.Diagnoses) > 0 {
		w.key("diagnoses")
		w.other(c.Diagnoses)
	}
	if c.Transport != "" {
		w.keyStr("transport", c.Transport)
	}
	if c.QUIC != nil {
		w.key("quic")
		w.other(c.QUIC)
	}
	w.close('}')
}

func (w *jsonWriter) endpoint(e *Endpoint) {
	w.open('{')
	w.keyInt("mss", int64(e.MSS))
	w.keyInt("window_scale", int64(e.WindowScale))
	w.keyBool("sack_permitted", e.SACKPermitted)
	w.keyBool("timestamps", e.Timestamps)
	w.close('}')
}

func (w *jsonWriter) initialWindow(iw *InitialWindow) {
	if iw == nil {
		w.null()
		return
	}
	w.open('{')
	w.keyInt("segments", int64(iw.Segments))
	w.keyInt("bytes", int64(iw.Bytes))
	if iw.SegmentsMax != 0 {
		w.keyInt("segments_max", int64(iw.SegmentsMax))
	}
	if iw.BytesMax != 0 {
		w.keyInt("bytes_max", int64(iw.BytesMax))
	}
	w.keyStr("verdict", iw.Verdict)
	w.keyStr("source", iw.Source)
	w.keyStr("reason", iw.Reason)
	if iw.ExactIf != "" {
		w.keyStr("exact_if", iw.ExactIf)
	}
	if len(iw.Evidence) > 0 {
		w.key("evidence")
		w.open('[')
		for _, p := range iw.Evidence {
			w.next()
			w.open('{')
			w.keyStr("obligation", p.Obligation)
			w.keyStr("detail", p.Detail)
			w.close('}')
		}
		w.close(']')
	}
	if len(iw.Unproven) > 0 {
		w.key("unproven")
		w.strings(iw.Unproven)
	}
	w.close('}')
}

func (w *jsonWriter) round(r *Round) {
	w.open('{')
	w.keyInt("index", int64(r.Index))
	w.keyFloat("start_ms", r.StartMs)
	w.keyFloat("end_ms", r.EndMs)
	w.keyFloat("start_rtts", r.StartRTTs)
	w.keyInt("segments", int64(r.Segments))
	if r.LossProbeSegments != 0 {
		w.keyInt("loss_probe_segments", int64(r.LossProbeSegments))
	}
	w.keyInt("bytes", int64(r.Bytes))
	w.keyInt("cumulative_bytes", r.CumulativeBytes)
	w.keyInt("packets", int64(r.Packets))
	w.keyInt("retransmissions", int64(r.Retransmissions))
	if r.CaptureGaps != 0 {
		w.keyInt("capture_gaps", int64(r.CaptureGaps))
	}
	w.keyInt("in_flight_bytes", int64(r.InFlightBytes))
	w.keyInt("receive_window_bytes", int64(r.ReceiveWindowBytes))
	w.keyBool("window_full", r.WindowFull)
	w.keyStr("limit", r.Limit)
	w.keyStr("phase", r.Phase)
	w.close('}')
}

func (w *jsonWriter) httpMessage(m *HTTPMessage) {
	w.open('{')
	w.keyStr("method", m.Method)
	w.keyStr("path", m.Path)
	if m.Authority != "" {
		w.keyStr("authority", m.Authority)
	}
	if m.Protocol != "" {
		w.keyStr("protocol", m.Protocol)
	}
	if m.Stream != 0 {
		w.keyInt("stream", int64(m.Stream))
	}
	if m.Pushed {
		w.keyBool("pushed", true)
	}
	if m.EarlyData {
		w.keyBool("early_data", true)
	}
	w.keyInt("status", int64(m.Status))
	if m.ContentType != "" {
		w.keyStr("content_type", m.ContentType)
	}
	if len(m.Rounds) > 0 {
		w.key("rounds")
		w.open('[')
		for _, r := range m.Rounds {
			w.next()
			w.int(int64(r))
		}
		w.close(']')
	}
	w.key("request_ms")
	w.floatPtr(m.RequestMs)
	w.key("first_byte_ms")
	w.floatPtr(m.FirstByteMs)
	w.key("last_byte_ms")
	w.floatPtr(m.LastByteMs)
	w.keyInt("bytes", m.Bytes)
	w.keyInt("body_bytes", m.BodyBytes)
	w.keyBool("chunked", m.Chunked)
	w.keyBool("incomplete", m.Incomplete)
	if m.IncompleteReason != "" {
		w.keyStr("incomplete_reason", m.IncompleteReason)
	}
	w.close('}')
}

func (w *jsonWriter) packet(p *Packet) {
	w.open('{')
	w.keyFloat("t_ms", p.TimeMs)
	w.keyStr("dir", p.Dir)
	w.keyInt("seq", p.Seq)
	w.keyInt("len", int64(p.Len))
	w.keyInt("ack", p.Ack)
	w.keyInt("win", int64(p.Win))
	w.keyStr("flags", p.Flags)
	if p.Retx {
		w.keyBool("retx", true)
	}
	if p.OOO {
		w.keyBool("ooo", true)
	}
	if p.Round != 0 {
		w.keyInt("round", int64(p.Round))
	}
	w.close('}')
}

// connectionTypesKnown reports whether the types appendConnectionJSON writes
// have the fields, types and JSON names it was written for (writtenTypes). A
// field added to one of them and not to the writer would be left out of the
// JSON: the writer then gives way to goccy, and TestConnectionJSONTypes fails
// until both agree again.
var connectionTypesKnown = typesAre(writtenTypes)

// writtenTypes lists, for each type appendConnectionJSON writes member by
// member, its fields as "name type tag".
var writtenTypes = map[reflect.Type][]string{
	reflect.TypeFor[Connection](): {
		`Index int json:"index"`, `Client string json:"client"`, `Server string json:"server"`, `Vantage string json:"vantage"`,
		`StartMs float64 json:"start_ms"`, `DurationMs float64 json:"duration_ms"`, `HandshakeRTTMs *float64 json:"handshake_rtt_ms"`,
		`MinRTTMs float64 json:"min_rtt_ms"`, `MSS int json:"mss"`, `ClientSYN report.Endpoint json:"client_syn"`,
		`ServerSYN report.Endpoint json:"server_syn"`, `ClientWindow report.ReceiveWindow json:"client_window"`,
		`MidStream bool json:"mid_stream"`, `Closed string json:"closed"`, `BytesToServer int64 json:"bytes_to_server"`,
		`BytesToClient int64 json:"bytes_to_client"`, `MissingBytesToServer int64 json:"missing_bytes_to_server"`,
		`MissingBytesToClient int64 json:"missing_bytes_to_client"`, `Retransmission int json:"retransmissions"`,
		`OutOfOrder int json:"out_of_order"`, `TLS *report.TLS json:"tls"`, `InitialWindow *report.InitialWindow json:"initial_window"`,
		`RoundTrips report.RoundTrips json:"round_trips"`, `RoundMethod string json:"round_method"`, `Rounds []report.Round json:"rounds"`,
		`HTTP []report.HTTPMessage json:"http"`, `Notes []string json:"notes"`, `Packets []report.Packet json:"packets,omitempty"`,
		`PacketStride int json:"packet_stride,omitempty"`, `ClientTiming *report.ClientTiming json:"client_timing,omitempty"`,
		`Diagnoses []report.Diagnosis json:"diagnoses,omitempty"`, `Transport string json:"transport,omitempty"`,
		`QUIC *report.QUIC json:"quic,omitempty"`,
	},
	reflect.TypeFor[Endpoint](): {
		`MSS int json:"mss"`, `WindowScale int json:"window_scale"`, `SACKPermitted bool json:"sack_permitted"`, `Timestamps bool json:"timestamps"`,
	},
	reflect.TypeFor[ReceiveWindow](): {
		`InitialBytes int json:"initial_bytes"`, `MinBytes int json:"min_bytes"`, `MaxBytes int json:"max_bytes"`,
	},
	reflect.TypeFor[TLS](): {
		`Version string json:"version"`, `ServerFlightBytes int json:"server_flight_bytes"`, `ServerFlightSegments int json:"server_flight_segments"`,
		`HandshakeRoundTrips int json:"handshake_round_trips"`, `InitialWindow *report.InitialWindow json:"initial_window"`,
	},
	reflect.TypeFor[InitialWindow](): {
		`Segments int json:"segments"`, `Bytes int json:"bytes"`, `SegmentsMax int json:"segments_max,omitempty"`,
		`BytesMax int json:"bytes_max,omitempty"`, `Verdict string json:"verdict"`, `Source string json:"source"`,
		`Reason string json:"reason"`, `ExactIf string json:"exact_if,omitempty"`, `Evidence []report.Proof json:"evidence,omitempty"`,
		`Unproven []string json:"unproven,omitempty"`,
	},
	reflect.TypeFor[Proof](): {
		`Obligation string json:"obligation"`, `Detail string json:"detail"`,
	},
	reflect.TypeFor[RoundTrips](): {
		`TCP int json:"tcp"`, `TLS int json:"tls"`, `HTTP int json:"http"`, `Total int json:"total"`,
	},
	reflect.TypeFor[Round](): {
		`Index int json:"index"`, `StartMs float64 json:"start_ms"`, `EndMs float64 json:"end_ms"`, `StartRTTs float64 json:"start_rtts"`,
		`Segments int json:"segments"`, `LossProbeSegments int json:"loss_probe_segments,omitempty"`, `Bytes int json:"bytes"`,
		`CumulativeBytes int64 json:"cumulative_bytes"`, `Packets int json:"packets"`, `Retransmissions int json:"retransmissions"`,
		`CaptureGaps int json:"capture_gaps,omitempty"`, `InFlightBytes int json:"in_flight_bytes"`,
		`ReceiveWindowBytes int json:"receive_window_bytes"`, `WindowFull bool json:"window_full"`, `Limit string json:"limit"`,
		`Phase string json:"phase"`,
	},
	reflect.TypeFor[HTTPMessage](): {
		`Method string json:"method"`, `Path string json:"path"`, `Authority string json:"authority,omitempty"`,
		`Protocol string json:"protocol,omitempty"`, `Stream uint32 json:"stream,omitempty"`, `Pushed bool json:"pushed,omitempty"`,
		`EarlyData bool json:"early_data,omitempty"`, `Status int json:"status"`, `ContentType string json:"content_type,omitempty"`,
		`Rounds []int json:"rounds,omitempty"`, `RequestMs *float64 json:"request_ms"`, `FirstByteMs *float64 json:"first_byte_ms"`,
		`LastByteMs *float64 json:"last_byte_ms"`, `Bytes int64 json:"bytes"`, `BodyBytes int64 json:"body_bytes"`,
		`Chunked bool json:"chunked"`, `Incomplete bool json:"incomplete"`, `IncompleteReason string json:"incomplete_reason,omitempty"`,
	},
	reflect.TypeFor[Packet](): {
		`TimeMs float64 json:"t_ms"`, `Dir string json:"dir"`, `Seq int64 json:"seq"`, `Len int json:"len"`, `Ack int64 json:"ack"`,
		`Win int json:"win"`, `Flags string json:"flags"`, `Retx bool json:"retx,omitempty"`, `OOO bool json:"ooo,omitempty"`,
		`Round int json:"round,omitempty"`,
	},
}

// typesAre reports whether every type has exactly the fields listed.
func typesAre(want map[reflect.Type][]string) bool {
	for t, fields := range want {
		if !slices.Equal(typeFields(t), fields) {
			return false
		}
	}
	return true
}

// typeFields lists t's fields as "name type tag".
func typeFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		out = append(out, f.Name+" "+f.Type.String()+" "+string(f.Tag))
	}
	return out
}
