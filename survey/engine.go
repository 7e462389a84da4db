package survey

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slowstart/slowstart/internal/progress"
	"github.com/slowstart/slowstart/internal/redact"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/probe/exact"
)

// Sink receives the survey's rows as they finish, one call at a time.
type Sink interface {
	Write(Row) error
}

// SinkFunc makes a function a Sink.
type SinkFunc func(Row) error

// Write calls f.
func (f SinkFunc) Write(r Row) error { return f(r) }

// Progress is a survey's progress, updated while it runs and safe to read
// from another goroutine (e.g. a terminal's status line).
type Progress struct {
	// Read counts the list's targets read so far; OtherShards those left to
	// other shards; Skipped those measured before (a resumed survey).
	Read, OtherShards, Skipped atomic.Int64
	// Done counts the rows written, Failed those with an error; InFlight the
	// targets being measured now.
	Done, Failed, InFlight atomic.Int64
	// ListDone is set once the whole list has been read.
	ListDone atomic.Bool

	mu     sync.Mutex
	byKind map[string]int64
}

// ErrorsByKind returns the failed rows by ErrorKind so far.
func (p *Progress) ErrorsByKind() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.byKind))
	for k, v := range p.byKind {
		out[k] = v
	}
	return out
}

func (p *Progress) row(r *Row) {
	p.Done.Add(1)
	if r.Failed() {
		p.Failed.Add(1)
		p.mu.Lock()
		if p.byKind == nil {
			p.byKind = map[string]int64{}
		}
		p.byKind[r.ErrorKind]++
		p.mu.Unlock()
	}
}

// Totals sum up what Stream did.
type Totals struct {
	Read, OtherShards, Skipped, Measured, Failed int64
}

// task is one target on its way through the survey.
type task struct {
	target   Target
	addr     netip.Addr // the server address (after DNS); invalid when unknown
	hostPort string     // the Resolve key of the target's URL
	dnsErr   error
}

// engine is one running survey.
type engine struct {
	opts      Options
	progress  *Progress
	limits    *limits
	pageLoads semaphore
	dns       *resolver
	sched     *scheduler
	sink      Sink
	sinkMu    sync.Mutex
	sinkErr   error
	cancel    context.CancelCauseFunc
}

// maxPendingPerWorker bounds the targets read ahead of the measurements, per
// worker: enough to find a free address when many targets of the list share
// one, not so many that a long list fills the memory.
const maxPendingPerWorker = 64

// Stream measures the targets src hands out and writes each target's row to
// sink as it finishes, in the order they finish, holding only the targets
// under way: a list of any length fits. At most Options.Concurrency targets
// are measured at once, one at a time per server address, with Options.Pause
// between two connections to one address; the rate limits hold for the whole
// survey. Targets outside Options.Shard, and those Options.Done says were
// measured, are skipped.
//
// Stream fails on bad options (*OptionsError), a malformed target (an
// *InputError from the source), a sink that fails, or when ctx ends: it then
// waits for the measurements under way (each removes what it set up), writes
// none of the rows they were cutting short, and returns ctx's error. The exact
// measurement's nftables table is made once for the survey and removed at its
// end.
func Stream(ctx context.Context, src Source, sink Sink, opts Options) (Totals, error) {
	o, err := opts.normalized()
	if err != nil {
		return Totals{}, &OptionsError{Err: err}
	}
	e := &engine{opts: o, progress: o.Progress, sink: sink,
		limits:    newLimits(o.ConnectionsPerSecond, o.PacketsPerSecond),
		pageLoads: make(semaphore, o.PageLoads),
		sched:     newScheduler(o.Pause, o.Concurrency*maxPendingPerWorker),
	}
	if e.progress == nil {
		e.progress = &Progress{}
	}
	e.dns = newResolver(o.Lookup, o.Netns, o.DNSConcurrency)
	ctx, e.cancel = context.WithCancelCause(ctx)
	defer e.cancel(nil)

	if !o.NoExact {
		// One nftables table for the whole survey, in each namespace measured
		// from (the targets' own, or Options.Netns): made now, removed at the end.
		for _, ns := range e.namespaces(src) {
			release, removed, err := exact.Hold(ctx, ns)
			if len(removed) > 0 {
				o.Logger.Info("removed nftables tables of processes that died", "tables", removed)
			}
			if err != nil {
				// Every exact measurement would fail the same way: say it once, in
				// each row, as the measurements do.
				o.Logger.Debug("holding the exact measurement's table", "netns", ns, "err", err)
				continue
			}
			defer release()
		}
	}

	var workers sync.WaitGroup
	for range o.Concurrency {
		workers.Go(func() { e.work(ctx) })
	}
	readErr := e.read(ctx, src)
	e.sched.close()
	workers.Wait()
	totals := Totals{Read: e.progress.Read.Load(), OtherShards: e.progress.OtherShards.Load(),
		Skipped: e.progress.Skipped.Load(), Measured: e.progress.Done.Load(), Failed: e.progress.Failed.Load()}
	if e.sinkErr != nil {
		return totals, e.sinkErr
	}
	if readErr != nil {
		return totals, readErr
	}
	return totals, context.Cause(ctx)
}

