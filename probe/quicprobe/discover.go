package quicprobe

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Alternative is one alternative service of an Alt-Svc header (RFC 7838 §3): the same
// origin served over Protocol ("h3", "h2", ...) at Host:Port; Host is empty when it
// is the origin's own.
type Alternative struct {
	Protocol string
	Host     string
	Port     uint16
	// MaxAgeSeconds is how long a client may remember it (ma; 24 hours when absent).
	MaxAgeSeconds int64
}

// ParseAltSvc reads an Alt-Svc header value: alternatives separated by commas, each
// protocol-id="[host]:port" with parameters after semicolons; "clear" gives none.
// What it cannot read is skipped. Protocol IDs are percent-decoded (h3, h3-29).
func ParseAltSvc(header string) []Alternative {
	var out []Alternative
	for _, item := range splitOutsideQuotes(header, ',') {
		item = strings.TrimSpace(item)
		if item == "" || strings.EqualFold(item, "clear") {
			continue
		}
		parts := splitOutsideQuotes(item, ';')
		id, value, ok := strings.Cut(strings.TrimSpace(parts[0]), "=")
		if !ok {
			continue
		}
		proto, err := percentDecode(strings.TrimSpace(id))
		if err != nil {
			continue
		}
		authority := strings.Trim(strings.TrimSpace(value), `"`)
		host, portText, err := net.SplitHostPort(authority)
		if err != nil {
			continue
		}
		port, err := strconv.ParseUint(portText, 10, 16)
		if err != nil || port == 0 {
			continue
		}
		alt := Alternative{Protocol: proto, Host: host, Port: uint16(port), MaxAgeSeconds: 86400}
		for _, p := range parts[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "ma") {
				if n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(v), `"`), 10, 64); err == nil && n >= 0 {
					alt.MaxAgeSeconds = n
				}
			}
		}
		out = append(out, alt)
	}
	return out
}

// HTTP3Alternative returns the first alternative of an Alt-Svc header that serves
// HTTP/3 version 1 (protocol "h3"), if any.
func HTTP3Alternative(header string) (Alternative, bool) {
	for _, a := range ParseAltSvc(header) {
		if a.Protocol == "h3" && a.MaxAgeSeconds > 0 {
			return a, true
		}
	}
	return Alternative{}, false
}

func splitOutsideQuotes(s string, sep byte) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '"':
			quoted = !quoted
		case s[i] == '\\' && quoted:
			i++
		case s[i] == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func percentDecode(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errors.New("cut percent escape")
		}
		n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", err
		}
		b.WriteByte(byte(n))
		i += 2
	}
	return b.String(), nil
}

// HTTPSRecord is what a DNS HTTPS record (RFC 9460) says of a name's service: the
// application protocols it offers (ALPN) and the port, when it names one.
type HTTPSRecord struct {
	Name     string // the name asked for
	Target   string // the service's name ("." for the name itself)
	Priority uint16
	ALPN     []string
	Port     uint16 // 0: the URL's
}

// OffersHTTP3 reports whether the record lists HTTP/3 (h3) among its protocols.
func (r HTTPSRecord) OffersHTTP3() bool {
	for _, p := range r.ALPN {
		if p == "h3" {
			return true
		}
	}
	return false
}

// SystemResolver returns the first name server of /etc/resolv.conf, port 53.
func SystemResolver() (netip.AddrPort, error) {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return netip.AddrPort{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil {
				return netip.AddrPortFrom(a.Unmap(), 53), nil
			}
		}
	}
	return netip.AddrPort{}, errors.New("no nameserver in /etc/resolv.conf")
}

// LookupHTTPS asks server for the HTTPS records of name (over UDP, one query) and
// returns the service-mode record of the highest priority (lowest number), following
// one alias (priority 0) to its target. It says (false, nil) when there is none.
func LookupHTTPS(ctx context.Context, server netip.AddrPort, name string) (HTTPSRecord, bool, error) {
	rec, ok, alias, err := queryHTTPS(ctx, server, name)
	if err == nil && !ok && alias != "" {
		rec, ok, _, err = queryHTTPS(ctx, server, alias)
	}
	rec.Name = name
	return rec, ok, err
}

func queryHTTPS(ctx context.Context, server netip.AddrPort, name string) (rec HTTPSRecord, ok bool, alias string, err error) {
	fqdn := name
	if !strings.HasSuffix(fqdn, ".") {
		fqdn += "."
	}
	qname, err := dnsmessage.NewName(fqdn)
	if err != nil {
		return rec, false, "", fmt.Errorf("DNS name %q: %w", name, err)
	}
	var idBytes [2]byte
	_, _ = rand.Read(idBytes[:])
	id := binary.BigEndian.Uint16(idBytes[:])
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return rec, false, "", err
	}
	if err := b.Question(dnsmessage.Question{Name: qname, Type: dnsmessage.TypeHTTPS, Class: dnsmessage.ClassINET}); err != nil {
		return rec, false, "", err
	}
	query, err := b.Finish()
	if err != nil {
		return rec, false, "", err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", server.String())
	if err != nil {
		return rec, false, "", fmt.Errorf("asking %s for HTTPS records: %w", server, err)
	}
	defer conn.Close()
	deadline := time.Now().Add(2 * time.Second)
	if dl, has := ctx.Deadline(); has && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write(query); err != nil {
		return rec, false, "", fmt.Errorf("asking %s for HTTPS records: %w", server, err)
	}
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return rec, false, "", fmt.Errorf("asking %s for HTTPS records of %s: %w", server, name, err)
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil || h.ID != id || !h.Response {
			continue // not the answer to this query
		}
		if h.RCode != dnsmessage.RCodeSuccess && h.RCode != dnsmessage.RCodeNameError {
			return rec, false, "", fmt.Errorf("%s answered %v for the HTTPS records of %s", server, h.RCode, name)
		}
		if err := p.SkipAllQuestions(); err != nil {
			return rec, false, "", err
		}
		for {
			rh, err := p.AnswerHeader()
			if errors.Is(err, dnsmessage.ErrSectionDone) {
				return rec, ok, alias, nil
			}
			if err != nil {
				return rec, false, "", err
			}
			if rh.Type != dnsmessage.TypeHTTPS {
				if err := p.SkipAnswer(); err != nil {
					return rec, false, "", err
				}
				continue
			}
			r, err := p.HTTPSResource()
			if err != nil {
				return rec, false, "", err
			}
			if r.Priority == 0 {
				alias = strings.TrimSuffix(r.Target.String(), ".")
				continue
			}
			if ok && r.Priority >= rec.Priority {
				continue
			}
			rec = HTTPSRecord{Target: r.Target.String(), Priority: r.Priority}
			if v, has := r.GetParam(dnsmessage.SVCParamALPN); has {
				for len(v) > 0 && int(v[0]) < len(v) {
					rec.ALPN = append(rec.ALPN, string(v[1:1+v[0]]))
					v = v[1+v[0]:]
				}
			}
			if v, has := r.GetParam(dnsmessage.SVCParamPort); has && len(v) == 2 {
				rec.Port = binary.BigEndian.Uint16(v)
			}
			ok = true
		}
	}
}
