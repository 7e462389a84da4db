package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"

	"github.com/slowstart/slowstart/lab/labserver"
	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/probe/exact"
)

// writeSurveyList writes a survey list into the test's temporary directory.
func writeSurveyList(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sites.txt")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSurveyCommandErrors checks the exit codes of what is refused before any
// measurement.
func TestSurveyCommandErrors(t *testing.T) {
	good := writeSurveyList(t, "a http://192.0.2.1/")
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"malformed line", []string{"survey", writeSurveyList(t, "# x", "a.example")}, exitUsage, "line 2"},
		{"no URL", []string{"survey", writeSurveyList(t, "# nothing")}, exitUsage, "holds no URL"},
		{"missing file", []string{"survey", filepath.Join(t.TempDir(), "none.txt")}, exitFile, "no such file"},
		{"no argument", []string{"survey"}, exitUsage, "accepts 1 arg"},
		{"csv and json", []string{"survey", "--csv", "--json", good}, exitUsage, "exclude each other"},
		{"bad resolve", []string{"survey", "--resolve", "x:443", good}, exitUsage, "HOST:PORT:ADDRESS"},
		{"bad flag", []string{"survey", "--parallel", "many", good}, exitUsage, "invalid argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.says) {
				t.Errorf("exit %d (want %d), stderr %q (want %q), stdout %q", code, tc.code, errOut, tc.says, out)
			}
		})
	}
	if os.Geteuid() == 0 {
		code, _, errOut := runCLI(t, "survey", "--parallel", "0", "--no-passive", "--exact-mss", "20", good)
		if code != exitUsage || !strings.Contains(errOut, "MSS 20") {
			t.Errorf("--mss 20: exit %d, stderr %q", code, errOut)
		}
	}
}

// TestSurveyStdin reads the list from standard input ("-"): a malformed one is
// refused with its line number.
func TestSurveyStdin(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	oldStdin := os.Stdin
	os.Stdin = r
	t.Cleanup(func() { os.Stdin = oldStdin; r.Close() })
	if _, err := w.WriteString("ok https://a.example/\nb.example\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	code, _, errOut := runCLI(t, "survey", "-")
	if code != exitUsage || !strings.Contains(errOut, "-: line 2") || !strings.Contains(errOut, "give the scheme") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestSurveyHelpTeaches(t *testing.T) {
	code, out, _ := runCLI(t, "survey", "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"initial window", "provider-a https://a.example/", "Exit codes", "--parallel", "--netns", "--no-exact", "slowstart survey sites.txt --csv"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

var surveyKeys = server.NewKeyCache()

// startSurveyLab starts an emulated server for a survey test; its cleanups
// check that no exact table is left in its client namespace and that its
// namespaces are gone after it closes.
func startSurveyLab(t *testing.T, cfg labserver.Config) *labserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := labserver.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("starting a lab server: %v", err)
	}
	clientPath := s.Netns
	serverPath := strings.TrimSuffix(clientPath, "-c") + "-s"
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the lab server: %v", err)
		}
		for _, p := range []string{clientPath, serverPath} {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("namespace %s is left behind", p)
			}
		}
	})
	t.Cleanup(func() {
		tables, err := exact.Tables(clientPath)
		if err != nil {
			t.Errorf("listing nftables tables in %s: %v", clientPath, err)
		}
		for _, name := range tables {
			t.Errorf("table %s left in %s", name, clientPath)
		}
	})
	return s
}

// exactHeldPorts lists the local ports of the connections whose ACKs an exact
// measurement holds back in a namespace (IPv4).
func exactHeldPorts(netnsPath string) ([]uint16, error) {
	handle, err := netns.GetFromPath(netnsPath)
	if err != nil {
		return nil, err
	}
	defer handle.Close()
	conn, err := nftables.New(nftables.WithNetNSFd(int(handle)))
	if err != nil {
		return nil, err
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, err
	}
	var ports []uint16
	for _, tb := range tables {
		if !strings.HasPrefix(tb.Name, exact.TablePrefix) {
			continue
		}
		set, err := conn.GetSetByName(tb, "hold4")
		if err != nil {
			continue
		}
		elements, err := conn.GetSetElements(set)
		if err != nil {
			continue // the table went between the listing and now
		}
		for _, e := range elements {
			// Key: remote address (4), remote port (2+2), local port (2+2).
			ports = append(ports, uint16(e.Key[8])<<8|uint16(e.Key[9]))
		}
	}
	return ports, nil
}

