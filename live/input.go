package live

// This file reads a capture as analyze and view take it: files read to their
// end (several merged in time order), or a pipe followed as it is written.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/report"
)

// Stats are the capture's counts so far.
func (in *Input) Stats() capture.Stats { return in.reader.Stats() }

// Paths are the files the input reads ("-" for standard input).
func (in *Input) Paths() []string { return in.paths }

// Followed says whether the input is a pipe read as it is written.
func (in *Input) Followed() bool { return in.followed }

// Drain analyzes the capture files at paths to their end with opts. It
// returns the stream's counts and the capture's warnings; a damaged record
// (skipped: everything readable was analyzed) or a file cut inside a record
// is among them and is returned as damaged as well, marked fault.File, for
// after the report. err is any other failure.
func Drain(ctx context.Context, paths []string, opts analysis.StreamOptions) (source report.Source, warnings []string, damaged, err error) {
	reader, err := openFiles(paths)
	if err != nil {
		return source, nil, nil, err
	}
	defer reader.Close()
	stats, err := analysis.Drain(ctx, reader, opts)
	_, warnings, damaged, err = outcome(reader.Stats(), stats, err)
	return Source(paths, reader.Stats()), warnings, damaged, err
}

// openFiles opens the capture files given (several are merged in time
// order, as one capture), or standard input for a lone "-"; its errors carry
// their exit codes.
func openFiles(paths []string) (*capture.Reader, error) {
	for _, p := range paths {
		if p == "-" && len(paths) > 1 {
			return nil, fault.Usagef("\"-\" (standard input) is read alone, not with other files")
		}
	}
	var r *capture.Reader
	var err error
	switch {
	case paths[0] == "-":
		r, err = capture.NewReader(os.Stdin, capture.WithUDP())
	case len(paths) == 1:
		r, err = capture.Open(paths[0], capture.WithUDP())
	default:
		r, err = capture.OpenFiles(paths, capture.WithUDP())
	}
	if err != nil {
		return nil, inputError(err)
	}
	return r, nil
}

// outcome sorts a stream's end: the capture's warnings, a damaged
// record (reported, exit code 3 after the report), or another failure.
func outcome(capStats capture.Stats, stats analysis.StreamStats, err error) (analysis.StreamStats, []string, error, error) {
	if err != nil && !errors.Is(err, capture.ErrDamaged) {
		return stats, nil, nil, inputError(err)
	}
	warnings := append(analysis.CaptureWarnings(capStats, int(stats.Connections)), analysis.StreamWarnings(stats)...)
	var damaged error
	switch {
	case err != nil:
		warnings = append(warnings, err.Error())
		damaged = fault.Mark(fault.File, err)
	case capStats.Truncated:
		// Its warning says so; the exit code says the file was not whole.
		damaged = fault.Mark(fault.File, fmt.Errorf("the capture ends inside a record (cut short, or still being written): the %d whole records before it were analyzed", capStats.Records))
	}
	return stats, warnings, damaged, nil
}

// Input is a capture as analyze and view read it: files read to their end, or a
// pipe (standard input, a FIFO) followed as it is written.
type Input struct {
	paths  []string
	reader *capture.Reader
	// followed: a pipe, read as it is written (live.Follow): connections go
	// out as they finish, and the stream's clock goes on while it is quiet.
	followed bool
	// stop ends the reading of the pipe once what it holds is read; nil
	// for files.
	stop  func()
	close []func()
}

func (in *Input) Close() {
	if in.reader != nil {
		in.reader.Close()
	}
	for i := len(in.close) - 1; i >= 0; i-- {
		in.close[i]()
	}
}

