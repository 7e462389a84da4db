package pageload

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/slowstart/slowstart/model"
	"github.com/slowstart/slowstart/report"
)

// The critical path to the first render (docs/browser.md):
//
//   - The first render waited for the document (and the redirects before it), for
//     every request the browser called render-blocking (stylesheets and scripts in
//     the head) that completed before the first contentful paint, for the parser-
//     blocking scripts in the body that did, and for the fonts that completed
//     before it.
//   - Each of them waited for a predecessor: of the others, the one that had got
//     furthest when it was issued (one that had completed, or its initiator still
//     arriving, such as the document whose first bytes named it).
//   - The critical path is the chain of predecessors back from the one that
//     completed last. Each step adds the handshake round trips of a connection
//     opened for it that the chain waited for, and the rounds of its response the
//     chain waited for: all of them for the last step, those that had begun to
//     arrive when the next step was issued for the others; and before its own,
//     the rounds of its connection that came after the chain reached it (other
//     responses it waited behind). On a connection the step before also used, it
//     counts the rounds after those already counted.

// criticalPath computes the page's critical path and what would shorten it.
func (b *builder) criticalPath() {
	cp := &b.page.CriticalPath
	cp.Steps, cp.Savings, cp.Notes = []Step{}, []Saving{}, []string{}
	doc := b.document()
	if doc == nil {
		cp.Notes = append(cp.Notes, "no document request: no critical path")
		return
	}
	if rtt := rttOf(doc); rtt > 0 {
		cp.RTTMs = round3(rtt / 1e6)
	}
	blocking := b.blockingSet(doc)
	// The blocking requests in a slice, in the page's order (a map's order
	// would make ties fall by chance).
	var blockers []*reqState
	for _, rs := range b.reqs {
		if blocking[rs] {
			blockers = append(blockers, rs)
		}
	}
	var last *reqState
	for _, rs := range blockers {
		if rs.lastNs != 0 && (last == nil || rs.lastNs > last.lastNs) {
			last = rs
		}
	}
	if last == nil {
		cp.Notes = append(cp.Notes, "no request the first render waited for has a known end: no critical path")
		return
	}
	for _, rs := range blockers {
		rs.out.Blocking = true
	}
	// Walk back from the last one, at most maxCriticalSteps.
	chain := []*reqState{last}
	reached := map[*reqState]int64{}
	for cur := last; cur != doc; {
		prev, at := b.predecessor(cur, blockers)
		if prev == nil || len(chain) > len(b.reqs) {
			break
		}
		if len(chain) == maxCriticalSteps {
			cp.Notes = append(cp.Notes, fmt.Sprintf("the critical path was followed back %d steps and no further", maxCriticalSteps))
			break
		}
		reached[prev] = at
		chain = append(chain, prev)
		cur = prev
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	if chain[0] != doc {
		cp.Notes = append(cp.Notes, fmt.Sprintf("the chain does not lead back to the document: it starts at %s", chain[0].in.URL))
	}

	var prevStep *Step
	var prev *reqState
	for i, rs := range chain {
		rs.out.Critical = true
		step := Step{Request: rs.out.Index, Connection: rs.out.Connection, Why: why(rs, i == 0)}
		startNs := rs.startNs
		if prev != nil {
			startNs = reached[prev]
		}
		step.StartMs = b.ms(startNs)
		step.HandshakeRoundTrips = b.handshakeWaited(rs, prev, startNs)
		until := int64(math.MaxInt64)
		if i+1 < len(chain) {
			if at := reached[rs]; rs.lastNs == 0 || at < rs.lastNs {
				until = at
				step.Partial = true
			}
		}
		first, lastRound, endNs := b.roundsWaited(rs, until)
		if first > 0 && prev != nil {
			// Rounds of its connection that came after the chain reached it but
			// before its response: it waited for them too (behind other responses).
			first = min(first, rs.conn.firstDataRoundAfter(startNs))
		}
		if prevStep != nil && prev.conn != nil && prev.conn == rs.conn && prevStep.LastRound > 0 {
			first = prevStep.LastRound + 1
		}
		if first > 0 && lastRound >= first {
			step.FirstRound, step.LastRound = first, lastRound
			step.DataRoundTrips = lastRound - first + 1
		} else if prevStep != nil && prev.conn == rs.conn {
			step.LastRound = prevStep.LastRound // carried whole by rounds already counted
		}
		if !step.Partial {
			endNs = rs.lastNs
		}
		step.EndMs = b.ms(endNs)
		if prevStep != nil {
			step.BrowserMs = round3(max(b.ms(rs.startNs)-prevStep.EndMs, 0))
		}
		step.RoundTrips = step.HandshakeRoundTrips + step.DataRoundTrips
		cp.RoundTrips += step.RoundTrips
		cp.Steps = append(cp.Steps, step)
		prevStep, prev = &cp.Steps[len(cp.Steps)-1], rs
	}
	cp.Ms = b.ms(last.lastNs)
	if fcp := b.page.FirstContentfulPaintMs; fcp == nil {
		cp.Notes = append(cp.Notes, "the browser reported no first contentful paint: the render-blocking requests are taken as the browser named them, and the fonts the stylesheets named")
	}
	if doc.conn != nil && ((cp.RTTMs > 0 && cp.RTTMs < localPathMaxRTTMs) || doc.conn.c.MSS > localPathMinMSS) {
		cp.Notes = append(cp.Notes, fmt.Sprintf("the path is local (round trip %.3f ms, segments of %d bytes): its rounds say nothing of a real network path, and no change of window or order would matter on it; load the page over the network, or from slowstart lab page", cp.RTTMs, doc.conn.c.MSS))
		return
	}
	b.savings(chain, doc)
}

// maxCriticalSteps bounds the critical path: a page's has a handful of steps,
// and each step back weighs every blocking request.
const maxCriticalSteps = 256

// A path this short, or segments this large (loopback's 64 KB MTU), are local
// (as the probe's diagnoses judge them).
const (
	localPathMaxRTTMs = 1.0
	localPathMinMSS   = 9000
)

// document is the page's navigation: the first request of type document (the
// first hop of its redirects), else the first request.
func (b *builder) document() *reqState {
	for _, rs := range b.reqs {
		if rs.in.Type == TypeDocument {
			return rs
		}
	}
	if len(b.reqs) > 0 {
		return b.reqs[0]
	}
	return nil
}

// blockingSet is what the first render waited for (see the comment at the top).
func (b *builder) blockingSet(doc *reqState) map[*reqState]bool {
	set := map[*reqState]bool{}
	fcp := int64(0)
	if b.in.Timings.FirstContentfulPaintNs != 0 {
		fcp = b.in.Timings.FirstContentfulPaintNs + b.in.ClockOffsetNs
	}
	tolerance := int64(AgreementToleranceMs * 1e6)
	doneBeforePaint := func(rs *reqState) bool {
		return fcp == 0 || (rs.lastNs != 0 && rs.lastNs <= fcp+tolerance)
	}
	// The document and its redirects: each hop's next is the first request it
	// initiated at the URL it redirected to (found in one pass, not one per hop).
	nextHop := map[*reqState]*reqState{}
	for _, other := range b.reqs {
		if i := other.initiator; i != nil && i.in.RedirectTo != "" && other.in.URL == i.in.RedirectTo && nextHop[i] == nil {
			nextHop[i] = other
		}
	}
	for rs := doc; rs != nil; rs = nextHop[rs] {
		set[rs] = true
	}
	stylesheets := map[*reqState]bool{}
	for _, rs := range b.reqs {
		if rs.in.FromCache || rs.in.Failed != "" && rs.lastNs == 0 {
			continue
		}
		switch {
		case rs.in.RenderBlocking == RenderBlocking && doneBeforePaint(rs):
			set[rs] = true
		case rs.in.RenderBlocking == RenderInBodyParser && fcp != 0 && doneBeforePaint(rs):
			set[rs] = true
		case rs.in.RenderBlocking == "" && fcp == 0 && rs.initiator != nil && set[rs.initiator] &&
			(rs.in.Type == TypeStylesheet || rs.in.Type == TypeScript) && b.in.Source == SourceHAR:
			// A HAR without render-blocking data: the document's stylesheets and
			// scripts, as a browser without async or defer would treat them.
			set[rs] = true
		}
		if set[rs] && rs.in.Type == TypeStylesheet {
			stylesheets[rs] = true
		}
	}
	for _, rs := range b.reqs {
		if rs.in.Type != TypeFont || rs.in.FromCache {
			continue
		}
		if fcp != 0 && doneBeforePaint(rs) || fcp == 0 && rs.initiator != nil && stylesheets[rs.initiator] {
			set[rs] = true
		}
	}
	return set
}

// predecessor is what rs waited for: of the blocking requests, the one that had
// got furthest when rs was issued: completed before it, or its initiator still
// arriving. It returns that request and how far it had got (capture clock).
func (b *builder) predecessor(rs *reqState, blocking []*reqState) (*reqState, int64) {
	var best *reqState
	bestAt := int64(math.MinInt64)
	for _, q := range blocking {
		if q == rs || q.startNs > rs.startNs || (q.startNs == rs.startNs && q.out.Index > rs.out.Index) {
			continue
		}
		var at int64
		switch {
		case q.lastNs != 0 && q.lastNs <= rs.startNs:
			at = q.lastNs
		case q == rs.initiator:
			at = rs.startNs
		default:
			continue
		}
		if at > bestAt || (at == bestAt && q == rs.initiator) {
			best, bestAt = q, at
		}
	}
	if best == nil && rs.initiator != nil && rs.initiator.startNs <= rs.startNs {
		return rs.initiator, rs.startNs
	}
	return best, bestAt
}

// why names a step's reason to be on the path.
func why(rs *reqState, root bool) string {
	switch {
	case rs.in.RedirectTo != "":
		return "a redirect"
	case rs.in.Type == TypeDocument:
		return "the document"
	case rs.in.Type == TypeFont:
		return "a font the first render needed"
	case rs.in.RenderBlocking == RenderInBodyParser:
		return "a parser-blocking script in the body"
	case rs.in.Type == TypeStylesheet:
		return "a render-blocking stylesheet"
	case rs.in.Type == TypeScript:
		return "a render-blocking script"
	case root:
		return "the first request"
	}
	return "render-blocking " + rs.in.Type
}

// rttOf is the handshake RTT of the request's connection, in ns (0 unknown).
func rttOf(rs *reqState) float64 {
	if rs.conn == nil {
		return 0
	}
	c := rs.conn.c
	if c.HandshakeRTTMs != nil {
		return *c.HandshakeRTTMs * 1e6
	}
	return c.MinRTTMs * 1e6
}

// handshakeWaited counts the TCP and TLS round trips of rs's connection the chain
// waited for: all of them when the connection was opened for rs after the chain
// reached it, none on a reused connection, and those still to come when the chain
// reached rs on a connection opened before (a preconnect, or one opened for
// another request).
func (b *builder) handshakeWaited(rs, prev *reqState, reachedNs int64) int {
	if rs.conn == nil || !rs.out.NewConnection {
		return 0
	}
	c := rs.conn.c
	total := c.RoundTrips.TCP + c.RoundTrips.TLS
	if prev == nil || rs.conn.startNs >= reachedNs-int64(1e6) {
		return total
	}
	ready := rs.conn.readyNs()
	if rs.sentNs != 0 && (ready == 0 || rs.sentNs < ready) {
		ready = rs.sentNs
	}
	rtt := rttOf(rs)
	if ready == 0 || ready <= reachedNs || rtt <= 0 {
		return 0
	}
	return min(total, int(math.Ceil(float64(ready-reachedNs)/rtt-0.25)))
}

// firstDataRoundAfter is the index of the connection's first round, not of the
// TLS handshake, that began to arrive after t (capture clock); a large number
// when none did.
func (cs *connState) firstDataRoundAfter(t int64) int {
	for _, r := range cs.c.Rounds {
		if r.Phase != report.PhaseTLS && cs.startNs+int64(r.StartMs*1e6) > t {
			return r.Index
		}
	}
	return math.MaxInt
}

// readyNs is when the connection could carry a request: the end of the server's
// last TLS round (the client's Finished and first request go at once), else the
// TCP handshake's end; 0 when unknown.
func (cs *connState) readyNs() int64 {
	c := cs.c
	ready := int64(0)
	if c.HandshakeRTTMs != nil {
		ready = cs.startNs + int64(*c.HandshakeRTTMs*1e6)
	}
	for _, r := range c.Rounds {
		if r.Phase == report.PhaseTLS {
			ready = cs.startNs + int64(r.EndMs*1e6)
		}
	}
	return ready
}

// roundsWaited gives the first and last of rs's rounds that had begun to arrive by
// until (capture clock), and when the last of them ended.
func (b *builder) roundsWaited(rs *reqState, until int64) (first, last int, endNs int64) {
	if rs.conn == nil || len(rs.rounds) == 0 {
		return 0, 0, rs.lastNs
	}
	c := rs.conn.c
	rounds := append([]int(nil), rs.rounds...)
	sort.Ints(rounds)
	for _, idx := range rounds {
		if idx < 1 || idx > len(c.Rounds) {
			continue
		}
		r := c.Rounds[idx-1]
		start := rs.conn.startNs + int64(r.StartMs*1e6)
		if first != 0 && start > until {
			break
		}
		if first == 0 {
			first = idx
		}
		last = idx
		endNs = rs.conn.startNs + int64(r.EndMs*1e6)
	}
	return first, last, endNs
}

// alternativeIWs are the initial windows a saving compares with: RFC 6928's and
// what large CDNs use.
var alternativeIWs = [...]int{10, 32}

// savings says what would have shortened the critical path, with its cost.
func (b *builder) savings(chain []*reqState, doc *reqState) {
	cp := &b.page.CriticalPath
	rtt := cp.RTTMs
	add := func(kind string, rs *reqState, rts int, format string, args ...any) {
		if rts <= 0 {
			return
		}
		cp.Savings = append(cp.Savings, Saving{Kind: kind, Request: rs.out.Index, Text: fmt.Sprintf(format, args...),
			CostRoundTrips: rts, CostMs: round3(float64(rts) * rtt)})
	}
	docHost := doc.out.Host
	docFirst := doc.firstNs
	for i, rs := range chain {
		step := cp.Steps[i]
		c := (*report.Connection)(nil)
		if rs.conn != nil {
			c = rs.conn.c
		}
		name := shortName(rs)
		if c != nil && step.HandshakeRoundTrips > 0 && c.TLS != nil {
			base := 2
			if c.TLS.Version == "1.3" {
				base = 1
			}
			if extra := c.TLS.HandshakeRoundTrips - base; extra > 0 {
				add(SavingCertificateChain, rs, extra, "the TLS flight of %s (%s) did not fit in its initial window: +%s on the connection of %s; a shorter certificate chain (ECDSA, fewer intermediates) or a larger initial window saves it",
					rs.out.Host, report.Size(int64(c.TLS.ServerFlightBytes)), roundTripsText(extra), name)
			}
		}
		if i > 0 && step.HandshakeRoundTrips > 0 && rs.out.Host != docHost && docFirst != 0 {
			// A preconnect in the document's head opens the connection when the
			// document's first bytes arrive.
			if r := rttOf(rs); r > 0 {
				early := int(math.Floor(float64(rs.startNs-docFirst)/r + 0.25))
				if n := min(early, step.HandshakeRoundTrips); n > 0 {
					add(SavingPreconnect, rs, n, "<link rel=\"preconnect\" href=\"%s\"> in the document's head would have opened the connection for %s %s earlier, while the chain waited",
						origin(rs.in.URL), name, roundTripsText(n))
				}
			}
		}
		if c != nil && step.DataRoundTrips > 1 && rs.out.NewConnection && c.MSS > 0 && c.InitialWindow != nil && c.InitialWindow.Segments > 0 && step.FirstRound == firstDataRound(c) {
			current := c.InitialWindow.Segments
			if c.InitialWindow.Verdict == report.VerdictRange && c.InitialWindow.SegmentsMax > current {
				current = c.InitialWindow.SegmentsMax // it may already be that large
			}
			bytes := cumulativeBytes(c, step.FirstRound, step.LastRound)
			var better []string
			best := step.DataRoundTrips
			for _, alt := range alternativeIWs {
				if alt <= current {
					continue
				}
				if n := model.RoundsNeeded(bytes, alt, c.MSS); n < step.DataRoundTrips {
					better = append(better, fmt.Sprintf("%d at IW %d", n, alt))
					best = min(best, n)
				}
			}
			if len(better) > 0 {
				at := fmt.Sprintf("IW %d", current)
				switch c.InitialWindow.Verdict {
				case report.VerdictExact:
				case report.VerdictRange:
					at = fmt.Sprintf("an IW of %d to %d", c.InitialWindow.Segments, current)
				default:
					at = fmt.Sprintf("an IW of at least %d", current)
				}
				add(SavingInitialWindow, rs, step.DataRoundTrips-best, "%s took %s on %s at %s; %s: a larger initial window on %s (ip route change ... initcwnd %d) saves %s",
					name, plural(step.DataRoundTrips, "round", "rounds"), rs.out.Host, at, strings.Join(better, ", "), rs.out.Host, alternativeIWs[len(alternativeIWs)-1], roundTripsText(step.DataRoundTrips-best))
			}
		}
		if i >= 2 {
			// Requested late: only after another request of the chain was read.
			between := 0
			for _, s := range cp.Steps[1:i] {
				between += s.RoundTrips
			}
			if between > 0 {
				as := map[string]string{TypeFont: "font", TypeStylesheet: "style", TypeScript: "script", TypeImage: "image"}[rs.in.Type]
				if as == "" {
					as = "fetch"
				}
				by := "after " + shortNameOf(chain[i-1])
				if rs.initiator != nil && rs.initiator != doc {
					by = fmt.Sprintf("by %s, after %s", shortNameOf(rs.initiator), shortNameOf(chain[i-1]))
				}
				add(SavingChain, rs, between, "%s was requested only %s: <link rel=\"preload\" href=\"%s\" as=\"%s\"%s> in the document's head requests it with the document's first bytes, saving the %s of the chain between",
					name, by, rs.out.Path, as, map[bool]string{true: " crossorigin"}[rs.in.Type == TypeFont], roundTripsText(between))
			}
		}
		if i > 0 && (rs.in.Type == TypeStylesheet || rs.in.Type == TypeScript) && doc.conn != nil && step.RoundTrips > 0 {
			dc := doc.conn.c
			if dc.MSS > 0 && dc.InitialWindow != nil && dc.InitialWindow.Segments > 0 && rs.out.Bytes > 0 && doc.out.Bytes > 0 {
				iw := dc.InitialWindow.Segments
				at := fmt.Sprintf("IW %d", iw)
				switch dc.InitialWindow.Verdict {
				case report.VerdictExact:
				case report.VerdictRange:
					iw = max(iw, dc.InitialWindow.SegmentsMax)
					at = fmt.Sprintf("an IW of %d to %d", dc.InitialWindow.Segments, iw)
				default:
					at = fmt.Sprintf("an IW of at least %d", iw)
				}
				now := model.RoundsNeeded(doc.out.Bytes, iw, dc.MSS)
				inlined := model.RoundsNeeded(doc.out.Bytes+rs.out.Bytes, iw, dc.MSS)
				adds := "would arrive within the document's " + plural(now, "round", "rounds")
				if inlined > now {
					adds = fmt.Sprintf("would add %s to the document's %s", plural(inlined-now, "round", "rounds"), plural(now, "round", "rounds"))
				}
				if saved := step.RoundTrips - (inlined - now); saved > 0 {
					add(SavingInline, rs, saved, "%s (%s) inlined in the document %s at %s, instead of the %s it cost on its own",
						name, report.Size(rs.out.Bytes), adds, at, roundTripsText(step.RoundTrips))
				}
			}
		}
	}
}

// firstDataRound is the index of the connection's first round that is not of the
// TLS handshake.
func firstDataRound(c *report.Connection) int {
	for _, r := range c.Rounds {
		if r.Phase != report.PhaseTLS {
			return r.Index
		}
	}
	return 0
}

// cumulativeBytes sums the bytes of rounds first..last.
func cumulativeBytes(c *report.Connection, first, last int) int64 {
	var n int64
	for _, r := range c.Rounds {
		if r.Index >= first && r.Index <= last {
			n += int64(r.Bytes)
		}
	}
	return n
}

func origin(rawURL string) string {
	i := strings.Index(rawURL, "://")
	if i < 0 {
		return rawURL
	}
	if j := strings.IndexByte(rawURL[i+3:], '/'); j >= 0 {
		return rawURL[:i+3+j]
	}
	return rawURL
}

// shortName names a request in a sentence: its kind and path.
func shortName(rs *reqState) string { return shortNameOf(rs) }

func shortNameOf(rs *reqState) string {
	kind := rs.in.Type
	if kind == "" {
		kind = "request"
	}
	if rs.in.Type == TypeDocument {
		kind = "the document"
	}
	return kind + " " + rs.out.Path
}

func roundTripsText(n int) string { return plural(n, "round trip", "round trips") }

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
