// Package inorder holds the one rule by which the stream parsers (tlsrec, httpmsg,
// http2msg, tlsdecrypt) take a piece of a TCP byte stream handed over in order:
// what lies before the bytes already handed over is ignored, what lies after them
// leaves a hole first. It is a leaf with no imports, small enough to inline in
// their zero-allocation paths.
package inorder

// Past returns what of a piece (stream offset, captured data, length on the wire,
// len(data) <= length) lies past next, the offset up to which the stream was
// handed over: gap is the bytes between next and the piece (missing from the
// capture), data the piece's captured bytes past next, and end the offset after
// the piece. ok is false when the piece lies wholly before next.
func Past(next, offset int64, data []byte, length int) (gap int64, fresh []byte, end int64, ok bool) {
	end = offset + int64(length)
	if end <= next {
		return 0, nil, end, false
	}
	if offset < next {
		if trim := next - offset; trim >= int64(len(data)) {
			data = nil
		} else {
			data = data[trim:]
		}
		offset = next
	}
	return offset - next, data, end, true
}
