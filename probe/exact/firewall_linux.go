//go:build linux

package exact

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/internal/owner"
)

// The firewall: one nftables table per process and network namespace,
// "slowstart_exact_<pid>", whose rules never change while it lives. They match
// the connections being measured through sets of (remote address, remote port,
// local port) elements:
//
//	mss4, mss6    maps each connection to the MSS its SYN announces (the rewrite)
//	hold4, hold6  the connections whose pure ACKs are dropped (no ACK until the
//	              server retransmits)
//
// A measurement adds its connection's elements and deletes them when it ends: one
// netlink message each, however many measurements run at once, with no rule
// rebuilt. Every element carries a timeout a little above the longest a
// measurement can use it, so that a process killed mid-measurement leaves
// elements that expire by themselves: the table then matches nothing. Its first
// rule carries a comment with the owner's marker (package internal/owner), which
// is how a later run proves the table is a dead process's before removing it:
// every measurement removes such tables at its start (CleanNamespace), and so does
// `slowstart clean`.

// TablePrefix begins the name of every nftables table the package makes:
// slowstart_exact_<pid>.
const TablePrefix = "slowstart_exact_"

// markerKind names the exact probe in its tables' markers.
const markerKind = "slowstart-exact"

// Element timeouts: how long past its last use an element of a killed process
// still matches.
const (
	// elementSlack is added to the longest a measurement uses an element.
	elementSlack = 5 * time.Second
)

// firewall is this process's table in one network namespace. It is shared by
// every measurement of the process in that namespace (acquireFirewall) and
// removed when the last one releases it.
type firewall struct {
	netnsPath string
	mu        sync.Mutex // serializes the netlink batches on conn
	conn      *nftables.Conn
	closeNs   func()
	table     *nftables.Table
	mss4      *nftables.Set
	mss6      *nftables.Set
	hold4     *nftables.Set
	hold6     *nftables.Set
	users     int // guarded by firewalls.mu
}

// firewalls are the process's tables, by namespace path ("" for its own).
var firewalls = struct {
	mu      sync.Mutex
	byNetns map[string]*firewall
}{byNetns: map[string]*firewall{}}

// tableName names the table of process pid.
func tableName(pid int) string { return TablePrefix + strconv.Itoa(pid) }

// openNftables returns a connection to nf_tables in the namespace at netnsPath
// (the process's own when empty) and a function that releases it.
func openNftables(netnsPath string) (*nftables.Conn, func(), error) {
	return openNftablesConn(netnsPath, false)
}

// openNftablesConn is openNftables; a lasting connection keeps one netlink
// socket for all its batches (the firewall's, which sends a few per
// measurement) instead of opening one, in the namespace, per batch.
func openNftablesConn(netnsPath string, lasting bool) (*nftables.Conn, func(), error) {
	var opts []nftables.ConnOption
	if lasting {
		opts = append(opts, nftables.AsLasting())
	}
	if netnsPath == "" {
		conn, err := nftables.New(opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("open nf_tables: %w", err)
		}
		return conn, func() { closeLasting(conn, lasting) }, nil
	}
	handle, err := netns.GetFromPath(netnsPath)
	if err != nil {
		return nil, nil, fmt.Errorf("open network namespace %s (see ip netns list): %w", netnsPath, err)
	}
	conn, err := nftables.New(append(opts, nftables.WithNetNSFd(int(handle)))...)
	if err != nil {
		handle.Close()
		return nil, nil, fmt.Errorf("open nf_tables in %s: %w", netnsPath, err)
	}
	return conn, func() { closeLasting(conn, lasting); handle.Close() }, nil
}

func closeLasting(conn *nftables.Conn, lasting bool) {
	if lasting {
		conn.CloseLasting()
	}
}

// acquireFirewall returns this process's table in the namespace, making it (after
// removing dead processes' tables there) when no measurement holds it. Release
// it with release.
func acquireFirewall(ctx context.Context, netnsPath string) (*firewall, []string, error) {
	firewalls.mu.Lock()
	defer firewalls.mu.Unlock()
	if fw := firewalls.byNetns[netnsPath]; fw != nil {
		fw.users++
		return fw, nil, nil
	}
	conn, closeNs, err := openNftablesConn(netnsPath, true)
	if err != nil {
		return nil, nil, err
	}
	removed, err := cleanStale(ctx, conn, false)
	if err != nil {
		closeNs()
		return nil, nil, err
	}
	fw, err := installFirewall(conn, owner.This())
	if err != nil {
		closeNs()
		return nil, removed, err
	}
	fw.netnsPath, fw.closeNs, fw.users = netnsPath, closeNs, 1
	firewalls.byNetns[netnsPath] = fw
	return fw, removed, nil
}

