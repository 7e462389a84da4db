// Command livecap runs slowstart's live packet path (capture.OpenLive and
// live.Watch, as `view --live` and the probe use them) on an interface until
// SIGINT or SIGTERM, then writes each connection's last report as one JSON line
// (sorted by Index, written as `analyze --jsonl` writes them) and prints the capture's
// counts, kernel drops among them, as JSON on stderr. For bench/live.sh, which
// compares its reports with `analyze` of a tcpdump capture of the same traffic.
// It is a benchmarking aid, not part of the slowstart binary.
//
//	livecap -i IFACE [-snaplen N] [-buffer BYTES] [-packets] [-ring] [-pcap FILE.pcap] -out FILE.jsonl
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"syscall"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/live"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/web"
)

func main() {
	iface := flag.String("i", "", "interface to capture on (required)")
	snaplen := flag.Int("snaplen", capture.DefaultSnaplen, "bytes kept per packet, from the IP header on")
	buffer := flag.Int("buffer", 0, "kernel receive buffer in bytes (0: capture.DefaultBufferBytes)")
	packets := flag.Bool("packets", false, "keep per-packet lists and put each report on a live view's feed, as the live view does")
	ring := flag.Bool("ring", false, "read through a packet ring (capture.LiveOptions.Ring), as the live view does")
	out := flag.String("out", "", "where to write the reports, one JSON line each (required)")
	pcap := flag.String("pcap", "", "also write every packet read to this pcap file, as view --live --pcap does (its analysis must give the same reports)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the capture here")
	flag.Parse()
	if *iface == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "livecap:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if err := run(*iface, *snaplen, *buffer, *packets, *ring, *out, *pcap); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "livecap:", err)
		os.Exit(1)
	}
}

// counts is what livecap prints at the end.
type counts struct {
	capture.LiveStats
	Connections int `json:"connections"`
}

func run(iface string, snaplen, buffer int, packets, ring bool, out, pcap string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	lv, err := capture.OpenLive(ctx, capture.LiveOptions{Interface: iface, Snaplen: snaplen, BufferBytes: buffer, Ring: ring})
	if err != nil {
		return err
	}
	defer lv.Close()
	var tee *capture.PcapWriter
	if pcap != "" {
		f, err := os.Create(pcap)
		if err != nil {
			return err
		}
		defer f.Close()
		if tee, err = capture.NewPcapWriter(f, 0); err != nil {
			return err
		}
		lv.Tee(tee)
	}
	// Ready: bench/live.sh starts the traffic once this line is out.
	fmt.Fprintln(os.Stderr, "livecap: capturing on", iface)
	last := map[int]report.Connection{}
	// With the live view's settings, each report goes where the view puts it
	// (its Feed: the report as JSON, the latest 300 kept), on the same
	// goroutine, and is kept here without its packets.
	var feed *web.Feed
	if packets {
		feed = web.NewFeed(0)
	}
	err = live.Watch(ctx, lv, live.WatchOptions{Analysis: analysis.Options{Tool: "slowstart", Packets: packets}},
		func(c report.Connection) {
			if feed != nil {
				if err := feed.Put(c); err != nil {
					fmt.Fprintln(os.Stderr, "livecap:", err)
				}
				c.Packets = nil
			}
			last[c.Index] = c
		})
	if err != nil {
		return err
	}
	if tee != nil {
		lv.Tee(nil)
		if err := tee.Flush(); err != nil {
			return err
		}
	}
	conns := make([]report.Connection, 0, len(last))
	for _, c := range last {
		conns = append(conns, c)
	}
	sort.Slice(conns, func(i, j int) bool { return conns[i].Index < conns[j].Index })
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	// The writer of analyze --jsonl, so that the lines compare byte for byte.
	w := report.NewJSONLStream(f)
	for i := range conns {
		conns[i].Packets, conns[i].PacketStride = nil, 0
		if err := w.Connection(&conns[i]); err != nil {
			return err
		}
	}
	if err := w.End(report.Source{}, nil); err != nil {
		return err
	}
	b, _ := json.Marshal(counts{LiveStats: lv.Stats(), Connections: len(conns)})
	fmt.Fprintln(os.Stderr, string(b))
	return f.Close()
}
