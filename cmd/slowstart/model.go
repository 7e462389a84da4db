package main

import (
	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/model"
	"github.com/slowstart/slowstart/units"
)

func newModelCommand() *cobra.Command {
	var f model.Inputs
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "model",
		Short: "Napkin math done right: round trips and time for a size, path, IW, window and TLS",
		Long: `Predict the first load of one response over one path: the round trips by phase
(TCP handshake, TLS handshake, HTTP data rounds), the time to the first and the last
byte, and the byte budget of each round ("round 1 carries 14.5 KB, rounds 1-2 43 KB").

The prediction comes from a packet-level model of Linux TCP: the congestion window
in packets (+1 per packet acknowledged in slow start, so delayed ACKs do not slow its
growth but can hold the last odd segment up to 40 ms), HyStart and CUBIC, the
client's receive window (a Linux client's 64 KB growing with autotuning, or --rwnd),
the serialization of every packet and its headers at the link rate, the switch from
window-limited to rate-limited transfer, and the TLS server flight against the IW.
Equation 1 of Dukkipati et al. (2010) is shown beside it for comparison.

` + units.Help,
		Example: `  slowstart model --size 160KB --rtt 130ms --rate 15mbit --iw 3,10,32
  slowstart model --size 160KB --rtt 130ms --iw 10 --tls 1.3 --chain 6.9KB --rwnd 64KB
  slowstart model --size 42KB --rtt 70ms --rate 1.2mbit --iw 3,10 --json`,
		Args:        cobra.NoArgs,
		Annotations: abandonOnInterrupt,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return model.Print(f, asJSON, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Size, "size", "160KB", "response body size, e.g. 160KB, 29x1448 (as lab run's --size)")
	fl.StringVar(&f.Headers, "headers", "", "response headers on the wire, added to --size (default: the lab's built-in server's, about 145 B)")
	fl.StringVar(&f.RTT, "rtt", "130ms", "round-trip propagation delay")
	fl.StringVar(&f.Rate, "rate", "0", "bottleneck rate, e.g. 15mbit; 0 for none")
	fl.StringVar(&f.IW, "iw", "3,10,32", "initial windows to compare (segments, comma-separated)")
	fl.StringVar(&f.Rwnd, "rwnd", "linux", "the client's receive window, e.g. 64KB; linux: a Linux client's default (64 KB, autotuned)")
	fl.IntVar(&f.MSS, "mss", model.DefaultMSS, "payload bytes per full segment")
	fl.StringVar(&f.TLS, "tls", "none", "TLS version: 1.2, 1.3 or none")
	fl.StringVar(&f.Chain, "chain", "4KB", "certificate chain size on the wire, with --tls")
	fl.BoolVar(&f.DelayedACK, "delayed-ack", false, "the client ACKs every second segment (40 ms timer) instead of every segment")
	fl.StringVar(&f.CC, "cc", model.CCCubic, "congestion control: cubic (with HyStart) or reno")
	fl.BoolVar(&f.LabLatency, "lab", false, "add the lab's per-packet and server latencies, to compare with slowstart lab run")
	fl.BoolVar(&asJSON, "json", false, "print the prediction as JSON")
	return cmd
}