// Hold makes this process's table in the network namespace at netnsPath (the
// process's own when empty) now, removing dead processes' tables there first,
// and keeps it until release is called, however many measurements start and
// end in between: a survey holds it for its whole life, so that one table
// serves every measurement and none is made or removed midway. Release it once;
// the last holder (a measurement or Hold) removes it.
func Hold(ctx context.Context, netnsPath string) (release func() error, removed []string, err error) {
	fw, removed, err := acquireFirewall(ctx, netnsPath)
	if err != nil {
		return nil, removed, err
	}
	var once sync.Once
	return func() error {
		var releaseErr error
		once.Do(func() { releaseErr = fw.release() })
		return releaseErr
	}, removed, nil
}

// release gives the table back; the last user removes it.
func (fw *firewall) release() error {
	firewalls.mu.Lock()
	defer firewalls.mu.Unlock()
	fw.users--
	if fw.users > 0 {
		return nil
	}
	delete(firewalls.byNetns, fw.netnsPath)
	defer fw.closeNs()
	return fw.remove()
}

// connectionKey types: (remote address, remote port, local port), each field
// padded to 4 bytes as nf_tables concatenations are.
var (
	connectionKey4 = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService, nftables.TypeInetService)
	connectionKey6 = nftables.MustConcatSetType(nftables.TypeIP6Addr, nftables.TypeInetService, nftables.TypeInetService)
	// mssType is a 2-byte integer: the MSS option's value.
	mssType = func() nftables.SetDatatype { t := nftables.TypeInteger; t.Bytes = 2; return t }()
)

// installFirewall makes the table of process o: its sets and its rules, in one
// batch that applies whole or not at all.
func installFirewall(conn *nftables.Conn, o owner.Process) (*firewall, error) {
	fw := &firewall{conn: conn}
	fw.table = conn.AddTable(&nftables.Table{Name: tableName(o.PID), Family: nftables.TableFamilyINet})
	policy := nftables.ChainPolicyAccept
	chain := conn.AddChain(&nftables.Chain{
		Name:     "output",
		Table:    fw.table,
		Type:     nftables.ChainTypeFilter,
		Hooknum:  nftables.ChainHookOutput,
		Priority: nftables.ChainPriorityMangle,
		Policy:   &policy,
	})
	newSet := func(name string, key nftables.SetDatatype, isMap bool) (*nftables.Set, error) {
		s := &nftables.Set{Table: fw.table, Name: name, KeyType: key, Concatenation: true, HasTimeout: true}
		if isMap {
			s.IsMap, s.DataType = true, mssType
		}
		if err := conn.AddSet(s, nil); err != nil {
			return nil, fmt.Errorf("nftables set %s: %w", name, err)
		}
		return s, nil
	}
	var err error
	if fw.mss4, err = newSet("mss4", connectionKey4, true); err != nil {
		return nil, err
	}
	if fw.mss6, err = newSet("mss6", connectionKey6, true); err != nil {
		return nil, err
	}
	if fw.hold4, err = newSet("hold4", connectionKey4, false); err != nil {
		return nil, err
	}
	if fw.hold6, err = newSet("hold6", connectionKey6, false); err != nil {
		return nil, err
	}
	marker := userdata.AppendString(nil, userdata.TypeComment, o.Marker(markerKind))
	for _, ipv6 := range []bool{false, true} {
		mssMap := fw.mss4
		if ipv6 {
			mssMap = fw.mss6
		}
		// The SYN (tcp flags & (syn|ack) == syn, not the SYN/ACK) of a connection in
		// the map: tcp option maxseg size set to the map's value (the kernel fixes
		// the checksum, and only ever lowers the value).
		rule := append(isTCP(ipv6),
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{tcpSYN | tcpACK}, Xor: []byte{0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{tcpSYN}},
		)
		rule = append(rule, loadConnectionKey(ipv6)...)
		rule = append(rule,
			&expr.Lookup{SourceRegister: unix.NFT_REG32_00, DestRegister: 1, IsDestRegSet: true, SetName: mssMap.Name, SetID: mssMap.ID},
			&expr.Exthdr{SourceRegister: 1, Op: expr.ExthdrOpTcpopt, Type: tcpOptionMSS, Offset: 2, Len: 2},
		)
		r := &nftables.Rule{Table: fw.table, Chain: chain, Exprs: rule}
		if !ipv6 {
			r.UserData = marker // the first rule carries the owner's marker
		}
		conn.AddRule(r)
	}
	for _, ipv6 := range []bool{false, true} {
		for _, rule := range dropPureACKRules(ipv6, fw.holdSet(ipv6)) {
			conn.AddRule(&nftables.Rule{Table: fw.table, Chain: chain, Exprs: rule})
		}
	}
	if err := conn.Flush(); err != nil {
		// A failed batch is applied whole or not at all: nothing to remove.
		return nil, fmt.Errorf("add nftables table %s (needs root and nf_tables): %w", fw.table.Name, err)
	}
	return fw, nil
}

