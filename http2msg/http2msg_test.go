package http2msg

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/slowstart/slowstart/flow"
)

// frameWriter writes frames with x/net/http2's Framer and remembers where each
// frame lay in the stream.
type frameWriter struct {
	buf    bytes.Buffer
	framer *http2.Framer
	spans  []Span
	enc    *hpack.Encoder
	block  bytes.Buffer
}

func newFrameWriter(preface bool) *frameWriter {
	w := &frameWriter{}
	if preface {
		w.buf.WriteString(ClientPreface)
	}
	w.framer = http2.NewFramer(&w.buf, nil)
	w.enc = hpack.NewEncoder(&w.block)
	return w
}

// frame runs write and records the span of what it wrote.
func (w *frameWriter) frame(t testing.TB, write func() error) Span {
	t.Helper()
	start := int64(w.buf.Len())
	if err := write(); err != nil {
		t.Fatal(err)
	}
	span := Span{start, int64(w.buf.Len())}
	w.spans = append(w.spans, span)
	return span
}

// encode HPACK-encodes fields as name, value pairs.
func (w *frameWriter) encode(t testing.TB, pairs ...string) []byte {
	t.Helper()
	w.block.Reset()
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := w.enc.WriteField(hpack.HeaderField{Name: pairs[i], Value: pairs[i+1]}); err != nil {
			t.Fatal(err)
		}
	}
	return bytes.Clone(w.block.Bytes())
}

// synthetic is a hand-built exchange with every frame type, and what it must give.
type synthetic struct {
	client, server []byte
	want           []Stream
	wantInfo       [2]DirInfo
}

func buildSynthetic(t testing.TB) synthetic {
	t.Helper()
	c, s := newFrameWriter(true), newFrameWriter(false)
	c.frame(t, func() error {
		return c.framer.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 8192}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	})
	c.frame(t, func() error { return c.framer.WriteWindowUpdate(0, 15<<20) })
	// Stream 1: a GET whose header block is split over HEADERS and CONTINUATION.
	block1 := c.encode(t, ":method", "GET", ":scheme", "https", ":authority", "example.test", ":path", "/index.html", "user-agent", "test")
	req1 := c.frame(t, func() error {
		return c.framer.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block1[:10], EndStream: true})
	})
	c.frame(t, func() error { return c.framer.WriteContinuation(1, true, block1[10:]) })
	// Stream 3: padded, with priority; a POST with a body.
	block3 := c.encode(t, ":method", "POST", ":scheme", "https", ":authority", "example.test", ":path", "/form")
	req3 := c.frame(t, func() error {
		return c.framer.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block3, EndHeaders: true, PadLength: 7,
			Priority: http2.PriorityParam{StreamDep: 1, Weight: 100}})
	})
	c.frame(t, func() error {
		return c.framer.WriteDataPadded(3, false, bytes.Repeat([]byte("p"), 300), make([]byte, 20))
	})
	req3End := c.frame(t, func() error { return c.framer.WriteData(3, true, bytes.Repeat([]byte("q"), 200)) })
	c.frame(t, func() error { return c.framer.WritePriority(5, http2.PriorityParam{StreamDep: 3, Weight: 1}) })
	c.frame(t, func() error { return c.framer.WriteSettingsAck() })
	c.frame(t, func() error { return c.framer.WriteRSTStream(3, http2.ErrCodeCancel) })

	s.frame(t, func() error {
		return s.framer.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 128})
	})
	s.frame(t, func() error { return s.framer.WriteSettingsAck() })
	// Stream 2 is pushed, promised on stream 1.
	promise := s.encode(t, ":method", "GET", ":scheme", "https", ":authority", "example.test", ":path", "/style.css")
	push := s.frame(t, func() error {
		return s.framer.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: promise, EndHeaders: true, PadLength: 3})
	})
	interim := s.encode(t, ":status", "103", "link", "</style.css>; rel=preload", "content-type", "not/this")
	h103 := s.frame(t, func() error {
		return s.framer.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: interim, EndHeaders: true})
	})
	final := s.encode(t, ":status", "200", "content-type", "text/html", "content-length", "5000")
	h200 := s.frame(t, func() error {
		return s.framer.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: final, EndHeaders: true})
	})
	d1 := s.frame(t, func() error {
		return s.framer.WriteDataPadded(1, false, bytes.Repeat([]byte("a"), 3000), make([]byte, 50))
	})
	css := s.encode(t, ":status", "200", "content-type", "text/css")
	h2 := s.frame(t, func() error {
		return s.framer.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, BlockFragment: css, EndHeaders: true})
	})
	d2 := s.frame(t, func() error { return s.framer.WriteData(2, true, bytes.Repeat([]byte("c"), 700)) })
	d1b := s.frame(t, func() error { return s.framer.WriteData(1, true, bytes.Repeat([]byte("a"), 2000)) })
	s.frame(t, func() error { return s.framer.WritePing(false, [8]byte{1}) })
	s.frame(t, func() error { return s.framer.WriteWindowUpdate(0, 1000) })
	s.frame(t, func() error { return s.framer.WriteGoAway(3, http2.ErrCodeNo, nil) })

	size := func(spans ...Span) int64 {
		var n int64
		for _, sp := range spans {
			n += sp.End - sp.Start
		}
		return n
	}
	out := synthetic{client: c.buf.Bytes(), server: s.buf.Bytes()}
	out.want = []Stream{
		{ID: 1, Method: "GET", Scheme: "https", Authority: "example.test", Path: "/index.html", Status: 200, ContentType: "text/html",
			ContentLength: 5000, InterimResponses: 1, RequestOffset: req1.Start, RequestEnd: req1.End,
			ResponseOffset: push.Start, ResponseEnd: d1b.End, ResponseEndStream: true,
			ResponseHeaderBytes: size(push, h103, h200), ResponseDataBytes: size(d1, d1b), ResponseBodyBytes: 5000,
			ResponseSpans: []Span{{push.Start, d1.End}, {d1b.Start, d1b.End}}},
		{ID: 2, Pushed: true, Method: "GET", Scheme: "https", Authority: "example.test", Path: "/style.css", Status: 200, ContentType: "text/css",
			ContentLength: -1, RequestOffset: push.Start, RequestEnd: push.End, ResponseOffset: h2.Start, ResponseEnd: d2.End, ResponseEndStream: true,
			ResponseHeaderBytes: size(h2), ResponseDataBytes: size(d2), ResponseBodyBytes: 700, ResponseSpans: []Span{{h2.Start, d2.End}}},
		{ID: 3, Method: "POST", Scheme: "https", Authority: "example.test", Path: "/form", ContentLength: -1,
			RequestOffset: req3.Start, RequestEnd: req3End.End, RequestBodyBytes: 500, ResponseOffset: -1, ResponseEnd: -1,
			Reset: true, ResetBy: flow.ToServer, ResetCode: uint32(http2.ErrCodeCancel), Incomplete: true, IncompleteReason: ReasonReset},
	}
	out.wantInfo[flow.ToServer] = DirInfo{Settings: []Setting{{0x1, 8192}, {0x4, 1 << 20}}, WindowUpdates: 1, WindowIncrementsBytes: 15 << 20,
		Frames: [10]int64{FrameData: 2, FrameHeaders: 2, FramePriority: 1, FrameRSTStream: 1, FrameSettings: 2, FrameWindowUpdate: 1, FrameContinuation: 1}, LostAt: -1}
	out.wantInfo[flow.ToClient] = DirInfo{Settings: []Setting{{0x3, 128}}, WindowUpdates: 1, WindowIncrementsBytes: 1000, Pings: 1,
		GoAway: true, GoAwayLastStreamID: 3, Frames: [10]int64{FrameData: 3, FrameHeaders: 3, FrameSettings: 2, FramePushPromise: 1, FramePing: 1, FrameGoAway: 1, FrameWindowUpdate: 1}, LostAt: -1}
	return out
}