// namespaces lists the namespaces the survey measures from, as far as it can
// know before reading the list: Options.Netns, and the targets' own when the
// source is in memory.
func (e *engine) namespaces(src Source) []string {
	seen := map[string]bool{e.opts.Netns: true}
	out := []string{e.opts.Netns}
	if s, ok := src.(*SliceSource); ok {
		for _, t := range s.Targets {
			if t.Netns != "" && !seen[t.Netns] {
				seen[t.Netns] = true
				out = append(out, t.Netns)
			}
		}
	}
	return out
}

// read feeds the targets to the resolvers and the scheduler until the list
// ends, ctx ends, or a target is malformed.
func (e *engine) read(ctx context.Context, src Source) error {
	jobs := make(chan *task)
	var resolvers sync.WaitGroup
	for range e.opts.DNSConcurrency {
		resolvers.Go(func() {
			for t := range jobs {
				e.resolve(ctx, t)
				if t.dnsErr != nil {
					e.finishUnresolved(ctx, t)
					continue
				}
				if !e.sched.add(ctx, t) {
					return
				}
			}
		})
	}
	defer resolvers.Wait()
	defer close(jobs)
	for ctx.Err() == nil {
		t, err := src.Next()
		if errors.Is(err, io.EOF) {
			e.progress.ListDone.Store(true)
			return nil
		}
		if err != nil {
			return err
		}
		if err := CheckURL(t.URL); err != nil {
			return &OptionsError{Err: fmt.Errorf("target %d: %w", t.Index, err)}
		}
		e.progress.Read.Add(1)
		if !e.opts.Shard.Contains(t.URL) {
			e.progress.OtherShards.Add(1)
			continue
		}
		if e.opts.Done != nil {
			done, err := e.opts.Done(t)
			if err != nil {
				return fmt.Errorf("checking whether target %d was measured before: %w", t.Index, err)
			}
			if done {
				e.progress.Skipped.Add(1)
				continue
			}
		}
		select {
		case jobs <- &task{target: t}:
		case <-ctx.Done():
		}
	}
	return nil
}

