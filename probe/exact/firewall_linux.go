//go:build linux

package exact

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// TablePrefix begins the name of every nftables table the package makes:
// slowstart_exact_<pid>_<local port>.
const TablePrefix = "slowstart_exact_"

// firewall is the nftables table of one run: an output chain at mangle
// priority with rules that match only the run's connection.
type firewall struct {
	conn  *nftables.Conn
	table *nftables.Table
	chain *nftables.Chain
	match []expr.Any // this connection's outgoing packets
	ipv6  bool
}

// openNftables returns a connection to nf_tables in the namespace at netnsPath
// (the process's own when empty) and a function that releases it.
func openNftables(netnsPath string) (*nftables.Conn, func(), error) {
	if netnsPath == "" {
		conn, err := nftables.New()
		if err != nil {
			return nil, nil, fmt.Errorf("open nf_tables: %w", err)
		}
		return conn, func() {}, nil
	}
	handle, err := netns.GetFromPath(netnsPath)
	if err != nil {
		return nil, nil, fmt.Errorf("open network namespace %s (see ip netns list): %w", netnsPath, err)
	}
	conn, err := nftables.New(nftables.WithNetNSFd(int(handle)))
	if err != nil {
		handle.Close()
		return nil, nil, fmt.Errorf("open nf_tables in %s: %w", netnsPath, err)
	}
	return conn, func() { handle.Close() }, nil
}

// tableName names the table of the run of process pid on localPort.
func tableName(pid int, localPort uint16) string {
	return TablePrefix + strconv.Itoa(pid) + "_" + strconv.Itoa(int(localPort))
}

// installFirewall makes the run's table with its one rule for now: rewrite the
// MSS option of the connection's SYN to mss.
func installFirewall(conn *nftables.Conn, remote netip.AddrPort, localPort uint16, mss int) (*firewall, error) {
	return installFirewallAs(conn, os.Getpid(), remote, localPort, mss)
}

// installFirewallAs is installFirewall with the table named after process pid.
func installFirewallAs(conn *nftables.Conn, pid int, remote netip.AddrPort, localPort uint16, mss int) (*firewall, error) {
	remoteAddr := remote.Addr().Unmap()
	fw := &firewall{conn: conn, ipv6: remoteAddr.Is6()}
	fw.table = &nftables.Table{Name: tableName(pid, localPort), Family: nftables.TableFamilyINet}
	policy := nftables.ChainPolicyAccept
	conn.AddTable(fw.table)
	fw.chain = conn.AddChain(&nftables.Chain{
		Name:     "output",
		Table:    fw.table,
		Type:     nftables.ChainTypeFilter,
		Hooknum:  nftables.ChainHookOutput,
		Priority: nftables.ChainPriorityMangle,
		Policy:   &policy,
	})
	fw.match = matchConnection(remoteAddr, remote.Port(), localPort)

	// tcp flags & (syn|ack) == syn: the SYN, not the SYN/ACK.
	mssRule := append(cloneExprs(fw.match),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{tcpSYN | tcpACK}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{tcpSYN}},
		// tcp option maxseg size set mss (the kernel fixes the checksum, and
		// only ever lowers the value).
		&expr.Immediate{Register: 1, Data: binary.BigEndian.AppendUint16(nil, uint16(mss))},
		&expr.Exthdr{SourceRegister: 1, Op: expr.ExthdrOpTcpopt, Type: tcpOptionMSS, Offset: 2, Len: 2},
	)
	conn.AddRule(&nftables.Rule{Table: fw.table, Chain: fw.chain, Exprs: mssRule})
	if err := conn.Flush(); err != nil {
		// A failed batch is applied whole or not at all: nothing to remove.
		return nil, fmt.Errorf("add nftables table %s (needs root and nf_tables): %w", fw.table.Name, err)
	}
	return fw, nil
}

const (
	tcpFIN       = 0x01
	tcpSYN       = 0x02
	tcpRST       = 0x04
	tcpACK       = 0x10
	tcpOptionMSS = 2
)

func cloneExprs(e []expr.Any) []expr.Any { return append([]expr.Any(nil), e...) }

// matchConnection matches TCP packets from localPort to remote:remotePort.
func matchConnection(remote netip.Addr, remotePort, localPort uint16) []expr.Any {
	family, addressOffset := byte(unix.NFPROTO_IPV4), uint32(16)
	if remote.Is6() {
		family, addressOffset = unix.NFPROTO_IPV6, 24
	}
	ports := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, localPort), remotePort)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{family}},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: addressOffset, Len: uint32(remote.BitLen() / 8)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: remote.AsSlice()},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ports},
	}
}

// dropPureACKs adds the rules that drop the connection's outgoing segments with
// no payload and none of SYN, FIN, RST: its pure ACKs. Segments with data (the
// request, the ClientHello) still leave. The payload is empty when the IP
// length is the IP header plus the TCP header (data offset × 4); one rule per
// data offset, since nf_tables compares a field with constants, not with
// another field.
func (fw *firewall) dropPureACKs() error {
	for dataOffset := 5; dataOffset <= 15; dataOffset++ {
		rule := append(cloneExprs(fw.match),
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{tcpSYN | tcpFIN | tcpRST}, Xor: []byte{0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 12, Len: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0xf0}, Xor: []byte{0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(dataOffset << 4)}},
		)
		if fw.ipv6 {
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
		rule = append(rule, &expr.Verdict{Kind: expr.VerdictDrop})
		fw.conn.AddRule(&nftables.Rule{Table: fw.table, Chain: fw.chain, Exprs: rule})
	}
	if err := fw.conn.Flush(); err != nil {
		return fmt.Errorf("add the rules that hold back ACKs to table %s: %w", fw.table.Name, err)
	}
	return nil
}

// remove deletes the table with its chain and rules.
func (fw *firewall) remove() error {
	fw.conn.DelTable(fw.table)
	if err := fw.conn.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete nftables table %s (remove it with: nft delete table inet %s): %w", fw.table.Name, fw.table.Name, err)
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
// their names.
func CleanNamespace(ctx context.Context, netnsPath string) (removed []string, err error) {
	conn, release, err := openNftables(netnsPath)
	if err != nil {
		return nil, err
	}
	defer release()
	return cleanStale(ctx, conn)
}

func cleanStale(ctx context.Context, conn *nftables.Conn) ([]string, error) {
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, fmt.Errorf("list nftables tables (needs root and nf_tables): %w", err)
	}
	var removed []string
	for _, table := range tables {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		pid, ok := tableOwner(table.Name)
		if !ok || processAlive(pid) {
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

// tableOwner returns the PID in a table name the package made.
func tableOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, TablePrefix)
	if !ok {
		return 0, false
	}
	pidText, _, _ := strings.Cut(rest, "_")
	pid, err := strconv.Atoi(pidText)
	return pid, err == nil && pid > 0
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// listOwnTables returns the names of the package's tables in the namespace.
func listOwnTables(netnsPath string) ([]string, error) {
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