// feed hands both streams over in pieces of at most step bytes, alternating
// directions, with the bytes past captureLimit of each piece not captured.
func feed(client, server []byte, step, captureLimit int) *Conn {
	c := NewConn()
	streams := [2][]byte{client, server}
	var at [2]int
	for at[0] < len(client) || at[1] < len(server) {
		for dir := range 2 {
			stream := streams[dir]
			if at[dir] >= len(stream) {
				continue
			}
			end := min(at[dir]+step, len(stream))
			piece := stream[at[dir]:end]
			c.Write(flow.Dir(dir), int64(at[dir]), piece[:min(len(piece), captureLimit)], len(piece))
			at[dir] = end
		}
	}
	c.Close()
	return c
}

// streamValues lists the streams by id (their order of first appearance
// depends on how the directions' pieces interleave).
func streamValues(c *Conn) []Stream {
	var out []Stream
	for _, s := range c.Streams() {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Stream) int { return int(a.ID) - int(b.ID) })
	return out
}

func TestSyntheticFrames(t *testing.T) {
	x := buildSynthetic(t)
	for _, step := range []int{1, 7, 100, 1 << 20} {
		c := feed(x.client, x.server, step, 1<<30)
		if !c.IsHTTP2() {
			t.Fatalf("step %d: not HTTP/2", step)
		}
		if got := streamValues(c); !reflect.DeepEqual(got, x.want) {
			t.Errorf("step %d: streams\n got %+v\nwant %+v", step, got, x.want)
		}
		for dir := range 2 {
			if got := c.Info(flow.Dir(dir)); !reflect.DeepEqual(got, x.wantInfo[dir]) {
				t.Errorf("step %d dir %d: info\n got %+v\nwant %+v", step, dir, got, x.wantInfo[dir])
			}
		}
	}
}

