package web

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/report"
)

func liveShell() *report.Report {
	return &report.Report{Schema: report.Schema, Tool: "slowstart test", Source: report.Source{Kind: "live", Path: "lo"}, Warnings: []string{}}
}

// sseEvent is one event read from a stream.
type sseEvent struct{ name, data string }

// readSSE reads events from r until n have arrived.
func readSSE(t *testing.T, sc *bufio.Scanner, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		case line == "" && cur.name != "":
			out = append(out, cur)
			cur = sseEvent{}
		}
	}
	if len(out) < n {
		t.Fatalf("read %d events, want %d: %v", len(out), n, sc.Err())
	}
	return out
}

func TestFeedKeepsTheLatest(t *testing.T) {
	f := NewFeed(2)
	for i := 1; i <= 3; i++ {
		if err := f.Put(report.Connection{Index: i, Client: "c", Server: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	// An update replaces, and does not count as a new connection.
	if err := f.Put(report.Connection{Index: 3, Client: "c", Server: "s", Notes: []string{"updated"}}); err != nil {
		t.Fatal(err)
	}
	st := f.Status()
	if st.Connections != 3 || st.Dropped != 1 || len(st.Kept) != 2 || st.Kept[0] != 2 || st.Kept[1] != 3 {
		t.Fatalf("status %+v: want 3 connections, 1 dropped, kept [2 3]", st)
	}
	entries, _, _, _ := f.since(0)
	if len(entries) != 2 || !strings.Contains(string(entries[1].data), "updated") {
		t.Fatalf("entries after an update: %d, last %s", len(entries), entries[len(entries)-1].data)
	}
}

// TestLiveEvents: the stream replays what is kept, then sends each new
// connection and status as it happens; other paths stay 404.
func TestLiveEvents(t *testing.T) {
	feed := NewFeed(10)
	feed.SetStatus(FeedStatus{Capturing: true, Interface: "lo", Filter: "tcp"})
	if err := feed.Put(report.Connection{Index: 1, Client: "127.0.0.1:40000", Server: "127.0.0.1:80"}); err != nil {
		t.Fatal(err)
	}
	h, err := NewLiveHandler(liveShell(), feed, HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	res, err := http.Get(srv.URL + "/api/report")
	if err != nil {
		t.Fatal(err)
	}
	var rep report.Report
	if err := json.NewDecoder(res.Body).Decode(&rep); err != nil || rep.Source.Kind != LiveFeedKind || len(rep.Connections) != 0 {
		t.Fatalf("/api/report: %v, kind %q, %d connections", err, rep.Source.Kind, len(rep.Connections))
	}
	res.Body.Close()
	for _, p := range []string{"/api/events/x", "/api/events/../../go.mod", "/live.go", "/api/feed"} {
		res, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, res.StatusCode)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/events", nil)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.Header.Get("Content-Type") != "text/event-stream" || !strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("headers: %v", res.Header)
	}
	sc := bufio.NewScanner(res.Body)
	ev := readSSE(t, sc, 2)
	if ev[0].name != "conn" || !strings.Contains(ev[0].data, `"index":1`) || ev[1].name != "status" || !strings.Contains(ev[1].data, `"kept":[1]`) {
		t.Fatalf("replay: %+v", ev)
	}
	if err := feed.Put(report.Connection{Index: 2, Client: "127.0.0.1:40001", Server: "127.0.0.1:80"}); err != nil {
		t.Fatal(err)
	}
	ev = readSSE(t, sc, 2)
	if ev[0].name != "conn" || !strings.Contains(ev[0].data, `"index":2`) || ev[1].name != "status" || !strings.Contains(ev[1].data, `"connections":2`) {
		t.Fatalf("after Put: %+v", ev)
	}
}

// TestServeEndsEventStreams: shutting down does not wait on open streams, and
// they get the last status first.
func TestServeEndsEventStreams(t *testing.T) {
	feed := NewFeed(0)
	feed.SetStatus(FeedStatus{Capturing: true})
	h, err := NewLiveHandler(liveShell(), feed, HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, h, nil) }()
	res, err := http.Get("http://" + ln.Addr().String() + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	if ev := readSSE(t, sc, 1); !strings.Contains(ev[0].data, `"capturing":true`) {
		t.Fatalf("first status: %+v", ev)
	}
	feed.SetStatus(FeedStatus{Capturing: false, Message: "the capture stopped"})
	stop()
	start := time.Now()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Serve did not return within 4 s of its context ending, with an event stream open")
	}
	t.Logf("shut down in %v", time.Since(start))
	if ev := readSSE(t, sc, 1); !strings.Contains(ev[0].data, `"capturing":false`) {
		t.Fatalf("last status: %+v", ev)
	}
}
