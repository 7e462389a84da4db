// Command profile runs the analyze pipeline (analysis.Stream, each connection
// rendered as JSON as it finishes, as `analyze --json` does) over one capture and writes a CPU profile and a heap profile, for finding what
// bench/analyze.sh measures. It is a benchmarking aid, not part of the slowstart
// binary.
//
//	go run ./bench/profile -cpu /tmp/cpu.pprof -heap /tmp/heap.pprof [-allocs /tmp/allocs.pprof] CAPTURE
//	go tool pprof -top /tmp/cpu.pprof
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"time"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
)

func main() {
	cpuPath := flag.String("cpu", "cpu.pprof", "where to write the CPU profile")
	heapPath := flag.String("heap", "", "where to write a heap profile taken at the fullest heap seen during the analysis (none if empty)")
	allocsPath := flag.String("allocs", "", "where to write a profile of everything allocated, taken at the end (none if empty)")
	tracePath := flag.String("trace", "", "where to write an execution trace of the analysis (go tool trace; none if empty): which goroutine waits for which")
	renderMode := flag.String("render", renderIndent, "how to render the connections: none, indent (as analyze --json), jsonl (as analyze --jsonl), text (as analyze)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] CAPTURE\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, flag.Arg(0), *cpuPath, *heapPath, *allocsPath, *tracePath, *renderMode); err != nil {
		slog.Error("profile failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, capturePath, cpuPath, heapPath, allocsPath, tracePath, renderMode string) error {
	cpuFile, err := os.Create(cpuPath)
	if err != nil {
		return fmt.Errorf("create the CPU profile file: %w", err)
	}
	defer cpuFile.Close()
	w, err := streamWriter(io.Discard, renderMode)
	if err != nil {
		return err
	}
	reader, err := capture.Open(capturePath, capture.WithUDP())
	if err != nil {
		return err
	}
	defer reader.Close()
	if tracePath != "" {
		traceFile, err := os.Create(tracePath)
		if err != nil {
			return fmt.Errorf("create the trace file: %w", err)
		}
		defer traceFile.Close()
		if err := trace.Start(traceFile); err != nil {
			return fmt.Errorf("start the trace: %w", err)
		}
		defer trace.Stop()
	}
	if err := pprof.StartCPUProfile(cpuFile); err != nil {
		return fmt.Errorf("start the CPU profile: %w", err)
	}
	start := time.Now()
	// As `analyze --json` does: the stream, each connection rendered as it finishes.
	if err := w.Begin("slowstart profile"); err != nil {
		return err
	}
	watch := watchHeap(heapPath)
	stats, feedErr := analysis.Drain(ctx, reader, analysis.StreamOptions{Options: analysis.Options{Tool: "slowstart profile"}, Emit: w.Connection})
	maxLive := watch()
	if feedErr != nil {
		pprof.StopCPUProfile()
		return fmt.Errorf("analyze %s: %w", capturePath, feedErr)
	}
	if err := w.End(analysis.FileSource(capturePath, reader.Stats()), nil); err != nil {
		return err
	}
	elapsed := time.Since(start)
	pprof.StopCPUProfile()
	if allocsPath != "" {
		if err := writeProfile("allocs", allocsPath); err != nil {
			return err
		}
	}

	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	seconds := elapsed.Seconds()
	slog.Info("profiled",
		"capture", capturePath,
		"packets", reader.Stats().Records,
		"connections", stats.Connections,
		"seconds", seconds,
		"render", renderMode,
		"packets_per_s", float64(reader.Stats().Records)/seconds,
		"max_live_heap_mb", float64(maxLive)/(1<<20),
		"total_alloc_mb", float64(mem.TotalAlloc)/(1<<20),
		"mallocs", mem.Mallocs,
		"cpu_profile", cpuPath)

	return nil
}

// writeProfile writes the named runtime profile to path.
func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create the %s profile: %w", name, err)
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("write the %s profile: %w", name, err)
	}
	return f.Close()
}

// watchHeap reads the live heap (as the last collection left it) every 20 ms,
// and writes a heap profile to path (unless empty) each time it reached a new
// high by 5%: the profile of the fullest heap. stop ends the watch and returns
// the highest live heap seen.
func watchHeap(path string) (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	done, finished := make(chan struct{}), make(chan struct{})
	var maxLive, written uint64
	go func() {
		defer close(finished)
		ticker := time.NewTicker(20 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
			}
			metrics.Read(sample)
			live := sample[0].Value.Uint64()
			maxLive = max(maxLive, live)
			if path != "" && live > written+written/20 {
				written = live
				_ = writeProfile("heap", path) // the next high writes it again
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		return maxLive
	}
}