func (fw *firewall) holdSet(ipv6 bool) *nftables.Set {
	if ipv6 {
		return fw.hold6
	}
	return fw.hold4
}

func (fw *firewall) mssMap(ipv6 bool) *nftables.Set {
	if ipv6 {
		return fw.mss6
	}
	return fw.mss4
}

const (
	tcpFIN       = 0x01
	tcpSYN       = 0x02
	tcpRST       = 0x04
	tcpACK       = 0x10
	tcpOptionMSS = 2
)

// isTCP matches TCP over IPv4 (or IPv6).
func isTCP(ipv6 bool) []expr.Any {
	family := byte(unix.NFPROTO_IPV4)
	if ipv6 {
		family = unix.NFPROTO_IPV6
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{family}},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
	}
}

// loadConnectionKey loads an outgoing packet's (destination address, destination
// port, source port) into the 32-bit registers from NFT_REG32_00 on, as a
// connection key's fields lie.
func loadConnectionKey(ipv6 bool) []expr.Any {
	addressOffset, addressLen := uint32(16), uint32(4)
	if ipv6 {
		addressOffset, addressLen = 24, 16
	}
	portRegister := unix.NFT_REG32_00 + addressLen/4
	return []expr.Any{
		&expr.Payload{DestRegister: unix.NFT_REG32_00, Base: expr.PayloadBaseNetworkHeader, Offset: addressOffset, Len: addressLen},
		&expr.Payload{DestRegister: portRegister, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Payload{DestRegister: portRegister + 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
	}
}

// connectionKey is the key of the connection from localPort to remote.
func connectionKey(remote netip.AddrPort, localPort uint16) []byte {
	key := append([]byte(nil), remote.Addr().Unmap().AsSlice()...)
	key = binary.BigEndian.AppendUint16(key, remote.Port())
	key = append(key, 0, 0)
	key = binary.BigEndian.AppendUint16(key, localPort)
	return append(key, 0, 0)
}

// dropPureACKRules drop the outgoing segments of the connections in hold with no
// payload and none of SYN, FIN, RST: their pure ACKs. Segments with data (the
// request, the ClientHello) still leave. The payload is empty when the IP length
// is the IP header plus the TCP header (data offset × 4); one rule per data
// offset, since nf_tables compares a field with constants, not with another field.
func dropPureACKRules(ipv6 bool, hold *nftables.Set) [][]expr.Any {
	var rules [][]expr.Any
	for dataOffset := 5; dataOffset <= 15; dataOffset++ {
		rule := append(isTCP(ipv6),
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{tcpSYN | tcpFIN | tcpRST}, Xor: []byte{0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 12, Len: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0xf0}, Xor: []byte{0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(dataOffset << 4)}},
		)
		if ipv6 {
			// ip6 payload length (no extension headers on a local TCP segment).
			rule = append(rule,
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 4, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, uint16(4*dataOffset))},
			)
		} else {
			// ip length, with a 20-byte IP header (ip ihl 5).
			rule = append(rule,
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 0, Len: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x45}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 2, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, uint16(20+4*dataOffset))},
			)
		}
		rule = append(rule, loadConnectionKey(ipv6)...)
		rule = append(rule,
			&expr.Lookup{SourceRegister: unix.NFT_REG32_00, SetName: hold.Name, SetID: hold.ID},
			&expr.Verdict{Kind: expr.VerdictDrop},
		)
		rules = append(rules, rule)
	}
	return rules
}

