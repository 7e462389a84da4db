package report

import (
	"container/heap"
	"fmt"
	"sort"

	gojson "github.com/goccy/go-json"
)

// Collector keeps connections for a Report that must stay small enough to open in
// a browser (the view's page): the connections that come first (by number), as
// many as fit in a budget of encoded bytes, whatever order they are added in.
// The rest are counted, and Report says so in a warning.
type Collector struct {
	budget  int64
	used    int64
	kept    keptHeap
	dropped int
	total   int
	// cutoff is the lowest number dropped so far (0: none): a connection
	// numbered above it is not kept, so that the page holds the first
	// connections by number and no later one in their place.
	cutoff int
}

// NewCollector keeps connections up to budgetBytes of JSON.
func NewCollector(budgetBytes int64) *Collector { return &Collector{budget: budgetBytes} }

type keptConn struct {
	c    Connection
	size int64
}

// keptHeap is a max-heap by connection number: the last to drop is on top.
type keptHeap []keptConn

func (h keptHeap) Len() int           { return len(h) }
func (h keptHeap) Less(i, j int) bool { return h[i].c.Index > h[j].c.Index }
func (h keptHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keptHeap) Push(x any)        { *h = append(*h, x.(keptConn)) }
func (h *keptHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// Add offers a connection; it is copied (its slices are shared, not copied).
// A connection numbered after one already dropped is dropped at once, without
// encoding it.
func (k *Collector) Add(c *Connection) error {
	k.total++
	if k.cutoff != 0 && c.Index > k.cutoff {
		k.dropped++
		return nil
	}
	b, err := gojson.Marshal(c)
	if err != nil {
		return err
	}
	size := int64(len(b))
	heap.Push(&k.kept, keptConn{c: *c, size: size})
	k.used += size
	for k.used > k.budget && len(k.kept) > 1 {
		e := heap.Pop(&k.kept).(keptConn)
		k.used -= e.size
		k.dropped++
		if k.cutoff == 0 || e.c.Index < k.cutoff {
			k.cutoff = e.c.Index
		}
	}
	return nil
}

// KeepsAfter reports whether a connection numbered after index may still be
// kept. Once false it stays false for index and every higher number: the
// connections after it need not be built in full (their packet lists).
func (k *Collector) KeepsAfter(index int) bool { return k.cutoff == 0 || index+1 < k.cutoff }

// Report returns the kept connections in order of number, in a Report of the
// given tool, source and warnings (plus one if connections were left out).
func (k *Collector) Report(tool string, source Source, warnings []string) *Report {
	conns := make([]Connection, len(k.kept))
	for i, e := range k.kept {
		conns[i] = e.c
	}
	sort.Slice(conns, func(i, j int) bool { return conns[i].Index < conns[j].Index })
	if warnings == nil {
		warnings = []string{}
	}
	if k.dropped > 0 {
		warnings = append(warnings, fmt.Sprintf("the page shows the first %d of %d connections (by first packet), what fits in %d MB; analyze --json or --jsonl gives them all",
			len(conns), k.total, k.budget>>20))
	}
	return &Report{Schema: Schema, Tool: tool, Source: source, Connections: conns, Warnings: warnings}
}
