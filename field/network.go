package field

import (
	"fmt"
	"net/netip"
	"os"

	"github.com/slowstart/slowstart/survey"
)

// Networks names a client's network: its address's prefix (a /24 for IPv4 and
// a /48 for IPv6 by default), or, with a prefix table (the pfx2as file `survey
// --asn` reads), the autonomous system announcing it ("AS64500"); an address
// the table does not hold is named by its prefix.
type Networks struct {
	bits4, bits6 int
	table        *survey.PrefixTable
}

// Default prefix lengths of client networks.
const (
	DefaultPrefix4 = 24
	DefaultPrefix6 = 48
)

// NewNetworks groups by prefixes of bits4 (IPv4) and bits6 (IPv6) bits; a
// non-nil table groups by AS first.
func NewNetworks(bits4, bits6 int, table *survey.PrefixTable) (*Networks, error) {
	if bits4 < 0 || bits4 > 32 {
		return nil, fmt.Errorf("an IPv4 prefix of %d bits: give 0 to 32", bits4)
	}
	if bits6 < 0 || bits6 > 128 {
		return nil, fmt.Errorf("an IPv6 prefix of %d bits: give 0 to 128", bits6)
	}
	return &Networks{bits4: bits4, bits6: bits6, table: table}, nil
}

// ReadASNFile reads a pfx2as file (survey.ReadPrefixTable: "PREFIX/LEN ASN" or
// CAIDA's "ADDRESS LEN ASN" lines).
func ReadASNFile(path string) (*survey.PrefixTable, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := survey.ReadPrefixTable(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Name is the network of addr.
func (n *Networks) Name(addr netip.Addr) string {
	addr = addr.Unmap()
	if n.table != nil {
		if name, ok := n.table.Lookup(addr); ok {
			return name
		}
	}
	bits := n.bits4
	if addr.Is6() {
		bits = n.bits6
	}
	p, err := addr.Prefix(bits)
	if err != nil {
		return "(no address)"
	}
	return p.String()
}

// ByASN says the networks are autonomous systems where the table knows them.
func (n *Networks) ByASN() bool { return n.table != nil }
