package survey

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// PrefixTable maps addresses to the autonomous system (or any provider name)
// announcing them, by longest prefix match: for grouping a survey's rows by
// ASN when the list has no labels.
type PrefixTable struct {
	byBits map[int]map[netip.Prefix]string // prefix length → prefix → name
	bits   []int                           // the lengths present, longest first
}

// ReadPrefixTable reads one prefix per line, in either of two layouts:
//
//	192.0.2.0/24 AS64500 Example Networks     (prefix, ASN or name, an optional description)
//	192.0.2.0	24	64500                     (CAIDA's pfx2as: address, length, ASN)
//
// A bare number as ASN is written AS<number>. Blank lines and # comments are
// skipped.
func ReadPrefixTable(r io.Reader) (*PrefixTable, error) {
	t := &PrefixTable{byBits: map[int]map[netip.Prefix]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(stripComment(sc.Text()))
		if text == "" {
			continue
		}
		fields := strings.Fields(text)
		var prefix netip.Prefix
		var name string
		var err error
		switch {
		case len(fields) >= 3 && !strings.Contains(fields[0], "/"):
			var bits int
			addr, aerr := netip.ParseAddr(fields[0])
			bits, err = strconv.Atoi(fields[1])
			if aerr != nil || err != nil {
				return nil, fmt.Errorf("line %d: %q: write PREFIX/LEN ASN, or ADDRESS LEN ASN", line, text)
			}
			prefix, err = addr.Unmap().Prefix(bits)
			name = fields[2]
		case len(fields) >= 2:
			prefix, err = netip.ParsePrefix(fields[0])
			name = strings.Join(fields[1:], " ")
		default:
			return nil, fmt.Errorf("line %d: %q: write PREFIX/LEN ASN, or ADDRESS LEN ASN", line, text)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %q: %v", line, text, err)
		}
		if _, err := strconv.ParseUint(name, 10, 32); err == nil {
			name = "AS" + name
		}
		prefix = prefix.Masked()
		if t.byBits[prefix.Bits()] == nil {
			t.byBits[prefix.Bits()] = map[netip.Prefix]string{}
			t.bits = append(t.bits, prefix.Bits())
		}
		t.byBits[prefix.Bits()][prefix] = name
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	// Longest first; IPv4 and IPv6 prefixes of one length share a map.
	for i := 1; i < len(t.bits); i++ {
		for j := i; j > 0 && t.bits[j] > t.bits[j-1]; j-- {
			t.bits[j], t.bits[j-1] = t.bits[j-1], t.bits[j]
		}
	}
	return t, nil
}

// Lookup returns the name of the longest prefix holding addr.
func (t *PrefixTable) Lookup(addr netip.Addr) (string, bool) {
	addr = addr.Unmap()
	for _, bits := range t.bits {
		if bits > addr.BitLen() {
			continue
		}
		p, err := addr.Prefix(bits)
		if err != nil {
			continue
		}
		if name, ok := t.byBits[bits][p]; ok {
			return name, true
		}
	}
	return "", false
}

// NameOf returns the name of the address written in a row, "(no address)"
// or "(unknown ASN)" when there is none.
func (t *PrefixTable) NameOf(address string) string {
	addr, err := netip.ParseAddr(address)
	if err != nil {
		return "(no address)"
	}
	if name, ok := t.Lookup(addr); ok {
		return name
	}
	return "(unknown ASN)"
}
