package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/har"
	"github.com/slowstart/slowstart/pageload"
	"github.com/slowstart/slowstart/report"
)

// loadHAR reads the page of a HAR (analyze --har) as the requests to place;
// its errors carry exit code 3.
func loadHAR(harPath string) (pageload.Input, error) {
	h, err := har.ReadFile(harPath)
	if err != nil {
		return pageload.Input{}, fileError(fmt.Errorf("--har: %w", err))
	}
	in, err := har.ToInput(h)
	if err != nil {
		return pageload.Input{}, fileError(fmt.Errorf("--har %s: %w", harPath, err))
	}
	if len(in.Requests) == 0 {
		return pageload.Input{}, fileError(fmt.Errorf("--har %s holds no request", harPath))
	}
	return in, nil
}

// placeHAR places a HAR's requests on the connections of rep (analyze --har)
// and prints the page load.
func placeHAR(cmd *cobra.Command, rep *report.Report, in pageload.Input, asJSON bool, htmlOut string) error {
	in.ClockOffsetNs = pageload.EstimateClockOffset(rep, in)
	page := pageload.Build(rep, in)
	if in.ClockOffsetNs != 0 {
		page.Warnings = append(page.Warnings, fmt.Sprintf("the HAR's clock was %.1f ms off the capture's (estimated from its connections' starts): its times are shifted to the capture's", float64(in.ClockOffsetNs)/1e6))
	}
	return writePageLoad(cmd, page, asJSON, htmlOut, "")
}
