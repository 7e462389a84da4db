package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/redact"
	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/survey"
	"github.com/slowstart/slowstart/survey/surveylab"
)

// TestSurveyKilledResumedSharded surveys a small emulated fleet (30 server
// addresses with known initial windows behind paths of 10 and 30 ms, 300
// targets) with the built binary into a SQLite store: the survey is killed
// (SIGKILL) at random moments three times and resumed, and must end with
// every target measured exactly once, every exact reading equal to its
// server's window (or a bound below it), and no nftables table left. Then the
// same list in three shards, run as three processes at once and merged, must
// hold the same targets and readings as the whole survey.
func TestSurveyKilledResumedSharded(t *testing.T) {
	testroot.Require(t, "network namespaces, nftables and live captures")
	binary := builtBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	fleet, err := surveylab.Start(ctx, surveylab.Options{Groups: []surveylab.Group{
		{RTT: 10 * time.Millisecond, Addresses: 15, IWs: []int{10}},
		{RTT: 30 * time.Millisecond, Addresses: 15, IWs: []int{4}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fleet.Close(); err != nil {
			t.Errorf("closing the fleet: %v", err)
		}
		if left := labNamespacesLeft(); len(left) > 0 {
			t.Errorf("namespaces left: %v", left)
		}
	})
	truth := map[string]int{}
	var lines []string
	for p := range 10 {
		for _, s := range fleet.Servers {
			u := fmt.Sprintf("http://%s:%d/bytes/%d?p=%d", s.Addr, surveylab.BuiltinHTTPPort, 2000+100*p, p)
			truth[redact.URL(u)] = s.IW // as the stores hold it: the query's value redacted
			lines = append(lines, fmt.Sprintf("g%d %s", s.Group, u))
		}
	}
	list := writeSurveyList(t, lines...)
	dir := t.TempDir()
	args := func(store string, extra ...string) []string {
		return append([]string{"survey", list, "--netns", fleet.Vantage, "--store", store, "--no-passive", "--exact-runs", "2",
			"--pause", "0", "--parallel", "64", "--timeout", "5s"}, extra...)
	}

	whole := filepath.Join(dir, "whole.db")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	kills := 0
	for attempt := 0; ; attempt++ {
		if attempt > 10 {
			t.Fatal("the survey did not finish in 10 runs")
		}
		cmd := exec.CommandContext(ctx, binary, args(whole)...)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killed := make(chan bool, 1)
		if kills < 3 {
			delay := time.Duration(500+rng.IntN(2000)) * time.Millisecond
			go func() {
				timer := time.NewTimer(delay)
				defer timer.Stop()
				select {
				case <-timer.C:
					killed <- cmd.Process.Kill() == nil
				case <-ctx.Done():
					killed <- false
				}
			}()
		}
		// While it runs, the vantage holds at most one exact table: the survey's.
		sampled := make(chan int, 1)
		exited := make(chan struct{})
		go func() {
			most := 0
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					if tables, err := exact.Tables(fleet.Vantage); err == nil {
						most = max(most, len(tables))
					}
				case <-exited:
					sampled <- most
					return
				case <-ctx.Done():
					sampled <- most
					return
				}
			}
		}()
		err := cmd.Wait()
		close(exited)
		most := <-sampled
		if most > 1 {
			t.Errorf("run %d: %d exact tables at once in the vantage, want the survey's one", attempt+1, most)
		}
		wasKilled := false
		if kills < 3 {
			wasKilled = <-killed && cmd.ProcessState.ExitCode() == -1
		}
		if wasKilled {
			kills++
			t.Logf("run %d killed: %d rows so far", attempt+1, countStoreRows(t, whole))
			continue
		}
		if err != nil {
			t.Fatalf("survey run %d: %v\n%s", attempt+1, err, out.String())
		}
		if most != 1 {
			t.Errorf("the survey that ran to its end had %d exact tables at most, want its one", most)
		}
		if !strings.Contains(out.String(), "Exact initial window") {
			t.Errorf("no summary at the end:\n%s", out.String())
		}
		break
	}
	rows := checkFleetStore(t, whole, truth)
	if tables, err := exact.Tables(fleet.Vantage); err != nil || len(tables) > 0 {
		t.Errorf("nftables tables left in the vantage: %v %v", tables, err)
	}

	// Three shards at once, merged.
	var wg sync.WaitGroup
	stores := make([]string, 3)
	outs := make([]string, 3)
	errs := make([]error, 3)
	for i := range 3 {
		stores[i] = filepath.Join(dir, fmt.Sprintf("shard%d.jsonl", i))
		wg.Go(func() {
			b, err := exec.CommandContext(ctx, binary, args(stores[i], "--shard", fmt.Sprintf("%d/3", i))...).CombinedOutput()
			outs[i], errs[i] = string(b), err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("shard %d: %v\n%s", i, err, outs[i])
		}
	}
	merged := filepath.Join(dir, "merged.db")
	if code, out, errOut := runCLI(t, append([]string{"survey", "merge", "--store", merged}, stores...)...); code != exitOK {
		t.Fatalf("merge: exit %d\n%s%s", code, out, errOut)
	}
	mergedRows := checkFleetStore(t, merged, truth)
	// The same targets; a reading may differ between two measurements (runs
	// that disagree are "inconsistent" once and agree another time), but both
	// agree with the truth (checkFleetStore).
	differ := 0
	for k, v := range rows {
		w, found := mergedRows[k]
		if !found {
			t.Errorf("%s: in the whole survey, not in the merged shards", k)
		} else if w != v {
			differ++
		}
	}
	t.Logf("%d targets read differently by the shards and the whole survey", differ)
	// The report reads the merged store.
	code, out, errOut := runCLI(t, "survey", "report", merged, "--by", "label")
	if code != exitOK || !strings.Contains(out, "g0") || !strings.Contains(out, "10 (") {
		t.Errorf("report: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "survey", "report", merged, "--json")
	if code != exitOK {
		t.Fatalf("report --json: exit %d\n%s", code, errOut)
	}
	checkSchema(t, "survey-summary", "survey report --json", out)
	// Every row of a JSONL store follows the survey schema's row.
	data, err := os.ReadFile(stores[0])
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	doc := `{"schema":"slowstart.survey/v1","tool":"x","started_at":"2025-01-02T03:04:05Z","settings":{"concurrency":1,"exact":true,"passive":false,"timeout_ms":1},"total":1,"interrupted":false,"failed":0,"rows":[` + first + `]}`
	checkSchema(t, "survey", "a JSONL store's row", doc)
}

// checkFleetStore checks that the store holds every target of truth exactly
// once, with a reading that agrees with the server's window; it returns each
// target's reading.
func checkFleetStore(t *testing.T, store string, truth map[string]int) map[string]string {
	t.Helper()
	readings := map[string]string{}
	exactCount := 0
	_, err := survey.ReadStore(store, func(r survey.Row) error {
		key := fmt.Sprintf("%d %s", r.Index, r.URL)
		if _, dup := readings[key]; dup {
			t.Errorf("%s: two rows", key)
		}
		iw, ok := truth[r.URL]
		switch {
		case !ok:
			t.Errorf("%s: not in the list", r.URL)
		case r.ExactVerdict == "exact" && (r.ExactIWSegments == nil || *r.ExactIWSegments != iw):
			t.Errorf("%s: exact %v, the server's IW is %d", r.URL, deref(r.ExactIWSegments), iw)
		case r.ExactVerdict == "lower_bound" && (r.ExactIWSegments == nil || *r.ExactIWSegments > iw):
			t.Errorf("%s: a bound of %v above the server's IW %d", r.URL, deref(r.ExactIWSegments), iw)
		case r.ExactVerdict == "exact":
			exactCount++
		}
		readings[key] = fmt.Sprintf("%s %v", r.ExactVerdict, deref(r.ExactIWSegments))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(readings) != len(truth) {
		t.Errorf("%s: %d targets of %d", filepath.Base(store), len(readings), len(truth))
	}
	// Bodies of 2 KB or more fill IW 10 at the 64-byte MSS: nearly all exact.
	if exactCount < len(truth)*9/10 {
		t.Errorf("%s: only %d of %d readings exact", filepath.Base(store), exactCount, len(truth))
	}
	return readings
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func countStoreRows(t *testing.T, store string) int {
	n := 0
	if _, err := os.Stat(store); err != nil {
		return 0
	}
	survey.ReadStore(store, func(survey.Row) error { n++; return nil })
	return n
}

// labNamespacesLeft lists this process's lab namespaces still there.
func labNamespacesLeft() []string {
	names, err := netlab.NamespacesOf(os.Getpid())
	if err != nil {
		return []string{err.Error()}
	}
	return names
}
