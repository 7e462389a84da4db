// Package surveylab builds an emulated fleet of web servers on this machine for
// testing and benchmarking surveys: many server addresses, each with a known
// initial window, behind emulated paths of several round-trip times, all
// reachable from one vantage namespace, so that `slowstart survey --netns` sees
// what a survey of the Internet sees (many addresses, several servers per
// address, near and far), and every reading can be checked against the truth.
//
//	vantage namespace (group 0's client)  ──tun0──(emulator, RTT 0)──  server namespace 0: addresses 10.64.j.h
//	      │ veth, forwarded by group i's client namespace
//	      └──── client i ──tun0──(emulator, RTT i)──  server namespace i: addresses 10.(64+i).j.h
//
// Each server namespace holds its addresses on lo, and the built-in server (HTTP
// on BuiltinHTTPPort, TLS 1.3 on BuiltinTLSPort) and nginx (HTTP on NginxHTTPPort,
// TLS on NginxTLSPort) listening on all of them. The initial window is set per
// /24 of addresses with policy routing: block j answers from routing table
// 100+j, whose one route back to the vantage carries initcwnd IWs[j % len(IWs)].
// Everything is made through lab/netlab (namespaces, TUN devices) and removed by
// Close (or netlab.CloseAll, or `slowstart lab clean` after a kill).
//
// It is not a lab of its own: one trial's worth of pieces per group, for tests
// and bench/; it measures nothing.
package surveylab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/internal/childproc"
	"github.com/slowstart/slowstart/lab/labpath"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/lab/server"
)

// The servers' ports.
const (
	BuiltinHTTPPort = 8080
	BuiltinTLSPort  = 8443
	NginxHTTPPort   = 80
	NginxTLSPort    = 443
)

// ServerName is the name on the servers' certificate.
const ServerName = "fleet.slowstart.test"

// addressesPerBlock is how many addresses a /24 block holds (.1 to .250).
const addressesPerBlock = 250

// Group is one emulated path and the servers behind it.
type Group struct {
	// RTT is the path's round-trip time (each way half of it).
	RTT time.Duration
	// Addresses is how many server addresses the group has.
	Addresses int
	// IWs are the initial windows of the group's /24 blocks, in turn.
	IWs []int
	// Nginx also serves with Debian's nginx (HTTP and TLS).
	Nginx bool
}

// Server is one server address and what it is set to.
type Server struct {
	Addr  netip.Addr
	IW    int
	RTT   time.Duration
	Group int
}

// Options configure a fleet.
type Options struct {
	Groups []Group
	// NginxBodySizes are the /bytes/N nginx serves (the built-in server serves
	// any N); every other path gets a 404 whose body repeats the path, as many
	// servers' error pages do.
	NginxBodySizes []int64
	// Keys caches the certificate chain's keys; nil makes fresh ones.
	Keys *server.KeyCache
}

// Fleet is a running fleet. Close it.
type Fleet struct {
	// Vantage is the path of the namespace to survey from (--netns).
	Vantage string
	// Servers lists every server address, group by group.
	Servers []Server
	// NginxDirs are the nginx instances' directories (configuration, access log).
	NginxDirs []string

	paths    []*labpath.Path
	cleanups []func() error
}

// Start builds the fleet. It needs root, and nginx when a group asks for it.
func Start(ctx context.Context, opts Options) (_ *Fleet, err error) {
	if len(opts.Groups) == 0 || len(opts.Groups) > 60 {
		return nil, errors.New("surveylab: give 1 to 60 groups")
	}
	f := &Fleet{}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	chain, err := server.NewChain(server.ChainConfig{ServerName: ServerName, Intermediates: 1, TargetBytes: 3000, Keys: opts.Keys})
	if err != nil {
		return nil, err
	}
	for i, g := range opts.Groups {
		if g.Addresses < 1 || g.Addresses > 200*addressesPerBlock || len(g.IWs) == 0 {
			return nil, fmt.Errorf("surveylab: group %d: give 1 to %d addresses and at least one IW", i, 200*addressesPerBlock)
		}
		path, err := labpath.Start(ctx, labpath.Config{RTT: g.RTT, NoSlowStartAfterIdle: true,
			Sysctls: map[string]string{"ipv4/ip_forward": "1", "ipv4/conf/all/rp_filter": "0", "ipv4/conf/default/rp_filter": "0",
				"core/somaxconn": "4096", "ipv4/tcp_max_syn_backlog": "4096"}})
		if err != nil {
			return nil, err
		}
		f.paths = append(f.paths, path)
		trial := path.Trial
		// Where the vantage's packets to this group come from, as the server sees them.
		peer := netip.PrefixFrom(trial.ClientAddr, 32)
		if i == 0 {
			f.Vantage = trial.NamespacePath(netlab.Client)
		} else if peer, err = f.joinVantage(i, trial); err != nil {
			return nil, err
		}
		servers, err := addServerAddresses(i, g, trial, peer)
		if err != nil {
			return nil, err
		}
		f.Servers = append(f.Servers, servers...)
		if err := f.startBuiltin(ctx, trial, chain); err != nil {
			return nil, err
		}
		if g.Nginx {
			if err := f.startNginx(ctx, trial, chain, opts.NginxBodySizes, servers[0].Addr); err != nil {
				return nil, err
			}
		}
	}
	return f, nil
}

