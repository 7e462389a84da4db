package tlsrec

import "bytes"

type handshakeState uint8

const (
	handshakeHeader handshakeState = iota // collecting a 4-byte message header
	handshakeBody                         // inside a message body
	handshakeLost                         // a message header fell into uncaptured bytes
)

// probeKind says what the first message header of a record must look like before
// the record is read as cleartext handshake.
type probeKind uint8

const (
	probeNone probeKind = iota
	// probeExactFill: after the handshake framing was lost, a record is trusted again
	// only if it starts with a known message type whose length fills it exactly.
	probeExactFill
	// probeClientHello: a client's handshake record after its ChangeCipherSpec is
	// cleartext only if it is a ClientHello filling the record (TLS 1.3
	// HelloRetryRequest in middlebox-compatibility mode); otherwise it is encrypted.
	probeClientHello
)

// handshakeReader follows handshake message framing across records and segments,
// and buffers the captured prefix of ClientHello and ServerHello messages.
type handshakeReader struct {
	state   handshakeState
	header  [handshakeHeaderBytes]byte
	headerN int
	// headerRecord is the index of the record the current message header started
	// in (-1 when not stored).
	headerRecord int
	messageType  uint8
	messageLeft  int
	probe        probeKind
	recordLength int

	buffering    bool // the current message is a hello being buffered
	buffer       []byte
	bufferBroken bool // a byte of the hello was not captured: buffer holds a prefix
	bufferParsed bool
}

// startRecord prepares for a handshake record's body. retryHelloPossible is set for
// a client's record after its ChangeCipherSpec.
func (h *handshakeReader) startRecord(recordLength int, retryHelloPossible bool) {
	h.recordLength = recordLength
	h.probe = probeNone
	atBoundary := h.state == handshakeLost || (h.state == handshakeHeader && h.headerN == 0)
	switch {
	case retryHelloPossible && atBoundary:
		h.probe = probeClientHello
	case !retryHelloPossible && h.state == handshakeLost:
		h.probe = probeExactFill
	default:
		return
	}
	if recordLength < handshakeHeaderBytes {
		h.state = handshakeLost
		return
	}
	h.state = handshakeHeader
	h.headerN = 0
}

func (h *handshakeReader) endRecord() {
	if h.probe != probeNone {
		// The record ended before its first message header was judged.
		h.probe = probeNone
		h.state = handshakeLost
	}
}

// lose gives up the handshake framing (record sync was lost, or resynced).
func (h *handshakeReader) lose() {
	h.state = handshakeLost
	h.headerN = 0
	h.probe = probeNone
	h.bufferBroken = true
}

func knownHandshakeType(messageType uint8) bool {
	switch messageType {
	case HandshakeHelloRequest, HandshakeClientHello, HandshakeServerHello,
		HandshakeNewSessionTicket, HandshakeEndOfEarlyData, HandshakeEncryptedExtensions,
		HandshakeCertificate, HandshakeServerKeyExchange, HandshakeCertificateRequest,
		HandshakeServerHelloDone, HandshakeCertificateVerify, HandshakeClientKeyExchange,
		HandshakeFinished, HandshakeCertificateStatus, HandshakeKeyUpdate:
		return true
	}
	return false
}

// pendingHeaderRecord is the record a message header begun but not yet whole
// started in, which noteHandshakeType will be told of (ok false: none).
func (h *handshakeReader) pendingHeaderRecord() (record int, ok bool) {
	return h.headerRecord, h.state == handshakeHeader && h.headerN > 0 && h.headerRecord >= 0
}

// feed reads captured handshake bytes.
func (h *handshakeReader) feed(data []byte, stream *Stream) {
	for len(data) > 0 {
		switch h.state {
		case handshakeLost:
			return
		case handshakeHeader:
			if h.headerN == 0 {
				h.headerRecord = stream.current
			}
			n := copy(h.header[h.headerN:], data)
			h.headerN += n
			data = data[n:]
			if h.headerN < handshakeHeaderBytes {
				return
			}
			h.headerN = 0
			messageType := h.header[0]
			messageLength := int(h.header[1])<<16 | int(h.header[2])<<8 | int(h.header[3])
			if kind := h.probe; kind != probeNone {
				h.probe = probeNone
				fills := handshakeHeaderBytes+messageLength == h.recordLength
				passed := fills && (kind == probeExactFill && knownHandshakeType(messageType) ||
					kind == probeClientHello && messageType == HandshakeClientHello)
				if !passed {
					h.state = handshakeLost
					stream.probeFailed(kind)
					return
				}
			}
			stream.noteHandshakeType(h.headerRecord, messageType)
			h.messageType = messageType
			h.messageLeft = messageLength
			h.state = handshakeBody
			if (messageType == HandshakeClientHello || messageType == HandshakeServerHello) &&
				messageLength <= maxHelloBytes {
				h.buffering = true
				h.buffer = h.buffer[:0]
				h.bufferBroken = false
				h.bufferParsed = false
			}
			if messageLength == 0 {
				h.endMessage(stream)
			}
		case handshakeBody:
			n := min(h.messageLeft, len(data))
			if h.buffering && !h.bufferBroken {
				h.buffer = append(h.buffer, data[:n]...)
			}
			h.messageLeft -= n
			data = data[n:]
			if h.messageLeft == 0 {
				h.endMessage(stream)
			}
		}
	}
}

// skip accounts for n handshake bytes that were not captured.
func (h *handshakeReader) skip(n int, stream *Stream) {
	for n > 0 {
		switch h.state {
		case handshakeLost:
			return
		case handshakeHeader:
			kind := h.probe
			h.lose()
			if kind != probeNone {
				stream.probeFailed(kind)
			}
			return
		case handshakeBody:
			step := min(h.messageLeft, n)
			if h.buffering {
				h.bufferBroken = true
				stream.finishHello()
			}
			h.messageLeft -= step
			n -= step
			if h.messageLeft == 0 {
				h.endMessage(stream)
			}
		}
	}
}

