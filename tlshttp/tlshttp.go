// Package tlshttp finds the HTTP exchanges inside a TLS connection decrypted with
// a key log: it runs tlsdecrypt on both directions' bytes, hands the application
// data to httpmsg (HTTP/1.x) and http2msg (HTTP/2), and maps what they find back
// to TCP stream offsets, the records that carried each request and response, and
// the times those records were seen. It also says exactly where each side's
// handshake ended and which records after it were not application data (TLS 1.3
// session tickets, key updates, alerts).
//
// It is the one call the analysis makes per TLS connection: feed it each data
// segment with its time (the new bytes tlsrec is fed will do; whole segments,
// retransmissions included, also fill holes), and read the Result at the end.
// Without keys for the connection the Result says so and holds nothing else.
//
// It does not decide rounds or round trips (package rounds does, from the
// offsets given here), decode bodies, or follow HTTP/1.1 upgrades.
package tlshttp

import (
	"sort"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/http2msg"
	"github.com/slowstart/slowstart/httpmsg"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/tlsdecrypt"
	"github.com/slowstart/slowstart/tlsrec"
)

// Protocols of the application data.
const (
	ProtocolHTTP1 = "http/1.1" // HTTP/1.0 and 1.1
	ProtocolHTTP2 = "h2"
)

// ReasonRecordLost marks exchanges cut by a TLS record that was not decrypted and
// whose plaintext length is unknown.
const ReasonRecordLost = "a TLS record of this direction was not decrypted and its length is unknown, so the HTTP framing after it is lost"

// Span is a range of TCP stream offsets, [Start, End).
type Span struct{ Start, End int64 }

// Exchange is one request and its response, placed in the TCP streams.
type Exchange struct {
	// Protocol is ProtocolHTTP1 or ProtocolHTTP2; StreamID the HTTP/2 stream (0
	// for HTTP/1.x); Pushed a stream the server pushed.
	Protocol string
	StreamID uint32
	Pushed   bool
	// Request fields ("" when not seen or not decoded): Authority is :authority
	// or the Host header.
	Method, Scheme, Authority, Path string
	// Status is the final status, 0 if no response was seen; ContentType the
	// response's Content-Type.
	Status      int
	ContentType string

	// RequestOffset is the TCP stream offset where the record that carried the
	// request's first byte starts: in the client's stream, or for a pushed
	// stream in the server's (its PUSH_PROMISE); -1 if not seen. RequestNs is when
	// that record's first byte was seen.
	RequestOffset int64
	RequestNs     int64
	// EarlyData reports that the request's first byte went as TLS 1.3 0-RTT
	// data, before the client's handshake ended.
	EarlyData bool
	// ResponseStart is the server stream offset where the record carrying the
	// response's first byte starts, ResponseEnd where the record carrying its last
	// byte ends (-1 when not seen). FirstByteNs is when the first record's first
	// byte was seen; LastByteNs when the whole response had arrived: the latest
	// time any byte of the records that carried it was seen (a hole filled late
	// makes that later than the last record's arrival).
	ResponseStart, ResponseEnd int64
	FirstByteNs, LastByteNs    int64
	// ResponseSpans are the server stream ranges of the records that carried the
	// response, adjacent ones merged (HTTP/2 interleaves streams).
	ResponseSpans []Span
	// Bytes counts the response's plaintext bytes: HTTP/1.x the message, header
	// and body; HTTP/2 its HEADERS, CONTINUATION and DATA frames with their frame
	// headers. BodyBytes counts the body as sent (HTTP/2: DATA payloads without
	// padding).
	Bytes, BodyBytes int64
	// Complete reports that the response's end was seen (its last byte, or
	// END_STREAM).
	Complete bool
	// Incomplete reports that the request or response was not seen whole;
	// Reason says why.
	Incomplete bool
	Reason     string
}

// RecordSpan is a protected record after the handshake that is not application
// data.
type RecordSpan struct {
	Dir         flow.Dir
	Offset, End int64
	// ContentType is the real content type (0 when the record was lost);
	// HandshakeTypes the handshake messages in it (4: NewSessionTicket, 24:
	// KeyUpdate).
	ContentType    uint8
	HandshakeTypes []uint8
}

