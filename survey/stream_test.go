package survey

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Shard
		bad  bool
	}{
		{"0/1", Shard{0, 1}, false}, {"3/16", Shard{3, 16}, false}, {" 7/8 ", Shard{7, 8}, false},
		{"8/8", Shard{}, true}, {"1/0", Shard{}, true}, {"-1/4", Shard{}, true}, {"2", Shard{}, true}, {"a/b", Shard{}, true},
	} {
		got, err := ParseShard(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
			t.Errorf("ParseShard(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// TestShardsPartition: every URL falls in exactly one shard of N, the same in
// every call, and all URLs of one host in the same shard.
func TestShardsPartition(t *testing.T) {
	const n = 7
	perShard := make([]int, n)
	for host := range 300 {
		var first = -1
		for path := range 5 {
			u := fmt.Sprintf("https://Host%d.example/p%d", host, path)
			in := 0
			for i := range n {
				if (Shard{i, n}).Contains(u) {
					in++
					if first < 0 {
						first = i
					} else if first != i {
						t.Fatalf("%s in shard %d, another URL of its host in %d", u, i, first)
					}
					perShard[i]++
				}
			}
			if in != 1 {
				t.Fatalf("%s is in %d shards", u, in)
			}
		}
		// Case does not change the host.
		if !(Shard{first, n}).Contains(fmt.Sprintf("http://host%d.EXAMPLE:8080/", host)) {
			t.Errorf("host%d: another shard for another case or port", host)
		}
	}
	for i, c := range perShard {
		// 1500 URLs over 7 shards: about 214 each; a split this uneven would be a bad hash.
		if c < 100 || c > 350 {
			t.Errorf("shard %d holds %d of 1500 URLs", i, c)
		}
	}
}

func TestCheckListAndListSource(t *testing.T) {
	list := "# a list\n\na https://a.example/\nhttps://b.example/x  # comment\n\ufeffc d http://192.0.2.1:8080/\n"
	info, err := CheckList(strings.NewReader(list), Shard{})
	if err != nil || info.Targets != 3 || info.InShard != 3 || len(info.SHA256) != 64 {
		t.Fatalf("CheckList = %+v, %v", info, err)
	}
	src := NewListSource(strings.NewReader(list))
	var got []Target
	for {
		tg, err := src.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		got = append(got, tg)
	}
	if len(got) != 3 || got[0].Index != 1 || got[0].Line != 3 || got[1].Index != 2 || got[1].Line != 4 || got[2].Label != "c d" || got[2].Index != 3 {
		t.Errorf("targets %+v", got)
	}
	_, err = CheckList(strings.NewReader("ok https://a/\nbad\nftp://x/\n"), Shard{})
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("bad list: %v", err)
	}
	if _, err := CheckList(strings.NewReader(strings.Repeat("x", MaxLineBytes+10)), Shard{}); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("a line too long: %v", err)
	}
}

// fakeRow makes a row as a measurement would, from the target.
func fakeRow(t *task) Row {
	iw := 10
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	r := Row{Index: t.target.Index, Line: t.target.Line, Label: t.target.Label, URL: t.target.URL, Address: t.addr.String(),
		ExactPhase: "http", ExactVerdict: "exact", ExactIWSegments: &iw, ExactIWBytes: ptr(520), ExactMSS: 64,
		ExactOutcomes: []string{"success", "success"}, ExactReason: "2 of 2 runs agree", PassiveVerdict: "range",
		PassiveIWSegments: ptr(8), PassiveIWSegmentsMax: ptr(12), PassiveIWExactIf: "linux_cubic_or_reno", HandshakeRTTMs: ptr(20.25),
		BodyBytes: ptr(int64(1000)), DurationMs: 12.5, FinishedAt: &now}
	if strings.Contains(t.target.URL, "fail") {
		r.ExactVerdict, r.ExactIWSegments, r.ExactIWBytes, r.ExactOutcomes = "none", nil, nil, []string{"timeout", "timeout"}
		r.PassiveErr, r.PassiveError, r.Error, r.ErrorKind = errors.New("timed out"), "timed out", "passive: timed out", "timeout"
	}
	return r
}

func fakeTargets(n int) []Target {
	var ts []Target
	for i := range n {
		u := fmt.Sprintf("http://192.0.2.%d/page%d", i%20+1, i)
		if i%9 == 0 {
			u = fmt.Sprintf("http://192.0.2.%d/fail%d", i%20+1, i)
		}
		ts = append(ts, Target{Label: fmt.Sprintf("p%d", i%3), URL: u, Line: i + 2})
	}
	return ts
}

// TestStreamOnePerAddress: the engine measures at most one target per address
// at once and waits the pause between them, while measuring many addresses
// at once; each target once.
func TestStreamOnePerAddress(t *testing.T) {
	var mu sync.Mutex
	busy := map[netip.Addr]bool{}
	lastEnd := map[netip.Addr]time.Time{}
	var inFlight, most atomic.Int64
	seen := map[int]int{}
	const pause = 20 * time.Millisecond
	opts := Options{Concurrency: 16, Pause: pause, NoPassive: true, measure: func(ctx context.Context, tk *task) Row {
		mu.Lock()
		if busy[tk.addr] {
			t.Errorf("two targets on %s at once", tk.addr)
		}
		if end, ok := lastEnd[tk.addr]; ok && time.Since(end) < pause {
			t.Errorf("%s measured again %v after the last, before the %v pause", tk.addr, time.Since(end), pause)
		}
		busy[tk.addr] = true
		seen[tk.target.Index]++
		mu.Unlock()
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(5 * time.Millisecond) // a measurement takes time
		inFlight.Add(-1)
		mu.Lock()
		busy[tk.addr] = false
		lastEnd[tk.addr] = time.Now()
		mu.Unlock()
		return fakeRow(tk)
	}}
	var rows []Row
	totals, err := Stream(context.Background(), &SliceSource{Targets: fakeTargets(200)}, SinkFunc(func(r Row) error { rows = append(rows, r); return nil }), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 200 || totals.Measured != 200 || len(seen) != 200 {
		t.Fatalf("%d rows, totals %+v, %d targets seen", len(rows), totals, len(seen))
	}
	for i, n := range seen {
		if n != 1 {
			t.Errorf("target %d measured %d times", i, n)
		}
	}
	// 20 addresses, 16 workers: many at once.
	if most.Load() < 8 {
		t.Errorf("at most %d measurements at once with 16 workers and 20 addresses", most.Load())
	}
}

// TestStreamResumeAndShards: a store resumes where a cancelled survey
// stopped, with no target twice; shards written to their own stores and
// merged hold the same rows as the whole list.
func TestStreamResumeAndShards(t *testing.T) {
	for _, format := range []string{FormatSQLite, FormatJSONL, FormatCSV} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			ext := map[string]string{FormatSQLite: ".db", FormatJSONL: ".jsonl", FormatCSV: ".csv"}[format]
			targets := fakeTargets(120)
			whole := filepath.Join(dir, "whole"+ext)
			st, err := OpenStore(whole, format, StoreMeta{})
			if err != nil {
				t.Fatal(err)
			}
			// Cancel after 50 rows.
			ctx, cancel := context.WithCancel(context.Background())
			calls := atomic.Int64{}
			opts := Options{Concurrency: 8, NoPassive: true, Done: st.Done, measure: func(ctx context.Context, tk *task) Row {
				calls.Add(1)
				return fakeRow(tk)
			}, OnRow: func(Row) {
				if st.Rows() >= 50 {
					cancel()
				}
			}}
			if _, err := Stream(ctx, &SliceSource{Targets: targets}, st, opts); !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled survey: %v", err)
			}
			first := st.Rows()
			st.Close()
			if first < 50 || first >= 120 {
				t.Fatalf("%d rows after the cancel", first)
			}
			// Resume: only the rest is measured.
			st, err = OpenStore(whole, format, StoreMeta{})
			if err != nil {
				t.Fatal(err)
			}
			calls.Store(0)
			opts.Done, opts.OnRow = st.Done, nil
			totals, err := Stream(context.Background(), &SliceSource{Targets: targets}, st, opts)
			if err != nil {
				t.Fatal(err)
			}
			if int(totals.Skipped) != first || int(calls.Load()) != 120-first || st.Rows() != 120 {
				t.Errorf("resumed: skipped %d (want %d), measured %d, %d rows", totals.Skipped, first, calls.Load(), st.Rows())
			}
			st.Close()
			wholeRows := readAll(t, whole)
			if len(wholeRows) != 120 {
				t.Fatalf("%d rows in the store", len(wholeRows))
			}
			// Every field survives the store.
			want := fakeRow(&task{target: Target{Index: wholeRows[0].Index, Line: wholeRows[0].Line, Label: wholeRows[0].Label, URL: wholeRows[0].URL}, addr: mustAddr(wholeRows[0].Address)})
			want.Vantage, want.Shard = wholeRows[0].Vantage, wholeRows[0].Shard
			want.ExactErr, want.PassiveErr = nil, nil
			got := wholeRows[0]
			got.ExactErr, got.PassiveErr = nil, nil
			if fmt.Sprintf("%+v", rowJSON(t, got)) != fmt.Sprintf("%+v", rowJSON(t, want)) {
				t.Errorf("row read back:\n%s\nwant\n%s", rowJSON(t, got), rowJSON(t, want))
			}

			// Three shards, merged.
			var stores []string
			for i := range 3 {
				path := filepath.Join(dir, fmt.Sprintf("shard%d%s", i, ext))
				st, err := OpenStore(path, format, StoreMeta{Settings: Settings{Shard: fmt.Sprintf("%d/3", i)}})
				if err != nil {
					t.Fatal(err)
				}
				o := opts
				o.Done, o.Shard = st.Done, Shard{i, 3}
				if _, err := Stream(context.Background(), &SliceSource{Targets: targets}, st, o); err != nil {
					t.Fatal(err)
				}
				st.Close()
				stores = append(stores, path)
			}
			merged := filepath.Join(dir, "merged.db")
			res, err := Merge(merged, "", stores)
			if err != nil {
				t.Fatal(err)
			}
			if res.Rows != 120 || res.Inputs != 3 || len(res.MissingShards) != 0 {
				t.Errorf("merge: %+v", res)
			}
			if a, b := keysOf(wholeRows), keysOf(readAll(t, merged)); !slices.Equal(a, b) {
				t.Errorf("merged shards hold %d targets, the whole survey %d", len(b), len(a))
			}
			// A store given twice: refused, nothing written.
			again := filepath.Join(dir, "again.db")
			if _, err := Merge(again, "", []string{stores[0], stores[1], stores[0]}); !errors.As(err, new(*DuplicateError)) {
				t.Errorf("duplicate shards merged: %v", err)
			}
			if _, err := os.Stat(again); err == nil {
				t.Error("a refused merge wrote its output")
			}
		})
	}
}

