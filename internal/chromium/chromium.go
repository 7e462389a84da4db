// Package chromium starts Debian's Chromium headless with a fresh profile,
// inside a network namespace when asked, and connects to it over the DevTools
// protocol (chromedp): the browser process and its DevTools endpoint, for the
// page loads of package browser and the tests that drive a real browser. What
// is done with the page (its requests, their timings) is the caller's.
package chromium

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cdptarget "github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/slowstart/slowstart/internal/childproc"
	"github.com/slowstart/slowstart/internal/netnsexec"
)

// Options say how to start Chromium.
type Options struct {
	// Binary is Chromium's binary (looked up in PATH).
	Binary string
	// Netns is the path of a network namespace (/run/netns/NAME, or another
	// namespace file) to run it in; the current one when empty.
	Netns string
	// Flags are the command line flags besides the profile and the DevTools
	// endpoint's (--user-data-dir, --remote-debugging-*).
	Flags []string
	// Dir is a directory of the caller's, removed by it after Stop: the profile,
	// Chromium's temporary files and its HOME go there.
	Dir string
	// KeylogPath is where Chromium writes its TLS secrets (SSLKEYLOGFILE);
	// none when empty.
	KeylogPath string
}

// Process is one Chromium process with a fresh profile, driven over the
// DevTools protocol.
type Process struct {
	proc      *childproc.Process // Chromium (or ip/nsenter, which exec it)
	profile   string             // --user-data-dir, unique to this process
	wsURL     string             // the DevTools endpoint, reachable from this namespace
	relay     net.Listener       // forwards DevTools connections into the namespace
	output    *tailBuffer
	stopOnce  sync.Once
	relayDone sync.WaitGroup
}

// socketSuffix is what Chromium adds to TMPDIR for its singleton socket (a
// directory of mkdtemp's, then the socket); maxSocketPathBytes is the longest
// path a Unix socket takes (sun_path, less its NUL).
const (
	socketSuffix       = "/org.chromium.Chromium.XXXXXX/SingletonSocket"
	maxSocketPathBytes = 107
)

// devToolsListening is the line Chromium prints with its DevTools endpoint.
var devToolsListening = regexp.MustCompile(`DevTools listening on (ws://\S+)`)

// Start starts Chromium as o says, on about:blank, and waits for its DevTools
// endpoint (30 s at most). Errors other than ctx's say what to do.
func Start(ctx context.Context, o Options) (*Process, error) {
	profile := filepath.Join(o.Dir, "profile")
	if err := os.Mkdir(profile, 0o700); err != nil {
		return nil, fmt.Errorf("making Chromium's profile directory: %w", err)
	}
	// Chromium's own temporary files (/tmp/org.chromium.Chromium.*, one or
	// more per launch, which it does not remove) go into the directory too
	// (TMPDIR): removed with it, and by slowstart clean after a kill. Its
	// singleton socket lives there, and a socket's path has at most 107 bytes.
	if n := len(o.Dir) + len(socketSuffix); n > maxSocketPathBytes {
		return nil, fmt.Errorf("the temporary directory %s is too long for Chromium's socket (%d bytes with it, at most %d): set TMPDIR to a shorter directory, such as /tmp", o.Dir, n, maxSocketPathBytes)
	}
	args := append(append([]string{}, o.Flags...), "--user-data-dir="+profile, "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1", "about:blank")
	path, err := exec.LookPath(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("finding Chromium (%s): %w: install Debian's chromium package (apt-get install chromium), or name the binary with --chromium", o.Binary, err)
	}
	cmd := exec.Command(path, args...)
	if o.Netns != "" {
		// A named namespace (/run/netns/NAME) runs it through `ip netns exec`, which
		// also puts /etc/netns/NAME/* (hosts, resolv.conf) in place of /etc's, as
		// for any program run there; another namespace file through nsenter.
		if name, ok := netnsexec.Named(o.Netns); ok {
			ip, err := exec.LookPath("ip")
			if err != nil {
				return nil, fmt.Errorf("running Chromium inside %s needs ip (iproute2): %w", o.Netns, err)
			}
			cmd = exec.Command(ip, append([]string{"netns", "exec", name, path}, args...)...)
		} else {
			nsenter, err := exec.LookPath("nsenter")
			if err != nil {
				return nil, fmt.Errorf("running Chromium inside %s needs nsenter (util-linux): %w", o.Netns, err)
			}
			cmd = exec.Command(nsenter, append([]string{"--net=" + o.Netns, "--", path}, args...)...)
		}
	}
	cmd.Env = append(os.Environ(), "HOME="+o.Dir, "TMPDIR="+o.Dir)
	if o.KeylogPath != "" {
		cmd.Env = append(cmd.Env, "SSLKEYLOGFILE="+o.KeylogPath)
	}
	// Its own process group, so that stopping it stops its helpers too; and killed
	// with slowstart.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = nil
	c := &Process{profile: profile, output: &tailBuffer{max: 4000}}
	// Started from a thread kept for it: the parent-death signal fires when
	// the forking thread ends, which for an ordinary one can be any time.
	if c.proc, err = childproc.Start(cmd, ""); err != nil {
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			c.output.add(line)
			if m := devToolsListening.FindStringSubmatch(line); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		io.Copy(io.Discard, stderr)
		close(found)
	}()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case u, ok := <-found:
		if !ok {
			<-c.proc.Exited()
			c.Stop()
			return nil, fmt.Errorf("the browser (Chromium) exited before it opened its DevTools endpoint (%v): %s", c.proc.Err(), c.output)
		}
		c.wsURL = u
	case <-timer.C:
		c.Stop()
		return nil, fmt.Errorf("the browser (Chromium) did not open its DevTools endpoint within 30 s: %s", c.output)
	case <-ctx.Done():
		c.Stop()
		return nil, ctx.Err()
	}
	if o.Netns != "" {
		if err := c.startRelay(o.Netns); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// Exited is closed when Chromium has exited; Err is then how.
func (c *Process) Exited() <-chan struct{} { return c.proc.Exited() }

// Err is how Chromium exited, once Exited is closed.
func (c *Process) Err() error { return c.proc.Err() }

// Output is the last lines Chromium printed, for error messages.
func (c *Process) Output() string { return c.output.String() }

// Connect connects to Chromium's DevTools endpoint and returns a context of
// the tab Chromium opened (about:blank), to run chromedp actions in, and what
// cancels it (and the connection). The first DevTools connections of a
// Chromium just started are sometimes dropped or refused (on a loaded host,
// for a second or more after it said it listens): it tries again, backing
// off, for up to 10 s while Chromium runs.
func (c *Process) Connect(ctx context.Context) (context.Context, context.CancelFunc, error) {
	connectBy := time.Now().Add(10 * time.Second)
	for attempt := 1; ; attempt++ {
		allocCtx, cancelAlloc := chromedp.NewRemoteAllocator(ctx, c.wsURL, chromedp.NoModifyURL)
		browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
		tab, err := initialTab(browserCtx)
		if err == nil {
			// Load in the tab Chromium opened: a tab made beside it stays in the
			// background, where nothing is painted and no paint is timed.
			tabCtx, cancelTab := chromedp.NewContext(browserCtx, chromedp.WithTargetID(tab))
			return tabCtx, func() { cancelTab(); cancelBrowser(); cancelAlloc() }, nil
		}
		cancelBrowser()
		cancelAlloc()
		exited := false
		select {
		case <-c.proc.Exited():
			exited = true
		default:
		}
		if exited || time.Now().After(connectBy) || ctx.Err() != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			if exited {
				err = fmt.Errorf("%w; Chromium exited (%v)", err, c.proc.Err())
			}
			return nil, nil, fmt.Errorf("connecting to Chromium's DevTools (%d tries): %w (Chromium said: %s)", attempt, err, c.output)
		}
		select {
		case <-time.After(min(time.Duration(attempt)*200*time.Millisecond, time.Second)): // back off before the next try
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-c.proc.Exited():
		}
	}
}

