package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/slowstart/slowstart/report"
)

// DefaultFeedKeep is how many connections a Feed keeps by default.
const DefaultFeedKeep = 300

// FeedStatus is what a live page shows besides the connections. The Feed
// fills in the counts of connections.
type FeedStatus struct {
	// Capturing is true while packets are being captured.
	Capturing bool `json:"capturing"`
	// Interface and Filter describe the capture.
	Interface string `json:"interface"`
	Filter    string `json:"filter"`
	// Packets counts the TCP packets captured so far; KernelDrops those the
	// kernel dropped for want of buffer space.
	Packets     int64 `json:"packets"`
	KernelDrops int64 `json:"kernel_drops"`
	// Connections counts every connection reported so far; Dropped the older
	// ones no longer kept (Feed's bound); Kept lists the Index of those kept.
	Connections int   `json:"connections"`
	Dropped     int   `json:"dropped"`
	Kept        []int `json:"kept"`
	// Message is a line to show, e.g. why the capture stopped.
	Message string `json:"message,omitempty"`
}

type feedEntry struct {
	index int
	seq   uint64
	data  []byte // the Connection as JSON
}

// Feed holds the connections of a live capture for the page: it keeps the
// most recent ones (a bounded number) and tells the pages watching
// /api/events about each connection added or updated.
type Feed struct {
	mu      sync.Mutex
	keep    int
	entries []feedEntry // in the order first added
	seq     uint64
	total   int
	dropped int
	status  FeedStatus
	changed chan struct{} // closed (and replaced) at every change
}

// NewFeed makes a Feed that keeps at most keep connections (DefaultFeedKeep when
// keep <= 0), dropping the oldest first.
func NewFeed(keep int) *Feed {
	if keep <= 0 {
		keep = DefaultFeedKeep
	}
	return &Feed{keep: keep, changed: make(chan struct{})}
}

// Put adds a connection, or replaces the one with the same Index.
func (f *Feed) Put(c report.Connection) error {
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("web: encoding connection %d: %w", c.Index, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	for i := range f.entries {
		if f.entries[i].index == c.Index {
			f.entries[i].seq, f.entries[i].data = f.seq, data
			f.notify()
			return nil
		}
	}
	f.entries = append(f.entries, feedEntry{index: c.Index, seq: f.seq, data: data})
	f.total++
	if over := len(f.entries) - f.keep; over > 0 {
		f.entries = append(f.entries[:0:0], f.entries[over:]...)
		f.dropped += over
	}
	f.notify()
	return nil
}

// SetStatus replaces the status (its connection counts are the Feed's own).
func (f *Feed) SetStatus(s FeedStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = s
	f.notify()
}

// Status returns the status with the Feed's counts filled in.
func (f *Feed) Status() FeedStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.statusLocked()
}

func (f *Feed) statusLocked() FeedStatus {
	s := f.status
	s.Connections, s.Dropped = f.total, f.dropped
	s.Kept = make([]int, len(f.entries))
	for i, e := range f.entries {
		s.Kept[i] = e.index
	}
	return s
}

func (f *Feed) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// since returns the entries changed after seq, the status, the current seq
// and a channel closed at the next change.
func (f *Feed) since(seq uint64) ([]feedEntry, FeedStatus, uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []feedEntry
	for _, e := range f.entries {
		if e.seq > seq {
			out = append(out, e)
		}
	}
	return out, f.statusLocked(), f.seq, f.changed
}

// heartbeat keeps idle event streams open through proxies and finds closed ones.
const heartbeat = 15 * time.Second

// serveEvents streams the feed as Server-Sent Events: every kept connection
// ("conn" events, data: a Connection), then each one added or updated, and a
// "status" event (data: FeedStatus) after every change.
func (f *Feed) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	// The server's read timeout would otherwise end the stream.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	var seq uint64
	var lastStatus []byte
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		entries, status, now, changed := f.since(seq)
		seq = now
		for _, e := range entries {
			if _, err := fmt.Fprintf(w, "event: conn\nid: %d\ndata: %s\n\n", e.seq, e.data); err != nil {
				return
			}
		}
		sdata, err := json.Marshal(status)
		if err != nil {
			return
		}
		if string(sdata) != string(lastStatus) {
			if _, err := fmt.Fprintf(w, "event: status\ndata: %s\n\n", sdata); err != nil {
				return
			}
			lastStatus = sdata
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-changed:
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": still here\n\n"); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		case <-r.Context().Done():
			// Shutting down: send what changed last (the final status) first.
			entries, status, _, _ := f.since(seq)
			for _, e := range entries {
				fmt.Fprintf(w, "event: conn\nid: %d\ndata: %s\n\n", e.seq, e.data)
			}
			if sdata, err := json.Marshal(status); err == nil && string(sdata) != string(lastStatus) {
				fmt.Fprintf(w, "event: status\ndata: %s\n\n", sdata)
			}
			_ = rc.Flush()
			return
		}
	}
}

// NewLiveHandler serves the live view: the page at "/", the embedded assets, the
// Report at "/api/report" (rep: its Source and Warnings; its connections come
// from feed) and the feed's events at "/api/events". Every other path is 404;
// nothing reaches the filesystem.
// LiveFeedKind is the Report's source kind on a live view's page: its
// connections arrive by the event stream.
const LiveFeedKind = "live_feed"

func NewLiveHandler(rep *report.Report, feed *Feed, opts HandlerOptions) (http.Handler, error) {
	if feed == nil {
		return nil, fmt.Errorf("web: a live view needs a feed")
	}
	shell := *rep
	shell.Connections = []report.Connection{}
	// The page follows the event stream only for this kind: a probe's Report,
	// also captured live, is a finished page.
	shell.Source.Kind = LiveFeedKind
	mux, err := newMux(&shell, nil)
	if err != nil {
		return nil, err
	}
	mux.HandleFunc("GET /api/events", feed.serveEvents)
	return secure(mux, opts), nil
}