// Close stops the servers and emulators and removes the namespaces.
func (f *Fleet) Close() error {
	var errs []error
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		errs = append(errs, f.cleanups[i]())
	}
	f.cleanups = nil
	for _, p := range f.paths {
		errs = append(errs, p.Close())
	}
	f.paths = nil
	return errors.Join(errs...)
}

// blockPrefix is group i's block j: 10.(64+i).j.0/24.
func blockAddr(group, block, host int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(64 + group), byte(block), byte(host)})
}

// joinVantage links group i's client namespace to the vantage with a veth
// pair (10.200.i.1 in the vantage, .2 in the client namespace), routes the
// group's addresses that way, and returns the vantage's prefix on it.
func (f *Fleet) joinVantage(i int, trial *netlab.Trial) (netip.Prefix, error) {
	vantageAddr := netip.AddrFrom4([4]byte{10, 200, byte(i), 1})
	clientAddr := netip.AddrFrom4([4]byte{10, 200, byte(i), 2})
	groupPrefix := netip.PrefixFrom(blockAddr(i, 0, 0), 16)
	clientNs, err := netns.GetFromPath(trial.NamespacePath(netlab.Client))
	if err != nil {
		return netip.Prefix{}, err
	}
	defer clientNs.Close()
	name := "fleet" + strconv.Itoa(i)
	err = f.paths[0].Do(netlab.Client, func() error {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		defer h.Close()
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: 1500, TxQLen: 10000}, PeerName: name + "p",
			PeerNamespace: netlink.NsFd(int(clientNs))}
		if err := h.LinkAdd(veth); err != nil {
			return fmt.Errorf("add veth %s: %w", name, err)
		}
		l, err := h.LinkByName(name)
		if err != nil {
			return err
		}
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(vantageAddr, 30))}); err != nil {
			return err
		}
		if err := h.LinkSetUp(l); err != nil {
			return err
		}
		return h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipNet(groupPrefix), Gw: net.IP(clientAddr.AsSlice())})
	})
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("surveylab: joining group %d to the vantage: %w", i, err)
	}
	err = trial.Do(netlab.Client, func() error {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		defer h.Close()
		l, err := h.LinkByName(name + "p")
		if err != nil {
			return err
		}
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(clientAddr, 30))}); err != nil {
			return err
		}
		if err := h.LinkSetUp(l); err != nil {
			return err
		}
		tun, err := h.LinkByName(netlab.TUNName)
		if err != nil {
			return err
		}
		return h.RouteAdd(&netlink.Route{LinkIndex: tun.Attrs().Index, Dst: ipNet(groupPrefix), Scope: netlink.SCOPE_LINK})
	})
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("surveylab: routing group %d: %w", i, err)
	}
	return netip.PrefixFrom(vantageAddr, 30).Masked(), nil
}

