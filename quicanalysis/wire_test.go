package quicanalysis

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/quic-go/qpack"

	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/quic"
)

// wire builds the datagrams of one QUIC version 1 connection for tests, protected with
// package quic's own functions: Initial packets with the keys of the client's first
// Destination Connection ID (RFC 9001 §5.2), Handshake and 1-RTT packets with made-up
// TLS secrets that the key log Keys holds for the ClientHello's random. Every packet
// number is sent in 4 bytes; connection IDs are 8 bytes.
type wire struct {
	t                    testing.TB
	odcid                []byte
	clientCID, serverCID []byte
	random               []byte
	seal                 [2][3]*quic.Keys // [0: client→server, 1: server→client][space]
	nextPN               [2][3]int64
	Keys                 *keylog.Log
	client, server       netip.AddrPort
}

func newWire(t testing.TB) *wire {
	w := &wire{t: t,
		odcid:     []byte{0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08},
		clientCID: []byte{0xc1, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1},
		serverCID: []byte{0x5e, 0x5e, 0x5e, 0x5e, 0x5e, 0x5e, 0x5e, 0x5e},
		random:    bytes.Repeat([]byte{0x2a}, 32),
		Keys:      keylog.New(),
		client:    netip.MustParseAddrPort("192.0.2.1:50000"),
		server:    netip.MustParseAddrPort("198.51.100.7:443"),
	}
	w.seal[0][quic.SpaceInitial], w.seal[1][quic.SpaceInitial] = quic.InitialKeys(w.odcid)
	for space, labels := range map[quic.Space][2]string{
		quic.SpaceHandshake:   {keylog.ClientHandshakeTrafficSecret, keylog.ServerHandshakeTrafficSecret},
		quic.SpaceApplication: {keylog.ClientTrafficSecret0, keylog.ServerTrafficSecret0},
	} {
		for d, label := range labels {
			secret := sha256.Sum256([]byte(label))
			w.Keys.Add(label, w.random, secret[:])
			k, err := quic.NewKeys(tls.TLS_AES_128_GCM_SHA256, secret[:])
			if err != nil {
				t.Fatal(err)
			}
			w.seal[d][space] = k
		}
	}
	return w
}

func appendVarint(b []byte, v uint64) []byte {
	switch {
	case v < 1<<6:
		return append(b, byte(v))
	case v < 1<<14:
		return append(b, 0x40|byte(v>>8), byte(v))
	case v < 1<<30:
		return append(b, 0x80|byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return binary.BigEndian.AppendUint64(b, v|0xc0<<56)
}

func cryptoFrame(offset uint64, data []byte) []byte {
	b := appendVarint(appendVarint([]byte{0x06}, offset), uint64(len(data)))
	return append(b, data...)
}

func streamFrame(id, offset uint64, data []byte, fin bool) []byte {
	typ := byte(0x0e) // STREAM with OFF and LEN
	if fin {
		typ |= 0x01
	}
	b := appendVarint(appendVarint(appendVarint([]byte{typ}, id), offset), uint64(len(data)))
	return append(b, data...)
}

// ackFrame acknowledges the packets smallest..largest with an encoded ACK Delay.
func ackFrame(smallest, largest int64, delay uint64) []byte {
	b := appendVarint([]byte{0x02}, uint64(largest))
	b = appendVarint(b, delay)
	b = appendVarint(b, 0)
	return appendVarint(b, uint64(largest-smallest))
}

// tlsMessage is a TLS handshake message of n bytes in all (header included).
func tlsMessage(typ byte, n int, body []byte) []byte {
	m := []byte{typ, byte((n - 4) >> 16), byte((n - 4) >> 8), byte(n - 4)}
	m = append(m, body...)
	for len(m) < n {
		m = append(m, 0x11)
	}
	return m[:n]
}

// clientHello and serverHello carry what package quic reads: the random, the suite.
func (w *wire) clientHello() []byte {
	body := append([]byte{0x03, 0x03}, w.random...)
	body = append(body, 0, 0, 2, 0x13, 0x01, 1, 0, 0, 0)
	return tlsMessage(1, 4+len(body), body)
}

func serverHello() []byte {
	body := append([]byte{0x03, 0x03}, bytes.Repeat([]byte{0x5a}, 32)...)
	body = append(body, 0, 0x13, 0x01, 0, 0, 0)
	return tlsMessage(2, 4+len(body), body)
}

// serverHandshake is the server's Handshake-space flight with a Certificate message of
// certificateBytes: EncryptedExtensions, Certificate, CertificateVerify, Finished.
func serverHandshake(certificateBytes int) []byte {
	var b []byte
	b = append(b, tlsMessage(8, 6, []byte{0, 0})...)
	b = append(b, tlsMessage(11, certificateBytes, nil)...)
	b = append(b, tlsMessage(15, 80, nil)...)
	return append(b, tlsMessage(20, 36, nil)...)
}

func clientFinished() []byte { return tlsMessage(20, 36, nil) }

// h3Request and h3Response are HTTP/3 streams: HEADERS (QPACK, static table), and for
// the response a DATA frame of bodyBytes.
func h3Request(path string) []byte {
	return h3HeaderFrame([]qpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: "example.test"}, {Name: ":path", Value: path}})
}

