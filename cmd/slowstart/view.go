package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/demo"
	"github.com/slowstart/slowstart/field"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/web"
)

func newViewCommand() *cobra.Command {
	var (
		listen   string
		port     int
		htmlPath string
		server   string
		iface    string
		pcapPath string
		keep     int
		keylog   string
	)
	cmd := &cobra.Command{
		Use:   "view {FILE | --live IFACE}",
		Short: "See a capture, a Report or a live capture in the browser: connections, rounds, windows",
		Long: `Show a capture (pcap or pcapng) or a Report (JSON from 'slowstart analyze --json';
or a page load from 'probe --browser --json', with its requests on their
connections and the critical path; or a store of 'slowstart field --store': a
panel per client network with the distribution of the round trips, the RTT,
round 1's bytes or the response time over time, and the marks of tune's
changes) as a web page: every connection on one time axis grouped by server, each
connection's time-sequence graph with its rounds, the segments of each round
against ideal slow start, and a summary of the initial window and what limited
the transfer. (The initial window, IW, is how many segments a new connection may
send before its first ACK comes back: each round trip after it about doubles.)

By default the page is served on 127.0.0.1 at a free port (or --listen) until
Ctrl-C; the URL is printed. --html OUT writes one self-contained HTML file
instead (code and data inline, works offline) to attach to a bug report.

A Report made without packets shows no time-sequence graph: view the capture
itself for that.

--live IFACE captures on an interface instead, for watching a site while you
click around it: each TCP connection is analyzed when it completes (FIN or RST
and then 2 s quiet, or 3 s idle; an idle connection that carries more later is
shown again, updated) with the same analysis as 'analyze', and appears on the
open page at once (a "live" mark and a count in the header). The page keeps the
most recent --keep connections and says how many older ones it dropped.
--server HOST[:PORT] (or :PORT) keeps only the connections with that server,
filtered in the kernel; --pcap FILE also writes every captured packet to FILE.
Live capture needs root or CAP_NET_RAW (setcap cap_net_raw+ep slowstart).
Ctrl-C stops the capture and the server.`,
		Example: `  slowstart view page.pcap                      # serve at http://127.0.0.1:PORT/
  slowstart view page.pcap --listen :8040
  slowstart view page.pcap --html page.html     # one file to share
  slowstart view page.pcap --keylog keys.txt    # TLS decrypted: every request with its rounds
  slowstart view field.db                       # a field store: per network, over time
  slowstart analyze page.pcap --json > r.json && slowstart view r.json
  sudo slowstart view --live eth0 --server 203.0.113.7:443   # watch one site live
  sudo slowstart view --live lo --server :8080 --pcap seen.pcap`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return web.View(cmd.Context(), web.ViewOptions{Path: strings.Join(args, ""), Live: iface, Pcap: pcapPath, Keep: keep,
				KeepGiven: cmd.Flags().Changed("keep"), Listen: listen, Port: port, HTML: htmlPath, Server: server, KeyLog: keylog,
				Tool: "slowstart " + version, FieldStore: field.ViewStore, Schemas: map[string]web.ReportReader{demo.Schema: demoReport}},
				cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1", "the address to serve on: an IP address, ADDR:PORT or :PORT (port 0 or none: any free port); anything but loopback exposes the capture's contents to the network")
	cmd.Flags().IntVar(&port, "port", 0, "the TCP port to serve on (0: any free port)")
	cmd.Flags().StringVar(&htmlPath, "html", "", "write one self-contained HTML file to this path ('-': standard output) instead of serving")
	cmd.Flags().StringVar(&server, "server", "", "the server's HOST[:PORT] (or :PORT): only its connections, and its side where the SYN was not captured (--live: filtered in the kernel)")
	cmd.Flags().StringVar(&iface, "live", "", "capture live on this interface (e.g. eth0, lo) and show each connection as it completes")
	cmd.Flags().StringVar(&pcapPath, "pcap", "", "(--live) also write every captured packet to this pcap file")
	cmd.Flags().IntVar(&keep, "keep", web.DefaultFeedKeep, "(--live) the most connections the page keeps; older ones are dropped")
	cmd.Flags().StringVar(&keylog, "keylog", "", "(captures) decrypt TLS with the secrets of this key log (NSS format, as SSLKEYLOGFILE writes; $SSLKEYLOGFILE when not given): every request on its connection with its rounds")
	cmd.Flags().MarkDeprecated("port", "use --listen [ADDR]:PORT instead")
	renamed(cmd.Flags(), "filter", "server")
	return cmd
}

// demoReport reads the demo's JSON (probe --json with no URL) as one Report of
// its page loads' connections.
func demoReport(data []byte) (*report.Report, error) {
	var out demo.Output
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("not the demo's JSON: %w", err)
	}
	return out.Merged(), nil
}