func mustAddr(s string) netip.Addr {
	a, _ := netip.ParseAddr(s)
	return a
}

func rowJSON(t *testing.T, r Row) string {
	t.Helper()
	values, err := rowValues(&r)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(values)
}

func readAll(t *testing.T, path string) []Row {
	t.Helper()
	var rows []Row
	if _, err := ReadStore(path, func(r Row) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return rows
}

func keysOf(rows []Row) []string {
	var keys []string
	for _, r := range rows {
		keys = append(keys, keyOf(r.Index, r.URL))
	}
	slices.Sort(keys)
	return keys
}

// TestStoreCutLine: a JSONL or CSV store whose last row was cut by a kill
// loses that row only, and takes new rows on a line of their own.
func TestStoreCutLine(t *testing.T) {
	for _, ext := range []string{".jsonl", ".csv"} {
		path := filepath.Join(t.TempDir(), "s"+ext)
		format, _ := FormatOf(path, "")
		st, err := OpenStore(path, format, StoreMeta{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			if err := st.Write(fakeRow(&task{target: Target{Index: i, URL: fmt.Sprintf("http://h/%d", i)}})); err != nil {
				t.Fatal(err)
			}
		}
		st.Close()
		data, _ := os.ReadFile(path)
		os.WriteFile(path, data[:len(data)-10], 0o600) // the third row cut
		st, err = OpenStore(path, format, StoreMeta{})
		if err != nil {
			t.Fatal(err)
		}
		if done, _ := st.Done(Target{Index: 3, URL: "http://h/3"}); done || st.Rows() != 2 {
			t.Errorf("%s: %d rows, the cut one done: %v", ext, st.Rows(), done)
		}
		if err := st.Write(fakeRow(&task{target: Target{Index: 3, URL: "http://h/3"}})); err != nil {
			t.Fatal(err)
		}
		if err := st.Write(fakeRow(&task{target: Target{Index: 3, URL: "http://h/3"}})); err == nil {
			t.Errorf("%s: a second row for a target was taken", ext)
		}
		st.Close()
		if rows := readAll(t, path); len(rows) != 3 {
			t.Errorf("%s: %d rows after the repair", ext, len(rows))
		}
	}
}

// TestSQLiteStoreRefusesAnotherSurvey: resuming into a store of another list,
// shard or settings is refused; a second row for a target is refused.
func TestSQLiteStoreRefusesAnotherSurvey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	meta := StoreMeta{ListSHA256: "aa", Settings: Settings{Exact: true, MSS: 64, ExactRuns: 3, Shard: "1/4"}}
	st, err := OpenStore(path, FormatSQLite, meta)
	if err != nil {
		t.Fatal(err)
	}
	row := fakeRow(&task{target: Target{Index: 1, URL: "http://h/"}})
	if err := st.Write(row); err != nil {
		t.Fatal(err)
	}
	if err := st.Write(row); err == nil {
		t.Error("a second row for one target was written")
	}
	st.Close()
	for name, m := range map[string]StoreMeta{
		"list":  {ListSHA256: "bb", Settings: meta.Settings},
		"shard": {ListSHA256: "aa", Settings: Settings{Exact: true, MSS: 64, ExactRuns: 3, Shard: "2/4"}},
		"mss":   {ListSHA256: "aa", Settings: Settings{Exact: true, MSS: 48, ExactRuns: 3, Shard: "1/4"}},
	} {
		if _, err := OpenStore(path, FormatSQLite, m); !errors.As(err, new(*StoreMismatchError)) {
			t.Errorf("another %s: %v", name, err)
		}
	}
	st, err = OpenStore(path, FormatSQLite, meta)
	if err != nil || st.Rows() != 1 {
		t.Fatalf("the same survey: %v", err)
	}
	st.Close()
}

// TestResolverCachesAndBounds: one lookup per name however many targets share
// it, at most the given number at once, failures cached too.
func TestResolverCachesAndBounds(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	var now, most atomic.Int64
	release := make(chan struct{})
	r := newResolver(func(ctx context.Context, host string) ([]netip.Addr, error) {
		mu.Lock()
		calls[host]++
		mu.Unlock()
		n := now.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		now.Add(-1)
		if strings.HasPrefix(host, "bad") {
			return nil, errors.New("no such host")
		}
		return []netip.Addr{netip.MustParseAddr("::ffff:192.0.2.7")}, nil
	}, "", 3)
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Go(func() {
			host := fmt.Sprintf("h%d.example", i%10)
			if i%10 == 9 {
				host = "bad.example"
			}
			addrs, err := r.lookup(context.Background(), host)
			if host == "bad.example" {
				if err == nil {
					t.Errorf("%s resolved", host)
				}
				return
			}
			if err != nil || len(addrs) != 1 || addrs[0] != netip.MustParseAddr("192.0.2.7") {
				t.Errorf("%s: %v, %v", host, addrs, err)
			}
		})
	}
	// Let the lookups through once 3 are waiting (the bound).
	for most.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if most.Load() != 3 {
		t.Errorf("%d lookups at once, want 3", most.Load())
	}
	for host, n := range calls {
		if n != 1 {
			t.Errorf("%s looked up %d times", host, n)
		}
	}
	if len(calls) != 10 {
		t.Errorf("%d names looked up, want 10", len(calls))
	}
}

// TestLimitsRate: n connections at R per second take about (n - burst)/R.
func TestLimitsRate(t *testing.T) {
	l := newLimits(200, 0)
	start := time.Now()
	for range 60 {
		if err := l.waitConnections(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
	}
	// Burst 20, then 40 at 200/s: at least 200 ms.
	if d := time.Since(start); d < 180*time.Millisecond {
		t.Errorf("60 connections at 200/s took %v", d)
	}
	p := newLimits(0, 1000)
	p.chargePackets(300) // 100 in the burst, 200 in debt: 0.3 s at 1000/s
	start = time.Now()
	if err := p.waitConnections(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("a packet debt of 200 at 1000/s was waited out in %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.chargePackets(10000)
	if err := p.waitConnections(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled wait: %v", err)
	}
}