// initialTab returns the page target Chromium opened, waiting up to 10 s for it.
func initialTab(ctx context.Context) (cdptarget.ID, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		targets, err := chromedp.Targets(ctx)
		if err != nil {
			return "", err
		}
		for _, t := range targets {
			if t.Type == "page" {
				return t.TargetID, nil
			}
		}
		if time.Now().After(deadline) {
			return "", errors.New("no page target within 10 s")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond): // the first tab is on its way
		}
	}
}

// startRelay makes the DevTools endpoint, which listens on the loopback of
// Chromium's namespace, reachable from this one: a listener on this namespace's
// loopback whose connections are forwarded to it, dialled from inside.
func (c *Process) startRelay(netnsPath string) error {
	u := strings.TrimPrefix(c.wsURL, "ws://")
	hostPort, rest, _ := strings.Cut(u, "/")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening for the DevTools relay: %w", err)
	}
	c.relay = ln
	c.wsURL = "ws://" + ln.Addr().String() + "/" + rest
	c.relayDone.Add(1)
	go func() {
		defer c.relayDone.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			var inner net.Conn
			err = netnsexec.Run(netnsPath, func() error {
				var err error
				inner, err = net.DialTimeout("tcp", hostPort, 10*time.Second)
				return err
			})
			if err != nil {
				c.output.add(fmt.Sprintf("(the DevTools relay could not reach %s in %s: %v)", hostPort, netnsPath, err))
				conn.Close()
				continue
			}
			c.relayDone.Add(2)
			go func() { defer c.relayDone.Done(); io.Copy(inner, conn); inner.Close() }()
			go func() { defer c.relayDone.Done(); io.Copy(conn, inner); conn.Close() }()
		}
	}()
	return nil
}

// Stop ends Chromium and every process of its group, and any helper still
// running with its profile, and the relay. Closing Chromium closes its
// connections.
func (c *Process) Stop() {
	c.stopOnce.Do(func() {
		pid := c.proc.Cmd.Process.Pid
		syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-c.proc.Exited():
		case <-time.After(3 * time.Second):
			syscall.Kill(-pid, syscall.SIGKILL)
			<-c.proc.Exited()
		}
		syscall.Kill(-pid, syscall.SIGKILL)
		killUsing(c.profile)
		if c.relay != nil {
			c.relay.Close()
		}
	})
}

// killUsing kills the processes whose command line names the profile directory:
// helpers of the Chromium started with it that left its process group. The
// directory is unique to this run, so nothing else names it.
func killUsing(profile string) {
	want := "--user-data-dir=" + profile
	for pass := 0; pass < 3; pass++ {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		killed := 0
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil {
				continue
			}
			for _, arg := range strings.Split(string(cmdline), "\x00") {
				if arg == want {
					syscall.Kill(pid, syscall.SIGKILL)
					killed++
					break
				}
			}
		}
		if killed == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond) // let the killed ones go before looking again
	}
}

// tailBuffer keeps the last lines Chromium printed, for error messages.
type tailBuffer struct {
	mu    sync.Mutex
	lines []string
	size  int
	max   int
}

func (t *tailBuffer) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	t.size += len(line)
	for t.size > t.max && len(t.lines) > 1 {
		t.size -= len(t.lines[0])
		t.lines = t.lines[1:]
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return "no output"
	}
	return strings.Join(t.lines, "; ")
}
