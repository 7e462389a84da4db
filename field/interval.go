package field

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"github.com/slowstart/slowstart/stats"
	"github.com/slowstart/slowstart/tune"
)

// readMarks reads tune's journal and keeps the marks not seen yet, in the
// store too.
func (r *runner) readMarks(ctx context.Context) error {
	if r.opts.MarksFile == "-" {
		return nil
	}
	marks, err := tune.ReadMarks(r.opts.MarksFile)
	if err != nil {
		switch {
		case r.src != nil:
			r.opts.Logger.Warn("reading the marks journal", "err", err)
		case r.opts.MarksFile == tune.DefaultMarksFile && errors.Is(err, fs.ErrPermission):
			// The default journal belongs to root: without root, tune's changes
			// are not marked, and field runs all the same.
			fmt.Fprintf(r.opts.Status, "marks: %v: changes made by slowstart tune will not be marked (give a readable --marks, or --marks -)\n", err)
			r.opts.MarksFile = "-"
		default:
			return &FileError{fmt.Errorf("%w (give another with --marks, or --marks - for none)", err)}
		}
		return nil
	}
	var fresh []tune.Mark
	for _, m := range marks {
		if r.markKeys[m.Key()] {
			continue
		}
		r.markKeys[m.Key()] = true
		fresh = append(fresh, m)
		if !m.Time.Before(r.from) {
			r.marks = append(r.marks, m)
			if r.src != nil {
				fmt.Fprintf(r.opts.Status, "mark: %s\n", MarkText(m))
			}
		}
	}
	if r.store != nil && len(fresh) > 0 {
		if _, err := r.store.AddMarks(ctx, fresh); err != nil {
			r.storeErrors++
			r.opts.Logger.Warn("recording marks", "err", err)
		}
	}
	return nil
}

// MarkText says what a mark changed, in one line.
func MarkText(m tune.Mark) string {
	what := ""
	for _, rt := range m.Routes {
		if rt.InitCwndBefore != rt.InitCwndAfter {
			what = fmt.Sprintf("initcwnd %s → %s", windowText(rt.InitCwndBefore), windowText(rt.InitCwndAfter))
			break
		}
	}
	if what == "" && len(m.Routes) > 0 {
		what = fmt.Sprintf("%d route(s)", len(m.Routes))
	}
	if len(m.Sysctls) > 0 {
		if what != "" {
			what += ", "
		}
		what += fmt.Sprintf("%d sysctl(s)", len(m.Sysctls))
	}
	where := ""
	if m.Netns != "" {
		where = " in netns " + m.Netns
	}
	return fmt.Sprintf("%s tune %s%s: %s", m.Time.Local().Format("2006-01-02 15:04:05"), m.Action, where, what)
}

func windowText(w int) string {
	if w == 0 {
		return "default"
	}
	return fmt.Sprint(w)
}

// writeInterval closes the interval under way at now: its statistics go to
// the store, its line to the output.
func (r *runner) writeInterval(ctx context.Context, now time.Time) {
	r.mu.Lock()
	nets := r.agg.takeInterval()
	pooled := r.agg.pooled - r.pooledBefore
	r.pooledBefore = r.agg.pooled
	r.mu.Unlock()
	cur := r.statusCopy()
	prev := r.prev
	r.prev = cur
	iv := &interval{start: r.intervalAt, end: now, networks: nets, status: intervalStatus{
		source: r.source, followed: cur.followed - prev.followed, measured: cur.measured - prev.measured,
		noRequest: cur.noRequest - prev.noRequest, noResponse: cur.noResponse - prev.noResponse,
		eventsRead: cur.eventsRead - prev.eventsRead, eventsLost: cur.eventsLost - prev.eventsLost,
		notFollowed: cur.notFollowed - prev.notFollowed, pooled: pooled, packetsDropped: cur.packetsDropped - prev.packetsDropped,
	}}
	r.intervalAt = now
	iv.samples = r.intervalSamples(nets)
	if r.store != nil {
		if err := r.store.writeInterval(ctx, iv, r.opts.Retain); err != nil {
			r.storeErrors++
			fmt.Fprintf(r.opts.Status, "store: %v (%d interval(s) not written so far)\n", err, r.storeErrors)
		}
	}
	r.readMarks(ctx)
	if r.opts.Format == FormatText {
		r.printInterval(iv)
	}
}

