package quic

import (
	"bytes"
	"crypto/tls"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		b.WriteString(strings.Join(strings.Fields(line), ""))
	}
	out, err := hex.DecodeString(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rfcDCID is the client's Destination Connection ID of RFC 9001 Appendix A.
const rfcDCID = "8394c8f03e515708"

// TestInitialSecretsRFC9001 checks the keys of RFC 9001 Appendix A.1.
func TestInitialSecretsRFC9001(t *testing.T) {
	clientSecret, serverSecret := InitialSecrets(unhex(t, rfcDCID))
	client, server := InitialKeys(unhex(t, rfcDCID))
	for _, c := range []struct {
		name      string
		got, want []byte
	}{
		{"client_initial_secret", clientSecret, unhex(t, "c00cf151ca5be075ed0ebfb5c80323c4 2d6b7db67881289af4008f1f6c357aea")},
		{"client key", client.Key, unhex(t, "1f369613dd76d5467730efcbe3b1a22d")},
		{"client iv", client.IV, unhex(t, "fa044b2f42a3fd3b46fb255c")},
		{"client hp", client.HP, unhex(t, "9f50449e04a0e810283a1e9933adedd2")},
		{"server_initial_secret", serverSecret, unhex(t, "3c199828fd139efd216c155ad844cc81 fb82fa8d7446fa7d78be803acdda951b")},
		{"server key", server.Key, unhex(t, "cf3a5331653c364c88f0f379b6067e37")},
		{"server iv", server.IV, unhex(t, "0ac1493ca1905853b0bba03e")},
		{"server hp", server.HP, unhex(t, "c206b8d9b9f0f37644430b490eeaa314")},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s: %x, want %x", c.name, c.got, c.want)
		}
	}
}