func TestNotHTTP2(t *testing.T) {
	c := NewConn()
	c.Write(flow.ToServer, 0, []byte("GET / HTTP/1.1\r\n\r\n"), 18)
	c.Write(flow.ToClient, 0, []byte("HTTP/1.1 200 OK\r\n\r\n"), 19)
	c.Close()
	if c.IsHTTP2() || !c.Decided() || len(c.Streams()) != 0 {
		t.Errorf("HTTP/1.1 taken for HTTP/2: %v", c)
	}
}

func TestUncapturedBytes(t *testing.T) {
	x := buildSynthetic(t)
	t.Run("DATA payload not captured", func(t *testing.T) {
		// Cut the first 3000-byte DATA frame of stream 1 after 100 payload bytes: the
		// body still counts, by the frame's length and its captured pad length.
		c := NewConn()
		c.Write(flow.ToServer, 0, x.client, len(x.client))
		d1 := serverFrameSpans(t, x.server)[5] // SETTINGS, ACK, PUSH_PROMISE, HEADERS 103, HEADERS 200, DATA
		cut := d1.Start + FrameHeaderBytes + 100
		c.Write(flow.ToClient, 0, x.server[:cut], int(cut))
		c.Write(flow.ToClient, cut, nil, int(d1.End-cut))
		c.Write(flow.ToClient, d1.End, x.server[d1.End:], len(x.server)-int(d1.End))
		c.Close()
		if got := streamValues(c); !reflect.DeepEqual(got, x.want) {
			t.Errorf("streams\n got %+v\nwant %+v", got, x.want)
		}
	})
	t.Run("header block not captured", func(t *testing.T) {
		// Stream 1's final HEADERS not captured: its fields and every later block
		// of the server (stream 2's response) are unknown; the framing is not lost.
		c := NewConn()
		c.Write(flow.ToServer, 0, x.client, len(x.client))
		spans := serverFrameSpans(t, x.server)
		final := spans[4] // SETTINGS, ACK, PUSH_PROMISE, HEADERS 103, HEADERS 200
		c.Write(flow.ToClient, 0, x.server[:final.Start+FrameHeaderBytes], int(final.Start+FrameHeaderBytes))
		c.Write(flow.ToClient, final.Start+FrameHeaderBytes, nil, int(final.End-final.Start-FrameHeaderBytes))
		c.Write(flow.ToClient, final.End, x.server[final.End:], len(x.server)-int(final.End))
		c.Close()
		got := streamValues(c)
		one, two := got[0], got[1]
		if one.Status != 0 || one.ContentType != "" || !one.Incomplete || one.IncompleteReason != ReasonHeadersNotCaptured {
			t.Errorf("stream 1 %+v, want no status, incomplete for the header block", one)
		}
		if one.ResponseBodyBytes != 5000 || !one.ResponseEndStream {
			t.Errorf("stream 1 body %d end %t, want 5000 and END_STREAM (framing kept)", one.ResponseBodyBytes, one.ResponseEndStream)
		}
		if two.Status != 0 || two.Path != "/style.css" || !two.Incomplete || two.ResponseBodyBytes != 700 {
			t.Errorf("stream 2 %+v, want its promise decoded, its response headers not", two)
		}
		if c.Info(flow.ToClient).LostAt != -1 {
			t.Errorf("framing lost at %d", c.Info(flow.ToClient).LostAt)
		}
	})
	t.Run("frame header not captured", func(t *testing.T) {
		spans := serverFrameSpans(t, x.server)
		d2 := spans[7] // ... DATA 1, HEADERS 2, DATA 2
		c := NewConn()
		c.Write(flow.ToServer, 0, x.client, len(x.client))
		c.Write(flow.ToClient, 0, x.server[:d2.Start], int(d2.Start))
		c.Write(flow.ToClient, d2.Start, nil, len(x.server)-int(d2.Start))
		c.Close()
		if info := c.Info(flow.ToClient); info.LostAt != d2.Start {
			t.Errorf("lost at %d, want %d", info.LostAt, d2.Start)
		}
		for _, s := range c.Streams() {
			if s.ID == 1 || s.ID == 2 {
				if !s.Incomplete || s.ResponseEndStream {
					t.Errorf("stream %d after lost framing: %+v", s.ID, *s)
				}
			}
		}
	})
}

// serverFrameSpans walks frame headers: an independent reading of frame bounds.
func serverFrameSpans(t *testing.T, stream []byte) []Span {
	t.Helper()
	var spans []Span
	for at := 0; at+FrameHeaderBytes <= len(stream); {
		n := int(stream[at])<<16 | int(stream[at+1])<<8 | int(stream[at+2])
		spans = append(spans, Span{int64(at), int64(at + FrameHeaderBytes + n)})
		at += FrameHeaderBytes + n
	}
	return spans
}