// OpenInput opens what analyze reads: the files given, or standard
// input for a lone "-". Standard input or a lone FIFO that is a pipe is read
// through a descriptor of its own in non-blocking mode, so that Go's poller
// reads it and a signal (ctx) can cut a read that waits for tcpdump. Its
// errors carry their exit codes.
func OpenInput(ctx context.Context, paths []string) (*Input, error) {
	var pipe *os.File
	switch {
	case len(paths) == 1 && paths[0] == "-":
		if fi, err := os.Stdin.Stat(); err == nil && isPipe(fi) {
			pipe = os.Stdin
		}
	case len(paths) == 1:
		if fi, err := os.Stat(paths[0]); err == nil && isPipe(fi) {
			// Opening a FIFO waits for a writer: a signal must not wait with it.
			type opened struct {
				f   *os.File
				err error
			}
			ch := make(chan opened, 1)
			go func() {
				f, err := os.Open(paths[0])
				ch <- opened{f, err}
			}()
			var o opened
			select {
			case o = <-ch:
			case <-ctx.Done():
				// A writer that opened it before the signal has its open
				// returned already, or in a moment.
				select {
				case o = <-ch:
				case <-time.After(fifoOpenGrace):
					return nil, fault.Interruptedf("interrupted before anything wrote into %s; nothing left behind", paths[0])
				}
			}
			if o.err != nil {
				return nil, fault.Mark(fault.File, fmt.Errorf("capture: opening the capture file: %w", o.err))
			}
			pipe = o.f
		}
	}
	if pipe == nil {
		r, err := openFiles(paths)
		if err != nil {
			return nil, err
		}
		return &Input{reader: r, paths: paths}, nil
	}
	in := &Input{followed: true, paths: paths}
	if pipe != os.Stdin {
		in.close = append(in.close, func() { pipe.Close() })
	}
	f, restore, err := pollable(pipe)
	if err != nil {
		// Not pollable: read it as it comes, a signal then ends the process.
		r, err := capture.NewReader(pipe, capture.WithUDP())
		if err != nil {
			in.Close()
			return nil, inputError(err)
		}
		in.reader = r
		return in, nil
	}
	in.close = append(in.close, restore)
	sp := &stoppablePipe{f: f}
	in.stop = sp.stop
	// Until Follow takes over, a signal ends the wait for the capture's
	// header (which may be in the pipe already).
	stopWaiting := context.AfterFunc(ctx, sp.stop)
	r, err := capture.NewReader(sp, capture.WithUDP())
	stopWaiting()
	if err != nil {
		in.Close()
		if ctx.Err() != nil { // the signal ended the reading
			return nil, fault.Interruptedf("interrupted before the capture's first packets arrived; nothing left behind")
		}
		return nil, inputError(err)
	}
	in.reader = r
	return in, nil
}

// errPipeStopped ends the reads of a stopped pipe.
var errPipeStopped = errors.New("the reading was stopped")

// stoppablePipe reads a pipe through Go's poller until it is stopped (a
// signal): then what the pipe holds at that moment is still read (tcpdump
// wrote it before the signal), and the reads end there, a read waiting for
// more being cut by a deadline.
type stoppablePipe struct {
	f         *os.File
	mu        sync.Mutex
	stopped   bool
	remaining int // once stopped: the bytes left to read
}

func (p *stoppablePipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	if p.stopped {
		if p.remaining == 0 {
			p.mu.Unlock()
			return 0, errPipeStopped
		}
		b = b[:min(len(b), p.remaining)]
	}
	p.mu.Unlock()
	n, err := p.f.Read(b)
	p.mu.Lock()
	if p.stopped {
		p.remaining = max(0, p.remaining-n)
	}
	p.mu.Unlock()
	return n, err
}

// Stat lets the capture reader see a pipe.
func (p *stoppablePipe) Stat() (os.FileInfo, error) { return p.f.Stat() }

func (p *stoppablePipe) stop() {
	p.mu.Lock()
	again := p.stopped
	p.mu.Unlock()
	if again {
		return
	}
	held := 0
	if raw, err := p.f.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			// TIOCINQ (FIONREAD): the bytes the pipe holds.
			if n, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
				held = n
			}
		})
	}
	p.mu.Lock()
	p.stopped, p.remaining = true, held
	p.mu.Unlock()
	if held == 0 {
		p.f.SetReadDeadline(time.Now()) // a read waiting for more ends now
	}
}

