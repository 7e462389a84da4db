package field

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slowstart/slowstart/ktcp"
	"github.com/slowstart/slowstart/survey"
	"github.com/slowstart/slowstart/tune"
)

// Sources Options.Source chooses.
const (
	SourceAuto = "auto" // the kernel, or packets where BPF is unavailable
)

// Output formats.
const (
	FormatText  = "text"  // a line per interval, a table at the end
	FormatJSON  = "json"  // the Summary at the end
	FormatJSONL = "jsonl" // a Conn per line as each first response is over
)

// Defaults of Options.
const (
	DefaultInterval           = time.Minute
	DefaultRetain             = 14 * 24 * time.Hour
	DefaultMaxConns           = 1 << 18
	DefaultMaxNetworks        = 2048
	DefaultSampleSize         = 256
	DefaultSamplesPerNetwork  = 32
	DefaultSamplesPerInterval = 4096
	DefaultMetricsNetworks    = 100
	DefaultTop                = 20
	DefaultQuiet              = time.Second
	DefaultIdle               = time.Minute
	DefaultExchange           = 1
)

// DefaultIWs are the initial windows priced when none are asked for.
var DefaultIWs = []int{10, 16, 32}

// Options configure Run. The zero value of a field takes its default.
type Options struct {
	// Ports are the local ports whose new connections are followed (required).
	Ports []uint16
	// Netns are network namespaces to follow, by path (/run/netns/NAME,
	// /proc/PID/ns/net); empty: the one field runs in. AllNetns follows every
	// namespace (the kernel source only).
	Netns    []string
	AllNetns bool
	// Source is SourceAuto, SourceKernel or SourcePackets; Interface is the
	// interface the packet source captures on.
	Source    string
	Interface string
	// Exchange is the client flight whose answer is "the first response": 1,
	// the answer to the first data the client sends (a request over HTTP; the
	// TLS handshake flight over TLS), 2 the next (TLS 1.3's first HTTP
	// response), and so on.
	Exchange int
	// IWs are the initial windows to price on every response.
	IWs []int
	// Prefix4 and Prefix6 are the prefix lengths of client networks; ASN
	// groups by autonomous system (a pfx2as table) where it knows the address.
	Prefix4, Prefix6 int
	ASN              *survey.PrefixTable
	// Interval is how often the aggregates are written to the store and a line
	// is printed; Duration stops Run after that long (0: until ctx ends).
	Interval, Duration time.Duration
	// StorePath is the SQLite store ("" for none); Retain is how long its rows
	// are kept.
	StorePath string
	Retain    time.Duration
	// SamplesPerNetwork and SamplesPerInterval bound the connections the
	// store keeps per network and in all per interval; SampleSize the sample
	// per network the summary's quantiles and intervals rest on.
	SamplesPerNetwork, SamplesPerInterval, SampleSize int
	// MarksFile is tune's journal of changes (tune.DefaultMarksFile when "",
	// none when "-"), read at the start and every interval.
	MarksFile string
	// MetricsListen serves Prometheus metrics at http://ADDR/metrics ("": no);
	// MetricsNetworks bounds the networks with series of their own.
	MetricsListen   string
	MetricsNetworks int
	// MaxConns bounds the connections followed at once, MaxNetworks the
	// networks with statistics of their own.
	MaxConns, MaxNetworks int
	// RingBytes is the kernel source's ring buffer (ktcp.Options.RingBytes).
	RingBytes int
	// Quiet: a response all acknowledged is over after this long without more
	// data; Idle: a connection without events for this long is given up.
	Quiet, Idle time.Duration
	// Top is how many networks the summary lists.
	Top int
	// Format is FormatText, FormatJSON or FormatJSONL; Out receives it, and
	// Status receives the lines a person reads as it runs (the source, the
	// metrics' address); nil: discarded.
	Format      string
	Out, Status io.Writer
	// Seed seeds the sampling and the bootstrap.
	Seed uint64
	// OnConn, when set, is called with every connection as its first response
	// is over (from the source's goroutine: it must not block).
	OnConn func(Conn)
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// UsageError says the options can't be used; nothing was done.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// FileError says a file (the store, the marks journal) can't be read or
// written.
type FileError struct{ Err error }

func (e *FileError) Error() string { return e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// PermissionError says neither source may run: kernel tracing and packet
// capture both need privileges this process lacks.
type PermissionError struct{ Err error }

func (e *PermissionError) Error() string { return e.Err.Error() }
func (e *PermissionError) Unwrap() error { return e.Err }

// Privileges says in one line what field needs.
const Privileges = "field needs root, or the capabilities CAP_BPF and CAP_PERFMON (the kernel's tracepoints), or CAP_NET_RAW for the packet fallback"

func (o *Options) normalize() error {
	if len(o.Ports) == 0 {
		return &UsageError{errors.New("no ports to follow: give the server's local ports, e.g. --port 443")}
	}
	for _, p := range o.Ports {
		if p == 0 {
			return &UsageError{errors.New("port 0: give the ports the server listens on")}
		}
	}
	switch o.Source {
	case "":
		o.Source = SourceAuto
	case SourceAuto, SourceKernel, SourcePackets:
	default:
		return &UsageError{fmt.Errorf("source %q: use auto, kernel or packets", o.Source)}
	}
	if o.AllNetns && len(o.Netns) > 0 {
		return &UsageError{errors.New("give network namespaces or all of them, not both")}
	}
	if o.AllNetns && o.Source == SourcePackets {
		return &UsageError{errors.New("the packet source captures in one network namespace: all namespaces need the kernel source")}
	}
	if len(o.Netns) > 1 && o.Source == SourcePackets {
		return &UsageError{errors.New("the packet source captures in one network namespace")}
	}
	if o.Exchange == 0 {
		o.Exchange = DefaultExchange
	}
	if o.Exchange < 1 || o.Exchange > 16 {
		return &UsageError{fmt.Errorf("exchange %d: give 1 (the answer to the first request) to 16", o.Exchange)}
	}
	if len(o.IWs) == 0 {
		o.IWs = slices.Clone(DefaultIWs)
	}
	for _, iw := range o.IWs {
		if iw < 1 || iw > tune.MaxForcedWindow {
			return &UsageError{fmt.Errorf("initial window %d: give 1 to %d segments", iw, tune.MaxForcedWindow)}
		}
	}
	if o.Prefix4 == 0 {
		o.Prefix4 = DefaultPrefix4
	}
	if o.Prefix6 == 0 {
		o.Prefix6 = DefaultPrefix6
	}
	setDefault := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setDefault(&o.MaxConns, DefaultMaxConns)
	setDefault(&o.MaxNetworks, DefaultMaxNetworks)
	setDefault(&o.SampleSize, DefaultSampleSize)
	setDefault(&o.SamplesPerNetwork, DefaultSamplesPerNetwork)
	setDefault(&o.SamplesPerInterval, DefaultSamplesPerInterval)
	setDefault(&o.MetricsNetworks, DefaultMetricsNetworks)
	setDefault(&o.Top, DefaultTop)
	for name, v := range map[string]int{"connections": o.MaxConns, "networks": o.MaxNetworks, "sample size": o.SampleSize,
		"samples per network": o.SamplesPerNetwork, "samples per interval": o.SamplesPerInterval, "metrics networks": o.MetricsNetworks, "top": o.Top} {
		if v < 1 {
			return &UsageError{fmt.Errorf("%s %d: give 1 or more", name, v)}
		}
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.Interval < time.Second {
		return &UsageError{fmt.Errorf("interval %v: give 1s or more", o.Interval)}
	}
	if o.Duration < 0 {
		return &UsageError{fmt.Errorf("duration %v: give 0 (until interrupted) or more", o.Duration)}
	}
	if o.Retain == 0 {
		o.Retain = DefaultRetain
	}
	if o.Quiet == 0 {
		o.Quiet = DefaultQuiet
	}
	if o.Idle == 0 {
		o.Idle = DefaultIdle
	}
	if o.Quiet < 0 || o.Idle < o.Quiet {
		return &UsageError{fmt.Errorf("idle %v must be at least quiet %v, both positive", o.Idle, o.Quiet)}
	}
	switch o.Format {
	case "":
		o.Format = FormatText
	case FormatText, FormatJSON, FormatJSONL:
	default:
		return &UsageError{fmt.Errorf("format %q: use text, json or jsonl", o.Format)}
	}
	if o.MarksFile == "" {
		o.MarksFile = tune.DefaultMarksFile
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Status == nil {
		o.Status = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return nil
}

// statusCounts are the source's and the tracker's counts, for the metrics
// and the store.
type statusCounts struct {
	followed, notFollowed, noRequest, noResponse uint64
	measured                                     uint64
	eventsRead, eventsLost, packetsDropped       uint64
	open                                         int
}

// runner is one Run.
type runner struct {
	opts     Options
	networks *Networks
	store    *Store
	metrics  *metrics
	marks    []tune.Mark // read from the journal, this run's period
	markKeys map[string]bool

	src    source
	source string // SourceKernel or SourcePackets
	note   string // why the packet source runs, when it does

	mu           sync.Mutex // guards what follows: the source's goroutines feed under it
	tracker      *tracker   // the kernel source's; nil for packets
	agg          *aggregator
	pooledBefore uint64 // agg.pooled at the last interval
	jsonl        *bufio.Writer
	jsonErr      error
	rng          *rand.Rand

	statusMu sync.Mutex
	status   statusCounts // the counts, refreshed every tick (the metrics read them)
	prev     statusCounts // at the last interval, for the store's per-interval counts

	from        time.Time
	intervalAt  time.Time // the start of the interval under way
	storeErrors uint64
	lines       int // interval lines printed (text)
}

// Run follows new connections to opts.Ports until ctx ends or opts.Duration
// passes, and returns the summary of the whole run (also written to opts.Out
// as opts.Format asks). The errors are *UsageError (bad options, nothing
// done), *FileError (the store or the journal), *PermissionError (no source
// may run), or others.
func Run(ctx context.Context, opts Options) (*Summary, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	networks, err := NewNetworks(opts.Prefix4, opts.Prefix6, opts.ASN)
	if err != nil {
		return nil, &UsageError{err}
	}
	now := time.Now()
	r := &runner{opts: opts, networks: networks, markKeys: map[string]bool{},
		rng: rand.New(rand.NewPCG(opts.Seed, 0x5eed)), from: now, intervalAt: now}
	r.agg = newAggregator(opts.MaxNetworks, opts.SampleSize, opts.SamplesPerNetwork, opts.Seed)
	if opts.Format == FormatJSONL {
		r.jsonl = bufio.NewWriterSize(opts.Out, 64<<10)
	}
	if opts.StorePath != "" {
		if r.store, err = OpenStore(opts.StorePath, true); err != nil {
			return nil, &FileError{err}
		}
		defer r.store.Close()
	}
	if err := r.readMarks(ctx); err != nil {
		return nil, err
	}
	r.metrics = newMetrics(opts.MetricsNetworks, opts.IWs, r.statusCopy)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if opts.Duration > 0 {
		var cancelTimeout context.CancelFunc
		runCtx, cancelTimeout = context.WithTimeout(runCtx, opts.Duration)
		defer cancelTimeout()
	}
	var metricsDone <-chan error
	if opts.MetricsListen != "" {
		bound, done, err := serveMetrics(runCtx, opts.MetricsListen, r.metrics.registry)
		if err != nil {
			return nil, &UsageError{fmt.Errorf("metrics: %w", err)}
		}
		metricsDone = done
		fmt.Fprintf(opts.Status, "metrics: http://%s/metrics\n", bound)
	}

	src, err := r.openSource(runCtx)
	if err != nil {
		return nil, err
	}
	r.src = src
	if r.store != nil {
		meta := map[string]string{"ports": joinPorts(opts.Ports), "prefix4": strconv.Itoa(opts.Prefix4),
			"prefix6": strconv.Itoa(opts.Prefix6), "grouping": r.grouping(), "exchange": strconv.Itoa(opts.Exchange),
			"interval": opts.Interval.String()}
		if err := r.store.SetMeta(ctx, meta); err != nil {
			src.close()
			return nil, &FileError{err}
		}
	}
	runErr := r.loop(runCtx, src)
	src.close()
	r.mu.Lock()
	if r.tracker != nil {
		r.tracker.flush()
	}
	r.mu.Unlock()
	r.tick()
	r.writeInterval(context.WithoutCancel(ctx), time.Now())
	if metricsDone != nil {
		cancel()
		<-metricsDone
	}
	sum := r.summary(time.Now())
	if err := r.finish(sum); err != nil && runErr == nil {
		runErr = err
	}
	return sum, runErr
}

func (r *runner) grouping() string {
	if r.networks.ByASN() {
		return "asn"
	}
	return "prefix"
}

func joinPorts(ports []uint16) string {
	var s []string
	for _, p := range ports {
		s = append(s, strconv.Itoa(int(p)))
	}
	return strings.Join(s, ",")
}

// source is what feeds the tracker or the aggregator.
type source interface {
	// run feeds until ctx ends or the source fails.
	run(ctx context.Context) error
	// counts adds the source's counts (events, drops).
	counts(*statusCounts)
	// monoNow is the source's clock for the tracker's sweeps (0: no tracker).
	monoNow() int64
	close()
}

// openSource opens the kernel source, or the packet one where asked or where
// BPF is unavailable (saying why in one line).
func (r *runner) openSource(ctx context.Context) (source, error) {
	opts := r.opts
	var kernelErr error
	if opts.Source != SourcePackets {
		src, err := openKernelSource(r, opts)
		if err == nil {
			r.source = SourceKernel
			fmt.Fprintf(opts.Status, "following new connections to port %s from the kernel (eBPF on tcp:tcp_probe and sock:inet_sock_set_state)\n",
				joinPorts(opts.Ports))
			return src, nil
		}
		if opts.Source == SourceKernel || !errors.Is(err, ktcp.ErrUnavailable) {
			var unavailable *ktcp.UnavailableError
			if errors.As(err, &unavailable) && strings.Contains(unavailable.Reason, "permission denied") {
				return nil, &PermissionError{fmt.Errorf("%w (%s)", err, Privileges)}
			}
			if errors.Is(err, ktcp.ErrUnavailable) {
				return nil, err
			}
			return nil, &UsageError{err}
		}
		kernelErr = err
	}
	psrc, err := openPacketSource(ctx, r, opts)
	if err != nil {
		if kernelErr != nil {
			err = fmt.Errorf("%v; and the packet fallback: %w", kernelErr, err)
		}
		if errors.Is(err, errCapturePermission) {
			return nil, &PermissionError{fmt.Errorf("%w (%s)", err, Privileges)}
		}
		return nil, err
	}
	r.source = SourcePackets
	if kernelErr != nil {
		var unavailable *ktcp.UnavailableError
		reason := kernelErr.Error()
		if errors.As(kernelErr, &unavailable) {
			reason = unavailable.Reason
		}
		r.note = "kernel TCP tracing is unavailable (" + reason + "): following packets instead"
		fmt.Fprintf(opts.Status, "%s on %s, filtered in the kernel on port %s, %s\n", r.note, psrc.iface, joinPorts(opts.Ports), psrc.ringNote())
	} else {
		fmt.Fprintf(opts.Status, "following new connections to port %s from packets on %s, %s\n", joinPorts(opts.Ports), psrc.iface, psrc.ringNote())
	}
	return psrc, nil
}

// emit takes a record from the source (under r.mu).
func (r *runner) emit(rec *record) {
	network := r.networks.Name(rec.remote.Addr())
	s := sampleOf(rec)
	r.agg.add(network, &s)
	r.metrics.observe(network, &s)
	if r.opts.OnConn != nil {
		r.opts.OnConn(rec.conn(network, r.opts.IWs))
	}
	if r.jsonl != nil && r.jsonErr == nil {
		c := rec.conn(network, r.opts.IWs)
		b, err := json.Marshal(c)
		if err == nil {
			b = append(b, '\n')
			_, err = r.jsonl.Write(b)
		}
		r.jsonErr = err
	}
}

// loop runs the source until it ends, sweeping the tracker and closing
// intervals as time passes.
func (r *runner) loop(ctx context.Context, src source) error {
	srcErr := make(chan error, 1)
	go func() { srcErr <- src.run(ctx) }()
	sweep := time.NewTicker(250 * time.Millisecond)
	defer sweep.Stop()
	next := time.Now().Truncate(r.opts.Interval).Add(r.opts.Interval)
	if time.Until(next) < r.opts.Interval/4 {
		next = next.Add(r.opts.Interval) // a first interval of at least a quarter
	}
	for {
		select {
		case err := <-srcErr:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case <-ctx.Done():
			return <-srcErr
		case now := <-sweep.C:
			if mono := src.monoNow(); mono != 0 {
				r.mu.Lock()
				r.tracker.sweep(mono)
				r.mu.Unlock()
			}
			r.tick()
			if !now.Before(next) {
				r.writeInterval(context.WithoutCancel(ctx), now) // a write under way when the run ends is finished
				next = next.Add(r.opts.Interval)
				for !now.Before(next) {
					next = next.Add(r.opts.Interval)
				}
			}
		}
	}
}

// tick refreshes the counts (and flushes the JSON lines).
func (r *runner) tick() {
	r.mu.Lock()
	var c statusCounts
	if r.tracker != nil {
		t := r.tracker.counts
		c.followed, c.notFollowed, c.noRequest, c.noResponse, c.measured = t.Followed, t.NotFollowed, t.NoRequest, t.NoResponse, t.Finished
		c.open = r.tracker.open()
	}
	r.src.counts(&c)
	if r.jsonl != nil && r.jsonErr == nil {
		r.jsonErr = r.jsonl.Flush()
	}
	r.mu.Unlock()
	r.statusMu.Lock()
	r.status = c
	r.statusMu.Unlock()
}

func (r *runner) statusCopy() statusCounts {
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	return r.status
}
