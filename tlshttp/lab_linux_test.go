//go:build linux

package tlshttp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/big"
	mathrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/internal/chromium"
	"github.com/slowstart/slowstart/internal/netnsexec"
	"github.com/slowstart/slowstart/internal/testroot"
)

// The lab of these tests: a network namespace of its own with only its loopback
// (MTU 1500, so responses span many segments), Debian's nginx serving TLS 1.2
// and 1.3 with HTTP/1.1 and HTTP/2 on several ports, and clients (curl,
// Chromium, openssl s_client) run inside it with a key log. For the lossy
// scenarios a client namespace reaches it through a router namespace that drops
// some of the server's packets, and the capture is taken at the client, so it
// shows holes that retransmissions fill later. Everything is made by the test
// and removed by t.Cleanup.

// Ports and what nginx serves on them.
const (
	portTLS13H2  = 8443 // TLS 1.3, HTTP/2
	portTLS13H1  = 8444 // TLS 1.3, HTTP/1.1
	portTLS12H2  = 8445 // TLS 1.2, HTTP/2
	portTLS12H1  = 8446 // TLS 1.2, HTTP/1.1 (encrypt-then-MAC on for CBC suites)
	portTLS12MtE = 8447 // TLS 1.2, HTTP/1.1, encrypt-then-MAC off
	portTLS13HRR = 8448 // TLS 1.3, HTTP/2, only P-384 key shares: clients that offer X25519 get a HelloRetryRequest
	portTLS13RTT = 8449 // TLS 1.3, HTTP/1.1, 0-RTT data accepted
	// The router drops the first full-size segment of each connection from
	// these ports on its way to the client namespace, where the capture is
	// taken (makeLossyPath).
	portTLS13Loss = 8450 // TLS 1.3, HTTP/2
	portTLS12Loss = 8451 // TLS 1.2, HTTP/1.1
	// lossSegmentBytes: an IP packet this long carries a full-size segment
	// (MTU 1500 less 52 bytes of IP and TCP headers with timestamps: 1448
	// bytes of payload, and a little less with other options).
	lossSegmentBytes = 1400
)

// Addresses of the lossy path: the lab (server) namespace, the router, the client.
const (
	lossServerAddress = "10.77.1.1"
	lossRouterServer  = "10.77.1.2"
	lossRouterClient  = "10.77.2.2"
	lossClientAddress = "10.77.2.1"
	lossClientIf      = "tlsc0"
)

// waitLimit bounds waits for things that should happen at once (nginx up, its
// log written); reaching it is a failure.
const waitLimit = 15 * time.Second

// docroot lists the files nginx serves: path and size. Bodies are
// pseudo-random (incompressible); text files end with a marker line.
var docroot = map[string]int{
	"/a.bin":          30000,
	"/b.bin":          200000,
	"/one.txt":        2000,
	"/two.txt":        5000,
	"/small.txt":      3000,
	"/page/style.css": 8000,
	"/page/app.js":    60000,
	"/page/img.png":   90000,
	"/tiny/style.css": 2000,
	"/tiny/app.js":    4000,
	"/tiny/img.png":   6000,
}

const pageHTML = `<!doctype html>
<html><head><link rel="icon" href="data:,"><link rel="stylesheet" href="style.css"><script src="app.js"></script></head>
<body><p>page</p><img src="img.png"></body></html>
`

type lab struct {
	name  string // network namespace
	netns string // its file
	// The lossy path's client and router namespaces.
	clientName, clientNetns, routerName string
	dir                                 string
	nginx                               *exec.Cmd
	waited                              chan error
	logPath                             string
}

func labSuffix(t *testing.T) string {
	h := fnv.New32a()
	h.Write([]byte(t.Name()))
	return fmt.Sprintf("%d-%04x", os.Getpid()%1_000_000, h.Sum32()&0xffff)
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// needs skips the test unless the commands are installed.
func needs(t *testing.T, commands ...string) {
	t.Helper()
	for _, c := range commands {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s is not installed (Debian packages: nginx-light, curl, chromium, openssl, tshark, iproute2)", c)
		}
	}
}