// intervalSamples picks the connections the store keeps of an interval: each
// network's sample, thinned to SamplesPerInterval in all, each row weighted
// by the connections of its network it stands for.
func (r *runner) intervalSamples(nets map[string]*netStats) []storedSample {
	names := make([]string, 0, len(nets))
	total := 0
	for name, n := range nets {
		if name == AllNetworks || len(n.reservoir) == 0 {
			continue
		}
		names = append(names, name)
		total += len(n.reservoir)
	}
	sort.Strings(names)
	keep := total
	if keep > r.opts.SamplesPerInterval {
		keep = r.opts.SamplesPerInterval
	}
	// Which rows stay: all, or keep of them at random.
	chosen := make([]bool, total)
	if keep == total {
		for i := range chosen {
			chosen[i] = true
		}
	} else {
		for _, i := range r.rng.Perm(total)[:keep] {
			chosen[i] = true
		}
	}
	out := make([]storedSample, 0, keep)
	i := 0
	for _, name := range names {
		n := nets[name]
		first := len(out)
		for _, s := range n.reservoir {
			if chosen[i] {
				out = append(out, storedSample{network: name, sample: s})
			}
			i++
		}
		if kept := len(out) - first; kept > 0 {
			w := float64(n.Connections) / float64(kept)
			for j := first; j < len(out); j++ {
				out[j].weight = w
			}
		}
	}
	return out
}

// printInterval writes an interval's line.
func (r *runner) printInterval(iv *interval) {
	all := iv.networks[AllNetworks]
	if r.lines == 0 {
		fmt.Fprintf(r.opts.Out, "%-8s  %7s  %10s  %14s  %11s  %9s  %s\n", "time", "conns", "rtt p50", "round trips", "window-lim", "cut short", "not seen")
	}
	r.lines++
	var rtts, rounds []float64
	for _, x := range all.reservoir {
		if x.rttUs > 0 {
			rtts = append(rtts, float64(x.rttUs)/1e3)
		}
		if x.roundTrips >= 0 {
			rounds = append(rounds, float64(x.roundTrips))
		}
	}
	rtt := "-"
	if len(rtts) > 0 {
		rtt = fmt.Sprintf("%.3g ms", stats.Median(rtts))
	}
	roundTrips := "-"
	if len(rounds) > 0 {
		roundTrips = fmt.Sprintf("p50 %.3g mean %.2f", stats.Median(rounds), all.RoundTrips.Sum/float64(all.RoundTrips.N))
	}
	limited := "-"
	if all.Connections > 0 {
		limited = fmt.Sprintf("%.0f%%", 100*float64(all.windowLimited())/float64(all.Connections))
	}
	st := iv.status
	notSeen := "0"
	if lost := st.eventsLost + st.notFollowed + st.packetsDropped; lost > 0 {
		notSeen = fmt.Sprintf("%d events lost, %d conns not followed, %d packets dropped", st.eventsLost, st.notFollowed, st.packetsDropped)
	}
	fmt.Fprintf(r.opts.Out, "%-8s  %7d  %10s  %14s  %11s  %9d  %s\n", iv.end.Local().Format("15:04:05"), all.Connections,
		rtt, roundTrips, limited, all.CutShort, notSeen)
}

// summary is the run's Summary until now.
func (r *runner) summary(now time.Time) *Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.statusCopy()
	s := r.newSummary(r.from, now)
	s.Source, s.SourceNote = r.source, r.note
	s.Counts = Counts{Followed: st.followed, Measured: st.measured, NoRequest: st.noRequest, NoResponse: st.noResponse}
	s.Drops = Drops{EventsLost: st.eventsLost, EventsRead: st.eventsRead, ConnectionsNotFollowed: st.notFollowed,
		ConnectionsPooled: r.agg.pooled, PacketsDropped: st.packetsDropped, StoreErrors: r.storeErrors}
	s.Marks = append(s.Marks, r.marks...)
	s.All = summarize("", r.agg.total, r.agg.total.reservoir, nil, r.opts.IWs, r.ci())
	names := make([]string, 0, len(r.agg.networks))
	for name := range r.agg.networks {
		names = append(names, name)
	}
	sortNetworks(names, func(name string) uint64 { return r.agg.networks[name].Connections })
	if len(names) > r.opts.Top {
		s.NetworksOmitted = len(names) - r.opts.Top
		names = names[:r.opts.Top]
	}
	for _, name := range names {
		n := r.agg.networks[name]
		s.Networks = append(s.Networks, summarize(name, n, n.reservoir, nil, r.opts.IWs, r.ci()))
	}
	s.Notes = notes(s)
	return s
}