// Result is what the connection's decrypted records held.
type Result struct {
	// Decrypted reports that the key log had the connection's secrets.
	// NoKeysReason says why not; then nothing else is set.
	Decrypted    bool
	NoKeysReason string
	// Protocol is ProtocolHTTP2 when the client sent the HTTP/2 preface,
	// ProtocolHTTP1 when HTTP/1.x messages were found, "" otherwise.
	Protocol string
	// Version, CipherSuite and ALPN are the server's choices.
	Version     uint16
	CipherSuite uint16
	ALPN        string
	// HandshakeEnd is, per direction (flow.ToServer, flow.ToClient), the TCP
	// stream offset just after the record that carried that side's Finished; -1
	// when unknown. HandshakeEndInferred says the Finished itself was lost and the
	// end is where the next keys began.
	HandshakeEnd         [2]int64
	HandshakeEndInferred [2]bool
	// NonApplication lists the records after a side's handshake that are not
	// application data: session tickets, key updates, alerts.
	NonApplication []RecordSpan
	// Exchanges are the requests, in order of their first frame or message.
	Exchanges []Exchange
	// Decryption is the decryptor's account, its problems included.
	Decryption tlsdecrypt.Summary
}

// recordSpan maps a run of plaintext to the record that carried it.
type recordSpan struct {
	plainStart, plainEnd int64
	tcpStart, tcpEnd     int64
	firstNs, lastNs      int64
	early                bool // 0-RTT data
}

// direction is one side's plaintext bookkeeping.
type direction struct {
	plain  int64 // plaintext offset of the next application byte
	spans  []recordSpan
	h1     *httpmsg.Parser
	h1Lost bool  // a lost record of unknown length cut this direction's HTTP/1 stream
	lostAt int64 // plaintext offset of that cut
}

// Conn finds the HTTP exchanges of one TLS connection. The zero value is not
// ready: use New. A Conn is not safe for concurrent use.
type Conn struct {
	decryptor *tlsdecrypt.Decryptor
	dirs      [2]direction
	h2        *http2msg.Conn
	nonApp    []RecordSpan
	closed    bool
	result    Result
}

// New returns a Conn that decrypts with keys (nil: nothing is decrypted).
func New(keys *keylog.Log) *Conn {
	c := &Conn{h2: http2msg.NewConn()}
	c.dirs[flow.ToServer].h1 = httpmsg.NewRequestParser()
	c.dirs[flow.ToClient].h1 = httpmsg.NewResponseParser(c.dirs[flow.ToServer].h1)
	c.decryptor = tlsdecrypt.New(tlsdecrypt.Config{Keys: keys, OnRecord: c.onRecord})
	return c
}

// Write hands over bytes of direction dir with the time they were seen: the new
// bytes of each segment, as tlsrec.Stream.Write takes them, and if the caller
// has them, retransmitted bytes that fill a hole (see tlsdecrypt.Decryptor.Write).
func (c *Conn) Write(dir flow.Dir, offset int64, data []byte, length int, timeNs int64) {
	c.decryptor.Write(dir, offset, data, length, timeNs)
}

