//go:build linux

package exact

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/slowstart/slowstart/internal/netnsexec"

	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/internal/redact"
)

// captureSnaplen keeps the IP and TCP headers: the measurement needs no payload.
const captureSnaplen = 192

// Measure measures the initial window of the server of opts.URL over
// opts.Runs fresh connections. It returns an error when it cannot measure at
// all (a bad option, no privileges, no nf_tables, a server that cannot be
// reached); what each run saw is in Result.Runs.
func Measure(ctx context.Context, opts Options) (_ *Result, err error) {
	opts, tgt, err := opts.normalized()
	if err != nil {
		return nil, &OptionsError{Err: err}
	}
	remote, err := resolve(ctx, opts, tgt)
	if err != nil {
		return nil, err
	}
	// The process's table in the namespace, made (after removing dead
	// processes' tables there) by the first measurement that needs it.
	fw, removed, err := acquireFirewall(ctx, opts.Netns)
	if len(removed) > 0 {
		opts.Logger.Info("removed nftables tables of processes that died", "tables", removed)
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if releaseErr := fw.release(); releaseErr != nil && err == nil {
			err = releaseErr
		}
	}()
	iface := opts.Interface
	if iface == "" {
		iface, _, err = capture.RouteInterfaceIn(opts.Netns, remote.Addr())
		if err != nil {
			return nil, fmt.Errorf("find the interface towards %s: %w", remote.Addr(), err)
		}
	}
	res := &Result{Schema: Schema, URL: redact.URL(opts.URL), Remote: remote.String(), Phase: PhaseHTTP, AnnouncedMSS: opts.MSS, AfterHandshake: opts.AfterHandshake}
	if tgt.tls && !opts.AfterHandshake {
		res.Phase = PhaseTLS
	}
	for i := 1; i <= opts.Runs; i++ {
		if i > 1 && opts.Pause > 0 {
			select {
			case <-time.After(opts.Pause):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		run, err := measureRun(ctx, opts, fw, tgt, remote, iface, res.Phase)
		if err != nil {
			return nil, fmt.Errorf("run %d of %s: %w", i, opts.URL, err)
		}
		run.Index = i
		opts.Logger.Debug("exact IW run", "run", i, "outcome", run.Outcome, "segments", run.Segments, "bytes", run.Bytes, "reason", run.Reason)
		res.Runs = append(res.Runs, run)
	}
	res.summarize()
	return res, nil
}

// resolve finds the address to connect to: Options.Resolve, an IP literal, or DNS.
func resolve(ctx context.Context, opts Options, tgt target) (netip.AddrPort, error) {
	key := net.JoinHostPort(tgt.host, strconv.Itoa(int(tgt.port)))
	if addr, ok := opts.Resolve[key]; ok {
		return netip.AddrPortFrom(addr.Unmap(), tgt.port), nil
	}
	if addr, err := netip.ParseAddr(tgt.host); err == nil {
		return netip.AddrPortFrom(addr.Unmap(), tgt.port), nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", tgt.host)
	if err != nil || len(addrs) == 0 {
		return netip.AddrPort{}, fmt.Errorf("look up %s: %v: check the name, or give its address with --resolve", tgt.host, err)
	}
	for _, a := range addrs {
		if a.Unmap().Is4() {
			return netip.AddrPortFrom(a.Unmap(), tgt.port), nil
		}
	}
	return netip.AddrPortFrom(addrs[0], tgt.port), nil
}

// runState is what one run set up, for its teardown.
type runState struct {
	firewall    *firewall
	rules       *connectionRules // the connection's elements in the firewall's sets
	live        *capture.Live
	tracker     *tracker
	captureDone chan struct{}
	local       netip.AddrPort
}

// measureRun makes one connection and measures its flight. Errors are for
// what makes measuring impossible; what the server did is in the Run.
func measureRun(ctx context.Context, opts Options, fw *firewall, tgt target, remote netip.AddrPort, iface, phase string) (run Run, err error) {
	st := &runState{firewall: fw}
	defer func() {
		if st.rules != nil {
			if removeErr := st.rules.remove(); removeErr != nil {
				err = errors.Join(err, removeErr)
			}
		}
	}()
	defer func() {
		if st.live != nil {
			st.live.Stop()
			if st.captureDone != nil {
				<-st.captureDone
			}
			st.live.Close()
		}
	}()

	conn, dialNs, err := st.connect(ctx, opts, remote, iface, phase)
	if err != nil {
		return run, err
	}
	tcpConn := conn.(*net.TCPConn)
	defer func() {
		tcpConn.SetLinger(0) // a reset: the server forgets the connection at once
		tcpConn.Close()
	}()
	announcedMSS, err := st.handshakeMSS(opts, remote, iface)
	if err != nil {
		return run, err
	}
	counting := &countingConn{Conn: conn}
	fl, err := st.startFlight(ctx, opts, tgt, counting, remote, phase)
	if err != nil {
		return run, err
	}
	flightBytes := st.awaitFlight(ctx, opts, fl, dialNs)
	if err := ctx.Err(); err != nil {
		return run, err
	}
	run = st.tracker.classify(classifyInput{announcedMSS: announcedMSS, flightBytes: flightBytes, requestAtNs: fl.requestAt.UnixNano()})
	run.Local = st.local.String()
	if run.TLSVersion == "" && tgt.tls {
		run.TLSVersion = serverHelloVersion(counting.prefixBytes())
	}
	tcpConn.SetLinger(0)
	tcpConn.Close()
	<-fl.readerDone
	return run, nil
}

// connect dials remote from opts.Netns; before the SYN leaves, the dialer's
// Control binds to learn the local port, adds the table that rewrites this
// connection's MSS, and starts capturing it. dialNs is how long the dial took.
func (st *runState) connect(ctx context.Context, opts Options, remote netip.AddrPort, iface, phase string) (conn net.Conn, dialNs int64, err error) {
	dialer := &net.Dialer{
		Timeout: opts.Timeout,
		Control: func(network, address string, raw syscall.RawConn) error {
			return st.prepare(ctx, opts, raw, remote, iface, phase)
		},
	}
	dialStart := time.Now()
	err = netnsexec.Run(opts.Netns, func() error {
		var dialErr error
		conn, dialErr = dialer.DialContext(ctx, "tcp", remote.String())
		return dialErr
	})
	if err != nil {
		return nil, 0, fmt.Errorf("connect to %s: %w", remote, err)
	}
	return conn, time.Since(dialStart).Nanoseconds(), nil
}

// handshakeMSS waits for the capture to see the handshake and returns the MSS
// the SYN left with, which must be the rewritten one.
func (st *runState) handshakeMSS(opts Options, remote netip.AddrPort, iface string) (int, error) {
	select {
	case <-st.tracker.handshakeSeen:
	case <-time.After(time.Second):
		return 0, fmt.Errorf("the capture on %s did not see the handshake with %s: check the interface (--interface)", iface, remote)
	}
	// The rewrite only ever lowers the MSS: a kernel that announced less on its
	// own (a small path MTU) keeps its value.
	announcedMSS := st.tracker.clientMSSSeen()
	if announcedMSS > opts.MSS || announcedMSS == 0 {
		return 0, fmt.Errorf("the SYN left with MSS %d instead of %d: the kernel did not apply the nftables rewrite (it needs nf_tables with TCP option support, Linux 4.19 or later)", announcedMSS, opts.MSS)
	}
	return announcedMSS, nil
}

// flight is a flight under way: flightDone receives its length when this side
// sees it complete, readerDone is closed when the reader stops.
type flight struct {
	flightDone chan int64
	readerDone chan struct{}
	requestAt  time.Time
}

// startFlight holds this side's ACKs back and sends what makes the server send the
// flight counted: the request (in the clear, or after a TLS handshake), or the
// ClientHello.
func (st *runState) startFlight(ctx context.Context, opts Options, tgt target, counting *countingConn, remote netip.AddrPort, phase string) (flight, error) {
	fl := flight{flightDone: make(chan int64, 1)}
	switch {
	case phase == PhaseHTTP && !tgt.tls:
		if err := st.rules.holdACKs(holdTimeout(opts)); err != nil {
			return fl, err
		}
		fl.requestAt = time.Now()
		if _, err := io.WriteString(counting.Conn, httpRequest(tgt, opts.UserAgent)); err != nil {
			return fl, fmt.Errorf("send the request to %s: %w", remote, err)
		}
		fl.readerDone = readHTTPResponse(counting, fl.flightDone, func(br *bufio.Reader) int64 {
			return counting.readBytes() - int64(br.Buffered())
		})
	case phase == PhaseHTTP: // after a TLS handshake
		tlsConn := tls.Client(counting, tlsConfig(tgt, opts, []string{"http/1.1"}))
		tlsConn.SetDeadline(time.Now().Add(opts.Timeout))
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			return fl, fmt.Errorf("TLS handshake with %s: %w", remote, err)
		}
		tlsConn.SetDeadline(time.Time{})
		handshakeBytes := counting.readBytes()
		st.tracker.setBase(handshakeBytes)
		if err := st.rules.holdACKs(holdTimeout(opts)); err != nil {
			return fl, err
		}
		fl.requestAt = time.Now()
		if _, err := io.WriteString(tlsConn, httpRequest(tgt, opts.UserAgent)); err != nil {
			return fl, fmt.Errorf("send the request to %s: %w", remote, err)
		}
		fl.readerDone = readHTTPResponse(tlsConn, fl.flightDone, func(*bufio.Reader) int64 {
			// The raw stream ends with the record that ended the body.
			return counting.readBytes() - handshakeBytes
		})
	default: // the TLS handshake flight
		if err := st.rules.holdACKs(holdTimeout(opts)); err != nil {
			return fl, err
		}
		counting.holdWrites(fl.flightDone)
		tlsConn := tls.Client(counting, tlsConfig(tgt, opts, []string{"h2", "http/1.1"}))
		readerDone := make(chan struct{})
		fl.readerDone = readerDone
		fl.requestAt = time.Now()
		go func() {
			defer close(readerDone)
			tlsConn.Handshake() // it stalls or fails once the writes are held back: the count is in the capture
		}()
	}
	return fl, nil
}

// awaitFlight waits for the run's end (the first retransmission, FIN or RST, the
// flight complete, 1 s + 6 handshake RTTs at most opts.MaxWait, or ctx), stops the
// capture, and returns the flight's length when this side saw it complete, else -1.
func (st *runState) awaitFlight(ctx context.Context, opts Options, fl flight, dialNs int64) int64 {
	rttNs := st.tracker.handshakeRTTNs()
	if rttNs <= 0 {
		rttNs = dialNs
	}
	wait := min(opts.MaxWait, time.Second+6*time.Duration(rttNs))
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var flightBytes int64 = -1
	select {
	case <-st.tracker.ended:
	case flightBytes = <-fl.flightDone:
	case <-timer.C:
	case <-ctx.Done():
	}
	st.live.Stop()
	<-st.captureDone
	if flightBytes < 0 && st.tracker.sawFIN() {
		// The server's answer ended in the capture (its FIN), so it is in the socket:
		// the reader may just not have got to it yet (a busy host).
		readerWait := time.NewTimer(time.Second)
		select {
		case flightBytes = <-fl.flightDone:
		case <-fl.readerDone: // what it reported, if anything, is taken below
		case <-readerWait.C:
		case <-ctx.Done():
		}
		readerWait.Stop()
	}
	if flightBytes < 0 {
		select {
		case flightBytes = <-fl.flightDone:
		default:
		}
	}
	return flightBytes
}

// prepare runs in the dialer's Control hook, on the socket before connect.
func (st *runState) prepare(ctx context.Context, opts Options, raw syscall.RawConn, remote netip.AddrPort, iface, phase string) error {
	var local netip.AddrPort
	var sockErr error
	err := raw.Control(func(fd uintptr) {
		var any unix.Sockaddr = &unix.SockaddrInet4{}
		if remote.Addr().Is6() {
			any = &unix.SockaddrInet6{}
		}
		if sockErr = unix.Bind(int(fd), any); sockErr != nil {
			sockErr = fmt.Errorf("bind a local port: %w", sockErr)
			return
		}
		sa, err := unix.Getsockname(int(fd))
		if err != nil {
			sockErr = fmt.Errorf("read the local port: %w", err)
			return
		}
		switch sa := sa.(type) {
		case *unix.SockaddrInet4:
			local = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
		case *unix.SockaddrInet6:
			local = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))
		}
	})
	if err = errors.Join(err, sockErr); err != nil {
		return err
	}
	st.local = local
	st.rules, err = st.firewall.rewriteMSS(remote, local.Port(), opts.MSS, opts.Timeout+elementSlack)
	if err != nil {
		return err
	}
	st.live, err = capture.OpenLive(ctx, capture.LiveOptions{
		Interface: iface,
		Netns:     opts.Netns,
		Snaplen:   captureSnaplen,
		Filter:    capture.Filter{Remote: remote.Addr(), Port: remote.Port(), LocalPort: local.Port()},
	})
	if err != nil {
		return fmt.Errorf("capture on %s: %w", iface, err)
	}
	// After a TLS handshake the flight starts where the handshake ended, known
	// only then; until then the tracker keeps the server's data aside.
	st.tracker = newTracker(remote.Addr(), remote.Port(), local.Port(), !(phase == PhaseHTTP && opts.AfterHandshake))
	st.captureDone = make(chan struct{})
	go func() {
		defer close(st.captureDone)
		var p capture.Packet
		for st.live.Next(&p) == nil {
			st.tracker.add(&p)
		}
	}()
	return nil
}

