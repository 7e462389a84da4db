package quic

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/slowstart/slowstart/keylog"
)

// Packet is one QUIC packet of a connection as read from a datagram.
type Packet struct {
	TimeNs     int64
	FromClient bool
	// Datagram is the 0-based index of the packet's datagram in its direction, and
	// DatagramBytes the datagram's UDP payload; coalesced packets share both.
	Datagram      int
	DatagramBytes int
	Type          PacketType
	Space         Space
	// Number is the packet number; -1 when the packet could not be decrypted.
	Number    int64
	Bytes     int // the packet's bytes on the wire, header and authentication tag included
	Decrypted bool
	// Frames of a decrypted packet; their Data points into a copy the Packet owns.
	Frames []Frame
	// Problem says why the packet was not decrypted or its frames not all read.
	Problem string
}

// AckEliciting reports whether any frame of the packet elicits an acknowledgement.
func (p *Packet) AckEliciting() bool {
	for i := range p.Frames {
		if p.Frames[i].AckEliciting() {
			return true
		}
	}
	return false
}

// InFlight reports whether the packet counts toward bytes in flight (RFC 9002 §2):
// ack-eliciting or carrying PADDING.
func (p *Packet) InFlight() bool {
	for i := range p.Frames {
		if p.Frames[i].AckEliciting() || p.Frames[i].Type == FramePadding {
			return true
		}
	}
	return false
}

// Conn decodes the datagrams of one QUIC connection, in the order they were captured
// at one point, and keeps what decryption needs: the Initial keys from the client's
// first Destination Connection ID, the client random and cipher suite from the TLS
// hellos, the key log's secrets, the largest packet numbers and the key phase.
type Conn struct {
	keys *keylog.Log
	// OriginalDCID is the Destination Connection ID of the client's first Initial.
	OriginalDCID []byte
	// ClientCID and ServerCID are the Source Connection IDs each end chose.
	ClientCID, ServerCID []byte
	// ClientRandom is the ClientHello's random (nil until it was read).
	ClientRandom []byte
	// CipherSuite is the suite of the ServerHello (0 until it was read).
	CipherSuite uint16
	// ServerName is the SNI of the ClientHello; ALPN the protocols the client offered.
	ServerName string
	ALPN       []string
	// Retry reports that the server sent a Retry.
	Retry bool
	// KeyProblem says why Handshake or 1-RTT packets could not be decrypted.
	KeyProblem string

	initialDCID []byte
	seenServer  bool
	open        [2][3]*Keys // [direction][space]; direction 0: client to server
	largest     [2][3]int64
	phase       [2]bool
	next        [2]*Keys
	hello       [2]cryptoPrefix
	datagrams   [2]int
}

// NewConn starts decoding a connection; keys may be nil (then only Initial packets
// are decrypted).
func NewConn(keys *keylog.Log) *Conn {
	c := &Conn{keys: keys}
	for d := range c.largest {
		for s := range c.largest[d] {
			c.largest[d][s] = -1
		}
	}
	return c
}

func dir(fromClient bool) int {
	if fromClient {
		return 0
	}
	return 1
}

// Datagram decodes the packets of one UDP datagram's payload. It copies the payload,
// so the caller may reuse it.
func (c *Conn) Datagram(timeNs int64, fromClient bool, payload []byte) []Packet {
	b := append([]byte(nil), payload...)
	d := dir(fromClient)
	index := c.datagrams[d]
	c.datagrams[d]++
	var out []Packet
	for len(b) > 0 {
		shortCID := len(c.ServerCID)
		if !fromClient {
			shortCID = len(c.ClientCID)
		}
		h, err := ParseHeader(b, shortCID)
		p := Packet{TimeNs: timeNs, FromClient: fromClient, Datagram: index, DatagramBytes: len(payload), Number: -1}
		if err != nil {
			if IsLongHeader(b[0]) || len(out) == 0 {
				p.Bytes, p.Problem = len(b), err.Error()
				out = append(out, p)
			} // else: padding after coalesced packets (RFC 9000 §12.2 allows junk)
			break
		}
		p.Type, p.Space, p.Bytes = h.Type, h.Type.Space(), h.Size
		c.learnIDs(&h, fromClient)
		if h.Type == PacketRetry {
			c.Retry = true
		}
		if p.Space != SpaceNone {
			c.decrypt(b[:h.Size], &h, &p)
		}
		out = append(out, p)
		b = b[h.Size:]
	}
	return out
}

