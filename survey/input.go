package survey

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"unicode"
)

// MaxLineBytes bounds one line of a survey list.
const MaxLineBytes = 64 * 1024

// InputError is a malformed survey list: which line, and what is wrong with it.
type InputError struct {
	Line int // 1-based; 0 for the list as a whole
	Err  error
}

func (e *InputError) Error() string {
	if e.Line == 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}
func (e *InputError) Unwrap() error { return e.Err }

// ParseInput reads a survey list: one URL per line, optionally preceded by a
// label ("provider-a https://a.example/"; a label may contain spaces, the URL
// is the last word). Blank lines and lines whose first non-blank character is
// # are skipped, and so is the rest of a line from a # preceded by a blank.
// Every malformed line is reported (as *InputError values joined); a list
// without any URL is an error too.
func ParseInput(r io.Reader) ([]Target, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxLineBytes)
	var targets []Target
	var errs []error
	lineNo := 0
	for sc.Scan() {
		lineNo++
		t, ok, err := parseLine(sc.Text())
		if err != nil {
			errs = append(errs, &InputError{Line: lineNo, Err: err})
			continue
		}
		if ok {
			t.Line = lineNo
			targets = append(targets, t)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &InputError{Line: lineNo + 1, Err: fmt.Errorf("longer than %d bytes", MaxLineBytes)}
		}
		return nil, fmt.Errorf("reading the list: %w", err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(targets) == 0 {
		return nil, &InputError{Err: errors.New("the list holds no URL: write one per line, optionally after a label (provider-a https://a.example/)")}
	}
	return targets, nil
}

// parseLine parses one line; ok is false for blank and comment lines.
func parseLine(line string) (t Target, ok bool, err error) {
	line = strings.TrimPrefix(line, "\uFEFF") // a byte order mark some editors write
	line = stripComment(line)
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return t, false, nil
	}
	raw := fields[len(fields)-1]
	if err := CheckURL(raw); err != nil {
		return t, false, err
	}
	label := strings.Join(fields[:len(fields)-1], " ")
	if strings.Contains(label, "://") {
		return t, false, fmt.Errorf("%q: one URL per line (a label, if any, then the URL)", line)
	}
	return Target{Label: label, URL: raw}, true, nil
}

// stripComment cuts a line at a # that begins it (after blanks) or follows a
// blank: a # inside a URL (a fragment) is kept.
func stripComment(line string) string {
	for i, r := range line {
		if r != '#' {
			continue
		}
		if i == 0 || unicode.IsSpace(rune(line[i-1])) {
			return line[:i]
		}
	}
	return line
}

// CheckURL says whether raw is a URL the survey can measure: http:// or
// https://, with a host and a valid port.
func CheckURL(raw string) error {
	if !strings.Contains(raw, "://") {
		return fmt.Errorf("%q is not a URL: give the scheme, e.g. https://%s", raw, raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a valid URL: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: only http:// and https:// URLs can be measured", raw)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q has no host", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return fmt.Errorf("%q: port %q is not a number from 1 to 65535", raw, p)
		}
	}
	return nil
}
