package link

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// TraceOpportunityBytes is what one line of a mahimahi trace can carry: 1504 bytes, the
// largest packet mahimahi's TUN devices pass (a 1500-byte MTU plus 4 bytes of TUN header).
const TraceOpportunityBytes = 1504

// maxTraceTimestampMs bounds trace times (about 115 days) so nanosecond arithmetic cannot
// overflow.
const maxTraceTimestampMs = 10_000_000_000

// DeliveryTrace is a mahimahi mm-link trace: each line is the time in milliseconds of one
// delivery opportunity of TraceOpportunityBytes, times never decrease, and the trace
// repeats with a period equal to its last time, so the cellular traces made for mahimahi
// work unchanged. Several lines with the same time are several opportunities at once.
type DeliveryTrace struct {
	Name            string  // where it came from, for messages
	OpportunitiesMs []int64 // nondecreasing; the last is the period and is positive
}

// PeriodMs returns the length of one repetition of the trace.
func (t *DeliveryTrace) PeriodMs() int64 { return t.OpportunitiesMs[len(t.OpportunitiesMs)-1] }

// AverageRateBitsPerSecond returns the rate the trace offers on average.
func (t *DeliveryTrace) AverageRateBitsPerSecond() float64 {
	return float64(len(t.OpportunitiesMs)) * TraceOpportunityBytes * 8 * 1000 / float64(t.PeriodMs())
}

// Validate checks the rules of the format: at least one opportunity, no negative or
// decreasing time, and a positive period.
func (t *DeliveryTrace) Validate() error {
	if len(t.OpportunitiesMs) == 0 {
		return fmt.Errorf("trace %s: no delivery opportunities: a trace needs one millisecond timestamp per line", t.Name)
	}
	for i, ms := range t.OpportunitiesMs {
		if ms < 0 || ms > maxTraceTimestampMs {
			return fmt.Errorf("trace %s: opportunity %d at %d ms is outside 0..%d ms", t.Name, i+1, ms, int64(maxTraceTimestampMs))
		}
		if i > 0 && ms < t.OpportunitiesMs[i-1] {
			return fmt.Errorf("trace %s: opportunity %d at %d ms comes before the previous one at %d ms: times must not decrease",
				t.Name, i+1, ms, t.OpportunitiesMs[i-1])
		}
	}
	if t.PeriodMs() == 0 {
		return fmt.Errorf("trace %s: every opportunity is at 0 ms: the trace must last a nonzero time (its last time is its period)", t.Name)
	}
	return nil
}

// ParseTrace reads a trace in mahimahi's format: one non-negative integer per line, a
// millisecond timestamp. Blank lines and lines starting with '#' are skipped (mahimahi
// itself rejects them). name labels error messages.
func ParseTrace(r io.Reader, name string) (*DeliveryTrace, error) {
	trace := &DeliveryTrace{Name: name}
	scanner := bufio.NewScanner(r)
	lineNumber := 0
	for scanner.Scan() {
		lineNumber++
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ms, err := strconv.ParseInt(line, 10, 64)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("trace %s line %d: %q is not a timestamp: each line must be a whole, non-negative number of milliseconds",
				name, lineNumber, line)
		}
		if n := len(trace.OpportunitiesMs); n > 0 && ms < trace.OpportunitiesMs[n-1] {
			return nil, fmt.Errorf("trace %s line %d: %d ms comes after %d ms: timestamps must not decrease",
				name, lineNumber, ms, trace.OpportunitiesMs[n-1])
		}
		trace.OpportunitiesMs = append(trace.OpportunitiesMs, ms)
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("trace %s: reading line %d: %w", name, lineNumber+1, err)
	}
	if err := trace.Validate(); err != nil {
		return nil, err
	}
	return trace, nil
}

// LoadTrace reads a trace file (see ParseTrace).
func LoadTrace(path string) (*DeliveryTrace, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("trace file %s does not exist: give the path of a mahimahi trace (e.g. Verizon-LTE-short.down)", path)
		}
		return nil, fmt.Errorf("opening trace: %w", err)
	}
	defer f.Close()
	return ParseTrace(f, path)
}

