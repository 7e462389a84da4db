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