func (r *runner) ci() ciOptions {
	c := defaultCI
	c.seed = r.opts.Seed
	return c
}

func (r *runner) newSummary(from, to time.Time) *Summary {
	return &Summary{Schema: Schema, Report: ReportSummary, Ports: portsInts(r.opts.Ports), From: from.UTC(), To: to.UTC(), Grouping: r.grouping(),
		Prefix4: r.opts.Prefix4, Prefix6: r.opts.Prefix6, IWs: r.opts.IWs, Networks: []NetworkSummary{},
		Marks: []tune.Mark{}, Notes: []string{}}
}

func portsInts(ports []uint16) []int {
	out := make([]int, len(ports))
	for i, p := range ports {
		out[i] = int(p)
	}
	return out
}

// sortNetworks orders names by connections, most first, then by name.
func sortNetworks(names []string, conns func(string) uint64) {
	sort.Slice(names, func(i, j int) bool {
		a, b := conns(names[i]), conns(names[j])
		if a != b {
			return a > b
		}
		return names[i] < names[j]
	})
}

// notes are the sentences a summary's reader should not miss.
func notes(s *Summary) []string {
	out := []string{}
	if s.SourceNote != "" {
		out = append(out, s.SourceNote+".")
	}
	if s.Source == SourcePackets {
		out = append(out, "From packets: the kernel's congestion window is not known (cwnd_segments 0), and response times are estimated from the server's side.")
	}
	if d := s.Drops; d.EventsLost > 0 {
		out = append(out, fmt.Sprintf("%d kernel events were lost (the ring buffer was full: field fell behind); the readings of their connections may be wrong. Give a larger --ring.", d.EventsLost))
	}
	if d := s.Drops; d.ConnectionsNotFollowed > 0 {
		out = append(out, fmt.Sprintf("%d new connections were not followed: the table of open connections was full (--max-conns).", d.ConnectionsNotFollowed))
	}
	if d := s.Drops; d.ConnectionsPooled > 0 {
		out = append(out, fmt.Sprintf("%d connections were counted under %q: the table of networks was full (--max-networks).", d.ConnectionsPooled, OtherNetworks))
	}
	if d := s.Drops; d.PacketsDropped > 0 {
		out = append(out, fmt.Sprintf("The kernel dropped %d packets from the capture: some connections were read with holes.", d.PacketsDropped))
	}
	if d := s.Drops; d.StoreErrors > 0 {
		out = append(out, fmt.Sprintf("%d interval(s) could not be written to the store.", d.StoreErrors))
	}
	if cut := s.All.CutShort; cut > 0 {
		server := s.All.cutServerClosed()
		text := fmt.Sprintf("%d of %d first responses were not seen to their end; their round trips are left out, not counted as fewer.", cut, s.All.Connections)
		if server > 0 {
			text += fmt.Sprintf(" %d of them because the server closed the connection right after writing: the kernel reports no ACK once a socket has closed its side (Connection: close), so the tail of those responses is invisible.", server)
		}
		out = append(out, text)
	}
	return out
}

// finish writes the summary as the format asks.
func (r *runner) finish(s *Summary) error {
	switch r.opts.Format {
	case FormatJSON:
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		_, err = r.opts.Out.Write(append(b, '\n'))
		return err
	case FormatJSONL:
		if r.jsonErr == nil {
			r.jsonErr = r.jsonl.Flush()
		}
		return r.jsonErr
	}
	return WriteText(r.opts.Out, s)
}