func (c *Conn) learnIDs(h *Header, fromClient bool) {
	if h.Type == PacketOneRTT || h.Type == PacketVersionNegotiation {
		return
	}
	if fromClient {
		if h.Type == PacketInitial && (c.initialDCID == nil || (c.Retry && !c.seenServer && !bytes.Equal(h.DCID, c.initialDCID))) {
			c.setInitialKeys(h.DCID)
		}
		if c.ClientCID == nil {
			c.ClientCID = append([]byte{}, h.SCID...)
		}
		return
	}
	if h.Type == PacketRetry {
		c.seenServer = false // the client's next Initial carries a new DCID
		return
	}
	c.seenServer = true
	if c.ServerCID == nil || !bytes.Equal(c.ServerCID, h.SCID) {
		c.ServerCID = append([]byte{}, h.SCID...)
	}
}

func (c *Conn) setInitialKeys(dcid []byte) {
	if c.OriginalDCID == nil {
		c.OriginalDCID = append([]byte{}, dcid...)
	}
	c.initialDCID = append([]byte{}, dcid...)
	c.open[0][SpaceInitial], c.open[1][SpaceInitial] = InitialKeys(dcid)
}

// keysFor returns the keys of a space and direction, deriving them from the key log
// when they become available.
func (c *Conn) keysFor(space Space, d int) *Keys {
	if k := c.open[d][space]; k != nil || space == SpaceInitial {
		return k
	}
	if c.ClientRandom == nil || c.CipherSuite == 0 {
		return nil
	}
	if c.keys == nil {
		c.KeyProblem = "no key log: Handshake and 1-RTT packets stay encrypted"
		return nil
	}
	label := map[Space][2]string{
		SpaceHandshake:   {keylog.ClientHandshakeTrafficSecret, keylog.ServerHandshakeTrafficSecret},
		SpaceApplication: {keylog.ClientTrafficSecret0, keylog.ServerTrafficSecret0},
	}[space][d]
	secret, ok := c.keys.Secret(label, c.ClientRandom)
	if !ok {
		c.KeyProblem = fmt.Sprintf("the key log has no %s for client random %x", label, c.ClientRandom)
		return nil
	}
	k, err := NewKeys(c.CipherSuite, secret)
	if err != nil {
		c.KeyProblem = err.Error()
		return nil
	}
	c.open[d][space] = k
	return k
}

func (c *Conn) decrypt(packet []byte, h *Header, p *Packet) {
	d := dir(p.FromClient)
	k := c.keysFor(p.Space, d)
	if k == nil {
		p.Problem = "no keys for " + p.Space.String() + " packets"
		if c.KeyProblem != "" {
			p.Problem = c.KeyProblem
		}
		return
	}
	first, truncated, pnBytes, err := k.RemoveHeaderProtection(packet, h)
	if err != nil {
		p.Problem = err.Error()
		return
	}
	largest := c.largest[d][p.Space]
	var u Unprotected
	if h.Type == PacketOneRTT && (first&0x04 != 0) != c.phase[d] {
		// A key update (RFC 9001 §6): the next generation of keys.
		if c.next[d] == nil {
			c.next[d], err = k.Next()
		}
		if err == nil {
			u, err = c.next[d].openUnprotected(packet, h, first, truncated, pnBytes, largest)
		}
		if err == nil {
			c.open[d][p.Space], c.next[d], c.phase[d] = c.next[d], nil, !c.phase[d]
		}
	} else {
		u, err = k.openUnprotected(packet, h, first, truncated, pnBytes, largest)
	}
	if err != nil {
		p.Problem = err.Error()
		return
	}
	p.Number, p.Decrypted = u.Number, true
	if u.Number > largest {
		c.largest[d][p.Space] = u.Number
	}
	p.Frames, err = ParseFrames(u.Payload, nil)
	if err != nil {
		p.Problem = err.Error()
	}
	if p.Space == SpaceInitial {
		for i := range p.Frames {
			if f := &p.Frames[i]; f.Type == FrameCrypto {
				c.hello[d].add(f.Offset, f.Data)
			}
		}
		c.readHello(d)
	}
}