// onRecord routes one protected record.
func (c *Conn) onRecord(r *tlsdecrypt.Record) {
	d := &c.dirs[r.Dir]
	// Application data comes after a side's handshake, or as the client's 0-RTT
	// data before it.
	early := r.Epoch == tlsdecrypt.EpochEarly
	if !r.AfterHandshake && !early {
		return
	}
	application := r.ContentType == tlsrec.ContentApplicationData
	if r.Lost && r.PlaintextLength < 0 {
		// TLS 1.3 (or CBC): neither the type nor the length is known.
		if r.AfterHandshake {
			c.nonApp = append(c.nonApp, RecordSpan{Dir: r.Dir, Offset: r.Offset, End: r.End})
		}
		c.h2.Lose(r.Dir, ReasonRecordLost)
		if !d.h1Lost {
			d.h1Lost, d.lostAt = true, d.plain
		}
		return
	}
	if !application {
		if r.AfterHandshake {
			c.nonApp = append(c.nonApp, RecordSpan{Dir: r.Dir, Offset: r.Offset, End: r.End, ContentType: r.ContentType,
				HandshakeTypes: append([]uint8(nil), r.HandshakeTypes...)})
		}
		return
	}
	n := int64(r.PlaintextLength)
	if n == 0 {
		return
	}
	d.spans = append(d.spans, recordSpan{plainStart: d.plain, plainEnd: d.plain + n, tcpStart: r.Offset, tcpEnd: r.End,
		firstNs: r.FirstNs, lastNs: r.LastNs, early: early})
	// A lost record of known length is a hole of that size: bodies are skipped by
	// count, boundaries in it lose sync.
	c.h2.Write(r.Dir, d.plain, r.Plaintext, int(n))
	if !d.h1Lost {
		d.h1.Write(d.plain, r.Plaintext, int(n))
	}
	d.plain += n
}

// Close ends the connection and returns what was found.
func (c *Conn) Close() Result {
	if c.closed {
		return c.result
	}
	c.closed = true
	c.decryptor.Close()
	c.h2.Close()
	for i := range c.dirs {
		c.dirs[i].h1.Close()
	}
	summary := c.decryptor.Summary()
	res := Result{
		Decrypted:    summary.Keys,
		NoKeysReason: summary.NoKeysReason,
		Version:      summary.Version,
		CipherSuite:  summary.CipherSuite,
		ALPN:         summary.ALPN,
		Decryption:   summary,
	}
	for dir := range 2 {
		res.HandshakeEnd[dir] = summary.Dirs[dir].HandshakeEnd
		res.HandshakeEndInferred[dir] = summary.Dirs[dir].HandshakeEndInferred
	}
	if !summary.Keys {
		c.result = res
		return res
	}
	res.NonApplication = c.nonApp
	switch {
	case c.h2.IsHTTP2():
		res.Protocol = ProtocolHTTP2
		res.Exchanges = c.http2Exchanges()
	case c.dirs[flow.ToServer].h1.IsHTTP() || c.dirs[flow.ToClient].h1.IsHTTP():
		res.Protocol = ProtocolHTTP1
		res.Exchanges = c.http1Exchanges()
	}
	c.result = res
	return res
}

// locate finds the record that carried plaintext byte at of a direction.
func (d *direction) locate(at int64) (recordSpan, bool) {
	i := sort.Search(len(d.spans), func(i int) bool { return d.spans[i].plainEnd > at })
	if i == len(d.spans) || d.spans[i].plainStart > at || at < 0 {
		return recordSpan{}, false
	}
	return d.spans[i], true
}

// tcpSpans maps plaintext ranges to the ranges of the records that carried them,
// merging adjacent ones, and returns when the last byte of any of those records
// was seen.
func (d *direction) tcpSpans(plain []http2msg.Span) (spans []Span, lastNs int64) {
	for _, p := range plain {
		i := sort.Search(len(d.spans), func(i int) bool { return d.spans[i].plainEnd > p.Start })
		for ; i < len(d.spans) && d.spans[i].plainStart < p.End; i++ {
			r := d.spans[i]
			lastNs = max(lastNs, r.lastNs)
			if n := len(spans); n > 0 && spans[n-1].End >= r.tcpStart {
				spans[n-1].End = max(spans[n-1].End, r.tcpEnd)
				continue
			}
			spans = append(spans, Span{r.tcpStart, r.tcpEnd})
		}
	}
	return spans, lastNs
}

func newExchange(protocol string) Exchange {
	return Exchange{Protocol: protocol, RequestOffset: -1, ResponseStart: -1, ResponseEnd: -1}
}

// placeResponse fills the response's TCP offsets and times from plaintext ones.
func (c *Conn) placeResponse(x *Exchange, start, end int64) {
	server := &c.dirs[flow.ToClient]
	if first, ok := server.locate(start); ok {
		x.ResponseStart, x.FirstByteNs = first.tcpStart, first.firstNs
	}
	if end > start {
		if last, ok := server.locate(end - 1); ok {
			x.ResponseEnd, x.LastByteNs = last.tcpEnd, last.lastNs
		}
	}
}

