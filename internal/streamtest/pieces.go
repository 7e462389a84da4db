// Package streamtest is test support for the stream parsers (tlsrec, httpmsg,
// http2msg, tlsdecrypt): it cuts a byte stream into the pieces a capture hands them
// (Write(offset, data, length) calls of which only data was captured, with holes
// the capture missed), records what each side of a real connection writes, and
// runs a crypto/tls exchange to record (TLSExchange). It serves their tests and
// fuzz targets, so that each does these the same way; it is not for production
// code.
package streamtest

import "slices"

// Piece is one Write call: length bytes on the wire at offset, of which the first
// len(Data) were captured.
type Piece struct {
	Offset int64
	Data   []byte
	Length int
}

// Whole is stream as one fully captured piece.
func Whole(stream []byte) []Piece { return []Piece{{0, stream, len(stream)}} }

// Segmentize cuts stream into segments of segmentBytes, each captured up to
// capturedBytes (0: whole), dropping the segments whose index is in holes.
func Segmentize(stream []byte, segmentBytes, capturedBytes int, holes ...int) []Piece {
	var pieces []Piece
	for index, start := 0, 0; start < len(stream); index, start = index+1, start+segmentBytes {
		end := min(start+segmentBytes, len(stream))
		if slices.Contains(holes, index) {
			continue
		}
		captured := end
		if capturedBytes > 0 {
			captured = min(start+capturedBytes, end)
		}
		pieces = append(pieces, Piece{Offset: int64(start), Data: stream[start:captured], Length: end - start})
	}
	return pieces
}

// Plan turns fuzzer-chosen plan bytes into pieces of stream. Each plan byte gives a
// piece length (low 6 bits, plus one) and a mode (high 2 bits): 0 captured whole,
// 1 half captured, 2 nothing captured, 3 a hole (never handed over). With
// allCaptured every piece is captured whole. The rest of the stream is one last
// piece.
func Plan(stream, plan []byte, allCaptured bool) []Piece {
	var pieces []Piece
	position := 0
	for _, step := range plan {
		if position >= len(stream) {
			break
		}
		length := min(int(step&0x3f)+1, len(stream)-position)
		mode := step >> 6
		if allCaptured {
			mode = 0
		}
		switch mode {
		case 0:
			pieces = append(pieces, Piece{int64(position), stream[position : position+length], length})
		case 1:
			pieces = append(pieces, Piece{int64(position), stream[position : position+length/2], length})
		case 2:
			pieces = append(pieces, Piece{int64(position), nil, length})
		}
		position += length
	}
	if position < len(stream) {
		pieces = append(pieces, Piece{int64(position), stream[position:], len(stream) - position})
	}
	return pieces
}
