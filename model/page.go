package model

import (
	"errors"
	"fmt"
	"math"
)

// A page load's critical path to the first render, predicted: a document and the
// render-blocking resources its head names (stylesheets, scripts), on the
// document's host or a second one, loaded by a browser that behaves as Chromium
// does on a first visit:
//
//   - at the navigation's start it opens the document's connection and one more to
//     the same host (a preconnect);
//   - it names the head's resources when the document's first round arrives (its
//     preload scanner reads the head in the first bytes) and requests them then:
//     over HTTP/2 on the one connection to their host (a new one to the second
//     host), behind the rest of the document; over HTTP/1.1 each on an idle
//     connection to its host (the document's once it has arrived whole, then the
//     preconnected one), else on a new one (up to six a host);
//   - images and other low-priority requests do not delay them (an HTTP/2 server
//     sends them after, by priority; over HTTP/1.1 they wait for free
//     connections), and the text has a system font, so the first render waits for
//     no font.
//
// Each connection is the packet-level model of Linux TCP (Simulate) with its
// requests at the times the browser sends them. The critical path is counted as
// package pageload counts it on a capture: the round trips of the document up to
// the round that named the resources, then for each resource the handshake of a
// connection opened for it and the rounds of its response (after those already
// counted on the same connection); the longest of these chains.

// PageParams describes a page load to predict.
type PageParams struct {
	// Path is the path and the server: RTTNs, RateBitsPerSecond, IW, MSS, TLS,
	// ChainBytes, DelayedACK, CC and the host delays (SizeBytes is ignored).
	Path Params
	// HTTP2 loads over HTTP/2 (one connection a host); HTTP/1.1 otherwise.
	HTTP2 bool
	// DocumentBytes is the document's response (HTTP headers and body).
	DocumentBytes int64
	// Resources are the render-blocking resources in the document's head, in its
	// order.
	Resources []PageResource
	// MaxConnectionsPerHost bounds HTTP/1.1 connections to a host (6 when 0).
	MaxConnectionsPerHost int
	// FirstRecordBytes is the size of the server's first TLS record of the
	// document: the browser reads the head (and names its resources) once that
	// record is whole. nginx fills records of 16 KB (ssl_buffer_size); Go's
	// crypto/tls starts with records of one segment. 0: the first segment.
	FirstRecordBytes int64
}

// PageResource is a render-blocking resource of the page.
type PageResource struct {
	Name  string
	Bytes int64 // its response: HTTP headers and body
	// SecondHost serves it from the second host name (connections of its own).
	SecondHost bool
}

// PagePrediction is what PageLoad predicts.
type PagePrediction struct {
	// CriticalPathRoundTrips is the critical path to the first render, in round
	// trips; CriticalPathMs the time from the navigation's start to the last byte
	// the first render waited for.
	CriticalPathRoundTrips int
	CriticalPathMs         float64
	// Document and Resources give each request's place and cost.
	Document  PageRequestPrediction
	Resources []PageRequestPrediction
	// Connections is how many connections the page opened (the preconnect included).
	Connections int
}

// PageRequestPrediction is one request's place on the critical path.
type PageRequestPrediction struct {
	Name string
	// Connection numbers the connections in the order they were opened (1: the
	// document's, 2: the preconnect); NewConnection says it was opened for this
	// request when the page named it.
	Connection    int
	NewConnection bool
	// HandshakeRoundTrips are the TCP and TLS round trips of a connection opened
	// for it; FirstRound and LastRound the rounds of its connection its response
	// arrived in; RoundTrips the critical path up to its last byte.
	HandshakeRoundTrips   int
	FirstRound, LastRound int
	RoundTrips            int
	LastByteMs            float64 // from the navigation's start
}

// PageLoad predicts the critical path of a page load (see the comment above).
// Over HTTP/1.1, when the document's connection and the preconnect are free at
// the same moment (the round that names the resources also ends the document),
// the first request binds to the document's connection, as Chromium did in most
// of the lab's loads; it sometimes takes the preconnect instead, and
// PageLoadRange counts both.
func PageLoad(pp PageParams) (PagePrediction, error) {
	return pageLoad(pp, false)
}