func h3Response(bodyBytes int) []byte {
	b := h3HeaderFrame([]qpack.HeaderField{{Name: ":status", Value: "200"}})
	b = appendVarint(appendVarint(b, 0x00), uint64(bodyBytes))
	return append(b, make([]byte, bodyBytes)...)
}

func h3HeaderFrame(fields []qpack.HeaderField) []byte {
	var block bytes.Buffer
	enc := qpack.NewEncoder(&block)
	for _, f := range fields {
		if err := enc.WriteField(f); err != nil {
			panic(err)
		}
	}
	return append(appendVarint(appendVarint(nil, 0x01), uint64(block.Len())), block.Bytes()...)
}

// overhead is what a packet of the space adds to its frames: header, packet number
// and authentication tag.
func overhead(space quic.Space) int {
	switch space {
	case quic.SpaceInitial:
		return 1 + 4 + 1 + 8 + 1 + 8 + 1 + 2 + 4 + 16
	case quic.SpaceHandshake:
		return 1 + 4 + 1 + 8 + 1 + 8 + 2 + 4 + 16
	}
	return 1 + 8 + 4 + 16
}

// packet protects one packet of the space from the client or the server whose frames
// are frames, padded with PADDING to size bytes in all when size is larger; it returns
// the packet and its number.
func (w *wire) packet(fromClient bool, space quic.Space, frames []byte, size int) ([]byte, int64) {
	d := 1
	dcid, scid := w.clientCID, w.serverCID
	if fromClient {
		d = 0
		dcid, scid = w.serverCID, w.clientCID
		if space == quic.SpaceInitial && w.nextPN[0][quic.SpaceInitial] == 0 {
			dcid = w.odcid
		}
	}
	if pad := size - overhead(space) - len(frames); pad > 0 {
		frames = append(append([]byte(nil), frames...), make([]byte, pad)...)
	}
	pn := w.nextPN[d][space]
	w.nextPN[d][space]++
	var header []byte
	if space == quic.SpaceApplication {
		header = append([]byte{0x43}, dcid...)
	} else {
		typ := byte(0x00)
		if space == quic.SpaceHandshake {
			typ = 0x20
		}
		header = []byte{0xc3 | typ, 0, 0, 0, 1, byte(len(dcid))}
		header = append(header, dcid...)
		header = append(header, byte(len(scid)))
		header = append(header, scid...)
		if space == quic.SpaceInitial {
			header = append(header, 0) // no token
		}
		length := 4 + len(frames) + 16
		header = append(header, 0x40|byte(length>>8), byte(length))
	}
	pnOffset := len(header)
	header = binary.BigEndian.AppendUint32(header, uint32(pn))
	return w.seal[d][space].Seal(header, frames, pn, pnOffset), pn
}

// datagram makes a Datagram of the packets from one end.
func (w *wire) datagram(timeNs int64, fromClient bool, packets ...[]byte) Datagram {
	src, dst := w.server, w.client
	if fromClient {
		src, dst = w.client, w.server
	}
	return Datagram{TimeNs: timeNs, Src: src, Dst: dst, Payload: bytes.Join(packets, nil)}
}

// TestWireDecodes: the builder's packets decode with package quic, the key log's
// secrets found by the ClientHello's random: a check of the test's own tool.
func TestWireDecodes(t *testing.T) {
	w := newWire(t)
	ch, _ := w.packet(true, quic.SpaceInitial, cryptoFrame(0, w.clientHello()), 1200)
	sh, _ := w.packet(false, quic.SpaceInitial, append(ackFrame(0, 0, 0), cryptoFrame(0, serverHello())...), 0)
	hs, _ := w.packet(false, quic.SpaceHandshake, cryptoFrame(0, serverHandshake(1000)), 0)
	app, _ := w.packet(false, quic.SpaceApplication, streamFrame(0, 0, h3Response(10), true), 0)
	c := quic.NewConn(w.Keys)
	if got := c.Datagram(0, true, ch); len(got) != 1 || !got[0].Decrypted || got[0].Bytes != 1200 {
		t.Fatalf("client Initial: %+v", got)
	}
	got := c.Datagram(1, false, bytes.Join([][]byte{sh, hs, app}, nil))
	if len(got) != 3 {
		t.Fatalf("%d packets, want 3", len(got))
	}
	for i, p := range got {
		if !p.Decrypted || p.Problem != "" {
			t.Errorf("packet %d (%s): not decrypted: %s", i, p.Space, p.Problem)
		}
	}
	if c.CipherSuite != tls.TLS_AES_128_GCM_SHA256 || !bytes.Equal(c.ClientRandom, w.random) {
		t.Errorf("suite %#x, random %x", c.CipherSuite, c.ClientRandom)
	}
}
