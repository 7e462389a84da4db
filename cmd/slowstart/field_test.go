package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/slowstart/slowstart/field"
	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/lab/client"
	"github.com/slowstart/slowstart/lab/labpath"
	"github.com/slowstart/slowstart/lab/server"
)

// TestFieldArguments: field refuses what it can't use before doing anything,
// with the README's exit codes.
func TestFieldArguments(t *testing.T) {
	dir := t.TempDir()
	notStore := filepath.Join(dir, "notes.txt")
	os.WriteFile(notStore, []byte("not a store"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"field"}, exitUsage, "--port is required"},
		{[]string{"field", "--port", "http"}, exitUsage, "port numbers"},
		{[]string{"field", "--port", "80", "--ring", "3MiB"}, exitUsage, "power of two"},
		{[]string{"field", "--port", "80", "--json", "--jsonl"}, exitUsage, "choose one"},
		{[]string{"field", "--port", "80", "--prefix", "40"}, exitUsage, "--prefix"},
		{[]string{"field", "--port", "80", "--iw", "0"}, exitUsage, "--iw"},
		{[]string{"field", "--port", "80", "--retain", "soon"}, exitUsage, "--retain"},
		{[]string{"field", "--port", "80", "--netns", "no-such-namespace-here"}, exitUsage, "no such network namespace"},
		{[]string{"field", "--port", "80", "--asn", filepath.Join(dir, "missing.txt")}, exitFile, "--asn"},
		{[]string{"field", "--port", "80", "--store", filepath.Join(dir, "no", "such", "dir", "f.db")}, exitFile, "--store"},
		{[]string{"field", "report"}, exitUsage, "--store FILE is required"},
		{[]string{"field", "report", "--store", notStore}, exitFile, "not a slowstart field store"},
		{[]string{"field", "report", "--store", notStore, "--before", "2026-01-01"}, exitUsage, "together"},
	} {
		code, _, errOut := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("slowstart %s: exit %d, %q; want %d and %q", strings.Join(c.args, " "), code, errOut, c.code, c.says)
		}
	}
}

// fieldPath is a lab path with nginx (IW 4, 40 ms) serving 30,000-byte bodies.
func fieldPath(t *testing.T) (*labpath.Path, netip.AddrPort) {
	t.Helper()
	ctx := context.Background()
	p, err := labpath.Start(ctx, labpath.Config{RTT: 40 * time.Millisecond, InitCwnd: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		labpath.CloseAll()
	})
	addr := netip.AddrPortFrom(p.ServerAddr, 80)
	if _, err := server.StartOnPath(ctx, p, server.OnPath{Kind: server.KindNginx, Addr: addr, BodySizes: []int64{30000}}); err != nil {
		t.Fatal(err)
	}
	return p, addr
}

// fieldProcess is the built binary running field, its output read line by line.
type fieldProcess struct {
	cmd            *exec.Cmd
	stdout, stderr chan string
	errText        strings.Builder
}

func startField(t *testing.T, cmd *exec.Cmd) *fieldProcess {
	t.Helper()
	p := &fieldProcess{cmd: cmd, stdout: make(chan string, 100), stderr: make(chan string, 100)}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := func(r io.Reader, ch chan string) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}
	go lines(out, p.stdout)
	go lines(errPipe, p.stderr)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return p
}

// waitLine returns the first line of ch that holds want.
func waitLine(t *testing.T, ch chan string, want string, seen *strings.Builder) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-ch:
			if !ok {
				t.Fatalf("the output ended without %q:\n%s", want, seen.String())
			}
			seen.WriteString(line + "\n")
			if strings.Contains(line, want) {
				return line
			}
		case <-timeout:
			t.Fatalf("no line with %q in 30 s:\n%s", want, seen.String())
		}
	}
}