func (h *handshakeReader) endMessage(stream *Stream) {
	h.state = handshakeHeader
	h.headerN = 0
	if h.buffering {
		stream.finishHello()
	}
}

// helloRetryRandom is the ServerHello.random that marks a HelloRetryRequest
// (RFC 8446, section 4.1.3).
var helloRetryRandom = [32]byte{
	0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
}

// TLS extension numbers read from hellos.
const (
	extensionServerName        uint16 = 0
	extensionALPN              uint16 = 16
	extensionSupportedVersions uint16 = 43
)

// parseHello fills info from the buffered hello. truncated says the buffer holds
// only a prefix of the message.
func (h *handshakeReader) parseHello(info *HelloInfo, truncated bool) {
	info.Found = true
	if truncated {
		info.Truncated = true
	}
	if h.messageType == HandshakeClientHello {
		info.IsClient = true
		parseClientHello(h.buffer, info)
		return
	}
	parseServerHello(h.buffer, info, truncated)
}

// cursor reads big-endian fields from a possibly truncated message; once a read
// runs past the end, every later read fails too.
type cursor struct {
	data  []byte
	short bool
}

func (c *cursor) take(n int) []byte {
	if c.short || n > len(c.data) {
		c.short = true
		c.data = nil
		return nil
	}
	taken := c.data[:n]
	c.data = c.data[n:]
	return taken
}

func (c *cursor) uint8() uint8 {
	if b := c.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (c *cursor) uint16() uint16 {
	if b := c.take(2); b != nil {
		return uint16(b[0])<<8 | uint16(b[1])
	}
	return 0
}

// vector8 and vector16 read a vector with a 1- or 2-byte length prefix.
func (c *cursor) vector8() []byte  { return c.take(int(c.uint8())) }
func (c *cursor) vector16() []byte { return c.take(int(c.uint16())) }

// extensions calls visit for each extension captured whole. It reports whether the
// extension block was complete (false when cut by the capture or malformed).
func (c *cursor) extensions(visit func(extensionType uint16, body []byte)) bool {
	if c.short {
		return false
	}
	if len(c.data) == 0 {
		return true // no extensions at all
	}
	declared := int(c.uint16())
	if c.short {
		return false
	}
	complete := declared <= len(c.data)
	block := cursor{data: c.data[:min(declared, len(c.data))]}
	for len(block.data) > 0 {
		extensionType := block.uint16()
		body := block.vector16()
		if block.short {
			return false
		}
		visit(extensionType, body)
	}
	return complete
}

func isGREASE(value uint16) bool {
	return value&0x0f0f == 0x0a0a && value>>8 == value&0xff
}

func parseClientHello(message []byte, info *HelloInfo) {
	c := cursor{data: message}
	if version := c.uint16(); !c.short {
		info.LegacyVersion = version
	}
	if random := c.take(32); random != nil {
		info.Random = append([]byte(nil), random...)
	}
	c.vector8()  // legacy_session_id
	c.vector16() // cipher_suites
	c.vector8()  // legacy_compression_methods
	c.extensions(func(extensionType uint16, body []byte) {
		switch extensionType {
		case extensionServerName:
			list := cursor{data: body}
			names := cursor{data: list.vector16()}
			for len(names.data) > 0 && !names.short {
				nameType := names.uint8()
				name := names.vector16()
				if !names.short && nameType == 0 {
					info.SNI = string(name)
					break
				}
			}
		case extensionALPN:
			info.ALPN = parseALPN(body)
		case extensionSupportedVersions:
			list := cursor{data: body}
			versions := cursor{data: list.vector8()}
			offered := make([]uint16, 0, len(versions.data)/2)
			for len(versions.data) >= 2 {
				if version := versions.uint16(); !isGREASE(version) {
					offered = append(offered, version)
				}
			}
			info.Versions = offered
		}
	})
}

func parseALPN(body []byte) []string {
	list := cursor{data: body}
	entries := cursor{data: list.vector16()}
	var protocols []string
	for len(entries.data) > 0 {
		protocol := entries.vector8()
		if entries.short {
			break
		}
		protocols = append(protocols, string(protocol))
	}
	return protocols
}

func parseServerHello(message []byte, info *HelloInfo, truncated bool) {
	c := cursor{data: message}
	legacyVersion := c.uint16()
	if c.short {
		return
	}
	info.LegacyVersion = legacyVersion
	if random := c.take(32); random != nil {
		info.Random = append([]byte(nil), random...)
		if bytes.Equal(random, helloRetryRandom[:]) {
			info.HelloRetryRequest = true
		}
	}
	c.vector8() // legacy_session_id_echo
	if suite := c.uint16(); !c.short {
		info.CipherSuite = suite
	}
	c.uint8() // legacy_compression_method
	selected := uint16(0)
	hadExtensionBytes := len(c.data) > 0
	complete := c.extensions(func(extensionType uint16, body []byte) {
		switch extensionType {
		case extensionSupportedVersions:
			if len(body) == 2 {
				selected = uint16(body[0])<<8 | uint16(body[1])
			}
		case extensionALPN:
			info.ALPN = parseALPN(body)
		}
	})
	switch {
	case selected != 0:
		info.NegotiatedVersion = selected
	case complete && (hadExtensionBytes || !truncated):
		info.NegotiatedVersion = legacyVersion
	case legacyVersion < VersionTLS12:
		// TLS 1.3 always says 1.2 here; anything lower is the version itself.
		info.NegotiatedVersion = legacyVersion
	}
}
