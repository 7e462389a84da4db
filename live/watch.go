package live

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/report"
)

// WatchOptions tune Watch.
type WatchOptions struct {
	Tracker  Options
	Analysis analysis.Options
	// TickEvery is how often the clock is checked for connections that are
	// complete (default 250 ms).
	TickEvery time.Duration
	// Now is the clock (default time.Now); it must be the clock of the packets'
	// timestamps.
	Now func() time.Time
}

// Watch reads src (a capture.Live) until it ends, tracks its connections and
// calls emit, from Watch's goroutine, with each connection's report when it is
// complete (and again, updated, for an idle connection that carries more
// packets later: same Index). At the end of the input every connection still
// tracked is reported. It returns nil at io.EOF, else src's error. Watch does
// not stop src: stop it (a capture.Live opened with a context stops when the
// context ends, and then hands over what it holds and io.EOF).
func Watch(ctx context.Context, src analysis.PacketSource, opts WatchOptions, emit func(report.Connection)) error {
	if opts.TickEvery <= 0 {
		opts.TickEvery = 250 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	type item struct {
		p   capture.Packet
		err error
	}
	items := make(chan item, 4096)
	abandon := make(chan struct{})
	defer close(abandon)
	go func() {
		for {
			var p capture.Packet
			err := src.Next(&p)
			if err == nil && len(p.Payload) > 0 {
				p.Payload = append([]byte(nil), p.Payload...) // src reuses its buffer
			}
			select {
			case items <- item{p, err}:
			case <-abandon:
				return
			}
			if err != nil {
				return
			}
		}
	}()

	var baseNs int64
	// Analysis is not cancelled with ctx: a connection handed over is analyzed whole.
	actx := context.WithoutCancel(ctx)
	var analyzeErr error
	tr := NewTracker(opts.Tracker, func(c *Conn) {
		rc, ok, err := Analyze(actx, c, opts.Analysis, baseNs)
		if err != nil {
			analyzeErr = err
			return
		}
		if ok {
			emit(rc)
		}
	})
	ticker := time.NewTicker(opts.TickEvery)
	defer ticker.Stop()
	for {
		select {
		case it := <-items:
			if it.err != nil {
				tr.Flush()
				if errors.Is(it.err, io.EOF) {
					return analyzeErr
				}
				return it.err
			}
			if baseNs == 0 {
				baseNs = it.p.TimestampNs
			}
			tr.Add(&it.p)
		case <-ticker.C:
			tr.Expire(opts.Now().UnixNano())
		}
	}
}
