// Package hoststeal measures the CPU time a hypervisor took from this machine (the
// "steal" column of /proc/stat), for tests whose timing a busy host can upset: a
// virtual CPU that the host does not run stalls whatever was on it, the emulator, a
// server or the kernel's TCP, for milliseconds at a time.
//
// The lab uses it to warn that a run's timing can't be trusted; the tests to judge
// their timing checks. It is for judging timing, not for hiding wrong answers: a test measures
// the steal over its own run and, when a timing check fails while the host took more
// than NoisyShare of the machine, reports the failure as not checkable here.
package hoststeal

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// NoisyShare is the share of the machine's CPU time (all CPUs) taken by the
// hypervisor above which timing checks of a few percent or a few milliseconds are
// not checkable. On the two-vCPU machines this was measured on, suite runs that lost
// more than about 5% failed such checks, and runs below it passed them.
const NoisyShare = 0.05

// ticksPerSecond is USER_HZ, the unit of /proc/stat: 100 on Linux.
const ticksPerSecond = 100

// Meter measures the steal from Start on.
type Meter struct {
	startTicks int64
	startAt    time.Time
	ok         bool
}

// Start begins a measurement. Where /proc/stat has no steal column, the meter
// reads zero.
func Start() Meter {
	ticks, err := stealTicks()
	return Meter{startTicks: ticks, startAt: time.Now(), ok: err == nil}
}

// Reading is the steal over a measurement.
type Reading struct {
	Stolen  time.Duration // CPU time the hypervisor took, all CPUs together
	Elapsed time.Duration
	Share   float64 // Stolen / (Elapsed × CPUs)
}

// Noisy reports whether the host took more than NoisyShare of the machine.
func (r Reading) Noisy() bool { return r.Share > NoisyShare }

func (r Reading) String() string {
	return fmt.Sprintf("the hypervisor took %.1f s of CPU time in %.1f s (%.1f%% of %d CPUs)",
		r.Stolen.Seconds(), r.Elapsed.Seconds(), 100*r.Share, runtime.NumCPU())
}

// TB is what Check and SkipIfNotCheckable need of a test (*testing.T has it).
type TB interface {
	Helper()
	Log(args ...any)
	Error(args ...any)
	Skipf(format string, args ...any)
}

// Check reports a test's timing problems on t: each as an error when the host was
// quiet, or, when it was Noisy, logged as not checkable here. It returns how many were
// not checkable. Problems that are not a matter of timing do not belong here.
func (r Reading) Check(t TB, problems []string) (notCheckable int) {
	t.Helper()
	for _, problem := range problems {
		if r.Noisy() {
			t.Log("not checkable on this host: " + problem)
			notCheckable++
		} else {
			t.Error(problem)
		}
	}
	return notCheckable
}

// SkipIfNotCheckable skips t, naming the steal, when Check found timing problems not
// checkable here (a failure reported before still fails the test).
func (r Reading) SkipIfNotCheckable(t TB, notCheckable int) {
	t.Helper()
	if notCheckable > 0 {
		t.Skipf("%d timing checks missed while %s: not checkable on this host", notCheckable, r)
	}
}

// Read returns the steal since Start.
func (m Meter) Read() Reading {
	elapsed := time.Since(m.startAt)
	r := Reading{Elapsed: elapsed}
	if !m.ok {
		return r
	}
	ticks, err := stealTicks()
	if err != nil {
		return r
	}
	r.Stolen = time.Duration(ticks-m.startTicks) * time.Second / ticksPerSecond
	if cpuTime := elapsed * time.Duration(runtime.NumCPU()); cpuTime > 0 {
		r.Share = float64(r.Stolen) / float64(cpuTime)
	}
	return r
}

// stealTicks reads the steal column of the "cpu" line of /proc/stat.
func stealTicks() (int64, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 8 && fields[0] == "cpu" {
			return strconv.ParseInt(fields[8], 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no steal column in /proc/stat")
}
