package lab

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// go test ./lab -run TestScratch -scratch "name:iw=10,adv=1400,tls=1.2,server=nginx;..."
func TestScratch(t *testing.T) {
	spec := os.Getenv("SCRATCH")
	if spec == "" {
		t.Skip()
	}
	dir := os.Getenv("SCRATCH_DIR")
	var jobs []Job
	for _, one := range strings.Split(spec, ";") {
		name, kv, _ := strings.Cut(one, ":")
		s := Spec{RTTNs: 80e6, IW: 10, SizeBytes: 100_000, InitRwnd: 300}
		for _, p := range strings.Split(kv, ",") {
			k, v, _ := strings.Cut(p, "=")
			n, _ := strconv.Atoi(v)
			switch k {
			case "iw":
				s.IW = n
			case "adv":
				s.ServerAdvMSS = n
			case "cadv":
				s.ClientAdvMSS = n
			case "mtu":
				s.MTU = n
			case "tls":
				s.TLS = v
			case "h2":
				s.HTTP2 = true
			case "server":
				s.Server = v
				if v == "nginx" {
					s.Client = ClientCurl
				}
			case "client":
				s.Client = v
			case "cc":
				s.CC = v
			case "rtt":
				s.RTTNs = int64(n) * 1e6
			case "size":
				s.SizeBytes = int64(n)
			case "chunk":
				s.WriteChunkBytes = n
			case "pause":
				s.WritePauseNs = int64(n) * 1e6
			case "nagle":
				s.Nagle = true
			}
		}
		jobs = append(jobs, Job{Spec: s, Trial: 1, Name: name})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rows, err := NewEnv().RunJobs(ctx, jobs, RunOptions{Parallel: 2, CaptureDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		t.Logf("%s: %s %d bytes %s", r.Point, r.Error, r.Bytes, r.ClientPcap)
	}
}
