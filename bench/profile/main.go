// Command profile runs the analyze pipeline (analysis.File plus the JSON rendering)
// over one capture and writes a CPU profile and a heap profile, for finding what
// bench/analyze.sh measures. It is a benchmarking aid, not part of the slowstart
// binary.
//
//	go run ./bench/profile -cpu /tmp/cpu.pprof -heap /tmp/heap.pprof CAPTURE
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
	"runtime/pprof"
	"time"

	"github.com/slowstart/slowstart/analysis"
)

func main() {
	cpuPath := flag.String("cpu", "cpu.pprof", "where to write the CPU profile")
	heapPath := flag.String("heap", "", "where to write a heap profile taken after the analysis (none if empty)")
	renderMode := flag.String("render", renderIndent, "how to render the Report as JSON: none, indent (as analyze --json), compact")
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
	if err := run(ctx, flag.Arg(0), *cpuPath, *heapPath, *renderMode); err != nil {
		slog.Error("profile failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, capturePath, cpuPath, heapPath, renderMode string) error {
	cpuFile, err := os.Create(cpuPath)
	if err != nil {
		return fmt.Errorf("create the CPU profile file: %w", err)
	}
	defer cpuFile.Close()
	if err := pprof.StartCPUProfile(cpuFile); err != nil {
		return fmt.Errorf("start the CPU profile: %w", err)
	}
	start := time.Now()
	rep, err := analysis.File(ctx, capturePath, analysis.Options{Tool: "slowstart profile"})
	if err != nil {
		pprof.StopCPUProfile()
		return fmt.Errorf("analyze %s: %w", capturePath, err)
	}
	analyzed := time.Since(start)
	// The heap that the Report alone keeps alive (a GC inside the profile is cheap
	// next to the analysis and shows as runtime.GC).
	runtime.GC()
	var afterAnalysis runtime.MemStats
	runtime.ReadMemStats(&afterAnalysis)
	renderStart := time.Now()
	if err := render(io.Discard, rep, renderMode); err != nil {
		pprof.StopCPUProfile()
		return fmt.Errorf("render the Report as JSON: %w", err)
	}
	rendered := time.Since(renderStart)
	pprof.StopCPUProfile()

	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	seconds := analyzed.Seconds()
	slog.Info("profiled",
		"capture", capturePath,
		"packets", rep.Source.Packets,
		"connections", len(rep.Connections),
		"analysis_s", seconds,
		"render", renderMode,
		"render_s", rendered.Seconds(),
		"packets_per_s", float64(rep.Source.Packets)/seconds,
		"report_heap_mb", float64(afterAnalysis.HeapAlloc)/(1<<20),
		"heap_in_use_mb", float64(mem.HeapInuse)/(1<<20),
		"total_alloc_mb", float64(mem.TotalAlloc)/(1<<20),
		"mallocs", mem.Mallocs,
		"cpu_profile", cpuPath)

	if heapPath != "" {
		heapFile, err := os.Create(heapPath)
		if err != nil {
			return fmt.Errorf("create the heap profile file: %w", err)
		}
		defer heapFile.Close()
		runtime.GC()
		if err := pprof.WriteHeapProfile(heapFile); err != nil {
			return fmt.Errorf("write the heap profile: %w", err)
		}
	}
	return nil
}
