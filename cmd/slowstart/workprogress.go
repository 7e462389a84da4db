package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
)

// workProgressMinBytes is the least work (bytes of responses the model
// simulates, about a gigabyte a second) worth showing progress for.
const workProgressMinBytes = 1 << 30

// workProgress shows how far a long computation is, the model simulating a
// large response packet by packet: a bar on a terminal, elsewhere a line at
// every tenth done, so that a log shows what the wait is. Work too small to
// take a second shows nothing. Its methods take a nil receiver.
type workProgress struct {
	bar   *progressbar.ProgressBar
	w     io.Writer
	what  string
	tenth int64 // lines printed (not a terminal)
}

func newWorkProgress(what string, total int64) *workProgress {
	if total < workProgressMinBytes {
		return nil
	}
	p := &workProgress{w: os.Stderr, what: what}
	if isTerminal(os.Stderr) {
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
func (p *workProgress) Set(done, total int64) {
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
func (p *workProgress) Finish() {
	if p != nil && p.bar != nil {
		_ = p.bar.Finish()
	}
}