// connectionRules are one connection's elements in the firewall's sets.
type connectionRules struct {
	fw     *firewall
	key    []byte
	ipv6   bool
	name   string // "remote from local port", for messages
	inMSS  bool
	inHold bool
}

// rewriteMSS adds the connection to the MSS map: its SYN will announce mss. The
// element expires after ttl.
func (fw *firewall) rewriteMSS(remote netip.AddrPort, localPort uint16, mss int, ttl time.Duration) (*connectionRules, error) {
	c := &connectionRules{fw: fw, key: connectionKey(remote, localPort), ipv6: remote.Addr().Unmap().Is6(),
		name: fmt.Sprintf("%s from local port %d", remote, localPort)}
	element := nftables.SetElement{Key: c.key, Val: binary.BigEndian.AppendUint16(nil, uint16(mss)), Timeout: ttl}
	if err := fw.addElement(fw.mssMap(c.ipv6), element); err != nil {
		return nil, fmt.Errorf("rewrite the MSS of the connection to %s (nftables table %s): %w", c.name, fw.table.Name, err)
	}
	c.inMSS = true
	return c, nil
}

// holdACKs adds the connection to the hold set: its pure ACKs are dropped from
// now on, for at most ttl.
func (c *connectionRules) holdACKs(ttl time.Duration) error {
	if err := c.fw.addElement(c.fw.holdSet(c.ipv6), nftables.SetElement{Key: c.key, Timeout: ttl}); err != nil {
		return fmt.Errorf("hold back the ACKs of the connection to %s (nftables table %s): %w", c.name, c.fw.table.Name, err)
	}
	c.inHold = true
	return nil
}

// remove deletes the connection's elements (gone already is no error), in one
// netlink batch.
func (c *connectionRules) remove() error {
	var sets []*nftables.Set
	if c.inHold {
		sets = append(sets, c.fw.holdSet(c.ipv6))
		c.inHold = false
	}
	if c.inMSS {
		sets = append(sets, c.fw.mssMap(c.ipv6))
		c.inMSS = false
	}
	if err := c.fw.deleteElements(sets, c.key); err != nil {
		return fmt.Errorf("remove the connection to %s from nftables table %s (its elements expire by themselves): %w", c.name, c.fw.table.Name, err)
	}
	return nil
}

// addElement adds (or replaces: a port reused within an element's life) one
// element, in one netlink batch.
func (fw *firewall) addElement(set *nftables.Set, element nftables.SetElement) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if err := fw.conn.SetAddElements(set, []nftables.SetElement{element}); err != nil {
		return err
	}
	err := fw.conn.Flush()
	if errors.Is(err, unix.EEXIST) {
		if err = fw.conn.SetDeleteElements(set, []nftables.SetElement{{Key: element.Key}}); err != nil {
			return err
		}
		if err = fw.conn.SetAddElements(set, []nftables.SetElement{element}); err != nil {
			return err
		}
		err = fw.conn.Flush()
	}
	return err
}

// deleteElements deletes the key from each set, in one batch. A batch that
// fails (an element gone already: ENOENT) is applied not at all, so each set
// is then tried alone.
func (fw *firewall) deleteElements(sets []*nftables.Set, key []byte) error {
	if len(sets) == 0 {
		return nil
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	for _, set := range sets {
		if err := fw.conn.SetDeleteElements(set, []nftables.SetElement{{Key: key}}); err != nil {
			return err
		}
	}
	err := fw.conn.Flush()
	if err == nil || !errors.Is(err, unix.ENOENT) || len(sets) == 1 {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	var errs []error
	for _, set := range sets {
		if err := fw.conn.SetDeleteElements(set, []nftables.SetElement{{Key: key}}); err != nil {
			return err
		}
		if err := fw.conn.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// remove deletes the table with its chain, rules and sets.
func (fw *firewall) remove() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.conn.DelTable(fw.table)
	if err := fw.conn.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete nftables table %s (slowstart clean removes it): %w", fw.table.Name, err)
	}
	return nil
}

// Clean removes the package's nftables tables left in the process's network
// namespace by processes that are no longer running.
func Clean(ctx context.Context) error {
	_, err := CleanNamespace(ctx, "")
	return err
}

// CleanNamespace removes the package's tables left by dead processes in the
// network namespace at netnsPath (the process's own when empty), and returns
// their names. A table is removed only when its marker proves that a process of
// this package made it and that the process is gone; any other table, whatever
// its name, is left alone.
func CleanNamespace(ctx context.Context, netnsPath string) (removed []string, err error) {
	conn, release, err := openNftables(netnsPath)
	if err != nil {
		return nil, err
	}
	defer release()
	return cleanStale(ctx, conn, false)
}

// cleanStale removes the tables of dead owners (with all, of any owner but this
// process, which removes its own when done).
func cleanStale(ctx context.Context, conn *nftables.Conn, all bool) ([]string, error) {
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, fmt.Errorf("list nftables tables (needs root and nf_tables): %w", err)
	}
	var removed []string
	for _, table := range tables {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		o, ok := tableOwner(conn, table)
		if !ok || o == owner.This() || (!all && o.Alive()) {
			continue
		}
		conn.DelTable(table)
		if err := conn.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
			return removed, fmt.Errorf("delete leftover nftables table %s: %w", table.Name, err)
		}
		removed = append(removed, table.Name)
	}
	return removed, nil
}

