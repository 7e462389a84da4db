//go:build linux

package labserver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/slowstart/slowstart/har"
)

// keepLoad writes base.pcap, base.keys, base.access.log and base.har.
func keepLoad(t *testing.T, res *PageResult, dir, base string) {
	t.Helper()
	for from, to := range map[string]string{"load.pcap": ".pcap", "load.keys": ".keys"} {
		data, err := os.ReadFile(filepath.Join(dir, from))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(base+to, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(base+".access.log", res.AccessLog, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(base + ".har")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := har.Write(f, har.FromPage(res.Page, "slowstart", "test")); err != nil {
		t.Fatal(err)
	}
}
