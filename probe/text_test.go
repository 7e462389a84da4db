package probe

import (
	"bytes"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/report"
)

// TestWriteTextEscapesServerText: what the server sent (a Location, a content
// encoding) is printed with its control characters escaped.
func TestWriteTextEscapesServerText(t *testing.T) {
	rep := &report.Report{Schema: report.Schema, Warnings: []string{"odd \x1b[31mwarning"}, Connections: []report.Connection{{
		Index: 1, Client: "192.0.2.1:40000", Server: "192.0.2.2:80", MSS: 1448,
		ClientTiming: &report.ClientTiming{URL: "http://192.0.2.2/", Status: 301, Protocol: "HTTP/1.1",
			ContentEncoding: "gzip\x1b[2J", Location: "http://example.com/\x1b]0;pwned\x07"},
	}}}
	var b bytes.Buffer
	if err := WriteText(&b, &Result{Report: rep, Runs: [][]int{{0}}}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("control characters reach the output:\n%q", out)
	}
	for _, want := range []string{`gzip\x1b[2J`, `\x1b]0;pwned\x07`, `odd \x1b[31mwarning`} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}