// tableOwner returns the process a table's marker names, when the table is one
// this package made: its name is tableName of that process and its output
// chain's first rule carries the marker.
func tableOwner(conn *nftables.Conn, table *nftables.Table) (owner.Process, bool) {
	pidText, ok := strings.CutPrefix(table.Name, TablePrefix)
	if !ok {
		return owner.Process{}, false
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return owner.Process{}, false
	}
	rules, err := conn.GetRules(table, &nftables.Chain{Name: "output", Table: table})
	if err != nil || len(rules) == 0 {
		return owner.Process{}, false
	}
	comment, ok := userdata.GetString(rules[0].UserData, userdata.TypeComment)
	if !ok {
		return owner.Process{}, false
	}
	o, ok := owner.Parse(markerKind, comment)
	if !ok || o.PID != pid {
		return owner.Process{}, false
	}
	return o, true
}

// Tables returns the names of the package's nftables tables in the namespace
// (a path such as /run/netns/NAME; empty: this process's): what a test or
// slowstart clean finds left behind.
func Tables(netnsPath string) ([]string, error) {
	conn, release, err := openNftables(netnsPath)
	if err != nil {
		return nil, err
	}
	defer release()
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, fmt.Errorf("list nftables tables: %w", err)
	}
	var names []string
	for _, t := range tables {
		if strings.HasPrefix(t.Name, TablePrefix) {
			names = append(names, t.Name)
		}
	}
	return names, nil
}

// CleanStale removes, before a probe, survey or watch starts, the tables of
// this package that killed processes left in the namespace the run uses
// (CleanNamespace): their rules would stall its connections from the same
// local ports. It says so on w, one line per table. Without the privilege to
// read nftables (a capture-only probe) it does nothing.
func CleanStale(ctx context.Context, netnsPath string, w io.Writer) {
	removed, err := CleanNamespace(ctx, netnsPath)
	if err != nil {
		return
	}
	for _, name := range removed {
		fmt.Fprintf(w, "slowstart: removed the nftables table %s that a killed run left\n", name)
	}
}

// netnsDir is where `ip netns add NAME` puts named network namespaces.
const netnsDir = "/run/netns"

// CleanEveryNamespace removes the tables of this package that dead processes
// left (CleanNamespace) in this network namespace and in every named one,
// says each on w, and returns how many.
func CleanEveryNamespace(ctx context.Context, w io.Writer) (int, error) {
	namespaces := []string{""}
	entries, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("list %s: %w", netnsDir, err)
	}
	for _, e := range entries {
		namespaces = append(namespaces, filepath.Join(netnsDir, e.Name()))
	}
	count := 0
	var errs []error
	for _, ns := range namespaces {
		removed, err := CleanNamespace(ctx, ns)
		if err != nil {
			if ns != "" {
				continue // not a namespace (a leftover mount point), or one being removed
			}
			errs = append(errs, err)
		}
		where := "this network namespace"
		if ns != "" {
			where = "network namespace " + filepath.Base(ns)
		}
		for _, name := range removed {
			fmt.Fprintf(w, "removed nftables table inet %s in %s\n", name, where)
			count++
		}
	}
	return count, errors.Join(errs...)
}
