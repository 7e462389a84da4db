//go:build linux

package tune

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/slowstart/slowstart/lab/link"
	"github.com/slowstart/slowstart/lab/netlab"
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
	trial, err := netlab.Create(ctx, netlab.Options{InitCwnd: 10})
	if err != nil {
		t.Fatalf("create the lab's namespaces: %v", err)
	}
	t.Cleanup(func() {
		if err := trial.Close(); err != nil {
			t.Errorf("close the trial: %v", err)
		}
	})

	// A 20 ms path through the link emulator.
	clientDevice, err := link.NewTUN(trial.ClientTUN)
	if err != nil {
		t.Fatal(err)
	}
	serverDevice, err := link.NewTUN(trial.ServerTUN)
	if err != nil {
		t.Fatal(err)
	}
	oneWay := link.Config{DelayNs: 10e6}
	linkCtx, stopLink := context.WithCancel(ctx)
	linkDone := make(chan error, 1)
	go func() {
		_, err := link.Run(linkCtx, clientDevice, serverDevice, oneWay, oneWay, link.RunOptions{EarlyWakeNs: -1})
		linkDone <- err
	}()
	t.Cleanup(func() {
		stopLink()
		if err := <-linkDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("link emulator: %v", err)
		}
	})

	serverAddr := netip.AddrPortFrom(trial.ServerAddr, 80)
	listener, err := trial.Listen(netlab.Server, "tcp", serverAddr.String())
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
			Netns: trial.NamespacePath(netlab.Client),
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

	route := netip.PrefixFrom(trial.ClientAddr, 32).String()
	res, err := Apply(ApplyOptions{Netns: trial.ServerNamespace, InitCwnd: 20, Route: route, BackupDir: t.TempDir()})
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
