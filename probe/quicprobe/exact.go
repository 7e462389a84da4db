package quicprobe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slowstart/slowstart/h3client"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/quic"
	"github.com/slowstart/slowstart/quicanalysis"
	"github.com/slowstart/slowstart/report"
)

// The active measurement of a server's initial window over QUIC (probe --exact
// --http3), the counterpart of probe/exact for TCP:
//
//  1. fetch the page over HTTP/3 (package h3client), and as soon as the datagram that
//     carries the request has left the client's socket, send nothing more: the
//     probe drops its own outgoing datagrams (the socket is its own: no firewall
//     rule), so the server hears no acknowledgement of its response;
//  2. the server sends while its bytes in flight are below its window, then is
//     silent until its probe timeout (RFC 9002 §6.2: at least the smoothed RTT plus
//     the client's max_ack_delay, 25 ms, after its last packet), which sends one or
//     two probe packets, then doubles;
//  3. the window is the bytes in flight when the server fell silent: the
//     ack-eliciting packets it sent that no datagram the client sent acknowledged.
//     A sender sends while in flight is below the window, so the window is more than
//     that less one datagram, and at most that.
//
// A silence is taken for the probe timeout only when one or two datagrams follow it
// and the next silence is at least half again as long (the timeout doubles): a server
// that stalled and went on sending its window is not mistaken for one that waited.

// ExactResult is one active measurement.
type ExactResult struct {
	// Verdict is report.VerdictExact (the window to within a datagram),
	// report.VerdictRange (packet numbers missing from the window: lost, or skipped
	// by the server), report.VerdictLowerBound (the response ended inside the window,
	// or the handshake may have grown it), report.VerdictAmbiguous (no probe timeout
	// recognized) or report.VerdictNone (no response).
	Verdict string
	// WindowBytes and WindowBytesMax bound the initial window: more than
	// WindowBytes-1... precisely, WindowBytes ≤ window ≤ WindowBytesMax (0: no upper
	// bound).
	WindowBytes, WindowBytesMax int
	// InFlightBytes and InFlightDatagrams: what the server had sent, unacknowledged,
	// when it fell silent.
	InFlightBytes, InFlightDatagrams int
	MaxDatagramBytes                 int
	// SilenceMs is the server's silence before its first probe timeout.
	SilenceMs float64
	Reason    string
	// Probe is the probe itself: its report, datagrams (those it sent and received;
	// the ones it held back are not there) and key log.
	Probe *h3client.Result
	// Held counts the datagrams the probe held back after the request.
	Held int
}

// exactState holds the client socket's side of an active measurement: a decoder of
// its own datagrams (with the secrets as the TLS stack writes them) to find the one
// with the request, after which every outgoing datagram is held back.
type exactState struct {
	mu        sync.Mutex
	keys      *keylog.Log
	keyBuf    bytes.Buffer
	dec       *quic.Conn
	holding   bool
	heldSince time.Time
	held      int
	started   chan struct{} // closed when holding begins
}

func newExactState() *exactState {
	k := keylog.New()
	return &exactState{keys: k, dec: quic.NewConn(k), started: make(chan struct{})}
}

// keyLine takes the key log as the TLS stack writes it.
func (e *exactState) keyLine(b []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.keyBuf.Write(b)
	for {
		line, err := e.keyBuf.ReadString('\n')
		if err != nil {
			e.keyBuf.WriteString(line)
			return
		}
		e.keys.AddLine(line)
	}
}

// received decodes a datagram from the server (the decoder learns the connection
// IDs and the cipher suite from them).
func (e *exactState) received(b []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dec.Datagram(time.Now().UnixNano(), false, b)
}