// pageLoad is PageLoad; laterFirst binds a request to the later-opened of two
// connections free at the same moment instead of the earlier.
func pageLoad(pp PageParams, laterFirst bool) (PagePrediction, error) {
	var out PagePrediction
	p := pp.Path
	p.SizeBytes, p.RequestAtNs, p.Requests = pp.DocumentBytes, 0, nil
	if err := p.Normalize(); err != nil {
		return out, err
	}
	if pp.DocumentBytes <= 0 {
		return out, errors.New("page: the document needs a size")
	}
	maxConns := pp.MaxConnectionsPerHost
	if maxConns == 0 {
		maxConns = 6
	}
	// The document, alone, tells when its first round arrives: when the browser
	// names the head's resources.
	doc, err := simulate(p, nil)
	if err != nil {
		return out, err
	}
	if len(doc.Responses) == 0 || doc.Responses[0].FirstRound == 0 {
		return out, errors.New("page: the model sent no document")
	}
	namedMs, namedRound := doc.Responses[0].ArrivalOf(min(max(pp.FirstRecordBytes, 1), pp.DocumentBytes))
	named := msToNs(namedMs)
	// Over HTTP/1.1 the document's connection is free again if the document had
	// arrived whole by then.
	docInOneRound := doc.Responses[0].LastRound <= namedRound
	handshake := doc.RoundTrips.TCP + doc.RoundTrips.TLS
	docFirst := doc.Responses[0].FirstRound

	// Connections and the requests they carry, opened at openNs, the requests sent
	// at sendNs (or when the connection is ready).
	type conn struct {
		host     int
		openNs   int64
		sendNs   int64
		requests []int // indexes into pp.Resources
		withDoc  bool
		fresh    bool // opened when the page named its resources
	}
	conns := []*conn{{host: 0, withDoc: true, sendNs: named}, {host: 0, sendNs: named}}
	if pp.HTTP2 {
		second := (*conn)(nil)
		for i, r := range pp.Resources {
			if !r.SecondHost {
				conns[0].requests = append(conns[0].requests, i)
				continue
			}
			if second == nil {
				second = &conn{host: 1, openNs: named, sendNs: named, fresh: true}
				conns = append(conns, second)
			}
			second.requests = append(second.requests, i)
		}
	} else {
		// Each request binds to the first connection of its host free for it (late
		// binding): the document's once the document has arrived, the preconnect
		// once ready, or a new one opened for it, whichever is first.
		probe := p
		probe.SizeBytes = 1
		fresh, err := simulate(probe, nil)
		if err != nil {
			return out, err
		}
		readyAfter := msToNs(fresh.ReadyMs)
		docDone := msToNs(doc.Responses[0].LastByteMs)
		if docInOneRound {
			docDone = named
		}
		free := map[*conn]int64{conns[0]: max(named, docDone), conns[1]: max(named, readyAfter)}
		counts := map[int]int{0: 2}
		for i, r := range pp.Resources {
			host := 0
			if r.SecondHost {
				host = 1
			}
			var best *conn
			for _, c := range conns {
				if c.host == host && len(c.requests) == 0 && (best == nil || free[c] < free[best] || (laterFirst && free[c] == free[best])) {
					best = c
				}
			}
			if best == nil || free[best] > named+readyAfter {
				if counts[host] >= maxConns {
					return out, fmt.Errorf("page: more than %d render-blocking requests to one host over HTTP/1.1: the model does not queue them", maxConns)
				}
				best = &conn{host: host, openNs: named, sendNs: named, fresh: true}
				conns = append(conns, best)
				counts[host]++
			}
			best.sendNs = max(best.sendNs, free[best])
			best.requests = append(best.requests, i)
		}
	}
	out.Connections = len(conns)
	out.Document = PageRequestPrediction{Name: "document", Connection: 1, NewConnection: true, HandshakeRoundTrips: handshake,
		FirstRound: docFirst, LastRound: doc.Responses[0].LastRound, LastByteMs: doc.Responses[0].LastByteMs}
	out.Document.RoundTrips = handshake + out.Document.LastRound - docFirst + 1
	out.CriticalPathRoundTrips, out.CriticalPathMs = out.Document.RoundTrips, out.Document.LastByteMs
	out.Resources = make([]PageRequestPrediction, len(pp.Resources))
	// Up to the round that named the resources.
	base := handshake + namedRound - docFirst + 1
	for ci, c := range conns {
		if len(c.requests) == 0 {
			continue
		}
		q := p
		q.Requests = nil
		sendAt := c.sendNs - c.openNs
		switch {
		case c.withDoc:
			q.SizeBytes = pp.DocumentBytes
			for _, i := range c.requests {
				q.Requests = append(q.Requests, Request{AtNs: sendAt, Bytes: pp.Resources[i].Bytes})
			}
		default:
			q.SizeBytes = pp.Resources[c.requests[0]].Bytes
			q.RequestAtNs = sendAt
			for _, i := range c.requests[1:] {
				q.Requests = append(q.Requests, Request{AtNs: sendAt, Bytes: pp.Resources[i].Bytes})
			}
		}
		res, err := simulate(q, nil)
		if err != nil {
			return out, err
		}
		responses := res.Responses
		if c.withDoc {
			responses = responses[1:]
		}
		for k, i := range c.requests {
			r := responses[k]
			pr := PageRequestPrediction{Name: pp.Resources[i].Name, Connection: ci + 1, NewConnection: c.fresh,
				FirstRound: r.FirstRound, LastRound: r.LastRound, LastByteMs: float64(c.openNs)/1e6 + r.LastByteMs}
			switch {
			case c.withDoc:
				// Its rounds after the document's first, on the same connection.
				pr.RoundTrips = max(handshake+r.LastRound-docFirst+1, base)
			case c.fresh:
				pr.HandshakeRoundTrips = res.RoundTrips.TCP + res.RoundTrips.TLS
				pr.RoundTrips = base + pr.HandshakeRoundTrips + r.LastRound - r.FirstRound + 1
			default:
				// Preconnected: ready by the time the page named it (or waited for).
				if wait := msToNs(res.ReadyMs) - named; wait > 0 {
					pr.HandshakeRoundTrips = int(math.Ceil(float64(wait) / float64(p.RTTNs)))
				}
				pr.RoundTrips = base + pr.HandshakeRoundTrips + r.LastRound - r.FirstRound + 1
			}
			out.Resources[i] = pr
			if pr.RoundTrips > out.CriticalPathRoundTrips || (pr.RoundTrips == out.CriticalPathRoundTrips && pr.LastByteMs > out.CriticalPathMs) {
				out.CriticalPathRoundTrips = pr.RoundTrips
			}
			out.CriticalPathMs = max(out.CriticalPathMs, pr.LastByteMs)
		}
	}
	return out, nil
}

