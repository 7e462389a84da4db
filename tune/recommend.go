package tune

import (
	"fmt"
	"slices"
	"strings"

	"github.com/slowstart/slowstart/model"
)

// KernelDefaultInitCwnd is Linux's initial congestion window when a route sets none.
const KernelDefaultInitCwnd = 10

// RecommendedInitCwnd is the window Recommend proposes for a route with less.
const RecommendedInitCwnd = 32

// Page is the response Recommend prices its advice with.
type Page struct {
	SizeBytes int64
	RTTNs     int64
	// Progress, when set, is told how far the pricing is: bytes of responses
	// simulated, done of total (the same total on every call). A large page
	// takes seconds per window priced.
	Progress func(doneBytes, totalBytes int64)
}

// Recommendation is one piece of advice.
type Recommendation struct {
	Subject string `json:"subject"` // a route or a sysctl
	Reason  string `json:"reason"`
	Action  string `json:"action,omitempty"` // a command that does it
	// SavingMs is the time model.Simulate predicts the change saves on the
	// page (0 when not priced).
	SavingMs float64 `json:"saving_ms,omitempty"`
}

// Recommend turns a state into advice, pricing initial-window changes on page
// with model.Simulate: each window the advice needs is simulated once.
func Recommend(state *State, page Page) ([]Recommendation, error) {
	// A first pass finds the windows to price (the advice asks for the same
	// ones whatever the prices), a second gives the advice with their prices.
	var windows []int
	if _, err := recommend(state, page, func(iw int) (model.Result, error) {
		if !slices.Contains(windows, iw) {
			windows = append(windows, iw)
		}
		return model.Result{}, nil
	}); err != nil {
		return nil, err
	}
	priced := map[int]model.Result{}
	work := model.SimulationBytes(model.Params{RTTNs: page.RTTNs, SizeBytes: page.SizeBytes})
	total := int64(len(windows)) * work
	for i, iw := range windows {
		var report func(int64)
		if page.Progress != nil {
			before := int64(i) * work
			report = func(done int64) { page.Progress(before+done, total) }
		}
		res, err := model.SimulateProgress(model.Params{RTTNs: page.RTTNs, SizeBytes: page.SizeBytes, IW: iw}, report)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		priced[iw] = res
	}
	return recommend(state, page, func(iw int) (model.Result, error) { return priced[iw], nil })
}

// recommend gives the advice, with simulate pricing a window.
func recommend(state *State, page Page, simulate func(iw int) (model.Result, error)) ([]Recommendation, error) {
	var recs []Recommendation
	netnsFlag := ""
	if state.Netns != "" {
		netnsFlag = " --netns " + state.Netns
	}
	defaults := 0
	isShadowed := shadowed(state.Routes)
	for i, r := range state.Routes {
		if !configurable(r) || !r.IsDefault() || isShadowed[i] {
			continue
		}
		defaults++
		iw, set := r.Metric("initcwnd")
		current := int(iw)
		what := fmt.Sprintf("initcwnd %d", current)
		if !set || current == 0 {
			current = KernelDefaultInitCwnd
			what = fmt.Sprintf("no initcwnd (kernel default %d)", KernelDefaultInitCwnd)
		}
		switch {
		case current > MaxWindow:
			recs = append(recs, Recommendation{Subject: r.String(), Reason: fmt.Sprintf(
				"initcwnd %d is above %d segments: every new connection bursts %d KB into a path it knows nothing about; shallow buffers will drop it",
				current, MaxWindow, current*model.DefaultMSS/1000)})
			continue
		case current >= RecommendedInitCwnd:
			continue
		}
		now, err := simulate(current)
		if err != nil {
			return nil, err
		}
		better, err := simulate(RecommendedInitCwnd)
		if err != nil {
			return nil, err
		}
		saving := now.LastByteMs - better.LastByteMs
		if now.RoundTrips.HTTP <= better.RoundTrips.HTTP || saving < 1 {
			continue // the page fits either way
		}
		recs = append(recs, Recommendation{
			Subject: r.String(),
			Reason: fmt.Sprintf("%s route has %s: a %s page at %s takes %d data rounds (%.0f ms to the last byte); at initcwnd %d, %d (%.0f ms): saves %.0f ms",
				routeWhich(r), what, sizeText(page.SizeBytes), rttText(page.RTTNs), now.RoundTrips.HTTP, now.LastByteMs,
				RecommendedInitCwnd, better.RoundTrips.HTTP, better.LastByteMs, saving),
			Action:   fmt.Sprintf("slowstart tune apply --initcwnd %d --route %s%s", RecommendedInitCwnd, routeSelector(r), netnsFlag),
			SavingMs: saving,
		})
	}
	if defaults == 0 {
		recs = append(recs, Recommendation{Subject: "routes", Reason: "no default route: set initcwnd on the routes towards your users (--route PREFIX)"})
	}
	if state.Sysctl("net.ipv4.tcp_slow_start_after_idle") == "1" {
		rec := Recommendation{Subject: "net.ipv4.tcp_slow_start_after_idle=1",
			Reason: "tcp_slow_start_after_idle=1 resets the window of idle keep-alive connections (idle longer than one RTO) to the initial window, so the next response starts slow again",
			Action: "slowstart tune apply --slow-start-after-idle 0" + netnsFlag}
		if idle, err := simulate(KernelDefaultInitCwnd); err == nil {
			if open, err := simulate(openWindow(page.SizeBytes)); err == nil && idle.LastByteMs > open.LastByteMs {
				rec.SavingMs = idle.LastByteMs - open.LastByteMs
				rec.Reason += fmt.Sprintf(": a %s response after a pause takes %d rounds instead of %d, up to %.0f ms more",
					sizeText(page.SizeBytes), idle.RoundTrips.HTTP, open.RoundTrips.HTTP, rec.SavingMs)
			}
		}
		recs = append(recs, rec)
	}
	if state.Sysctl("net.ipv4.tcp_no_metrics_save") == "0" {
		recs = append(recs, Recommendation{Subject: "net.ipv4.tcp_no_metrics_save=0",
			Reason: "the kernel caches each destination's ssthresh and RTT when a connection closes and starts the next from them: one lossy connection can cut slow start short for a client's later visits, and measurements of a repeat visitor see a window other than a first visit's",
			Action: "slowstart tune apply --no-metrics-save 1" + netnsFlag})
	}
	return recs, nil
}

// openWindow is a window large enough for the page to go in one round.
func openWindow(sizeBytes int64) int {
	n := int((sizeBytes + model.DefaultMSS - 1) / model.DefaultMSS)
	return max(1, min(n, 1000))
}

func routeWhich(r Route) string {
	which := "default"
	if r.Family == "inet6" {
		which = "IPv6 default"
	}
	if r.Table != TableMain {
		which += " (table " + TableName(r.Table) + ")"
	}
	return which
}

func routeSelector(r Route) string {
	if r.IsDefault() {
		return RouteDefault
	}
	return r.dst.String()
}

func sizeText(bytes int64) string {
	if bytes >= 1000 && bytes%1000 == 0 {
		return fmt.Sprintf("%d KB", bytes/1000)
	}
	return fmt.Sprintf("%d-byte", bytes)
}

func rttText(ns int64) string {
	return strings.TrimSuffix(fmt.Sprintf("%.3f", float64(ns)/1e6), ".000") + " ms"
}