// addServerAddresses puts the group's addresses on lo in its server namespace,
// and gives each /24 block a routing table whose route back to the vantage
// carries the block's initial window. The vantage routes the group's /16 to it.
func addServerAddresses(i int, g Group, trial *netlab.Trial, peer netip.Prefix) ([]Server, error) {
	var servers []Server
	blocks := (g.Addresses + addressesPerBlock - 1) / addressesPerBlock
	err := trial.Do(netlab.Server, func() error {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		defer h.Close()
		lo, err := h.LinkByName("lo")
		if err != nil {
			return err
		}
		tun, err := h.LinkByName(netlab.TUNName)
		if err != nil {
			return err
		}
		for b := range blocks {
			iw := g.IWs[b%len(g.IWs)]
			table := 100 + b
			rule := netlink.NewRule()
			rule.Src, rule.Table, rule.Priority = ipNet(netip.PrefixFrom(blockAddr(i, b, 0), 24)), table, 1000+b
			if err := h.RuleAdd(rule); err != nil {
				return fmt.Errorf("policy rule of block %d: %w", b, err)
			}
			if err := h.RouteAdd(&netlink.Route{LinkIndex: tun.Attrs().Index, Dst: ipNet(peer), Scope: netlink.SCOPE_LINK,
				Table: table, InitCwnd: iw}); err != nil {
				return fmt.Errorf("route of block %d (initcwnd %d): %w", b, iw, err)
			}
			for host := 1; host <= addressesPerBlock && len(servers) < g.Addresses; host++ {
				a := blockAddr(i, b, host)
				if err := h.AddrAdd(lo, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(a, 32))}); err != nil {
					return fmt.Errorf("address %s: %w", a, err)
				}
				servers = append(servers, Server{Addr: a, IW: iw, RTT: g.RTT, Group: i})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("surveylab: group %d's addresses: %w", i, err)
	}
	if i == 0 {
		// The vantage is this trial's client: route the group's /16 into its TUN.
		err = trial.Do(netlab.Client, func() error {
			h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
			if err != nil {
				return err
			}
			defer h.Close()
			tun, err := h.LinkByName(netlab.TUNName)
			if err != nil {
				return err
			}
			return h.RouteAdd(&netlink.Route{LinkIndex: tun.Attrs().Index, Dst: ipNet(netip.PrefixFrom(blockAddr(0, 0, 0), 16)),
				Scope: netlink.SCOPE_LINK, Src: net.IP(trial.ClientAddr.AsSlice())})
		})
		if err != nil {
			return nil, fmt.Errorf("surveylab: routing group 0: %w", err)
		}
	}
	return servers, nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// startBuiltin serves HTTP and TLS 1.3 with the built-in server on every
// address of the trial's server namespace.
func (f *Fleet) startBuiltin(ctx context.Context, trial *netlab.Trial, chain *server.Chain) error {
	for _, c := range []struct {
		port int
		cfg  server.Config
	}{
		{BuiltinHTTPPort, server.Config{}},
		{BuiltinTLSPort, server.Config{TLSVersion: "1.3", Certificate: chain.Certificate}},
	} {
		ln, err := trial.Listen(netlab.Server, "tcp4", ":"+strconv.Itoa(c.port))
		if err != nil {
			return err
		}
		serveCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan error, 1)
		go func() { done <- server.Serve(serveCtx, ln, c.cfg) }()
		f.cleanups = append(f.cleanups, func() error { stop(); return <-done })
	}
	return nil
}

// nginxConfig serves /bytes/N from sparse files and answers every other path
// with a 404 that repeats it (as Apache's and many CDNs' error pages do).
var nginxConfig = template.Must(template.New("nginx.conf").Parse(`# made by slowstart's survey lab; removed on stop
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 16384;
user root;
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log warn;
events { worker_connections 8192; }
http {
    access_log {{.Dir}}/access.log;
    client_body_temp_path {{.Dir}}/tmp;
    proxy_temp_path {{.Dir}}/tmp;
    fastcgi_temp_path {{.Dir}}/tmp;
    uwsgi_temp_path {{.Dir}}/tmp;
    scgi_temp_path {{.Dir}}/tmp;
    types {}
    default_type application/octet-stream;
    gzip off;
    server_tokens off;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 0;
    large_client_header_buffers 4 16k;
    server {
        listen {{.HTTPPort}} reuseport backlog=4096;
        listen {{.TLSPort}} ssl reuseport backlog=4096;
        ssl_certificate {{.Dir}}/chain.pem;
        ssl_certificate_key {{.Dir}}/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ecdh_curve X25519:prime256v1;
        ssl_session_tickets off;
        root {{.Dir}}/docroot;
        location ~ "^/bytes/([0-9]+)$" { try_files /$1 @echo; }
        location / { try_files $uri @echo; }
        location @echo { default_type text/plain; return 404 "Not found: $request_uri\n"; }
    }
}
`))

// startNginx runs nginx in the trial's server namespace, on all its addresses.
func (f *Fleet) startNginx(ctx context.Context, trial *netlab.Trial, chain *server.Chain, sizes []int64, probe netip.Addr) error {
	binary, err := exec.LookPath("nginx")
	if err != nil {
		return fmt.Errorf("surveylab: nginx is not installed (apt-get install nginx-light): %w", err)
	}
	dir, err := netlab.MakeTempDir("surveynginx")
	if err != nil {
		return err
	}
	f.cleanups = append(f.cleanups, func() error { return netlab.RemoveTempDir(dir) })
	for _, sub := range []string{"tmp", "docroot"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return err
		}
	}
	for _, n := range slices.Compact(slices.Sorted(slices.Values(sizes))) {
		if err := os.Truncate(mustCreate(filepath.Join(dir, "docroot", strconv.FormatInt(n, 10))), n); err != nil {
			return err
		}
	}
	key, err := server.PrivateKeyPEM(chain.Certificate)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "chain.pem"), server.CertificateChainPEM(chain.Certificate), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), key, 0o600); err != nil {
		return err
	}
	var conf strings.Builder
	if err := nginxConfig.Execute(&conf, map[string]any{"Dir": dir, "HTTPPort": NginxHTTPPort, "TLSPort": NginxTLSPort}); err != nil {
		return err
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf.String()), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(binary, "-c", confPath, "-p", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Forked from a thread kept until nginx exits: the parent-death signal
	// fires when the forking thread ends, which for a pooled one can be any time.
	proc, err := childproc.Start(cmd, trial.NamespacePath(netlab.Server))
	if err != nil {
		return fmt.Errorf("starting nginx in %s: %w", trial.Namespace(netlab.Server), err)
	}
	exited := proc.Exited()
	f.cleanups = append(f.cleanups, func() error {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		return nil
	})
	f.NginxDirs = append(f.NginxDirs, dir)
	// Up when it accepts a connection from the vantage.
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := f.paths[0].DialContext(ctx, netlab.Client, "tcp", netip.AddrPortFrom(probe, NginxHTTPPort).String())
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			return fmt.Errorf("surveylab: nginx exited: %s", strings.TrimSpace(string(log)))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("surveylab: nginx does not accept connections on %s: %w", probe, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mustCreate(path string) string {
	if f, err := os.Create(path); err == nil {
		f.Close()
	}
	return path
}
