package model

import (
	"bytes"
	"testing"

	"github.com/slowstart/slowstart/internal/golden"
)

// TestWriteTextGolden: model's text for fixed parameters, against
// testdata/golden (go test -update rewrites them after a deliberate change).
func TestWriteTextGolden(t *testing.T) {
	cases := []struct {
		name      string
		p         Params
		iws       []int
		bodyBytes int64
	}{
		{"rate-limited.txt", Params{SizeBytes: 160_000 + 145, RTTNs: 130e6, RateBitsPerSecond: 15e6, CC: CCCubic}, []int{3, 10, 32}, 160_000},
		{"tls13-rwnd.txt", Params{SizeBytes: 160_000 + 145, RTTNs: 130e6, TLS: "1.3", ChainBytes: 6900, RwndBytes: 64_000, CC: CCCubic}, []int{10}, 160_000},
		{"delayed-ack.txt", Params{SizeBytes: 42_000 + 145, RTTNs: 70e6, RateBitsPerSecond: 1.2e6, DelayedACK: true, CC: CCReno}, []int{3, 10}, 42_000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Predict(tc.p, tc.iws, tc.bodyBytes)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := WriteText(&b, out); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, tc.name, b.Bytes())
		})
	}
}
