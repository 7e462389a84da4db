package main

import (
	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/model"
	"github.com/slowstart/slowstart/units"
)

// modelFlags are the model command's flags.
type modelFlags struct {
	size, headers, rtt, rate, iw, rwnd, tls, chain, cc string
	mss                                                int
	delayedACK, labLatency, asJSON                     bool
}

// inputs are the model's inputs as the flags give them.
func (f *modelFlags) inputs() model.Inputs {
	return model.Inputs{Size: f.size, Headers: f.headers, RTT: f.rtt, Rate: f.rate, IW: f.iw, Rwnd: f.rwnd, TLS: f.tls, Chain: f.chain,
		CC: f.cc, MSS: f.mss, DelayedACK: f.delayedACK, LabLatency: f.labLatency}
}

func newModelCommand() *cobra.Command {
	var f modelFlags
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
			return model.Print(f.inputs(), f.asJSON, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.size, "size", "160KB", "response body size, e.g. 160KB, 29x1448 (as lab run's --size)")
	fl.StringVar(&f.headers, "headers", "", "response headers on the wire, added to --size (default: the lab's built-in server's, about 145 B)")
	fl.StringVar(&f.rtt, "rtt", "130ms", "round-trip propagation delay")
	fl.StringVar(&f.rate, "rate", "0", "bottleneck rate, e.g. 15mbit; 0 for none")
	fl.StringVar(&f.iw, "iw", "3,10,32", "initial windows to compare (segments, comma-separated)")
	fl.StringVar(&f.rwnd, "rwnd", "linux", "the client's receive window, e.g. 64KB; linux: a Linux client's default (64 KB, autotuned)")
	fl.IntVar(&f.mss, "mss", model.DefaultMSS, "payload bytes per full segment")
	fl.StringVar(&f.tls, "tls", "none", "TLS version: 1.2, 1.3 or none")
	fl.StringVar(&f.chain, "chain", "4KB", "certificate chain size on the wire, with --tls")
	fl.BoolVar(&f.delayedACK, "delayed-ack", false, "the client ACKs every second segment (40 ms timer) instead of every segment")
	fl.StringVar(&f.cc, "cc", model.CCCubic, "congestion control: cubic (with HyStart) or reno")
	fl.BoolVar(&f.labLatency, "lab", false, "add the lab's per-packet and server latencies, to compare with slowstart lab run")
	fl.BoolVar(&f.asJSON, "json", false, "print the prediction as JSON")
	return cmd
}
