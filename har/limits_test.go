package har

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/pageload"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestReadIsBounded: a HAR longer than MaxFileBytes (or endless) is refused
// once that much was read, not read whole into memory.
func TestReadIsBounded(t *testing.T) {
	_, err := Read(io.LimitReader(zeros{}, MaxFileBytes+10))
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("got %v; want a refusal saying it is too large", err)
	}
}

// TestTooManyRequests: a page of more than pageload.MaxRequests requests is
// refused, one of exactly that many read.
func TestTooManyRequests(t *testing.T) {
	for _, n := range []int{pageload.MaxRequests, pageload.MaxRequests + 1} {
		h := &HAR{Log: Log{Version: Version}}
		for i := range n {
			h.Log.Entries = append(h.Log.Entries, Entry{StartedDateTime: "2026-01-02T03:04:05.000Z",
				Request: Request{Method: "GET", URL: fmt.Sprintf("https://a.test/%d", i)}})
		}
		in, err := ToInput(h)
		switch {
		case n <= pageload.MaxRequests && (err != nil || len(in.Requests) != n):
			t.Errorf("%d entries: %d requests, %v", n, len(in.Requests), err)
		case n > pageload.MaxRequests && (err == nil || !strings.Contains(err.Error(), "more than")):
			t.Errorf("%d entries: %v; want a refusal", n, err)
		}
	}
}

// FuzzReadToInput: any bytes are read as a HAR or refused, without a panic,
// and a page read has at most pageload.MaxRequests requests.
func FuzzReadToInput(f *testing.F) {
	f.Add([]byte(`{"log":{"version":"1.2","creator":{"name":"x","version":"1"},"pages":[{"startedDateTime":"2026-01-02T03:04:05.000Z","id":"p","title":"https://a.test/","pageTimings":{"onContentLoad":10,"onLoad":20}}],"entries":[{"pageref":"p","startedDateTime":"2026-01-02T03:04:05.000Z","time":5,"request":{"method":"GET","url":"https://a.test/","httpVersion":"h2"},"response":{"status":200,"httpVersion":"h2","content":{"size":10,"mimeType":"text/html; charset=utf-8"}},"timings":{"blocked":0,"dns":1,"connect":2,"send":0,"wait":1,"receive":1},"serverIPAddress":"192.0.2.1","connection":"40000","_initiator":{"type":"parser","url":"https://a.test/"}}]}}`))
	f.Add([]byte("\ufeff{\"log\":{\"entries\":[]}}"))
	f.Add([]byte(`{"log":{"version":"1.2","entries":[{"startedDateTime":"x"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Read(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		in, err := ToInput(h)
		if err == nil && len(in.Requests) > pageload.MaxRequests {
			t.Errorf("%d requests read", len(in.Requests))
		}
	})
}
