package survey

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/slowstart/slowstart/internal/fault"
)

// MergeResult says what Merge did.
type MergeResult struct {
	// Rows were written; Inputs read.
	Rows, Inputs int
	// Shards are the shards found in the inputs ("I/N"); MissingShards those of
	// N that no input held (from SQLite inputs, which record their shard).
	Shards, MissingShards []string
	// Vantages are the vantage points of the rows.
	Vantages []string
}

// DuplicateError is a target found in more than one input: shards of one list
// never overlap, so the inputs are not the shards of one survey (or one was
// given twice).
type DuplicateError struct {
	Count   int
	Example string
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("%d targets have rows in more than one input (e.g. %s): shards of one survey never overlap; was an input given twice, or are these surveys of different lists?", e.Count, e.Example)
}

// Merge joins the rows of the stores at inputs (shards of one survey, or
// surveys of one list from several vantage points) into a new store at out
// (format as FormatOf says). A target is identified by its vantage, its index
// in the list and its URL; one found twice is an error (*DuplicateError) and
// nothing is written. SQLite inputs must be of the same list.
func Merge(out, format string, inputs []string) (MergeResult, error) {
	var res MergeResult
	if len(inputs) == 0 {
		return res, errors.New("no store to merge")
	}
	if _, err := os.Stat(out); err == nil {
		return res, fmt.Errorf("%s exists: merge into a new file", out)
	}
	// First pass: the inputs' descriptions, and every key once.
	seen := map[string]struct{}{}
	vantages := map[string]bool{}
	shards := map[string]bool{}
	shardCount := 0
	var meta StoreMeta
	dups, example := 0, ""
	for _, in := range inputs {
		m, err := ReadStore(in, func(r Row) error {
			k := r.Vantage + "\x00" + keyOf(r.Index, r.URL)
			if _, dup := seen[k]; dup {
				if dups == 0 {
					example = fmt.Sprintf("target %d, %s, in %s", r.Index, r.URL, in)
				}
				dups++
				return nil
			}
			seen[k] = struct{}{}
			vantages[r.Vantage] = true
			if r.Shard != "" {
				shards[r.Shard] = true
			}
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("reading %s: %w", in, err)
		}
		if m.Schema != "" {
			switch {
			case meta.Schema == "":
				meta = m
			case meta.ListSHA256 != "" && m.ListSHA256 != "" && meta.ListSHA256 != m.ListSHA256:
				return res, fmt.Errorf("%s is a survey of another list than %s's (their lists' SHA-256 differ): merge the shards of one list", in, inputs[0])
			}
			if sh, err := ParseShard(m.Settings.Shard); err == nil {
				if shardCount != 0 && sh.Count != shardCount {
					return res, fmt.Errorf("%s is shard %s, of another split than the other inputs (%d shards)", in, m.Settings.Shard, shardCount)
				}
				shardCount = sh.Count
				shards[m.Settings.Shard] = true
			}
		}
	}
	if dups > 0 {
		return res, &DuplicateError{Count: dups, Example: example}
	}
	for s := range shards {
		res.Shards = append(res.Shards, s)
	}
	sort.Strings(res.Shards)
	if shardCount > 1 {
		for i := range shardCount {
			if s := fmt.Sprintf("%d/%d", i, shardCount); !shards[s] {
				res.MissingShards = append(res.MissingShards, s)
			}
		}
	}
	for v := range vantages {
		if v != "" {
			res.Vantages = append(res.Vantages, v)
		}
	}
	sort.Strings(res.Vantages)

	// Second pass: write.
	if format == "" {
		var err error
		if format, err = FormatOf(out, ""); err != nil {
			return res, err
		}
	}
	meta.Schema = StoreSchema
	meta.Settings.Shard = ""
	if len(res.Vantages) != 1 {
		meta.Settings.Vantage = strings.Join(res.Vantages, ",")
	}
	meta.ShardTargets = meta.ListTargets
	st, err := OpenStore(out, format, meta)
	if err != nil {
		return res, err
	}
	if b, ok := st.(interface{ begin() error }); ok {
		if err := b.begin(); err != nil {
			st.Close()
			os.Remove(out)
			return res, err
		}
	}
	for _, in := range inputs {
		if _, err := ReadStore(in, func(r Row) error { return st.Write(r) }); err != nil {
			st.Close()
			os.Remove(out)
			return res, fmt.Errorf("writing %s: %w", out, err)
		}
		res.Inputs++
	}
	if c, ok := st.(interface{ commit() error }); ok {
		if err := c.commit(); err != nil {
			st.Close()
			os.Remove(out)
			return res, err
		}
	}
	res.Rows = st.Rows()
	return res, st.Close()
}

// MergeStores joins the rows of stores (directories stand for the stores in
// them) into a new store out (format: sqlite, jsonl or csv; "" by its
// extension), and says so on w. A target found twice, or a shard missing from
// the split, is a Failed error; a store that can't be read a file error.
func MergeStores(out, format string, stores []string, w io.Writer) error {
	f, err := FormatOf(out, format)
	if err != nil {
		return fault.Usagef("--format: %w", err)
	}
	inputs, err := ExpandStoreDirs(stores, out)
	if err != nil {
		return fault.Mark(fault.File, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fault.Mark(fault.File, err)
	}
	res, err := Merge(out, f, inputs)
	if err != nil {
		var de *DuplicateError
		if errors.As(err, &de) {
			return fault.Mark(fault.Failed, err)
		}
		return fault.Mark(fault.File, err)
	}
	fmt.Fprintf(w, "%d rows from %d stores into %s", res.Rows, res.Inputs, out)
	if len(res.Shards) > 0 {
		fmt.Fprintf(w, " (shards %s)", strings.Join(res.Shards, ", "))
	}
	if len(res.Vantages) > 0 {
		fmt.Fprintf(w, " from %s", strings.Join(res.Vantages, ", "))
	}
	fmt.Fprintln(w, ".")
	if len(res.MissingShards) > 0 {
		return fault.Failedf("no store of shard %s was given: the merged survey lacks their targets", strings.Join(res.MissingShards, ", "))
	}
	return nil
}

// ExpandStoreDirs replaces each directory by the stores in it, sorted; out is
// never one of them.
func ExpandStoreDirs(paths []string, out string) ([]string, error) {
	var inputs []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("reading the store: %w", err)
		}
		if !st.IsDir() {
			inputs = append(inputs, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		found := 0
		for _, e := range entries {
			name := filepath.Join(p, e.Name())
			switch strings.ToLower(filepath.Ext(e.Name())) {
			case ".db", ".sqlite", ".sqlite3", ".jsonl", ".ndjson", ".csv":
				if e.Type().IsRegular() && filepath.Clean(name) != filepath.Clean(out) {
					inputs = append(inputs, name)
					found++
				}
			}
		}
		if found == 0 {
			return nil, fmt.Errorf("%s holds no store (.db, .sqlite, .jsonl, .csv)", p)
		}
	}
	return inputs, nil
}
