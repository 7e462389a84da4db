package quicanalysis

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/quic-go/qpack"

	"github.com/slowstart/slowstart/quic"
	"github.com/slowstart/slowstart/report"
)

// maxStreamBytes bounds the bytes of one stream kept for reading messages; the
// sizes and times of longer streams are still counted.
const maxStreamBytes = 1 << 20

// stream reassembles the start of a byte stream (up to maxStreamBytes) and tracks its
// end.
type stream struct {
	data    []byte
	pending map[uint64][]byte
	end     uint64 // one past the highest byte seen
	fin     bool
	firstNs int64
	lastNs  int64 // when the last new byte was seen
}

func (s *stream) add(timeNs int64, f *quic.Frame) {
	if s.firstNs == 0 {
		s.firstNs = timeNs
	}
	if e := f.Offset + f.Length; e > s.end || (f.Fin && !s.fin) {
		s.end = max(s.end, e)
		s.lastNs = timeNs
	}
	s.fin = s.fin || f.Fin
	if f.Offset >= maxStreamBytes || len(f.Data) == 0 {
		return
	}
	if s.pending == nil {
		s.pending = map[uint64][]byte{}
	}
	s.pending[f.Offset] = append([]byte(nil), f.Data...)
	for progress := true; progress; {
		progress = false
		for off, chunk := range s.pending {
			have := uint64(len(s.data))
			if off > have {
				continue
			}
			if end := off + uint64(len(chunk)); end > have {
				s.data = append(s.data, chunk[have-off:min(uint64(len(chunk)), maxStreamBytes-off)]...)
			}
			delete(s.pending, off)
			progress = true
		}
	}
}

// handshake is what the server's TLS handshake messages say.
type handshakeInfo struct {
	serverBytes      int
	certificateBytes int
	compressed       bool
}

// TLS handshake message types.
const (
	tlsCertificate           = 11
	tlsCompressedCertificate = 25
)

// handshakeOf reads the server's handshake messages from its Handshake-space CRYPTO
// frames: the size of the Certificate (or CompressedCertificate) message.
func handshakeOf(c *conn) handshakeInfo {
	var info handshakeInfo
	var hs stream
	ends := map[quic.Space]uint64{}
	for i := range c.packets {
		p := &c.packets[i]
		if p.FromClient {
			continue
		}
		for j := range p.Frames {
			f := &p.Frames[j]
			if f.Type != quic.FrameCrypto {
				continue
			}
			ends[p.Space] = max(ends[p.Space], f.Offset+f.Length)
			if p.Space == quic.SpaceHandshake {
				hs.add(p.TimeNs, f)
			}
		}
	}
	info.serverBytes = int(ends[quic.SpaceInitial] + ends[quic.SpaceHandshake])
	msgs := hs.data
	for len(msgs) >= 4 {
		n := int(msgs[1])<<16 | int(msgs[2])<<8 | int(msgs[3])
		switch msgs[0] {
		case tlsCertificate:
			info.certificateBytes = 4 + n
		case tlsCompressedCertificate:
			info.certificateBytes, info.compressed = 4+n, true
		}
		if len(msgs) < 4+n {
			break
		}
		msgs = msgs[4+n:]
	}
	return info
}

// HTTP/3 frame types (RFC 9114 §7.2).
const (
	h3Data    = 0x00
	h3Headers = 0x01
)

// httpMessages reads the HTTP/3 exchanges: one per client-initiated bidirectional
// stream, the request's HEADERS (QPACK with the static table; a field that refers to
// the dynamic table is left out) and the response's.
func httpMessages(c *conn, ms func(int64) float64) []report.HTTPMessage {
	requests, responses := map[uint64]*stream{}, map[uint64]*stream{}
	for i := range c.packets {
		p := &c.packets[i]
		for j := range p.Frames {
			f := &p.Frames[j]
			if f.Type != quic.FrameStream || f.StreamID%4 != 0 {
				continue
			}
			m := responses
			if p.FromClient {
				m = requests
			}
			s := m[f.StreamID]
			if s == nil {
				s = &stream{}
				m[f.StreamID] = s
			}
			s.add(p.TimeNs, f)
		}
	}
	out := []report.HTTPMessage{}
	for _, id := range sortedKeys(requests) {
		req := requests[id]
		m := report.HTTPMessage{}
		t := ms(req.firstNs)
		m.RequestMs = &t
		fields, _ := readH3(req.data, req.end)
		m.Method, m.Path = fields[":method"], fields[":path"]
		if resp := responses[id]; resp != nil {
			first, last := ms(resp.firstNs), ms(resp.lastNs)
			m.FirstByteMs, m.LastByteMs = &first, &last
			m.Bytes = int64(resp.end)
			fields, body := readH3(resp.data, resp.end)
			m.Status, _ = strconv.Atoi(fields[":status"])
			m.BodyBytes = body
			m.Incomplete = !resp.fin || uint64(len(resp.data)) < resp.end
		} else {
			m.Incomplete = true
		}
		out = append(out, m)
	}
	return out
}

// readH3 reads the HTTP/3 frames of a stream's start: the first HEADERS frame's fields
// and the DATA bytes, from the frame headers found in the kept bytes (a DATA frame
// counts in full even when its end was not kept; frames whose header was not kept
// are not counted).
func readH3(data []byte, end uint64) (map[string]string, int64) {
	fields := map[string]string{}
	var body int64
	pos := uint64(0)
	for pos < uint64(len(data)) {
		typ, n1, err1 := quic.ReadVarint(data[pos:])
		if err1 != nil {
			break
		}
		length, n2, err2 := quic.ReadVarint(data[pos+uint64(n1):])
		if err2 != nil {
			break
		}
		start := pos + uint64(n1+n2)
		switch typ {
		case h3Headers:
			if len(fields) == 0 && start+length <= uint64(len(data)) {
				decodeFields(data[start:start+length], fields)
			}
		case h3Data:
			body += int64(min(length, end-min(start, end)))
		}
		pos = start + length
	}
	return fields, body
}

func decodeFields(block []byte, fields map[string]string) {
	dec := qpack.NewDecoder()
	next := dec.Decode(block)
	for {
		hf, err := next()
		if errors.Is(err, io.EOF) || err != nil {
			return
		}
		fields[http.CanonicalHeaderKey(hf.Name)] = hf.Value
		if len(hf.Name) > 0 && hf.Name[0] == ':' {
			fields[hf.Name] = hf.Value
		}
	}
}