// TestFieldFallbackWithoutBPF runs field as a user without the capabilities
// BPF needs (nobody, with CAP_NET_RAW alone) inside a lab server namespace:
// it says in one line why the kernel's tracepoints are unavailable, follows
// packets instead, and reads nginx's 30,249-byte response to curl under IW 4
// over 40 ms as the packets show it: three round trips of 4, 8 and 9
// segments. Ctrl-C stops it with exit 130 and a line saying what it measured.
func TestFieldFallbackWithoutBPF(t *testing.T) {
	testroot.Require(t, "network namespaces, nginx and setpriv")
	bin := builtBinary(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) is not installed")
	}
	p, addr := fieldPath(t)
	// nobody must reach the binary: copy it where everyone may read it.
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "slowstart")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=+net_raw", "--ambient-caps=+net_raw", "--",
		exe, "field", "--port", "80", "--interface", "tun0", "--jsonl", "--marks", "-")
	p.WrapCommand(labpath.Server)(cmd)
	proc := startField(t, cmd)
	line := waitLine(t, proc.stderr, "following packets instead", &proc.errText)
	if !strings.Contains(line, "kernel TCP tracing is unavailable") || !strings.Contains(line, "CAP_BPF") || !strings.Contains(line, "on tun0") ||
		!strings.Contains(line, "through a packet ring of 32 MiB per port") {
		t.Errorf("the line saying why: %q", line)
	}
	if _, err := client.FetchCurl(context.Background(), client.FetchConfig{URL: fmt.Sprintf("http://%s/bytes/30000", addr)}, p.WrapCommand(labpath.Client)); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	got := waitLine(t, proc.stdout, `"schema":"slowstart.field-connection/v1"`, &out)
	var c field.Conn
	if err := json.Unmarshal([]byte(got), &c); err != nil {
		t.Fatal(err)
	}
	if c.Source != field.SourcePackets || c.RoundTrips == nil || *c.RoundTrips != 3 || c.ResponseBytes != 30249 || c.Round1Limit != field.LimitCwnd {
		t.Errorf("from packets: %s", got)
	}
	for i, want := range []int{4, 8, 9} {
		if i < len(c.Rounds) && c.Rounds[i].Segments != want {
			t.Errorf("round %d: %d segments, want %d", i+1, c.Rounds[i].Segments, want)
		}
	}
	checkSchema(t, "field-connection", "field --jsonl (packets)", got)
	proc.cmd.Process.Signal(syscall.SIGINT)
	last := waitLine(t, proc.stderr, "stopped", &proc.errText)
	if !strings.Contains(last, "1 first responses measured") {
		t.Errorf("the last line: %q", last)
	}
	proc.cmd.Wait()
	if code := proc.cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Errorf("exit %d after Ctrl-C, want %d", code, exitInterrupted)
	}
}

// bpfObjects reads the IDs of the BPF programs, maps and links a process
// holds, from its file descriptors' fdinfo.
func bpfObjects(t *testing.T, pid int) (progs, maps, links []uint32) {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fdinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil {
				continue
			}
			switch k {
			case "prog_id":
				progs = append(progs, uint32(id))
			case "map_id":
				maps = append(maps, uint32(id))
			case "link_id":
				links = append(links, uint32(id))
			}
		}
	}
	return progs, maps, links
}

