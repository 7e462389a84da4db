package lab

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/hoststeal"
)

// TestDropsShownAndWarned: the drops of every trial reach the per-trial table,
// the point's line, and, when the queue dropped data packets, a warning that
// names the queue and how to change it.
func TestDropsShownAndWarned(t *testing.T) {
	spec := Spec{RTTNs: 70e6, RateBitsPerSecond: 1_200_000, IW: 10, SizeBytes: 42000}
	if err := spec.Normalize(); err != nil {
		t.Fatal(err)
	}
	clean := spec
	clean.IW = 3
	var rows []Row
	for i, drops := range []int64{9, 5, 0, 2} {
		rows = append(rows, NewRow(spec, TrialResult{Trial: i + 1, FCTPaperMs: 1000 + float64(i), FCTUserMs: 1200,
			DataPacketsDroppedQueue: drops, DataPacketsLost: drops, AckPacketsDroppedLoss: int64(i % 2)}))
		rows = append(rows, NewRow(clean, TrialResult{Trial: i + 1, FCTPaperMs: 400, FCTUserMs: 700}))
	}
	sums := SummarizePoints([]Spec{spec, clean}, rows)
	if d := sums[0].Drops; d.DataQueue != 16 || d.TrialsWithDataDrops != 3 || d.AckLoss != 2 || sums[1].Drops.DataQueue != 0 {
		t.Fatalf("drops summed %+v and %+v", sums[0].Drops, sums[1].Drops)
	}
	var b bytes.Buffer
	if err := WriteTrials(&b, rows[:2]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "data drops queue") || !strings.Contains(b.String(), "   9 ") {
		t.Errorf("the trial table lacks the drops:\n%s", b.String())
	}
	b.Reset()
	if err := WriteSummaries(&b, sums); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "drops/trial queue") || !strings.Contains(b.String(), "4.0") {
		t.Errorf("the point's line lacks its 4.0 drops per trial:\n%s", b.String())
	}
	warnings := DropWarnings(sums)
	if len(warnings) != 1 {
		t.Fatalf("warnings %q, want one for the IW 10 point", warnings)
	}
	for _, want := range []string{sums[0].Point, "dropped 16 data packets in 3 of 4 trials", "no random loss was configured", "10 packets", "--queue 100p"} {
		if !strings.Contains(warnings[0], want) {
			t.Errorf("the warning lacks %q: %s", want, warnings[0])
		}
	}
}

func TestStealWarning(t *testing.T) {
	quiet := NewHostSteal(hoststeal.Reading{Stolen: 10 * time.Millisecond, Elapsed: 10 * time.Second, Share: 0.0005})
	if w := StealWarning(quiet); w != "" {
		t.Errorf("a quiet host warned: %s", w)
	}
	busy := NewHostSteal(hoststeal.Reading{Stolen: 3 * time.Second, Elapsed: 10 * time.Second, Share: 0.15})
	if w := StealWarning(busy); !strings.Contains(w, "too busy") || !strings.Contains(w, "15%") {
		t.Errorf("a busy host: %q", w)
	}
}

// TestComparisonOfTCPAndQUIC: a TCP point and its HTTP/3 twin are paired, their
// medians set side by side with what QUIC saved, and the text shows both lines and
// the saving; a point whose twin is missing is not compared.
func TestComparisonOfTCPAndQUIC(t *testing.T) {
	tcp := Spec{RTTNs: 70e6, RateBitsPerSecond: 10_000_000, IW: 10, SizeBytes: 100_000, TLS: "1.3", HTTP2: true, ChainBytes: 9000}
	if err := tcp.Normalize(); err != nil {
		t.Fatal(err)
	}
	quic, err := tcp.HTTP3Twin()
	if err != nil {
		t.Fatal(err)
	}
	if !quic.HTTP3 || quic.HTTP2 || quic.TLS != "1.3" || quic.Label() == tcp.Label() || quic.ChainBytes != 9000 {
		t.Fatalf("twin %+v of %+v", quic, tcp)
	}
	other := tcp
	other.SizeBytes = 5000
	var rows []Row
	for i, fct := range []float64{410, 412, 409} {
		rows = append(rows, NewRow(tcp, TrialResult{Trial: i + 1, FCTUserMs: fct, FCTPaperMs: fct - 235, FirstByteMs: 235,
			RoundTrips: &TrialRoundTrips{Handshake: 2, Data: 3, Total: 5}}))
		rows = append(rows, NewRow(quic, TrialResult{Trial: i + 1, FCTUserMs: fct - 50, FCTPaperMs: fct - 290, FirstByteMs: 236,
			RoundTrips: &TrialRoundTrips{Handshake: 2, Data: 2 + i%2, Total: 4 + i%2}}))
	}
	rows = append(rows, NewRow(quic, TrialResult{Trial: 4, Error: "timeout"}))
	specs := []Spec{tcp, quic, other}
	sums := SummarizePoints(specs, rows)
	if sums[0].RoundTrips == nil || sums[0].RoundTrips.Total.Median != 5 || sums[1].RoundTrips.Total.Median != 4 || sums[2].RoundTrips != nil {
		t.Fatalf("round trips summed %+v, %+v, %+v", sums[0].RoundTrips, sums[1].RoundTrips, sums[2].RoundTrips)
	}
	cs := Comparisons(specs, sums)
	if len(cs) != 1 {
		t.Fatalf("%d comparisons, want 1 (the point without a twin is left out)", len(cs))
	}
	c := cs[0]
	if c.TCP.Point != tcp.Label() || c.QUIC.Point != quic.Label() || c.QUIC.Trials != 3 || c.RoundTripsSaved != 1 || c.FCTUserSavedMs != 50 {
		t.Errorf("comparison %+v", c)
	}
	if c.TCP.Protocol != "HTTP/2 over TLS 1.3 over TCP" || c.QUIC.Protocol != "HTTP/3 over QUIC" {
		t.Errorf("protocols %q, %q", c.TCP.Protocol, c.QUIC.Protocol)
	}
	var b bytes.Buffer
	if err := WriteComparisons(&b, cs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 + 3 = 5", "2 + 2 = 4", "QUIC saved 1 round trip and 50.0 ms"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the comparison lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := WriteTrials(&b, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "QUIC") || !strings.Contains(b.String(), "2 + 3 = 5") {
		t.Errorf("the trial table lacks the protocol or the round trips:\n%s", b.String())
	}
	var csv bytes.Buffer
	if err := WriteCSV(&csv, rows[:2]); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(csv.String(), "\n"); !strings.Contains(lines[0], "http3") || !strings.Contains(lines[0], "round_trips_total") ||
		!strings.Contains(lines[2], ",true,") || !strings.Contains(lines[2], ",2,2,4,") {
		t.Errorf("CSV:\n%s", csv.String())
	}
	for _, bad := range []Spec{{Server: ServerNginx, TLS: "1.3"}, {Server: "apache", TLS: "1.3"}} {
		if _, err := bad.HTTP3Twin(); err == nil {
			t.Errorf("%+v has an HTTP/3 twin", bad)
		}
	}
}