// resolve finds the target's server address: --resolve, an IP literal, or DNS
// (with the survey's cache and its own concurrency).
func (e *engine) resolve(ctx context.Context, t *task) {
	u, err := url.Parse(t.target.URL)
	if err != nil {
		t.dnsErr = err
		return
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	host := u.Hostname()
	t.hostPort = net.JoinHostPort(host, port)
	if a, ok := t.target.Resolve[t.hostPort]; ok {
		t.addr = a.Unmap()
		return
	}
	if a, ok := e.opts.Resolve[t.hostPort]; ok {
		t.addr = a.Unmap()
		return
	}
	if a, err := netip.ParseAddr(host); err == nil {
		t.addr = a.Unmap()
		return
	}
	addrs, err := e.dns.lookup(ctx, host)
	if err != nil {
		t.dnsErr = err
		return
	}
	t.addr = addrs[0]
	for _, a := range addrs {
		if a.Is4() {
			t.addr = a
			break
		}
	}
}

// finishUnresolved writes the row of a target whose name did not resolve:
// nothing was measured.
func (e *engine) finishUnresolved(ctx context.Context, t *task) {
	if ctx.Err() != nil {
		return
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	err := &probe.Error{Kind: probe.KindDNS, Err: fmt.Errorf("%s: looking up %s: %v: check the name, or give its address with --resolve", t.target.URL, t.hostPort, t.dnsErr)}
	row := Row{Index: t.target.Index, Line: t.target.Line, Label: t.target.Label, URL: redact.URL(t.target.URL),
		Vantage: e.opts.Vantage, Shard: e.opts.Shard.String(), FinishedAt: &now, ErrorKind: probe.KindDNS}
	if !e.opts.NoPassive {
		row.PassiveErr, row.PassiveError = err, oneLine(err)
	}
	if !e.opts.NoExact {
		row.ExactErr = fmt.Errorf("not measured: the name did not resolve")
		row.ExactError = row.ExactErr.Error()
	}
	parts := []string{}
	if row.ExactError != "" {
		parts = append(parts, "exact: "+row.ExactError)
	}
	if row.PassiveError != "" {
		parts = append(parts, "passive: "+row.PassiveError)
	}
	row.Error = joinParts(parts)
	e.write(row)
}

func joinParts(parts []string) string {
	out := ""
	for i, p := range parts {
		if i > 0 {
			out += "; "
		}
		out += p
	}
	return out
}

// work measures the targets the scheduler hands out until it closes.
func (e *engine) work(ctx context.Context) {
	for {
		t, ok := e.sched.next(ctx)
		if !ok {
			return
		}
		e.progress.InFlight.Add(1)
		var row Row
		if e.opts.measure != nil {
			row = e.opts.measure(ctx, t)
		} else {
			row = e.measure(ctx, t)
		}
		e.progress.InFlight.Add(-1)
		e.sched.done(t)
		if ctx.Err() != nil {
			// Cut short by the interruption (or finished as it came): measured
			// again when the survey resumes, never half.
			continue
		}
		e.write(row)
	}
}

// write hands a row to the sink; a failing sink stops the survey.
func (e *engine) write(row Row) {
	e.sinkMu.Lock()
	defer e.sinkMu.Unlock()
	if e.sinkErr != nil {
		return
	}
	if err := e.sink.Write(row); err != nil {
		e.sinkErr = fmt.Errorf("writing the row of %s (target %d): %w", row.URL, row.Index, err)
		e.cancel(e.sinkErr)
		return
	}
	e.progress.row(&row)
	if e.opts.OnRow != nil {
		e.opts.OnRow(row)
	}
}

// semaphore bounds how many of something run at once.
type semaphore chan struct{}

func (s semaphore) acquire(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (s semaphore) release() { <-s }

// keyOf names a target in a store: its index in the list and its URL as the
// store holds it (redacted: no credentials, no query values).
func keyOf(index int, rawURL string) string { return strconv.Itoa(index) + " " + redact.URL(rawURL) }

// status shows a long survey's progress on standard error: on a
// terminal one line redrawn twice a second, otherwise a line every
// statusEvery (for logs, a Kubernetes pod's included).
type status struct {
	w        io.Writer
	progress *Progress
	total    int // targets to measure (those of the shard not in the store yet)
	start    time.Time
	terminal bool
	done     chan struct{}
	wg       sync.WaitGroup
}

const (
	statusTerminalEvery = 500 * time.Millisecond
	statusEvery         = 10 * time.Second
)

func startStatus(w io.Writer, p *Progress, total int) *status {
	s := &status{w: w, progress: p, total: max(total, 0), start: time.Now(), done: make(chan struct{})}
	if f, ok := w.(*os.File); ok && progress.IsTerminal(f) {
		s.terminal = true
	}
	every := statusEvery
	if s.terminal {
		every = statusTerminalEvery
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

func (s *status) stop() {
	close(s.done)
	s.wg.Wait()
}

// line says: done of total, rate, time left, in flight, errors by kind.
func (s *status) line() string {
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

func (s *status) print(final bool) {
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