// Trace is a bottleneck that follows a DeliveryTrace, with its queue, as mahimahi's
// mm-link does: at each opportunity the link carries up to TraceOpportunityBytes from the
// head of the queue; a packet leaves at the opportunity that carries its last byte, what
// is left of an opportunity serves the next packet, and an opportunity that finds the
// queue empty is lost. A packet cannot use an opportunity at the very time it arrives.
type Trace struct {
	opportunitiesNs []int64 // one period, relative to its start
	periodNs        int64
	queue           *Queue

	cycleStartNs    int64 // start of the current repetition
	nextOpportunity int   // index in opportunitiesNs of the next unused opportunity
	transmitting    *Packet
	bytesLeft       int        // bytes of transmitting still to carry
	sent            packetFIFO // carried, waiting for Dequeue
}

// NewTrace returns a Trace stage that starts following trace (which must be valid) at
// startNs, with packets waiting in queue.
func NewTrace(trace *DeliveryTrace, queue *Queue, startNs int64) *Trace {
	if err := trace.Validate(); err != nil {
		panic("link.NewTrace: " + err.Error())
	}
	opportunitiesNs := make([]int64, len(trace.OpportunitiesMs))
	for i, ms := range trace.OpportunitiesMs {
		opportunitiesNs[i] = ms * 1e6
	}
	return &Trace{
		opportunitiesNs: opportunitiesNs,
		periodNs:        trace.PeriodMs() * 1e6,
		queue:           queue,
		cycleStartNs:    startNs,
	}
}

func (s *Trace) nextOpportunityNs() int64 {
	return s.cycleStartNs + s.opportunitiesNs[s.nextOpportunity]
}

func (s *Trace) useOpportunity() {
	s.nextOpportunity++
	if s.nextOpportunity == len(s.opportunitiesNs) {
		s.nextOpportunity = 0
		s.cycleStartNs += s.periodNs
	}
}

// skipIdleOpportunities moves past every opportunity at or before nowNs without the
// work of visiting each; only for when there is nothing to carry.
func (s *Trace) skipIdleOpportunities(nowNs int64) {
	if elapsedNs := nowNs - s.cycleStartNs; elapsedNs >= s.periodNs {
		s.cycleStartNs += elapsedNs / s.periodNs * s.periodNs
		s.nextOpportunity = 0
	}
	offsetNs := nowNs - s.cycleStartNs
	first := sort.Search(len(s.opportunitiesNs), func(i int) bool { return s.opportunitiesNs[i] > offsetNs })
	s.nextOpportunity = max(s.nextOpportunity, first)
	if s.nextOpportunity == len(s.opportunitiesNs) {
		s.nextOpportunity = 0
		s.cycleStartNs += s.periodNs
	}
}

// advance uses every opportunity at or before nowNs.
func (s *Trace) advance(nowNs int64) {
	for s.nextOpportunityNs() <= nowNs {
		if s.transmitting == nil && s.queue.Len() == 0 {
			s.skipIdleOpportunities(nowNs)
			return
		}
		opportunityNs := s.nextOpportunityNs()
		s.useOpportunity()
		for capacityBytes := TraceOpportunityBytes; capacityBytes > 0; {
			if s.transmitting == nil {
				if s.transmitting = s.queue.Dequeue(); s.transmitting == nil {
					break
				}
				s.bytesLeft = s.transmitting.Size()
			}
			carriedBytes := min(capacityBytes, s.bytesLeft)
			capacityBytes -= carriedBytes
			s.bytesLeft -= carriedBytes
			if s.bytesLeft == 0 {
				s.transmitting.TimeNs = opportunityNs
				s.sent.push(s.transmitting)
				s.transmitting = nil
			}
		}
	}
}

// Enqueue implements Stage: the packet waits in the queue, which may drop.
func (s *Trace) Enqueue(p *Packet, nowNs int64, dropped []*Packet) []*Packet {
	s.advance(nowNs)
	return s.queue.Enqueue(p, dropped)
}

// Dequeue implements Stage.
func (s *Trace) Dequeue(nowNs int64) *Packet {
	s.advance(nowNs)
	return s.sent.popReady(nowNs)
}

// NextReadyNs implements Stage. While a packet waits it reports the next opportunity,
// which may carry only part of a large packet.
func (s *Trace) NextReadyNs() (int64, bool) {
	if t, ok := s.sent.frontTime(); ok {
		return t, true
	}
	if s.transmitting != nil || s.queue.Len() > 0 {
		return s.nextOpportunityNs(), true
	}
	return 0, false
}