func msToNs(ms float64) int64 { return int64(math.Round(ms * 1e6)) }

// PageLoadRange predicts the critical path with the responses slackBytes smaller
// and larger too (headers and framing a server adds or leaves out, how its writes
// fall into segments), the document and the resources each way, and returns the
// fewest and most round trips: where they differ, the page sits on a boundary the
// model can't call. Each is predicted with both bindings of HTTP/1.1 requests to
// connections free at the same moment (see PageLoad): which one Chromium takes
// is a race the model can't call either.
func PageLoadRange(pp PageParams, slackBytes int64) (minRoundTrips, maxRoundTrips int, err error) {
	minRoundTrips, maxRoundTrips = math.MaxInt, 0
	for _, docDelta := range []int64{0, -slackBytes, slackBytes} {
		for _, delta := range []int64{0, -slackBytes, slackBytes} {
			q := pp
			q.DocumentBytes = max(pp.DocumentBytes+docDelta, 1)
			q.Resources = append([]PageResource(nil), pp.Resources...)
			for i := range q.Resources {
				q.Resources[i].Bytes = max(q.Resources[i].Bytes+delta, 1)
			}
			for _, laterFirst := range []bool{false, true} {
				pred, err := pageLoad(q, laterFirst)
				if err != nil {
					return 0, 0, err
				}
				minRoundTrips = min(minRoundTrips, pred.CriticalPathRoundTrips)
				maxRoundTrips = max(maxRoundTrips, pred.CriticalPathRoundTrips)
			}
		}
	}
	return minRoundTrips, maxRoundTrips, nil
}
