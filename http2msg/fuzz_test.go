package http2msg

import (
	"reflect"
	"testing"

	"github.com/slowstart/slowstart/flow"
)

// planWrites hands stream over to c as direction dir following plan: each plan
// byte gives a piece length (low 6 bits, plus one) and a mode (high 2 bits): 0
// captured whole, 1 half captured, 2 nothing captured, 3 a hole (never handed
// over). With allCaptured every piece is captured whole. The rest of the stream
// is one last piece.
func planWrites(c *Conn, dir flow.Dir, stream, plan []byte, allCaptured bool) {
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
			c.Write(dir, int64(position), stream[position:position+length], length)
		case 1:
			c.Write(dir, int64(position), stream[position:position+length/2], length)
		case 2:
			c.Write(dir, int64(position), nil, length)
		}
		position += length
	}
	if position < len(stream) {
		c.Write(dir, int64(position), stream[position:], len(stream)-position)
	}
}

func FuzzHTTP2Frames(f *testing.F) {
	f.Add([]byte(ClientPreface+"\x00\x00\x00\x04\x00\x00\x00\x00\x00"), []byte("\x00\x00\x00\x04\x00\x00\x00\x00\x00"), []byte{3, 0x80 | 20})
	x := buildSynthetic(f)
	f.Add(x.client, x.server, []byte{0x3f, 0x3f, 0x80 | 30, 0x40 | 12, 9})
	f.Fuzz(func(t *testing.T, client, server, plan []byte) {
		whole := NewConn()
		whole.Write(flow.ToServer, 0, client, len(client))
		whole.Write(flow.ToClient, 0, server, len(server))
		whole.Close()

		split := NewConn()
		planWrites(split, flow.ToServer, client, plan, true)
		planWrites(split, flow.ToClient, server, plan, true)
		split.Close()
		if !reflect.DeepEqual(streamValues(split), streamValues(whole)) ||
			!reflect.DeepEqual(split.Info(flow.ToServer), whole.Info(flow.ToServer)) ||
			!reflect.DeepEqual(split.Info(flow.ToClient), whole.Info(flow.ToClient)) {
			t.Fatalf("split pieces give other streams than one piece:\n got %+v\nwant %+v", streamValues(split), streamValues(whole))
		}

		cut := NewConn()
		planWrites(cut, flow.ToServer, client, plan, false)
		planWrites(cut, flow.ToClient, server, plan, false)
		cut.Close()
		for _, s := range cut.Streams() {
			if s.ResponseOffset >= 0 && (s.ResponseEnd < s.ResponseOffset || s.ResponseEnd > int64(len(server))) {
				t.Fatalf("stream %d response %d..%d outside the server's %d bytes", s.ID, s.ResponseOffset, s.ResponseEnd, len(server))
			}
			if s.ResponseBodyBytes < 0 || s.ResponseBodyBytes > s.ResponseDataBytes {
				t.Fatalf("stream %d body %d of %d DATA bytes", s.ID, s.ResponseBodyBytes, s.ResponseDataBytes)
			}
			// A decoded field was captured: a cut capture never shows a path the
			// whole one did not.
			if s.Path != "" {
				found := false
				for _, w := range whole.Streams() {
					if w.ID == s.ID && w.Path == s.Path {
						found = true
					}
				}
				if !found {
					t.Fatalf("stream %d path %q appears only in the cut capture", s.ID, s.Path)
				}
			}
		}
	})
}