// fifoOpenGrace is how long a signal waits for the open of a FIFO whose writer
// came just before it.
const fifoOpenGrace = 500 * time.Millisecond

// isPipe reports whether fi is a pipe, a FIFO or a socket: an input that is
// written as it is read.
func isPipe(fi os.FileInfo) bool {
	return fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0
}

// pollable returns a descriptor of f's own in non-blocking mode (a pipe's read
// end is shared by its descriptors), which Go's poller reads and a deadline
// can interrupt; restore closes it and puts f's blocking mode back.
func pollable(f *os.File) (*os.File, func(), error) {
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	var fd int
	var dupErr error
	if err := raw.Control(func(orig uintptr) { fd, dupErr = unix.Dup(int(orig)) }); err != nil {
		return nil, nil, err
	}
	if dupErr != nil {
		return nil, nil, dupErr
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	// A descriptor in non-blocking mode makes a pollable File.
	nf := os.NewFile(uintptr(fd), f.Name())
	restore := func() {
		unix.SetNonblock(fd, false)
		nf.Close()
	}
	return nf, restore, nil
}

// Fed is how a capture's analysis ended.
type Fed struct {
	Stats    analysis.StreamStats
	Warnings []string
	// Damaged is a damaged record's error (marked fault.File), for after the
	// report of everything readable.
	Damaged error
	// Stopped: a signal ended the reading; what was read was analyzed and
	// reported.
	Stopped bool
}

// Feed analyzes the input to its end, or until a signal: the stream
// itself is not cancelled then, so the connections read are finished and
// reported. A followed pipe is read as it is written (live.Follow).
func (in *Input) Feed(ctx context.Context, opts analysis.StreamOptions) (Fed, error) {
	st := analysis.NewStream(context.WithoutCancel(ctx), opts)
	var err error
	if in.followed {
		err = Follow(ctx, in.reader, st, FollowOptions{Stop: in.stop})
	} else {
		err = analysis.Feed(ctx, in.reader, st)
	}
	stopped := ctx.Err() != nil && (err == nil || errors.Is(err, ctx.Err()))
	if stopped {
		err = nil
	}
	stats, closeErr := st.Close()
	if err == nil {
		err = closeErr
	}
	if stopped && in.followed && in.stop == nil {
		// The read in progress could not be cut: the reader is not ours to
		// read from again.
		return Fed{Stats: stats, Stopped: true}, nil
	}
	capStats := in.reader.Stats()
	if stopped {
		// A record the signal cut is not the file's end.
		capStats.Truncated = false
	}
	stats, warnings, damaged, err := outcome(capStats, stats, err)
	if err != nil {
		return Fed{}, err
	}
	return Fed{Stats: stats, Warnings: warnings, Damaged: damaged, Stopped: stopped}, nil
}

// Source describes the files read (Path is the first, or "standard
// input"; Paths lists them all when there were several).
func Source(paths []string, st capture.Stats) report.Source {
	source := analysis.FileSource(paths[0], st)
	switch {
	case len(paths) == 1 && paths[0] == "-":
		source.Path = "standard input"
	case len(paths) > 1:
		source.Path = fmt.Sprintf("%s and %d more", paths[0], len(paths)-1)
		if len(paths) == 2 {
			source.Path = paths[0] + " and " + paths[1]
		}
		source.Paths = append([]string(nil), paths...)
	}
	return source
}

// inputError marks an error of a capture that can't be read: File for a
// file missing, unreadable (a directory, a symbolic link loop, no permission),
// empty, cut inside its header, damaged or not a capture.
func inputError(err error) error {
	var pathErr *fs.PathError
	switch {
	case errors.As(err, &pathErr), errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission),
		errors.Is(err, capture.ErrNotCapture), errors.Is(err, capture.ErrEmpty), errors.Is(err, capture.ErrDamaged),
		errors.Is(err, capture.ErrTruncated):
		return fault.Mark(fault.File, err)
	}
	return fault.Mark(fault.Failed, err)
}
