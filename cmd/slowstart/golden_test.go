package main

import (
	"testing"

	"github.com/slowstart/slowstart/internal/golden"
)

// TestTextGolden: the text of analyze (committed captures) and compare (a
// committed CSV of made-up trials, testdata/iw3-iw10.csv) against
// testdata/golden; go test -update rewrites them after a deliberate change. The
// renderings of model, lab and probe --exact have theirs in their packages.
func TestTextGolden(t *testing.T) {
	const captures = "../../testdata/captures/"
	cases := []struct {
		name string
		args []string
	}{
		{"analyze-h1-iw10.txt", []string{"analyze", captures + "rtt150-iw10-h1-100000.client.pcap"}},
		{"analyze-tls13h2-server.txt", []string{"analyze", captures + "rtt150-iw20-tls13h2-200000.server.pcap"}},
		{"analyze-hrr-iw3.txt", []string{"analyze", captures + "hrr-builtin-iw3-tls13.client.pcap"}},
		{"analyze-realworld-google.txt", []string{"analyze", "../../testdata/realworld/cs__http_google.pcapng"}},
		{"compare-iw3-iw10.txt", []string{"compare", "testdata/iw3-iw10.csv@iw=3", "testdata/iw3-iw10.csv@iw=10"}},
		{"compare-iw3-iw10-paper.txt", []string{"compare", "testdata/iw3-iw10.csv@iw=10", "testdata/iw3-iw10.csv@iw=3", "--metric", "fct_paper"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden.Check(t, tc.name, []byte(out))
		})
	}
}
