package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/har"
	"github.com/slowstart/slowstart/pageload"
	"github.com/slowstart/slowstart/report"
)

// analyzeWithHAR places a HAR's requests on the connections of rep (analyze --har)
// and prints the page load.
func analyzeWithHAR(cmd *cobra.Command, rep *report.Report, harPath string, asJSON bool, htmlOut string) error {
	h, err := har.ReadFile(harPath)
	if err != nil {
		return fileError(fmt.Errorf("--har: %w", err))
	}
	in, err := har.ToInput(h)
	if err != nil {
		return fileError(fmt.Errorf("--har %s: %w", harPath, err))
	}
	if len(in.Requests) == 0 {
		return fileError(fmt.Errorf("--har %s holds no request", harPath))
	}
	in.ClockOffsetNs = pageload.EstimateClockOffset(rep, in)
	page := pageload.Build(rep, in)
	if in.ClockOffsetNs != 0 {
		page.Warnings = append(page.Warnings, fmt.Sprintf("the HAR's clock was %.1f ms off the capture's (estimated from its connections' starts): its times are shifted to the capture's", float64(in.ClockOffsetNs)/1e6))
	}
	return writePageLoad(cmd, page, asJSON, htmlOut, "")
}
