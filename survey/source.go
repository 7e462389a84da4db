package survey

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// Source hands out a survey's targets one at a time, in the list's order:
// Next returns io.EOF after the last one. Index numbers the targets from 1
// across the whole list (so that shards of one list agree on it).
type Source interface {
	Next() (Target, error)
}

// ListSource reads a survey list (the format of ParseInput) line by line,
// without holding it: a list of millions of URLs costs no more memory than a
// short one. A malformed line is an *InputError; check a list whole first
// with CheckList to refuse it before anything is measured.
type ListSource struct {
	sc    *bufio.Scanner
	line  int
	index int
	ended bool // the scanner failed: nothing more to read
}

// NewListSource reads the list from r.
func NewListSource(r io.Reader) *ListSource {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxLineBytes)
	return &ListSource{sc: sc}
}

// Next returns the next target of the list.
func (s *ListSource) Next() (Target, error) {
	if s.ended {
		return Target{}, io.EOF
	}
	for s.sc.Scan() {
		s.line++
		t, ok, err := parseLine(s.sc.Text())
		if err != nil {
			return Target{}, &InputError{Line: s.line, Err: err}
		}
		if ok {
			s.index++
			t.Line, t.Index = s.line, s.index
			return t, nil
		}
	}
	s.ended = true
	if err := s.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Target{}, &InputError{Line: s.line + 1, Err: fmt.Errorf("longer than %d bytes", MaxLineBytes)}
		}
		return Target{}, fmt.Errorf("reading the list: %w", err)
	}
	return Target{}, io.EOF
}

// SliceSource hands out targets given in memory. A target's Index, when 0, is
// its position in the slice (1-based).
type SliceSource struct {
	Targets []Target
	next    int
}

// Next returns the next target.
func (s *SliceSource) Next() (Target, error) {
	if s.next >= len(s.Targets) {
		return Target{}, io.EOF
	}
	t := s.Targets[s.next]
	s.next++
	if t.Index == 0 {
		t.Index = s.next
	}
	return t, nil
}

// ListInfo describes a whole list, as CheckList read it.
type ListInfo struct {
	// Targets is the number of URLs in the list; InShard those of the shard
	// CheckList was given.
	Targets, InShard int
	// SHA256 is the hex digest of the list's bytes: stores record it, so that a
	// resumed survey or a merge can tell when lists differ.
	SHA256 string
}

// CheckList reads a whole list and returns what it holds, or every malformed
// line (as *InputError values joined), like ParseInput, without keeping the
// targets.
func CheckList(r io.Reader, shard Shard) (ListInfo, error) {
	h := sha256.New()
	src := NewListSource(io.TeeReader(r, h))
	var info ListInfo
	var errs []error
	for {
		t, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var ie *InputError
		if errors.As(err, &ie) && len(errs) < 1000 {
			errs = append(errs, err)
			continue
		}
		if err != nil {
			return info, err
		}
		info.Targets++
		if shard.Contains(t.URL) {
			info.InShard++
		}
	}
	if len(errs) > 0 {
		return info, errors.Join(errs...)
	}
	if info.Targets == 0 {
		return info, &InputError{Err: errors.New("the list holds no URL: write one per line, optionally after a label (provider-a https://a.example/)")}
	}
	info.SHA256 = hex.EncodeToString(h.Sum(nil))
	return info, nil
}
