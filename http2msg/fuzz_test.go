package http2msg

import (
	"reflect"
	"testing"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/internal/streamtest"
)

// planWrites hands stream over to c as direction dir in the pieces plan makes
// (streamtest.Plan).
func planWrites(c *Conn, dir flow.Dir, stream, plan []byte, allCaptured bool) {
	for _, p := range streamtest.Plan(stream, plan, allCaptured) {
		c.Write(dir, p.Offset, p.Data, p.Length)
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