// startLab makes the namespace, the files and nginx.
func startLab(t *testing.T) *lab {
	t.Helper()
	testroot.Require(t, "network namespaces and live capture")
	needs(t, "ip", "nginx", "ethtool")
	l := &lab{name: "tlshttp-" + labSuffix(t), dir: t.TempDir()}
	l.netns = filepath.Join("/run/netns", l.name)
	l.logPath = filepath.Join(l.dir, "access.log")
	run(t, "ip", "netns", "add", l.name)
	t.Cleanup(func() {
		l.stopNginx(t)
		l.killLeftovers()
		if out, err := exec.Command("ip", "netns", "del", l.name).CombinedOutput(); err != nil {
			t.Errorf("removing network namespace %s: %v %s", l.name, err, out)
		}
	})
	run(t, "ip", "-n", l.name, "link", "set", "lo", "up")
	run(t, "ip", "-n", l.name, "link", "set", "lo", "mtu", "1500")
	l.writeFiles(t)
	l.startNginx(t)
	l.makeLossyPath(t)
	return l
}

// makeLossyPath joins a client namespace to the lab through a router namespace
// (veth pairs, forwarding on) whose nftables forward chain drops the first
// full-size segment of every connection from the loss ports.
func (l *lab) makeLossyPath(t *testing.T) {
	t.Helper()
	suffix := labSuffix(t)
	l.clientName, l.routerName = "tlshttpc-"+suffix, "tlshttpr-"+suffix
	l.clientNetns = filepath.Join("/run/netns", l.clientName)
	for _, name := range []string{l.clientName, l.routerName} {
		run(t, "ip", "netns", "add", name)
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
				t.Errorf("removing network namespace %s: %v %s", name, err, out)
			}
		})
	}
	run(t, "ip", "-n", l.name, "link", "add", "tlss0", "type", "veth", "peer", "name", "tlsr0", "netns", l.routerName)
	run(t, "ip", "-n", l.routerName, "link", "add", "tlsr1", "type", "veth", "peer", "name", lossClientIf, "netns", l.clientName)
	for _, step := range [][]string{
		{l.name, "addr", "add", lossServerAddress + "/24", "dev", "tlss0"},
		{l.name, "link", "set", "tlss0", "up"},
		{l.name, "route", "add", "10.77.2.0/24", "via", lossRouterServer},
		{l.routerName, "addr", "add", lossRouterServer + "/24", "dev", "tlsr0"},
		{l.routerName, "addr", "add", lossRouterClient + "/24", "dev", "tlsr1"},
		{l.routerName, "link", "set", "tlsr0", "up"},
		{l.routerName, "link", "set", "tlsr1", "up"},
		{l.clientName, "addr", "add", lossClientAddress + "/24", "dev", lossClientIf},
		{l.clientName, "link", "set", lossClientIf, "up"},
		{l.clientName, "link", "set", "lo", "up"},
		{l.clientName, "route", "add", "10.77.1.0/24", "via", lossRouterClient},
	} {
		run(t, "ip", append([]string{"-n", step[0]}, step[1:]...)...)
	}
	run(t, "ip", "netns", "exec", l.routerName, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	// The server's segments leave it MTU-sized (no segmentation offload), so
	// the one the router drops is one segment, with the rest of its flight
	// after it.
	run(t, "ip", "netns", "exec", l.name, "ethtool", "-K", "tlss0", "tso", "off", "gso", "off")
	handle, err := netns.GetFromPath(filepath.Join("/run/netns", l.routerName))
	if err != nil {
		t.Fatal(err)
	}
	defer handle.Close()
	conn, err := nftables.New(nftables.WithNetNSFd(int(handle)))
	if err != nil {
		t.Fatalf("nf_tables in the router namespace: %v", err)
	}
	table := conn.AddTable(&nftables.Table{Name: "tlshttp_loss", Family: nftables.TableFamilyINet})
	policy := nftables.ChainPolicyAccept
	chain := conn.AddChain(&nftables.Chain{Name: "forward", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &policy})
	// Each connection loses the first full-size segment (IP length
	// lossSegmentBytes or more) the server sends on it, once: the rule marks
	// the connection (conntrack's mark) as it drops it, and a marked
	// connection loses nothing more. The segments after it show a hole that
	// the retransmission fills. What a connection loses depends on its own
	// packets only, not on what ran before it (a counter over all of a
	// port's packets made a small transfer lose nothing, or only its last
	// segment, depending on the scenarios before it).
	for _, port := range []uint16{portTLS13Loss, portTLS12Loss} {
		conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)},
			// IPv4's total length (big-endian, so the comparison is numeric).
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpGte, Register: 1, Data: binary.BigEndian.AppendUint16(nil, lossSegmentBytes)},
			&expr.Ct{Key: expr.CtKeyMARK, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, 0)},
			&expr.Immediate{Register: 1, Data: binary.NativeEndian.AppendUint32(nil, 1)},
			&expr.Ct{Key: expr.CtKeyMARK, Register: 1, SourceRegister: true},
			&expr.Verdict{Kind: expr.VerdictDrop},
		}})
	}
	if err := conn.Flush(); err != nil {
		t.Fatalf("installing the loss rule in the router namespace: %v", err)
	}
}