// TestClientInitialRFC9001 removes the protection of RFC 9001 Appendix A.2's client
// Initial and reads its frames: a CRYPTO frame with the 241-byte ClientHello at offset 0,
// then PADDING to 1,200 bytes.
func TestClientInitialRFC9001(t *testing.T) {
	raw, err := os.ReadFile("testdata/rfc9001-a2-client-initial.hex")
	if err != nil {
		t.Fatal(err)
	}
	packet := unhex(t, string(raw))
	if len(packet) != 1200 {
		t.Fatalf("%d bytes, want 1200", len(packet))
	}
	h, err := ParseHeader(packet, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.Type != PacketInitial || h.Version != Version1 || hex.EncodeToString(h.DCID) != rfcDCID || len(h.SCID) != 0 || len(h.Token) != 0 || h.Size != 1200 {
		t.Fatalf("header %+v", h)
	}
	client, _ := InitialKeys(h.DCID)
	u, err := client.Open(packet, &h, -1)
	if err != nil {
		t.Fatal(err)
	}
	// The unprotected header of A.2: c300000001088394c8f03e5157080000449e00000002.
	if want := unhex(t, "c300000001088394c8f03e5157080000449e00000002"); !bytes.Equal(packet[:len(want)], want) {
		t.Errorf("unprotected header %x, want %x", packet[:len(want)], want)
	}
	if u.Number != 2 {
		t.Errorf("packet number %d, want 2", u.Number)
	}
	frames, err := ParseFrames(u.Payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 2 || frames[0].Type != FrameCrypto || frames[0].Offset != 0 || frames[0].Length != 241 || frames[1].Type != FramePadding {
		t.Fatalf("frames %+v", frames)
	}
	if got := int(frames[1].Length) + 4 + 241 + 16 + 22; got != 1200 {
		t.Errorf("padding %d bytes: the packet adds up to %d, want 1200", frames[1].Length, got)
	}
	// The ClientHello starts 01 0000ed 0303 ebf8fa56...: its random.
	info, err := parseClientHello(frames[0].Data[4:])
	if err != nil {
		t.Fatal(err)
	}
	if want := "ebf8fa56f12939b9584a3896472ec40bb863cfd3e86804fe3a47f06a2b69484c"; hex.EncodeToString(info.random) != want || info.serverName != "example.com" {
		t.Errorf("ClientHello random %x, SNI %q; want %s, example.com", info.random, info.serverName, want)
	}
}

// TestServerInitialRFC9001 opens RFC 9001 Appendix A.3's server Initial: an ACK of
// packet 0 and the ServerHello in a CRYPTO frame, packet number 1.
func TestServerInitialRFC9001(t *testing.T) {
	packet := unhex(t, `cf000000010008f067a5502a4262b500 4075c0d95a482cd0991cd25b0aac406a
		5816b6394100f37a1c69797554780bb3 8cc5a99f5ede4cf73c3ec2493a1839b3 dbcba3f6ea46c5b7684df3548e7ddeb9
		c3bf9c73cc3f3bded74b562bfb19fb84 022f8ef4cdd93795d77d06edbb7aaf2f 58891850abbdca3d20398c276456cbc4
		2158407dd074ee`)
	h, err := ParseHeader(packet, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.Type != PacketInitial || len(h.DCID) != 0 || hex.EncodeToString(h.SCID) != "f067a5502a4262b5" || h.Size != len(packet) {
		t.Fatalf("header %+v", h)
	}
	_, server := InitialKeys(unhex(t, rfcDCID))
	u, err := server.Open(packet, &h, 0)
	if err != nil {
		t.Fatal(err)
	}
	if u.Number != 1 {
		t.Errorf("packet number %d, want 1", u.Number)
	}
	wantPayload := unhex(t, `02000000000600405a020000560303ee fce7f7b37ba1d1632e96677825ddf739 88cfc79825df566dc5430b9a045a1200
		130100002e00330024001d00209d3c94 0d89690b84d08a60993c144eca684d10 81287c834d5311bcf32bb9da1a002b00 020304`)
	if !bytes.Equal(u.Payload, wantPayload) {
		t.Fatalf("payload %x, want %x", u.Payload, wantPayload)
	}
	frames, err := ParseFrames(u.Payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 2 || frames[0].Type != FrameAck || len(frames[0].AckRanges) != 1 || frames[0].AckRanges[0] != (AckRange{0, 0}) ||
		frames[1].Type != FrameCrypto || frames[1].Offset != 0 || frames[1].Length != 90 {
		t.Fatalf("frames %+v", frames)
	}
	suite, err := parseServerHelloSuite(frames[1].Data[4:])
	if err != nil || suite != tls.TLS_AES_128_GCM_SHA256 {
		t.Errorf("cipher suite %#04x (%v), want TLS_AES_128_GCM_SHA256", suite, err)
	}
}

// TestChaChaShortHeaderRFC9001 opens RFC 9001 Appendix A.5's 1-RTT packet protected
// with ChaCha20-Poly1305: a PING, packet number 654360564, and checks its key update
// secret.
func TestChaChaShortHeaderRFC9001(t *testing.T) {
	secret := unhex(t, "9ac312a7f877468ebe69422748ad00a1 5443f18203a07d6060f688f30f21632b")
	k, err := NewKeys(tls.TLS_CHACHA20_POLY1305_SHA256, secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want []byte
	}{
		{"key", k.Key, unhex(t, "c6d98ff3441c3fe1b2182094f69caa2e d4b716b65488960a7a984979fb23e1c8")},
		{"iv", k.IV, unhex(t, "e0459b3474bdd0e44a41c144")},
		{"hp", k.HP, unhex(t, "25a282b9e82f06f21f488917a4fc8f1b 73573685608597d0efcb076b0ab7a7a4")},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s: %x, want %x", c.name, c.got, c.want)
		}
	}
	next, err := k.Next()
	if err != nil {
		t.Fatal(err)
	}
	if want := unhex(t, "1223504755036d556342ee9361d25342 1a826c9ecdf3c7148684b36b714881f9"); !bytes.Equal(next.secret, want) {
		t.Errorf("ku secret %x, want %x", next.secret, want)
	}
	packet := unhex(t, "4cfe4189655e5cd55c41f69080575d7999c25a5bfb")
	h, err := ParseHeader(packet, 0)
	if err != nil {
		t.Fatal(err)
	}
	u, err := k.Open(packet, &h, 654360563)
	if err != nil {
		t.Fatal(err)
	}
	if u.Number != 654360564 || !bytes.Equal(u.Payload, []byte{0x01}) {
		t.Errorf("packet %d payload %x, want 654360564 01", u.Number, u.Payload)
	}
	// A wrong key fails authentication rather than yielding garbage.
	packet = unhex(t, "4cfe4189655e5cd55c41f69080575d7999c25a5bfb")
	if _, err := next.Open(packet, &h, 654360563); err == nil {
		t.Error("the next phase's keys opened the packet")
	}
}

// TestSealOpenRoundTrip seals with one suite's keys and opens again, for each suite.
func TestSealOpenRoundTrip(t *testing.T) {
	for _, suite := range []uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384, tls.TLS_CHACHA20_POLY1305_SHA256} {
		secret := bytes.Repeat([]byte{0x42}, 48)
		k, err := NewKeys(suite, secret)
		if err != nil {
			t.Fatal(err)
		}
		header := []byte{0x41, 0xaa, 0xbb, 0x00, 0x07} // short header, DCID aabb, 2-byte pn 7
		payload := append([]byte{0x01}, make([]byte, 30)...)
		wire := k.Seal(header, payload, 7, 3)
		h, err := ParseHeader(wire, 2)
		if err != nil {
			t.Fatal(err)
		}
		u, err := k.Open(wire, &h, 5)
		if err != nil {
			t.Fatalf("suite %#04x: %v", suite, err)
		}
		if u.Number != 7 || !bytes.Equal(u.Payload, payload) {
			t.Errorf("suite %#04x: packet %d payload %x", suite, u.Number, u.Payload)
		}
	}
}

// TestDecodePacketNumber checks RFC 9000 Appendix A.3's example and the edges.
func TestDecodePacketNumber(t *testing.T) {
	for _, c := range []struct {
		largest   int64
		truncated uint64
		bytes     int
		want      int64
	}{
		{0xa82f30ea, 0x9b32, 2, 0xa82f9b32}, // RFC 9000 A.3
		{-1, 0, 1, 0},
		{-1, 3, 4, 3},
		{254, 0x00, 1, 256},
		{255, 0xff, 1, 255},
		{300, 0x2c, 1, 300},
	} {
		if got := DecodePacketNumber(c.largest, c.truncated, c.bytes); got != c.want {
			t.Errorf("DecodePacketNumber(%d, %#x, %d) = %d, want %d", c.largest, c.truncated, c.bytes, got, c.want)
		}
	}
}
