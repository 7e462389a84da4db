// Package progress shows how far long work is on standard error: a bar on a
// terminal, otherwise lines that a log or a script reads. Count counts items
// done (trials, URLs); Work follows a computation by its share done (the model
// simulating a large response). It is not for the survey's status line
// (package survey) nor for results, which go to standard output.
package progress

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// IsTerminal reports whether f is a terminal (a tty: /dev/null and other
// character devices are not).
func IsTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// Count shows how far a batch is: a bar on a terminal, otherwise a line per
// item done ("3 of 10 trials done").
type Count struct {
	bar         *progressbar.ProgressBar
	w           io.Writer
	unit        string
	done, total int
}

// NewCount starts showing a batch of total items, what it is and the unit of
// its items ("trials").
func NewCount(total int, what, unit string) *Count {
	p := &Count{total: total, unit: unit, w: os.Stderr}
	if IsTerminal(os.Stderr) {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(what),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(200*time.Millisecond),
		)
	}
	return p
}

// Add counts n more items done.
func (p *Count) Add(n int) {
	p.done += n
	if p.bar != nil {
		_ = p.bar.Add(n)
		return
	}
	fmt.Fprintf(p.w, "%d of %d %s done\n", p.done, p.total, p.unit)
}

// Set says done items are done; without a bar, a line is printed only every
// lineEvery items and at the end.
func (p *Count) Set(done, lineEvery int) {
	if p.bar != nil || done%lineEvery == 0 || done == p.total {
		p.Add(done - p.done)
		return
	}
	p.done = done
}

// Finish clears the bar.
func (p *Count) Finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// WorkMinBytes is the least work (bytes of responses the model simulates,
// about a gigabyte a second) worth showing progress for.
const WorkMinBytes = 1 << 30

// Work shows how far a long computation is: a bar on a terminal, elsewhere a
// line at every tenth done, so that a log shows what the wait is. Work too
// small to take a second shows nothing. Its methods take a nil receiver.
type Work struct {
	bar   *progressbar.ProgressBar
	w     io.Writer
	what  string
	tenth int64 // lines printed (not a terminal)
}

// NewWork starts showing a computation of total units (bytes simulated); nil
// when it is below WorkMinBytes.
func NewWork(what string, total int64) *Work {
	if total < WorkMinBytes {
		return nil
	}
	p := &Work{w: os.Stderr, what: what}
	if IsTerminal(os.Stderr) {
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(what),
			progressbar.OptionShowBytes(false),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(200*time.Millisecond),
		)
	} else {
		fmt.Fprintf(p.w, "%s...\n", what)
	}
	return p
}

// Set says done of total.
func (p *Work) Set(done, total int64) {
	if p == nil {
		return
	}
	if p.bar != nil {
		_ = p.bar.Set64(done)
		return
	}
	for total > 0 && (p.tenth+1)*total/10 <= done && p.tenth < 10 {
		p.tenth++
		fmt.Fprintf(p.w, "%s: %d%% done\n", p.what, p.tenth*10)
	}
}

// Finish clears the bar.
func (p *Work) Finish() {
	if p != nil && p.bar != nil {
		_ = p.bar.Finish()
	}
}