// sending decodes a datagram about to leave and says whether to hold it back: every
// datagram after the one that carries the end of the request (stream 0's FIN).
func (e *exactState) sending(b []byte) (hold bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.holding {
		e.held++
		return true
	}
	for _, p := range e.dec.Datagram(time.Now().UnixNano(), true, b) {
		for _, f := range p.Frames {
			if f.Type == quic.FrameStream && f.StreamID == 0 && f.Fin {
				e.holding, e.heldSince = true, time.Now()
				close(e.started)
			}
		}
	}
	return false
}

// exactWait is how long the probe listens after the request left: the response's
// first byte (a round trip), the server's window (under one more), its first probe
// timeout (the smoothed RTT, four times its deviation and the 25 ms ACK delay: about
// three round trips after a handshake's few samples) and the second (twice that),
// with room.
func exactWait(rtt time.Duration) time.Duration {
	return 14*rtt + 500*time.Millisecond
}

// Exact measures the server's initial window actively over HTTP/3 (see above).
// opts.URL should name a response longer than the window (tens of kilobytes:
// quic-go's window is 40,960 bytes).
func Exact(ctx context.Context, opts h3client.Options) (*ExactResult, error) {
	state := newExactState()
	userKeylog := opts.Keylog
	opts.Keylog = writerFunc(func(b []byte) (int, error) {
		state.keyLine(b)
		if userKeylog != nil {
			return userKeylog.Write(b)
		}
		return len(b), nil
	})
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var handshake atomic.Int64
	opts.Hooks = &h3client.Hooks{
		Handshake: func(d time.Duration) { handshake.Store(int64(d)) },
		Received:  state.received,
		Sending:   state.sending,
	}
	go func() {
		select {
		case <-state.started:
		case <-runCtx.Done():
			return
		}
		// The handshake's duration is a round trip and the server's work: an upper
		// bound of the round trip, enough to size the wait.
		select {
		case <-time.After(exactWait(max(time.Duration(handshake.Load()), 10*time.Millisecond))):
			cancel()
		case <-runCtx.Done():
		}
	}()
	res, err := h3client.Run(runCtx, opts)
	select {
	case <-state.started:
	default:
		if err == nil {
			err = errors.New("the request was never seen leaving the socket: nothing measured")
		}
		return &ExactResult{Verdict: report.VerdictNone, Reason: err.Error(), Probe: res}, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if res == nil {
		return nil, err
	}
	out := readExact(res, state.held)
	return out, nil
}

// readExact reads the window from the probe's datagrams.
func readExact(res *h3client.Result, held int) *ExactResult {
	out := &ExactResult{Probe: res, Held: held}
	kl, err := keylog.Parse(bytes.NewReader(res.Keylog))
	if err != nil {
		out.Verdict, out.Reason = report.VerdictNone, "the connection's key log: "+err.Error()
		return out
	}
	a := quicanalysis.New(quicanalysis.Options{Keys: kl, Vantage: report.VantageClient})
	for _, d := range res.Datagrams {
		a.Add(d)
	}
	packets := a.Packets()
	var firstClient, firstServer, requestNs int64 = -1, -1, -1
	acked := map[[2]int64]bool{}
	for _, p := range packets {
		if p.FromClient {
			if firstClient < 0 {
				firstClient = p.TimeNs
			}
			for _, f := range p.Frames {
				if f.Type == quic.FrameStream && f.StreamID == 0 && f.Fin {
					requestNs = p.TimeNs
				}
				if f.Type == quic.FrameAck || f.Type == quic.FrameAckECN {
					for _, r := range f.AckRanges {
						for pn := r.Smallest; pn <= r.Largest; pn++ {
							acked[[2]int64{int64(p.Space), pn}] = true
						}
					}
				}
			}
		} else if firstServer < 0 {
			firstServer = p.TimeNs
		}
	}
	if requestNs < 0 || firstServer < 0 {
		out.Verdict, out.Reason = report.VerdictNone, "no request or no answer in the probe's datagrams"
		return out
	}
	rtt := firstServer - firstClient
	threshold := max(rtt/2, 10_000_000)

	// The server's datagrams after the request, in groups split by silences.
	type datagram struct {
		timeNs  int64
		bytes   int
		packets []quic.Packet
	}
	var after []datagram
	for _, p := range packets {
		if p.FromClient || p.TimeNs <= requestNs {
			continue
		}
		if n := len(after); n > 0 && after[n-1].timeNs == p.TimeNs && after[n-1].packets[0].Datagram == p.Datagram {
			after[n-1].packets = append(after[n-1].packets, p)
			continue
		}
		after = append(after, datagram{timeNs: p.TimeNs, bytes: p.DatagramBytes, packets: []quic.Packet{p}})
	}
	var groups [][]datagram
	for i, d := range after {
		if i == 0 || d.timeNs-after[i-1].timeNs >= threshold {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], d)
	}
	if len(groups) == 0 {
		out.Verdict, out.Reason = report.VerdictNone, "the server sent nothing after the request"
		return out
	}
	eliciting := func(g []datagram) int {
		n := 0
		for _, d := range g {
			for i := range d.packets {
				if d.packets[i].AckEliciting() {
					n++
					break
				}
			}
		}
		return n
	}
	silence := func(k int) int64 { return groups[k][0].timeNs - groups[k-1][len(groups[k-1])-1].timeNs }
	// The window's burst: the first group, and the groups after it that are not a
	// probe timeout's (more than two datagrams: a stalled server going on).
	end, probe := 0, -1
	for k := 1; k < len(groups); k++ {
		if eliciting(groups[k]) <= 2 && k+1 < len(groups) && 2*silence(k+1) >= 3*silence(k) {
			probe = k
			break
		}
		end = k
	}

	// Bytes in flight at the end of the burst: every ack-eliciting server packet
	// received until then that no datagram the client sent acknowledged.
	burstEnd := groups[end][len(groups[end])-1].timeNs
	var inFlight, datagrams, maxDatagram int
	var handshake int
	fin := false
	minPN, maxPN := int64(-1), int64(-1)
	seen := map[int64]bool{}
	countedDatagram := map[[2]int64]bool{}
	for _, p := range packets {
		if p.FromClient || p.TimeNs > burstEnd {
			continue
		}
		maxDatagram = max(maxDatagram, p.DatagramBytes)
		if p.Space != quic.SpaceApplication && p.AckEliciting() {
			handshake += p.Bytes
		}
		if p.Space == quic.SpaceApplication && p.TimeNs > requestNs {
			seen[p.Number] = true
			if minPN < 0 || p.Number < minPN {
				minPN = p.Number
			}
			maxPN = max(maxPN, p.Number)
			for _, f := range p.Frames {
				if f.Type == quic.FrameStream && f.StreamID == 0 && f.Fin {
					fin = true
				}
			}
		}
		if !p.AckEliciting() || acked[[2]int64{int64(p.Space), p.Number}] {
			continue
		}
		inFlight += p.Bytes
		if key := [2]int64{p.TimeNs, int64(p.Datagram)}; !countedDatagram[key] {
			countedDatagram[key] = true
			datagrams++
		}
	}
	missing := 0
	for pn := minPN; minPN >= 0 && pn <= maxPN; pn++ {
		if !seen[pn] {
			missing++
		}
	}
	out.InFlightBytes, out.InFlightDatagrams, out.MaxDatagramBytes = inFlight, datagrams, maxDatagram
	lowest := max(1, inFlight-maxDatagram+1)
	switch {
	case fin:
		out.Verdict, out.WindowBytes = report.VerdictLowerBound, lowest
		out.Reason = fmt.Sprintf("the response ended with %d bytes in flight before the server's window was full: the window is at least %d bytes; ask for a longer response", inFlight, lowest)
	case probe < 0:
		out.Verdict, out.WindowBytes = report.VerdictAmbiguous, lowest
		out.Reason = fmt.Sprintf("no probe timeout recognized after the server's %d bytes (silences of one or two datagrams, then a doubled silence): the server may have stalled; measure again", inFlight)
	case 2*handshake > lowest:
		out.Verdict, out.WindowBytes, out.WindowBytesMax = report.VerdictRange, max(1, lowest-handshake), inFlight
		out.Reason = fmt.Sprintf("the server had %d bytes in flight when it fell silent, but its handshake (%d bytes) was more than half of that and may have grown the window", inFlight, handshake)
	case missing > 0:
		out.Verdict, out.WindowBytes, out.WindowBytesMax = report.VerdictRange, lowest, inFlight+missing*maxDatagram
		out.Reason = fmt.Sprintf("%d packet numbers are missing from the server's window (lost on the way, or skipped by the server): the window was more than %d bytes and at most %d", missing, lowest-1, out.WindowBytesMax)
	default:
		out.Verdict, out.WindowBytes, out.WindowBytesMax = report.VerdictExact, lowest, inFlight
		out.Reason = fmt.Sprintf("with nothing acknowledged after the request, the server sent %d bytes in %d datagrams and fell silent; QUIC senders send while in flight is below the window, so the window was more than %d bytes and at most %d", inFlight, datagrams, lowest-1, inFlight)
	}
	if probe > 0 {
		out.SilenceMs = float64(silence(probe)) / 1e6
		if out.Verdict != report.VerdictLowerBound {
			out.Reason += fmt.Sprintf("; its probe timeout came %.1f ms later", out.SilenceMs)
		}
	}
	return out
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// InitialWindow is the measurement as a Report's initial-window reading (source
// "http": the response's first round, here with nothing acknowledged).
func (r *ExactResult) InitialWindow() *report.InitialWindow {
	iw := &report.InitialWindow{Source: "http", Verdict: r.Verdict, Bytes: r.WindowBytes, BytesMax: r.WindowBytesMax,
		Reason: "measured actively (nothing acknowledged after the request): " + r.Reason}
	if d := r.MaxDatagramBytes; d > 0 {
		iw.Segments = (r.WindowBytes + d - 1) / d
		if r.WindowBytesMax > 0 {
			iw.SegmentsMax = (r.WindowBytesMax + d - 1) / d
		}
	}
	if r.Verdict == report.VerdictExact {
		// As the passive reading gives it: the bytes in flight, the window within a
		// datagram below.
		iw.Bytes, iw.BytesMax, iw.Segments, iw.SegmentsMax = r.WindowBytesMax, 0, r.InFlightDatagrams, 0
	}
	return iw
}

// WriteExactText writes active measurements for people, one line each, and what
// they agree on.
func WriteExactText(w io.Writer, url string, results []*ExactResult) error {
	ew := &report.ErrWriter{W: w}
	ew.Printf("Initial window of %s over HTTP/3 (QUIC), measured actively: nothing acknowledged after the request\n", url)
	lo, hi := 0, -1
	agree := true
	for i, r := range results {
		span := fmt.Sprintf("%d bytes", r.WindowBytes)
		if r.WindowBytesMax > 0 {
			span = fmt.Sprintf("%d to %d bytes", r.WindowBytes, r.WindowBytesMax)
		}
		ew.Printf("  run %d: %s, %s (%d datagrams in flight, up to %d bytes each): %s\n", i+1, r.Verdict, span, r.InFlightDatagrams, r.MaxDatagramBytes, r.Reason)
		if r.Verdict != report.VerdictExact && r.Verdict != report.VerdictRange {
			agree = false
			continue
		}
		lo = max(lo, r.WindowBytes)
		if hi < 0 || r.WindowBytesMax < hi {
			hi = r.WindowBytesMax
		}
	}
	switch {
	case agree && hi >= lo && len(results) > 0:
		ew.Printf("The runs agree: the initial window is %d to %d bytes.\n", lo, hi)
	case len(results) > 0:
		ew.Printf("The runs do not agree on a window: see each run.\n")
	}
	return ew.Err
}
