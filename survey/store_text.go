package survey

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/slowstart/slowstart/internal/privatefile"
)

// lineStore appends rows to a text file, one line each (JSONL or CSV), written
// with one write call per row so that a killed survey leaves whole rows and at
// most one cut line, which opening the store again removes. The keys of the
// rows are held in memory (about 100 bytes a row), for Done.
type lineStore struct {
	mu     sync.Mutex // Write and Done come from different goroutines
	f      *os.File
	keys   map[string]struct{}
	encode func(*Row) ([]byte, error)
}

func (s *lineStore) Write(r Row) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return errStoreClosed
	}
	k := keyOf(r.Index, r.URL)
	if _, dup := s.keys[k]; dup {
		return fmt.Errorf("target %d (%s) already has a row", r.Index, r.URL)
	}
	line, err := s.encode(&r)
	if err != nil {
		return err
	}
	if _, err := s.f.Write(line); err != nil {
		return err
	}
	s.keys[k] = struct{}{}
	return nil
}

func (s *lineStore) Done(t Target) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.keys[keyOf(t.Index, t.URL)]
	return ok, nil
}

func (s *lineStore) Rows() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}
func (s *lineStore) Meta() StoreMeta { return StoreMeta{} }

func (s *lineStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// trimCutLine removes a last line without its newline (a row cut by a kill).
func trimCutLine(f *os.File) error {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	size := st.Size()
	buf := make([]byte, 64*1024)
	end := size
	for end > 0 {
		n := int64(len(buf))
		if n > end {
			n = end
		}
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return err
		}
		if end == size && buf[n-1] == '\n' {
			return nil
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return f.Truncate(end - n + int64(i) + 1)
		}
		end -= n
	}
	return f.Truncate(0)
}

func openLineFile(path string) (*os.File, error) {
	f, err := privatefile.OpenReadWrite(path) // made 0600, or tightened to it
	if err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	if err := trimCutLine(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("opening the store %s: %w", path, err)
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func openJSONLStore(path string) (Store, error) {
	f, err := openLineFile(path)
	if err != nil {
		return nil, err
	}
	s := &lineStore{f: f, keys: map[string]struct{}{}, encode: func(r *Row) ([]byte, error) {
		data, err := json.Marshal(r)
		return append(data, '\n'), err
	}}
	if err := readJSONL(path, func(r Row) error {
		s.keys[keyOf(r.Index, r.URL)] = struct{}{}
		return nil
	}); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// readJSONL calls fn for every row of a JSONL store.
func readJSONL(path string, fn func(Row) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s, line %d: not a survey row: %w", path, line, err)
		}
		if r.URL == "" || r.Index < 1 {
			return fmt.Errorf("%s, line %d: not a survey row (no index or url)", path, line)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return sc.Err()
}

func openCSVStore(path string) (Store, error) {
	f, err := openLineFile(path)
	if err != nil {
		return nil, err
	}
	s := &lineStore{f: f, keys: map[string]struct{}{}, encode: encodeCSVRow}
	st, err := f.Stat()
	if err == nil && st.Size() == 0 {
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		w.Write(CSVHeader())
		w.Flush()
		_, err = f.Write(b.Bytes())
	}
	if err == nil {
		err = readCSV(path, func(r Row) error {
			s.keys[keyOf(r.Index, r.URL)] = struct{}{}
			return nil
		})
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

func encodeCSVRow(r *Row) ([]byte, error) {
	values, err := rowValues(r)
	if err != nil {
		return nil, err
	}
	record := make([]string, len(columns))
	for i, c := range columns {
		record[i] = cellText(c, values[i])
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.Write(record); err != nil {
		return nil, err
	}
	w.Flush()
	return b.Bytes(), w.Error()
}

// readCSV calls fn for every row of a CSV store (or of survey --csv's output).
func readCSV(path string, fn func(Row) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	cr := csv.NewReader(bufio.NewReader(f))
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// Columns by name: a store of an older layout, or with columns in another
	// order, reads as well.
	at := make([]int, len(columns))
	for i, c := range columns {
		at[i] = slices.Index(header, c.name)
	}
	if at[0] < 0 || at[3] < 0 {
		return fmt.Errorf("%s is not a survey CSV: no index or url column in its header", path)
	}
	values := make([]any, len(columns))
	for {
		record, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for i, c := range columns {
			values[i] = nil
			if at[i] < 0 || at[i] >= len(record) {
				continue
			}
			if values[i], err = cellValue(c, record[at[i]]); err != nil {
				line, _ := cr.FieldPos(0)
				return fmt.Errorf("%s, line %d: %w", path, line, err)
			}
		}
		r, err := rowFromValues(values)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
}