// killLeftovers ends processes still in the namespace: ones the test started
// (a browser's helpers that outlived it).
func (l *lab) killLeftovers() {
	out, err := exec.Command("ip", "netns", "pids", l.name).Output()
	if err != nil {
		return
	}
	for _, field := range strings.Fields(string(out)) {
		// The test process itself may show up: its threads enter the namespace.
		if pid, err := strconv.Atoi(field); err == nil && pid > 1 && pid != os.Getpid() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// certificate writes a self-signed certificate and key for server.test.
func certificate(t *testing.T, dir, name string, key any, public any) {
	t.Helper()
	template := x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "server.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), DNSNames: []string{"server.test"}}
	der, err := x509.CreateCertificate(rand.Reader, &template, &template, public, key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".crt"), "CERTIFICATE", der)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".key"), "PRIVATE KEY", keyDER)
}

var nginxConf = template.Must(template.New("nginx.conf").Parse(`daemon off;
master_process on;
worker_processes 1;
user root;
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log notice;
events { worker_connections 512; }
http {
  types { text/html html; text/css css; application/javascript js; image/png png; text/plain txt; application/octet-stream bin; }
  default_type application/octet-stream;
  client_body_temp_path {{.Dir}}/body; proxy_temp_path {{.Dir}}/proxy; fastcgi_temp_path {{.Dir}}/fastcgi;
  uwsgi_temp_path {{.Dir}}/uwsgi; scgi_temp_path {{.Dir}}/scgi;
  log_format fields '$server_port $remote_port "$request" $status $bytes_sent $body_bytes_sent $request_completion';
  access_log {{.Dir}}/access.log fields;
  root {{.Dir}}/www;
  ssl_certificate {{.Dir}}/ecdsa.crt; ssl_certificate_key {{.Dir}}/ecdsa.key;
  ssl_certificate {{.Dir}}/rsa.crt; ssl_certificate_key {{.Dir}}/rsa.key;
  ssl_ciphers HIGH:!aNULL;
  ssl_session_cache shared:tls:1m;
  server { listen 127.0.0.1:8443 ssl http2; ssl_protocols TLSv1.3; }
  server { listen 127.0.0.1:8444 ssl; ssl_protocols TLSv1.3; }
  server { listen 127.0.0.1:8445 ssl http2; ssl_protocols TLSv1.2; }
  server { listen 127.0.0.1:8446 ssl; ssl_protocols TLSv1.2; }
  server { listen 127.0.0.1:8447 ssl; ssl_protocols TLSv1.2; ssl_conf_command Options -EncryptThenMac; }
  server { listen 127.0.0.1:8448 ssl http2; ssl_protocols TLSv1.3; ssl_ecdh_curve secp384r1; }
  server { listen 127.0.0.1:8449 ssl; ssl_protocols TLSv1.3; ssl_early_data on; }
  server { listen 8450 ssl http2; ssl_protocols TLSv1.3; }
  server { listen 8451 ssl; ssl_protocols TLSv1.2; }
}
`))

