//go:build linux

package exact

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/lab/netlab"
)

// measureHelperEnv, set to "NETNS URL", makes this test binary a process that
// measures URL from NETNS until it is killed (see TestHelperMeasure).
const measureHelperEnv = "SLOWSTART_EXACT_TEST_MEASURE"

// TestHelperMeasure is not a test: run with measureHelperEnv set, it measures
// over and over, as a long `probe --exact` or survey does, until killed.
func TestHelperMeasure(t *testing.T) {
	spec := os.Getenv(measureHelperEnv)
	if spec == "" {
		t.Skip("runs only as the helper process of TestKilledMeasurement")
	}
	netnsPath, url, _ := strings.Cut(spec, " ")
	_, err := Measure(context.Background(), Options{URL: url, Netns: netnsPath, Runs: 100, Timeout: 3 * time.Second})
	fmt.Fprintln(os.Stderr, "the measurement ended:", err)
	os.Exit(2)
}

// heldConnection waits until the helper's table holds back a connection's ACKs
// (the middle of a measurement) and returns that connection's local port.
func heldConnection(t *testing.T, netnsPath string, pid int, helperDone <-chan error) uint16 {
	t.Helper()
	conn, release, err := openNftables(netnsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	table := &nftables.Table{Name: tableName(pid), Family: nftables.TableFamilyINet}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-helperDone:
			t.Fatalf("the helper ended: %v", err)
		default:
		}
		if set, err := conn.GetSetByName(table, "hold4"); err == nil {
			elements, err := conn.GetSetElements(set)
			if err == nil && len(elements) == 1 {
				// Key: remote address (4), remote port (2+2), local port (2+2).
				return binary.BigEndian.Uint16(elements[0].Key[8:10])
			}
		}
		time.Sleep(2 * time.Millisecond) // polling interval for the kernel's state, not a synchronization
	}
	t.Fatal("the helper never held back a connection's ACKs")
	return 0
}

// elementsLeft counts the elements of the table's sets.
func elementsLeft(t *testing.T, netnsPath, tableName string) int {
	t.Helper()
	conn, release, err := openNftables(netnsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	table := &nftables.Table{Name: tableName, Family: nftables.TableFamilyINet}
	n := 0
	for _, name := range []string{"mss4", "mss6", "hold4", "hold6"} {
		set, err := conn.GetSetByName(table, name)
		if err != nil {
			t.Fatalf("set %s of table %s: %v", name, tableName, err)
		}
		elements, err := conn.GetSetElements(set)
		if err != nil {
			t.Fatal(err)
		}
		n += len(elements)
	}
	return n
}

// fetchFromPort fetches bodyBytes from the lab's server over a connection from
// localPort, within timeout, and returns the bytes received.
func fetchFromPort(lt *labTrial, localPort uint16, bodyBytes int, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	dialer := &net.Dialer{
		LocalAddr: &net.TCPAddr{Port: int(localPort)},
		Control: func(_, _ string, raw syscall.RawConn) error {
			var sockErr error
			err := raw.Control(func(fd uintptr) { sockErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1) })
			return errors.Join(err, sockErr)
		},
	}
	var conn net.Conn
	var err error
	// The killed process's own connection on this port may live on a moment
	// (the kernel resets it when the server's next segment arrives): try again
	// until the port is free, within the timeout.
	for {
		conn, err = lt.trial.DialFunc(netlab.Client, dialer)(ctx, "tcp4", lt.server.String())
		if err == nil || ctx.Err() != nil || !(errors.Is(err, unix.EADDRNOTAVAIL) || errors.Is(err, unix.EADDRINUSE)) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling for the port, not a synchronization
	}
	if err != nil {
		return 0, fmt.Errorf("connect from port %d: %w", localPort, err)
	}
	defer func() {
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	if _, err := fmt.Fprintf(conn, "GET /bytes/%d HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n", bodyBytes); err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, conn)
	return int(n), err
}

// TestKilledMeasurement reproduces the 9.5-minute stall: `probe --exact` killed
// in the middle of a measurement (ACKs held back, MSS rewritten), then a new
// connection from the same local port to the same server. While the dead
// process's elements last, that connection stalls; the next run's cleanup (as
// every probe, survey and watch does at its start) or the elements' expiry gives
// it its ACKs back.
func TestKilledMeasurement(t *testing.T) {
	lt := startLab(t, labSpec{iw: 10, rttMs: 40})
	const body = 1_000_000
	startHelper := func() (*exec.Cmd, <-chan error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMeasure$", "-test.count=1")
		cmd.Env = append(os.Environ(), measureHelperEnv+"="+lt.netns+" "+lt.url(body))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		exited := make(chan struct{})
		go func() {
			err := cmd.Wait()
			close(exited)
			done <- err
		}()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
		})
		return cmd, done
	}
	kill := func(cmd *exec.Cmd, done <-chan error) {
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the killed helper did not exit")
		}
	}

	t.Run("cleanup", func(t *testing.T) {
		helper, done := startHelper()
		port := heldConnection(t, lt.netns, helper.Process.Pid, done)
		kill(helper, done)
		// The stall: the dead process's table still holds this port's ACKs back.
		if n, err := fetchFromPort(lt, port, body, 3*time.Second); err == nil {
			t.Fatalf("a connection from port %d got %d bytes through the dead process's table: the test does not reproduce the stall", port, n)
		}
		removed, err := CleanNamespace(context.Background(), lt.netns)
		if err != nil {
			t.Fatal(err)
		}
		if len(removed) != 1 || removed[0] != tableName(helper.Process.Pid) {
			t.Errorf("the cleanup removed %v, want the dead helper's table %s", removed, tableName(helper.Process.Pid))
		}
		n, err := fetchFromPort(lt, port, body, 10*time.Second)
		if err != nil || n < body {
			t.Errorf("after the cleanup, a connection from port %d got %d bytes (%v), want the whole response", port, n, err)
		}
	})

	t.Run("expiry", func(t *testing.T) {
		helper, done := startHelper()
		port := heldConnection(t, lt.netns, helper.Process.Pid, done)
		kill(helper, done)
		name := tableName(helper.Process.Pid)
		// Nothing cleans up: the elements expire by themselves, after at most the
		// longest a measurement holds them.
		limit := time.Now().Add(holdTimeout(Options{MaxWait: DefaultMaxWait}) + 2*time.Second)
		for elementsLeft(t, lt.netns, name) > 0 {
			if time.Now().After(limit) {
				t.Fatalf("the dead process's elements did not expire")
			}
			time.Sleep(100 * time.Millisecond) // polling for the kernel's expiry, not a synchronization
		}
		n, err := fetchFromPort(lt, port, body, 10*time.Second)
		if err != nil || n < body {
			t.Errorf("with the dead table's elements expired, a connection from port %d got %d bytes (%v), want the whole response", port, n, err)
		}
		if _, err := CleanNamespace(context.Background(), lt.netns); err != nil {
			t.Error(err)
		}
	})
}
