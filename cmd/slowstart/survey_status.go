package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/slowstart/slowstart/survey"
)

// surveyStatus shows a long survey's progress on standard error: on a
// terminal one line redrawn twice a second, otherwise a line every
// surveyStatusEvery (for logs, a Kubernetes pod's included).
type surveyStatus struct {
	w        io.Writer
	progress *survey.Progress
	total    int // targets to measure (those of the shard not in the store yet)
	start    time.Time
	terminal bool
	done     chan struct{}
	wg       sync.WaitGroup
}

const (
	surveyStatusTerminalEvery = 500 * time.Millisecond
	surveyStatusEvery         = 10 * time.Second
)

func startSurveyStatus(w io.Writer, p *survey.Progress, total int) *surveyStatus {
	s := &surveyStatus{w: w, progress: p, total: max(total, 0), start: time.Now(), done: make(chan struct{})}
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		s.terminal = true
	}
	every := surveyStatusEvery
	if s.terminal {
		every = surveyStatusTerminalEvery
	}
	s.wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				s.print(false)
			case <-s.done:
				s.print(true)
				return
			}
		}
	})
	return s
}

func (s *surveyStatus) stop() {
	close(s.done)
	s.wg.Wait()
}

// line says: done of total, rate, time left, in flight, errors by kind.
func (s *surveyStatus) line() string {
	done := s.progress.Done.Load()
	elapsed := time.Since(s.start)
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d done", done, s.total)
	if s.total > 0 {
		fmt.Fprintf(&b, " (%.0f%%)", 100*float64(done)/float64(s.total))
	}
	perMinute := 0.0
	if elapsed > time.Second {
		perMinute = float64(done) / elapsed.Minutes()
	}
	fmt.Fprintf(&b, ", %.0f/min", perMinute)
	if left := int64(s.total) - done; perMinute > 0 && left > 0 {
		eta := time.Duration(float64(left) / perMinute * float64(time.Minute)).Round(time.Second)
		fmt.Fprintf(&b, ", %s left", eta)
	}
	fmt.Fprintf(&b, ", %d in flight", s.progress.InFlight.Load())
	if kinds := s.progress.ErrorsByKind(); len(kinds) > 0 {
		names := make([]string, 0, len(kinds))
		for k := range kinds {
			names = append(names, k)
		}
		sort.Slice(names, func(i, j int) bool { return kinds[names[i]] > kinds[names[j]] })
		var parts []string
		for _, k := range names {
			parts = append(parts, fmt.Sprintf("%s %d", k, kinds[k]))
		}
		fmt.Fprintf(&b, "; errors: %s", strings.Join(parts, ", "))
	}
	return b.String()
}

func (s *surveyStatus) print(final bool) {
	line := s.line()
	switch {
	case s.terminal && final:
		fmt.Fprintf(s.w, "\r\033[K%s\n", line)
	case s.terminal:
		fmt.Fprintf(s.w, "\r\033[K%s", line)
	default:
		fmt.Fprintln(s.w, line)
	}
}