func (l *lab) writeFiles(t *testing.T) {
	t.Helper()
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	certificate(t, l.dir, "ecdsa", ecKey, &ecKey.PublicKey)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	certificate(t, l.dir, "rsa", rsaKey, &rsaKey.PublicKey)
	random := mathrand.New(mathrand.NewChaCha8([32]byte{1}))
	write := func(path string, body []byte) {
		full := filepath.Join(l.dir, "www", path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for path, size := range docroot {
		body := make([]byte, size)
		if strings.HasSuffix(path, ".txt") {
			const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
			for i := range body {
				body[i] = letters[random.IntN(len(letters))]
			}
			marker := "\nEND-" + strings.ToUpper(strings.TrimSuffix(filepath.Base(path), ".txt")) + "\n"
			copy(body[len(body)-len(marker):], marker)
		} else {
			for i := range body {
				body[i] = byte(random.Uint32())
			}
		}
		write(path, body)
	}
	write("/page/index.html", []byte(pageHTML))
	write("/tiny/index.html", []byte(pageHTML))
	var conf bytes.Buffer
	if err := nginxConf.Execute(&conf, struct{ Dir string }{l.dir}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.dir, "nginx.conf"), conf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (l *lab) startNginx(t *testing.T) {
	t.Helper()
	// ip netns exec execs nginx in place: the command's process is nginx's master.
	l.nginx = exec.Command("ip", "netns", "exec", l.name, "nginx", "-c", filepath.Join(l.dir, "nginx.conf"), "-p", l.dir)
	var stderr bytes.Buffer
	l.nginx.Stderr = &stderr
	if err := l.nginx.Start(); err != nil {
		t.Fatalf("starting nginx: %v", err)
	}
	l.waited = make(chan error, 1)
	go func() { l.waited <- l.nginx.Wait() }()
	// Ready when every port accepts a connection.
	deadline := time.Now().Add(waitLimit)
	for _, port := range []int{portTLS13H2, portTLS13H1, portTLS12H2, portTLS12H1, portTLS12MtE, portTLS13HRR, portTLS13RTT, portTLS13Loss, portTLS12Loss} {
		for {
			err := netnsexec.Run(l.netns, func() error {
				conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
				if err == nil {
					conn.Close()
				}
				return err
			})
			if err == nil {
				break
			}
			select {
			case waitErr := <-l.waited:
				l.waited <- waitErr
				errorLog, _ := os.ReadFile(filepath.Join(l.dir, "error.log"))
				t.Fatalf("nginx exited: %v\n%s\n%s", waitErr, stderr.String(), errorLog)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("nginx did not accept connections on port %d within %v", port, waitLimit)
			}
		}
	}
}

func (l *lab) stopNginx(t *testing.T) {
	if l.nginx == nil || l.nginx.Process == nil {
		return
	}
	l.nginx.Process.Signal(syscall.SIGQUIT)
	select {
	case <-l.waited:
	case <-time.After(waitLimit):
		l.nginx.Process.Kill()
		<-l.waited
		t.Errorf("nginx did not stop on SIGQUIT within %v", waitLimit)
	}
	l.nginx = nil
}

// logSize is the access log's current size: a scenario reads from there on.
func (l *lab) logSize(t *testing.T) int64 {
	t.Helper()
	info, err := os.Stat(l.logPath)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// waitLog returns the access log lines written from offset on, once there are
// at least want of them.
func (l *lab) waitLog(t *testing.T, offset int64, want int) string {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		data, err := os.ReadFile(l.logPath)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if int64(len(data)) >= offset {
			text := string(data[offset:])
			if strings.Count(text, "\n") >= want {
				return text
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx logged fewer than %d requests within %v", want, waitLimit)
		}
		time.Sleep(20 * time.Millisecond) // polling a file nginx appends to
	}
}

// recording is a live capture on the namespace's loopback, written to a pcap.
type recording struct {
	live *capture.Live
	file *os.File
	w    *capture.PcapWriter
	done chan error
	path string
}

func (l *lab) startCapture(t *testing.T, path, netnsPath, iface string) *recording {
	t.Helper()
	live, err := capture.OpenLive(context.Background(), capture.LiveOptions{Interface: iface, Netns: netnsPath})
	if err != nil {
		t.Fatalf("live capture on %s in %s: %v", iface, netnsPath, err)
	}
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := capture.NewPcapWriter(file, capture.DefaultSnaplen)
	if err != nil {
		t.Fatal(err)
	}
	live.Tee(w)
	r := &recording{live: live, file: file, w: w, done: make(chan error, 1), path: path}
	go func() {
		var p capture.Packet
		for {
			if err := live.Next(&p); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				r.done <- err
				return
			}
		}
	}()
	return r
}

// stop ends the capture once every packet captured is written.
func (r *recording) stop(t *testing.T) {
	t.Helper()
	r.live.Stop()
	if err := <-r.done; err != nil {
		t.Fatalf("live capture: %v", err)
	}
	if stats := r.live.Stats(); stats.KernelDrops > 0 {
		t.Fatalf("the capture dropped %d packets", stats.KernelDrops)
	}
	r.live.Close()
	if err := r.w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := r.file.Close(); err != nil {
		t.Fatal(err)
	}
}

// client runs a command inside a namespace with SSLKEYLOGFILE set.
func (l *lab) client(t *testing.T, namespace, keys string, stdin io.Reader, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", namespace, name}, args...)...)
	// A temporary directory of the test's for what the client leaves there
	// (Chromium's org.chromium.Chromium.*), short enough for Chromium's socket.
	tmp, err := os.MkdirTemp("", "tlshttp")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	cmd.Env = append(os.Environ(), "SSLKEYLOGFILE="+keys, "HOME="+t.TempDir(), "TMPDIR="+tmp)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// scenario is one client run against one nginx port.
type scenario struct {
	name     string
	port     int
	requests int // requests the client makes (nginx logs each)
	// lossy: the client runs in the client namespace, across the router that
	// drops packets, and the capture is taken on its interface.
	lossy bool
	run   func(t *testing.T, l *lab, keys string)
}

// scenarioFiles are where one scenario's capture and logs go.
type scenarioFiles struct {
	pcap, keys string
	access     string // the scenario's access log lines
}

// runScenario captures one scenario and returns its files: in a temporary
// directory, or in $SLOWSTART_TLSHTTP_KEEP when set (to keep captures).
func (l *lab) runScenario(t *testing.T, s scenario) scenarioFiles {
	t.Helper()
	dir := t.TempDir()
	if keep := os.Getenv("SLOWSTART_TLSHTTP_KEEP"); keep != "" {
		dir = keep
	}
	files := scenarioFiles{pcap: filepath.Join(dir, s.name+".pcap"), keys: filepath.Join(dir, s.name+".keys")}
	os.Remove(files.keys)
	offset := l.logSize(t)
	captureNetns, captureIf := l.netns, "lo"
	if s.lossy {
		captureNetns, captureIf = l.clientNetns, lossClientIf
	}
	rec := l.startCapture(t, files.pcap, captureNetns, captureIf)
	s.run(t, l, files.keys)
	files.access = l.waitLog(t, offset, s.requests)
	rec.stop(t)
	if err := os.WriteFile(filepath.Join(dir, s.name+".access.log"), []byte(files.access), 0o644); err != nil {
		t.Fatal(err)
	}
	return files
}

func urls(host string, port int, paths ...string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, "-o", "/dev/null", fmt.Sprintf("https://%s:%d%s", host, port, p))
	}
	return out
}

// curlScenario fetches paths over one curl run (one connection unless the
// arguments close it).
func curlScenario(name string, port int, args []string, paths ...string) scenario {
	return scenario{name: name, port: port, requests: len(paths), run: func(t *testing.T, l *lab, keys string) {
		l.client(t, l.name, keys, nil, "curl", append(append([]string{"-sS", "-k"}, args...), urls("127.0.0.1", port, paths...)...)...)
	}}
}

// lossyCurlScenario is curlScenario from the client namespace, across the router
// that drops some of the server's packets.
func lossyCurlScenario(name string, port int, args []string, paths ...string) scenario {
	return scenario{name: name, port: port, requests: len(paths), lossy: true, run: func(t *testing.T, l *lab, keys string) {
		l.client(t, l.clientName, keys, nil, "curl", append(append([]string{"-sS", "-k"}, args...), urls(lossServerAddress, port, paths...)...)...)
	}}
}

// chromiumScenario loads a page in headless Chromium with a fresh profile,
// driven over the DevTools protocol: Navigate returns at the page's load
// event, once every subresource is loaded or given up, and only then is
// Chromium closed. Chromium gives up the image at times (its bytes are random,
// no image it can decode) and resets its stream before nginx sent it all, with
// the load event as with --dump-dom before: nginx's log says so
// ($request_completion), and the capture must be read as incomplete then.
func chromiumScenario(name string, port int, page string, requests int) scenario {
	return scenario{name: name, port: port, requests: requests, run: func(t *testing.T, l *lab, keys string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// A short directory of the test's for the profile and Chromium's
		// temporary files (its socket's path must fit in 107 bytes).
		dir, err := os.MkdirTemp("", "tlshttp")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		c, err := chromium.Start(ctx, chromium.Options{Binary: "chromium", Netns: l.netns, Dir: dir, KeylogPath: keys,
			Flags: []string{"--headless", "--no-sandbox", "--disable-quic", "--ignore-certificate-errors", "--disable-gpu", "--no-first-run"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Stop()
		tab, closeTab, err := c.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer closeTab()
		var html string
		url := fmt.Sprintf("https://127.0.0.1:%d%s", port, page)
		if err := chromedp.Run(tab, chromedp.Navigate(url), chromedp.OuterHTML("html", &html, chromedp.ByQuery)); err != nil {
			t.Fatalf("chromium loading %s: %v (it said: %s)", url, err, c.Output())
		}
		if !strings.Contains(html, "<p>page</p>") {
			t.Fatalf("chromium did not load the page: %q", html)
		}
	}}
}

// sClient drives openssl s_client inside the lab: script writes to its stdin and
// waits for markers in what it prints (stdout and stderr).
type sClient struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Reader
	out   *os.File
}

func (l *lab) startSClient(t *testing.T, args ...string) *sClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.name, "openssl", "s_client"}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// s_client prints responses on stdout and notes such as KEYUPDATE on stderr.
	out, output, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = output, output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	output.Close()
	return &sClient{t: t, cmd: cmd, stdin: stdin, lines: bufio.NewReader(out), out: out}
}

func (c *sClient) send(text string) { io.WriteString(c.stdin, text) }

func (c *sClient) waitFor(marker string) {
	c.t.Helper()
	for {
		line, err := c.lines.ReadString('\n')
		if strings.Contains(line, marker) {
			return
		}
		if err != nil {
			c.t.Fatalf("s_client ended before %q: %v", marker, err)
		}
	}
}

func (c *sClient) finish() {
	c.t.Helper()
	c.stdin.Close()
	io.Copy(io.Discard, c.lines)
	c.out.Close()
	if err := c.cmd.Wait(); err != nil {
		c.t.Fatalf("openssl s_client: %v", err)
	}
}

// keyUpdateScenario sends two requests with openssl s_client on one TLS 1.3
// connection, with a KeyUpdate (update_requested, so the server updates too)
// between them.
func keyUpdateScenario(name string, port int) scenario {
	return scenario{name: name, port: port, requests: 2, run: func(t *testing.T, l *lab, keys string) {
		c := l.startSClient(t, "-connect", fmt.Sprintf("127.0.0.1:%d", port), "-tls1_3", "-keylogfile", keys, "-servername", "server.test")
		c.send("GET /one.txt HTTP/1.1\r\nHost: server.test\r\n\r\n")
		c.waitFor("END-ONE")
		// A line starting with K makes s_client send a KeyUpdate asking for one back.
		c.send("K\n")
		c.waitFor("KEYUPDATE")
		c.send("GET /two.txt HTTP/1.1\r\nHost: server.test\r\nConnection: close\r\n\r\n")
		c.waitFor("END-TWO")
		c.finish()
	}}
}

// earlyDataScenario makes two TLS 1.3 connections with openssl s_client: the
// first gets a session ticket, the second resumes it and sends its request as
// 0-RTT data, which the server accepts.
func earlyDataScenario(name string, port int) scenario {
	return scenario{name: name, port: port, requests: 2, run: func(t *testing.T, l *lab, keys string) {
		dir := t.TempDir()
		session, early := filepath.Join(dir, "session.pem"), filepath.Join(dir, "early.txt")
		if err := os.WriteFile(early, []byte("GET /two.txt HTTP/1.1\r\nHost: server.test\r\nConnection: close\r\n\r\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		address := fmt.Sprintf("127.0.0.1:%d", port)
		first := l.startSClient(t, "-connect", address, "-tls1_3", "-keylogfile", keys, "-servername", "server.test", "-sess_out", session)
		first.send("GET /one.txt HTTP/1.1\r\nHost: server.test\r\nConnection: close\r\n\r\n")
		first.waitFor("END-ONE")
		first.finish()
		second := l.startSClient(t, "-connect", address, "-tls1_3", "-keylogfile", keys, "-servername", "server.test",
			"-sess_in", session, "-early_data", early)
		second.waitFor("Early data was accepted")
		second.waitFor("END-TWO")
		second.finish()
	}}
}