// holdTimeout is how long a connection's ACKs may be held back: the longest wait
// for the server's retransmission, the wait for the reader after it, and slack. A
// killed process's connection gets its ACKs back after that.
func holdTimeout(opts Options) time.Duration {
	return opts.MaxWait + time.Second + elementSlack
}

// httpRequest is a GET of the URL's path that asks the server to close after it.
func httpRequest(tgt target, userAgent string) string {
	return "GET " + tgt.requestPath() + " HTTP/1.1\r\n" +
		"Host: " + tgt.url.Host + "\r\n" +
		"User-Agent: " + userAgent + "\r\n" +
		"Accept: */*\r\n" +
		"Accept-Encoding: identity\r\n" +
		"Connection: close\r\n\r\n"
}

// readHTTPResponse reads one response from r in a goroutine and, when it is
// complete, sends the flight's length in stream bytes, as flightLength says.
func readHTTPResponse(r io.Reader, flightDone chan<- int64, flightLength func(*bufio.Reader) int64) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		br := bufio.NewReader(r)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return
		}
		flightDone <- flightLength(br)
	}()
	return done
}

func tlsConfig(tgt target, opts Options, alpn []string) *tls.Config {
	cfg := &tls.Config{
		// Only the size and timing of the server's flight matter, and nothing is
		// sent that trusting the server would protect.
		InsecureSkipVerify: true,
		NextProtos:         alpn,
		MinVersion:         tls.VersionTLS12,
	}
	if _, err := netip.ParseAddr(tgt.serverName); err != nil {
		cfg.ServerName = tgt.serverName
	}
	switch opts.TLSVersion {
	case "1.2":
		cfg.MaxVersion = tls.VersionTLS12
	case "1.3":
		cfg.MinVersion = tls.VersionTLS13
	}
	return cfg
}
