//go:build linux

package tune

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/slowstart/slowstart/lab/labpath"
	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/probe/exact"
)

// TestLabProbeSeesNewWindow: in a lab trial whose server route carries
// initcwnd 10, Apply sets 20 on the route towards the client; the exact probe
// from the client namespace then measures 20, and after Revert 10 again.
func TestLabProbeSeesNewWindow(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// A 20 ms path through the link emulator.
	path, err := labpath.Start(ctx, labpath.Config{RTT: 20 * time.Millisecond, InitCwnd: 10})
	if err != nil {
		t.Fatalf("start the lab's path: %v", err)
	}
	t.Cleanup(func() {
		if err := path.Close(); err != nil {
			t.Errorf("close the path: %v", err)
		}
	})

	serverAddr := netip.AddrPortFrom(path.ServerAddr, 80)
	listener, err := path.Listen(labpath.Server, "tcp", serverAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- server.Serve(serveCtx, listener, server.Config{}) }()
	t.Cleanup(func() {
		stopServe()
		if err := <-served; err != nil {
			t.Errorf("server: %v", err)
		}
	})

	measure := func() int {
		t.Helper()
		mctx, mcancel := context.WithTimeout(ctx, time.Minute)
		defer mcancel()
		res, err := exact.Measure(mctx, exact.Options{
			URL:   fmt.Sprintf("http://%s/bytes/100000", serverAddr),
			Netns: path.ClientNetns,
			Runs:  1,
		})
		if err != nil {
			t.Fatalf("measure: %v", err)
		}
		if res.Verdict != exact.VerdictExact {
			t.Fatalf("verdict %s: %s", res.Verdict, res.Reason)
		}
		return res.IWSegments
	}

	route := netip.PrefixFrom(path.ClientAddr, 32).String()
	res, err := Apply(ApplyOptions{Netns: path.ServerNamespace, InitCwnd: 20, Route: route, BackupDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed != 1 {
		t.Fatalf("changed %d routes, want the one towards the client", res.Changed)
	}
	if iw := measure(); iw != 20 {
		t.Errorf("after apply: measured IW %d, want 20", iw)
	}
	if _, err := Revert(RevertOptions{BackupPath: res.BackupPath}); err != nil {
		t.Fatal(err)
	}
	if iw := measure(); iw != 10 {
		t.Errorf("after revert: measured IW %d, want 10", iw)
	}
}
