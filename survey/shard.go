package survey

import (
	"fmt"
	"hash/fnv"
	"net/url"
	"strconv"
	"strings"
)

// Shard is one of Count disjoint parts of a list, Index from 0 to Count-1 (the
// numbering of a Kubernetes Indexed Job's JOB_COMPLETION_INDEX). The zero value
// (Count 0) is the whole list.
//
// A target falls in the shard of its URL's host (FNV-1a of the lower-cased host
// name or address, modulo Count): the split depends on nothing but the URL, so
// every process given the same list and Count agrees on it, whatever the order
// of the lines; and every URL of one host lands in the same shard, so the
// per-address politeness of one survey process still holds when N processes
// share a list.
type Shard struct {
	Index, Count int
}

// ParseShard reads "I/N" (0 ≤ I < N).
func ParseShard(s string) (Shard, error) {
	i, n, ok := strings.Cut(strings.TrimSpace(s), "/")
	index, err1 := strconv.Atoi(i)
	count, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("shard %q: write INDEX/COUNT, e.g. 0/8 (indexes run from 0 to COUNT-1, as JOB_COMPLETION_INDEX)", s)
	}
	if count < 1 || count > 1<<20 {
		return Shard{}, fmt.Errorf("shard %q: the count must be 1 to %d", s, 1<<20)
	}
	if index < 0 || index >= count {
		return Shard{}, fmt.Errorf("shard %q: the index must be 0 to %d (indexes run from 0, as JOB_COMPLETION_INDEX)", s, count-1)
	}
	return Shard{Index: index, Count: count}, nil
}

// String is "I/N", or "" for the whole list.
func (s Shard) String() string {
	if s.Count <= 1 {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// Contains says whether the target with this URL belongs to the shard.
func (s Shard) Contains(rawURL string) bool {
	if s.Count <= 1 {
		return true
	}
	return ShardOf(rawURL, s.Count) == s.Index
}

// ShardOf returns the index of the shard (of count) the URL belongs to.
func ShardOf(rawURL string, count int) int {
	if count <= 1 {
		return 0
	}
	host := rawURL
	if u, err := url.Parse(rawURL); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	h := fnv.New64a()
	h.Write([]byte(strings.ToLower(host)))
	return int(h.Sum64() % uint64(count))
}