// TestSurveyCommandLab runs the command in-process against emulated servers:
// over http with IW 3 next to a URL that refuses (CSV, exit 1), and over TLS
// with IW 32 reached through --resolve (JSON, exit 0).
func TestSurveyCommandLab(t *testing.T) {
	testroot.Require(t, "network namespaces, nftables and live captures")
	const body = "/bytes/150000"

	plain := startSurveyLab(t, labserver.Config{RTT: 20 * time.Millisecond, IW: 3, Keys: surveyKeys})
	list := writeSurveyList(t, "# an emulated server and a port where nothing listens",
		"iw-three "+plain.URL(body),
		fmt.Sprintf("nothing http://%s:81/", plain.Addr.Addr()))
	code, out, errOut := runCLI(t, "survey", "--csv", "--exact-runs", "2", "--timeout", "10s", "--netns", plain.Netns, list)
	t.Logf("CSV:\n%s\nstderr:\n%s", out, errOut)
	if code != exitFailure {
		t.Errorf("exit %d, want %d (one URL failed)", code, exitFailure)
	}
	records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(records) != 3 {
		t.Fatalf("CSV with %d records (%v), want a header and 2 rows", len(records), err)
	}
	col := map[string]int{}
	for i, name := range records[0] {
		col[name] = i
	}
	row1, row2 := records[1], records[2]
	if row1[col["label"]] != "iw-three" || row1[col["exact_verdict"]] != "exact" || row1[col["exact_iw_segments"]] != "3" ||
		row1[col["exact_phase"]] != "http" || row1[col["error"]] != "" {
		t.Errorf("IW 3 row: %v", row1)
	}
	if row1[col["passive_verdict"]] != "exact" || row1[col["passive_iw_segments"]] != "3" || row1[col["round_trips"]] == "" {
		t.Errorf("IW 3 row, page load: %v", row1)
	}
	if row2[col["label"]] != "nothing" || !strings.Contains(row2[col["error"]], "refused") || row2[col["exact_iw_segments"]] != "" {
		t.Errorf("refused row: %v", row2)
	}

	tlsServer := startSurveyLab(t, labserver.Config{RTT: 20 * time.Millisecond, IW: 32, TLSVersion: "1.3", Keys: surveyKeys})
	list = writeSurveyList(t, "tls-32 "+tlsServer.URL(body))
	resolve := fmt.Sprintf("%s:%d:%s", labserver.ServerName, tlsServer.Addr.Port(), tlsServer.Addr.Addr())
	code, out, errOut = runCLI(t, "survey", "--json", "--exact-runs", "2", "--timeout", "10s", "--insecure",
		"--netns", tlsServer.Netns, "--resolve", resolve, list)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q, stdout %s", code, errOut, out)
	}
	var doc struct {
		Schema string `json:"schema"`
		Rows   []struct {
			Label           string `json:"label"`
			ExactPhase      string `json:"exact_phase"`
			ExactVerdict    string `json:"exact_verdict"`
			ExactIWSegments *int   `json:"exact_iw_segments"`
			TLSFlightBytes  *int   `json:"tls_flight_bytes"`
			Protocol        string `json:"protocol"`
			Error           string `json:"error"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if doc.Schema != "slowstart.survey/v1" || len(doc.Rows) != 1 {
		t.Fatalf("schema %q, %d rows", doc.Schema, len(doc.Rows))
	}
	r := doc.Rows[0]
	if r.Label != "tls-32" || r.ExactPhase != "tls" || r.ExactVerdict != "exact" || r.ExactIWSegments == nil || *r.ExactIWSegments != 32 ||
		r.TLSFlightBytes == nil || *r.TLSFlightBytes < 4000 || r.Error != "" {
		t.Errorf("TLS row: %+v", r)
	}
}

// TestSurveyBinaryInterrupted runs the built binary and interrupts it (SIGINT,
// as Ctrl-C does) while it measures its second URL's exact IW: it must print the
// first URL's row, exit 130 and leave no nftables table behind.
func TestSurveyBinaryInterrupted(t *testing.T) {
	testroot.Require(t, "network namespaces, nftables and live captures")
	binary := builtBinary(t)
	s := startSurveyLab(t, labserver.Config{RTT: 20 * time.Millisecond, IW: 10, Keys: surveyKeys})
	var lines []string
	for i := range 6 {
		lines = append(lines, fmt.Sprintf("site-%d %s", i+1, s.URL("/bytes/100000")))
	}
	list := writeSurveyList(t, lines...)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "survey", "--parallel", "1", "--exact-runs", "1", "--netns", s.Netns, list)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	t.Cleanup(func() {
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	// One URL at a time, one exact connection each: the first connection held
	// back is the first URL's; one from another local port later is the second
	// URL's, whose page load came after the first row was finished.
	var first uint16
	for {
		if ctx.Err() != nil {
			t.Fatalf("no second exact measurement seen; stderr %q", stderr.String())
		}
		ports, err := exactHeldPorts(s.Netns)
		if err != nil {
			t.Fatalf("listing the exact probe's held connections: %v", err)
		}
		if len(ports) == 1 && first == 0 {
			first = ports[0]
		}
		if len(ports) == 1 && first != 0 && ports[0] != first {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a synchronization
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	waited = true
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != exitInterrupted {
		t.Errorf("exit %v, want %d; stderr %q", err, exitInterrupted, stderr.String())
	}
	out := stdout.String()
	t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr.String())
	// The survey does not promise the list's order (targets of one address are
	// taken one at a time, in an order of its own): the table must hold as many
	// rows as it says were measured, at least one and not all six.
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "site-") {
			rows++
		}
	}
	var measured int
	if i := strings.Index(out, "Interrupted: "); i >= 0 {
		fmt.Sscanf(out[i:], "Interrupted: %d of 6 URLs measured", &measured)
	}
	if rows == 0 || rows != measured || rows == 6 {
		t.Errorf("the table holds %d rows, says %d were measured: want the finished ones only, at least one, not all:\n%s", rows, measured, out)
	}
	if !strings.Contains(out, "Interrupted: ") || !strings.Contains(out, " of 6 URLs measured") {
		t.Errorf("the table does not say it was interrupted:\n%s", out)
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr does not say interrupted: %q", stderr.String())
	}
	// The binary has exited: whatever it left in the namespace is left for good.
	if tables, err := exact.Tables(s.Netns); err != nil || len(tables) > 0 {
		t.Errorf("after the interruption: tables %v (%v)", tables, err)
	}
}

// TestSurveyPrivileges runs the binary without a capability it needs (dropped
// from the bounding set with setpriv): it must stop before measuring, exit 4
// and name what is missing.
func TestSurveyPrivileges(t *testing.T) {
	testroot.Require(t, "drop capabilities with setpriv")
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) is not installed")
	}
	binary := builtBinary(t)
	list := writeSurveyList(t, "a http://192.0.2.1/")
	for _, tc := range []struct {
		drop    string
		args    []string
		says    string
		notSays string
	}{
		{"-net_admin", nil, "CAP_NET_ADMIN", "CAP_NET_RAW"},
		{"-net_raw", []string{"--no-exact"}, "CAP_NET_RAW", "CAP_NET_ADMIN"},
		{"-sys_admin", []string{"--netns", "/proc/self/ns/net"}, "CAP_SYS_ADMIN", "CAP_NET_RAW"},
	} {
		t.Run(tc.drop, func(t *testing.T) {
			args := append([]string{"--bounding-set=" + tc.drop, binary, "survey"}, tc.args...)
			cmd := exec.Command(setpriv, append(args, list)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitCode() != exitPermission {
				t.Errorf("exit %v, want %d; stderr %q", err, exitPermission, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.says) || strings.Contains(stderr.String(), tc.notSays) {
				t.Errorf("stderr %q: want %s named, not %s", stderr.String(), tc.says, tc.notSays)
			}
		})
	}
}
