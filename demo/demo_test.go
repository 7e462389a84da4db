package demo

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/browser"
	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/lab/labserver"
	"github.com/slowstart/slowstart/report"
)

// TestDemo runs the built-in demo and checks its story: IW 3 cuts the 6.9 KB chain
// (one more TLS round trip) and every column's verdict is exact with its own IW.
func TestDemo(t *testing.T) {
	testroot.Require(t, "network namespaces and a live capture")
	if testing.Short() {
		t.Skip("the demo takes a few seconds")
	}
	t.Cleanup(func() { labserver.CloseAll() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := Run(ctx, Default())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteText(&b, d); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	if len(d.Columns) != 3 {
		t.Fatalf("%d columns, want 3", len(d.Columns))
	}
	for _, col := range d.Columns {
		c := col.Result.Final(0)
		iw := c.InitialWindow
		switch {
		case iw == nil:
			t.Errorf("IW %d: no initial window", col.IW)
		case iw.Verdict == report.VerdictExact && iw.Segments != col.IW:
			t.Errorf("IW %d: wrong exact verdict %d", col.IW, iw.Segments)
		case iw.Verdict == report.VerdictLowerBound && iw.Segments > col.IW:
			t.Errorf("IW %d: lower bound %d above it", col.IW, iw.Segments)
		case iw.Verdict == report.VerdictRange && (col.IW < iw.Segments || col.IW > iw.SegmentsMax):
			t.Errorf("IW %d: range %d-%d excludes it", col.IW, iw.Segments, iw.SegmentsMax)
		case col.IW == 3 && iw.Verdict != report.VerdictExact:
			// IW 3 cuts the chain.
			t.Errorf("IW %d: verdict %s, want exact", col.IW, iw.Verdict)
		case col.IW == 32 && !(iw.Verdict == report.VerdictRange && iw.ExactIf == "linux_cubic_or_reno" && iw.SegmentsMax == 32):
			// IW 32's first HTTP round is 3× the handshake's: exactly 32 for CUBIC (the
			// lab's), a range for a sender whose window may grow during the handshake.
			t.Errorf("IW %d: verdict %s %d-%d (exact if %q), want a range up to 32, exact for CUBIC", col.IW, iw.Verdict, iw.Segments, iw.SegmentsMax, iw.ExactIf)
		}
	}
	c3, c32 := d.Columns[0].Result.Final(0), d.Columns[2].Result.Final(0)
	if c3.RoundTrips.TLS != 3 || c32.RoundTrips.TLS != 2 {
		t.Errorf("TLS round trips: IW 3 %d (want 3), IW 32 %d (want 2)", c3.RoundTrips.TLS, c32.RoundTrips.TLS)
	}
	if c3.RoundTrips.Total <= c32.RoundTrips.Total {
		t.Errorf("IW 3 took %d round trips, IW 32 %d: want more with IW 3", c3.RoundTrips.Total, c32.RoundTrips.Total)
	}
	// The page loads in Chromium: each critical path as the model predicts it (unless
	// a busy host slowed the browser itself), longer at IW 3 than at IW 32.
	if _, err := os.Stat(browser.DefaultChromium); err != nil {
		t.Log("Chromium is not installed: no page loads to check")
		return
	}
	// Chromium's choice of connection for a request depends on timing the model
	// cannot see; a critical path off the model's gets one more demo, and fails
	// only when it is off again (timing misses are retried, never wrong readings:
	// the IW checks above are not).
	if misses := pageLoadMisses(t, d); len(misses) > 0 {
		t.Logf("page loads off the model, the demo once more: %s", strings.Join(misses, "; "))
		again, err := Run(ctx, Default())
		if err != nil {
			t.Fatal(err)
		}
		for _, miss := range pageLoadMisses(t, again) {
			t.Error(miss)
		}
		d = again
	}
	if p3, p32 := d.Columns[0].PageLoad, d.Columns[2].PageLoad; p3 != nil && p32 != nil && p3.CriticalPath.RoundTrips <= p32.CriticalPath.RoundTrips {
		t.Errorf("the page's critical path: %d round trips at IW 3, %d at IW 32: want more at IW 3", p3.CriticalPath.RoundTrips, p32.CriticalPath.RoundTrips)
	}
}

// pageLoadMisses compares each column's critical path in Chromium with the
// model's prediction.
func pageLoadMisses(t *testing.T, d *Result) []string {
	t.Helper()
	var misses []string
	for _, col := range d.Columns {
		p := col.PageLoad
		if p == nil || p.CriticalPath.Predicted == nil {
			misses = append(misses, fmt.Sprintf("IW %d: no page load or no prediction (%v)", col.IW, col.PageErr))
			continue
		}
		if slow := labserver.SlowBrowser(p, d.Config.RTT); slow != "" {
			t.Logf("IW %d: %s: the critical path is not compared", col.IW, slow)
			continue
		}
		pred := p.CriticalPath.Predicted
		if got, want := p.CriticalPath.RoundTrips, pred.RoundTrips; got != want {
			if pred.Min < pred.Max && got >= pred.Min && got <= pred.Max {
				// The demo's page is not chosen off a round boundary: with its
				// responses two segments smaller or larger the model itself
				// predicts this many, so a few bytes of headers decide it.
				t.Logf("IW %d: the critical path took %d round trips, the model predicts %d (%d to %d within two segments of the sizes)", col.IW, got, want, pred.Min, pred.Max)
				continue
			}
			misses = append(misses, fmt.Sprintf("IW %d: the page's critical path took %d round trips, the model predicts %d (%d to %d within two segments): %+v", col.IW, got, want, pred.Min, pred.Max, p.CriticalPath.Steps))
		}
	}
	return misses
}