// readHello reads the ClientHello's random, SNI and ALPN, or the ServerHello's cipher
// suite, once the Initial CRYPTO stream holds the whole message.
func (c *Conn) readHello(d int) {
	msg := c.hello[d].data
	if len(msg) < 4 {
		return
	}
	n := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
	if len(msg) < 4+n {
		return
	}
	body := msg[4 : 4+n]
	switch {
	case d == 0 && msg[0] == 1 && c.ClientRandom == nil:
		if info, err := parseClientHello(body); err == nil {
			c.ClientRandom, c.ServerName, c.ALPN = info.random, info.serverName, info.alpn
		}
	case d == 1 && msg[0] == 2 && c.CipherSuite == 0:
		if suite, err := parseServerHelloSuite(body); err == nil {
			c.CipherSuite = suite
		}
	}
}

// cryptoPrefix keeps the contiguous start of a CRYPTO stream (up to maxHelloBytes).
type cryptoPrefix struct {
	data    []byte
	pending map[uint64][]byte
}

const maxHelloBytes = 1 << 16

func (s *cryptoPrefix) add(offset uint64, data []byte) {
	if offset >= maxHelloBytes || len(data) == 0 {
		return
	}
	if s.pending == nil {
		s.pending = map[uint64][]byte{}
	}
	s.pending[offset] = append([]byte(nil), data...)
	for progress := true; progress; {
		progress = false
		for off, chunk := range s.pending {
			end := off + uint64(len(chunk))
			have := uint64(len(s.data))
			if off <= have {
				if end > have && end <= maxHelloBytes {
					s.data = append(s.data, chunk[have-off:]...)
				}
				delete(s.pending, off)
				progress = true
			}
		}
	}
}

type clientHelloInfo struct {
	random     []byte
	serverName string
	alpn       []string
}

var errHello = errors.New("quic: malformed TLS hello")

// parseClientHello reads the random, SNI and ALPN of a ClientHello's body.
func parseClientHello(b []byte) (clientHelloInfo, error) {
	var info clientHelloInfo
	r := helloReader{b: b}
	r.take(2)
	info.random = append([]byte(nil), r.take(32)...)
	r.take(int(r.u8()))  // legacy_session_id
	r.take(int(r.u16())) // cipher_suites
	r.take(int(r.u8()))  // compression methods
	if r.bad {
		return info, errHello
	}
	ext := helloReader{b: r.take(int(r.u16()))}
	for len(ext.b) >= 4 && !ext.bad {
		typ, body := ext.u16(), helloReader{b: ext.take(int(ext.u16()))}
		switch typ {
		case 0: // server_name
			list := helloReader{b: body.take(int(body.u16()))}
			if list.u8() == 0 {
				info.serverName = string(list.take(int(list.u16())))
			}
		case 16: // ALPN
			list := helloReader{b: body.take(int(body.u16()))}
			for len(list.b) > 0 && !list.bad {
				if p := list.take(int(list.u8())); !list.bad {
					info.alpn = append(info.alpn, string(p))
				}
			}
		}
	}
	return info, nil
}

// parseServerHelloSuite reads the cipher suite of a ServerHello's body.
func parseServerHelloSuite(b []byte) (uint16, error) {
	r := helloReader{b: b}
	r.take(2 + 32)
	r.take(int(r.u8()))
	suite := r.u16()
	if r.bad {
		return 0, errHello
	}
	return suite, nil
}

type helloReader struct {
	b   []byte
	bad bool
}

func (r *helloReader) take(n int) []byte {
	if r.bad || n > len(r.b) {
		r.bad = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *helloReader) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *helloReader) u16() uint16 {
	if b := r.take(2); b != nil {
		return uint16(b[0])<<8 | uint16(b[1])
	}
	return 0
}
