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
