package report

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestWriteJSONMatchesEncoder: the streamed JSON is byte for byte what encoding/json
// writes for the whole Report at once.
func TestWriteJSONMatchesEncoder(t *testing.T) {
	rtt := 40.5
	for _, n := range []int{0, 1, 3, 64, 65, 200} {
		r := &Report{Schema: Schema, Tool: "t", Source: Source{Kind: "file", Path: "x.pcap"}, Warnings: []string{"w"}}
		r.Connections = []Connection{}
		for i := 0; i < n; i++ {
			r.Connections = append(r.Connections, Connection{Index: i + 1, Client: "a", Server: "b", HandshakeRTTMs: &rtt,
				Rounds: []Round{{Index: 1, Bytes: 100, Limit: LimitCwnd}}, HTTP: []HTTPMessage{}, Notes: []string{}})
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := WriteJSON(&got, r); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%d connections: streamed JSON differs:\n%s\nwant:\n%s", n, got.String(), want.String())
		}
	}
}