func (c *Conn) placeRequest(x *Exchange, dir flow.Dir, at int64) {
	if r, ok := c.dirs[dir].locate(at); ok {
		x.RequestOffset, x.RequestNs, x.EarlyData = r.tcpStart, r.firstNs, r.early
	}
}

func (c *Conn) http2Exchanges() []Exchange {
	server := &c.dirs[flow.ToClient]
	var out []Exchange
	for _, s := range c.h2.Streams() {
		x := newExchange(ProtocolHTTP2)
		x.StreamID, x.Pushed = s.ID, s.Pushed
		x.Method, x.Scheme, x.Authority, x.Path = s.Method, s.Scheme, s.Authority, s.Path
		x.Status, x.ContentType = s.Status, s.ContentType
		requestDir := flow.ToServer
		if s.Pushed {
			requestDir = flow.ToClient
		}
		if s.RequestOffset >= 0 {
			c.placeRequest(&x, requestDir, s.RequestOffset)
		}
		if s.ResponseOffset >= 0 {
			c.placeResponse(&x, s.ResponseOffset, s.ResponseEnd)
			var lastNs int64
			x.ResponseSpans, lastNs = server.tcpSpans(s.ResponseSpans)
			x.LastByteNs = max(x.LastByteNs, lastNs)
		}
		x.Bytes = s.ResponseHeaderBytes + s.ResponseDataBytes
		x.BodyBytes = s.ResponseBodyBytes
		x.Complete = s.ResponseEndStream
		x.Incomplete, x.Reason = s.Incomplete, s.IncompleteReason
		if s.Reset && s.ResponseEndStream {
			x.Incomplete = false
			x.Reason = ""
		}
		out = append(out, x)
	}
	return out
}

func (c *Conn) http1Exchanges() []Exchange {
	client, server := &c.dirs[flow.ToServer], &c.dirs[flow.ToClient]
	requests, responses := client.h1.Messages(), server.h1.Messages()
	// The response to each request: the final response whose Request is its
	// index (interim 1xx responses come first and are skipped).
	answer := make(map[int]int)
	for i, m := range responses {
		if m.Request >= 0 && (m.Status < 100 || m.Status >= 200) {
			if _, seen := answer[m.Request]; !seen {
				answer[m.Request] = i
			}
		}
	}
	var out []Exchange
	for i, q := range requests {
		x := newExchange(ProtocolHTTP1)
		x.Method, x.Path, x.Authority, x.Scheme = q.Method, q.Target, q.Host, "https"
		c.placeRequest(&x, flow.ToServer, q.Offset)
		if q.Incomplete {
			x.Incomplete, x.Reason = true, q.IncompleteReason
		}
		if client.h1Lost && (q.End < 0 || q.End > client.lostAt) {
			x.Incomplete, x.Reason = true, ReasonRecordLost
		}
		if j, ok := answer[i]; ok {
			r := responses[j]
			x.Status, x.ContentType = r.Status, r.ContentType
			end := r.End
			x.Complete = end >= 0 && !r.Incomplete
			if end < 0 {
				end = server.plain
				if j+1 < len(responses) {
					end = responses[j+1].Offset
				}
			}
			if server.h1Lost && end > server.lostAt {
				end = server.lostAt
				x.Complete = false
				x.Incomplete, x.Reason = true, ReasonRecordLost
			}
			c.placeResponse(&x, r.Offset, end)
			var lastNs int64
			x.ResponseSpans, lastNs = server.tcpSpans([]http2msg.Span{{Start: r.Offset, End: end}})
			x.LastByteNs = max(x.LastByteNs, lastNs)
			x.Bytes = end - r.Offset
			if r.HeaderEnd >= 0 {
				x.BodyBytes = end - r.HeaderEnd
			}
			if r.Incomplete && !x.Incomplete {
				x.Incomplete, x.Reason = true, r.IncompleteReason
			}
		} else if server.h1Lost {
			x.Incomplete, x.Reason = true, ReasonRecordLost
		}
		out = append(out, x)
	}
	return out
}