// TestFieldKilledLeavesNothing runs field from the kernel with a store, kills
// it with SIGKILL in the middle, and checks that none of the BPF programs,
// maps and links it held remains (the kernel releases them with the process)
// and that the store it was writing opens and reports the intervals written
// before the kill.
func TestFieldKilledLeavesNothing(t *testing.T) {
	testroot.Require(t, "BPF, network namespaces and nginx")
	bin := builtBinary(t)
	p, addr := fieldPath(t)
	store := filepath.Join(t.TempDir(), "field.db")
	cmd := exec.Command(bin, "field", "--port", "80", "--netns", p.NamespacePath(labpath.Server), "--store", store, "--interval", "1s",
		"--jsonl", "--marks", "-")
	proc := startField(t, cmd)
	waitLine(t, proc.stderr, "following new connections to port 80 from the kernel", &proc.errText)
	for range 2 {
		if _, err := client.FetchCurl(context.Background(), client.FetchConfig{URL: fmt.Sprintf("http://%s/bytes/30000", addr)}, p.WrapCommand(labpath.Client)); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	for range 2 {
		checkSchema(t, "field-connection", "field --jsonl", waitLine(t, proc.stdout, "field-connection", &out))
	}
	progs, maps, links := bpfObjects(t, cmd.Process.Pid)
	if len(progs) < 3 || len(maps) < 3 || len(links) < 3 {
		t.Fatalf("the running field holds programs %v, maps %v, links %v: want a program and a link per tracepoint, and the maps", progs, maps, links)
	}
	// At least one interval written: its line comes after the connections.
	st0 := time.Now()
	for {
		if s, err := field.OpenStore(store, false); err == nil {
			rep, err := field.Report(context.Background(), s, field.ReportOptions{})
			s.Close()
			if err == nil && rep.All.Connections == 2 {
				break
			}
		}
		if time.Since(st0) > 20*time.Second {
			t.Fatal("no interval with the two connections in the store after 20 s")
		}
		time.Sleep(200 * time.Millisecond) // the store is written every second: poll it
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, id := range progs {
			if o, err := ebpf.NewProgramFromID(ebpf.ProgramID(id)); err == nil {
				o.Close()
				left = append(left, fmt.Sprintf("program %d", id))
			}
		}
		for _, id := range maps {
			if o, err := ebpf.NewMapFromID(ebpf.MapID(id)); err == nil {
				o.Close()
				left = append(left, fmt.Sprintf("map %d", id))
			}
		}
		for _, id := range links {
			if o, err := link.NewFromID(link.ID(id)); err == nil {
				o.Close()
				left = append(left, fmt.Sprintf("link %d", id))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after SIGKILL these remain: %v", left)
		}
		time.Sleep(100 * time.Millisecond) // the kernel frees them after an RCU grace period, and says nothing
	}
	code, outText, errText := runCLI(t, "field", "report", "--store", store, "--json")
	if code != exitOK {
		t.Fatalf("field report of the killed run's store: exit %d: %s", code, errText)
	}
	checkSchema(t, "field", "field report --json", outText)
}

// fieldOutputs runs field as a user would on a server listening on this
// machine's loopback (port, serving url): --jsonl while four pages are
// fetched over new connections, two before a moment T and two after, then
// field report --json of its store, the comparison of the two halves, and a
// run that saw nothing (--json). It returns the outputs by schema format, for
// the schema test.
func fieldOutputs(t *testing.T, port int, url string) map[string][]string {
	t.Helper()
	bin := builtBinary(t)
	store := filepath.Join(t.TempDir(), "field.db")
	out := map[string][]string{}
	cmd := exec.Command(bin, "field", "--port", strconv.Itoa(port), "--store", store, "--interval", "1s", "--jsonl", "--marks", "-")
	proc := startField(t, cmd)
	waitLine(t, proc.stderr, "following new connections", &proc.errText)
	fetch := func() {
		tr := &http.Transport{DisableKeepAlives: true}
		res, err := (&http.Client{Transport: tr}).Get(url)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	fetch()
	fetch()
	var lines strings.Builder
	for range 2 {
		out["field-connection"] = append(out["field-connection"], waitLine(t, proc.stdout, "field-connection", &lines))
	}
	split := time.Now().UTC()
	fetch()
	fetch()
	for range 2 {
		out["field-connection"] = append(out["field-connection"], waitLine(t, proc.stdout, "field-connection", &lines))
	}
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("field: exit %d after SIGINT:\n%s", code, proc.errText.String())
	}
	run := func(args ...string) string {
		t.Helper()
		o, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("slowstart %s: %v", strings.Join(args, " "), err)
		}
		return string(o)
	}
	report := run("field", "report", "--store", store, "--json")
	var sum field.Summary
	if err := json.Unmarshal([]byte(report), &sum); err != nil || sum.All.Connections != 4 {
		t.Fatalf("field report --json: %d connections (%v), want 4:\n%s\n%s", sum.All.Connections, err, report, proc.errText.String())
	}
	T := split.Format(time.RFC3339Nano)
	out["field"] = append(out["field"], report,
		run("field", "report", "--store", store, "--before", T, "--after", T, "--json"),
		run("field", "--port", strconv.Itoa(port), "--duration", "1s", "--json", "--marks", "-"))
	return out
}
