// Command truth runs the truth campaign (package internal/campaign): lab trials
// drawn from the space real servers' TCP stacks occupy, each read from both ends
// and judged against the server kernel's own congestion window. It prints the
// tally (exact right, ranges and bounds holding the truth, wrong) and exits 1 when a
// reading left out the truth. As root:
//
//	go run ./bench/truth -trials 2000 -seed 7 -keep /tmp/truth-wrong
//
// A wrong trial's captures and spec go to -keep; -first N -trials 1 with the same
// seed runs that trial again.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/slowstart/slowstart/internal/campaign"
)

func main() {
	seed := flag.Uint64("seed", 1, "the campaign's seed: the same seed draws the same trials")
	first := flag.Int("first", 0, "index of the first trial")
	trials := flag.Int("trials", 1000, "trials to run")
	parallel := flag.Int("parallel", 4, "trials at once")
	keepDir := flag.String("keep", "", "copy the captures of trials with a wrong reading here")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "truth: the lab needs root (network namespaces, BPF): run it with sudo")
		os.Exit(4)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	done := 0
	tally, _, err := campaign.Run(ctx, campaign.Options{Seed: *seed, First: *first, Trials: *trials, Parallel: *parallel, KeepDir: *keepDir,
		Progress: func(r campaign.Result) {
			done++
			switch {
			case r.Error != "":
				fmt.Fprintf(os.Stderr, "[%d/%d] %s: did not run through: %s\n", done, *trials, r.Name, r.Error)
			case r.Wrong():
				fmt.Fprintf(os.Stderr, "[%d/%d] %s: WRONG (truth %d):\n", done, *trials, r.Name, r.TruthIW)
				for _, x := range r.Readings {
					if x.Wrong != "" {
						fmt.Fprintf(os.Stderr, "    %s %s: %s\n", x.Vantage, x.Source, x.Wrong)
					}
				}
			case done%50 == 0:
				fmt.Fprintf(os.Stderr, "[%d/%d] %s\n", done, *trials, time.Since(start).Round(time.Second))
			}
		}})
	tally.Write(os.Stdout)
	fmt.Printf("seed %d, trials %d..%d, %s\n", *seed, *first, *first+*trials-1, time.Since(start).Round(time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "truth:", err)
		os.Exit(130)
	}
	if tally.Wrong() > 0 {
		os.Exit(1)
	}
}
