package lab

import (
	"errors"
	"fmt"
	"io"
)

// Warnings are the sentences printed after a batch of trials' tables: drops nobody
// asked for, and a host too busy to trust.
func Warnings(sums []PointSummary, steal HostSteal) []string {
	warnings := append(DropWarnings(sums), PathWarnings(sums)...)
	if w := StealWarning(steal); w != "" {
		warnings = append(warnings, w)
	}
	return warnings
}

// WriteWarnings prints warnings, one line each.
func WriteWarnings(w io.Writer, warnings []string) {
	for _, warning := range warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
}

// NewRunOutput is lab run's JSON: specs are the run's point (and its HTTP/3 twin),
// rows its trials.
func NewRunOutput(specs []Spec, rows []Row, steal HostSteal) RunOutput {
	sums := SummarizePoints(specs, rows)
	comparisons := Comparisons(specs, sums)
	output := RunOutput{Schema: Schema, Summary: sums[0], Trials: rows,
		Warnings: append([]string{}, Warnings(sums, steal)...), HostSteal: steal}
	if len(specs) == 2 && specs[1].HTTP3 {
		output.HTTP3 = &sums[1]
		if len(comparisons) == 1 {
			output.Comparison = &comparisons[0]
		}
	}
	return output
}

// WriteRunText renders a lab run for people: what the points emulate, a line per
// trial, a line per point, HTTP/3 beside TCP when both ran, then the warnings.
func WriteRunText(w io.Writer, specs []Spec, rows []Row, steal HostSteal) error {
	fmt.Fprintf(w, "%s\n", DescribeSpecs(specs))
	sums := SummarizePoints(specs, rows)
	if err := errors.Join(WriteTrials(w, rows), WriteSummaries(w, sums), WriteComparisons(w, Comparisons(specs, sums))); err != nil {
		return err
	}
	WriteWarnings(w, Warnings(sums, steal))
	return nil
}

// WriteSweepText renders a sweep's points for people: a line per point, HTTP/3
// beside TCP where both ran, then the warnings.
func WriteSweepText(w io.Writer, specs []Spec, rows []Row, steal HostSteal) error {
	sums := SummarizePoints(specs, rows)
	if err := errors.Join(WriteSummaries(w, sums), WriteComparisons(w, Comparisons(specs, sums))); err != nil {
		return err
	}
	WriteWarnings(w, Warnings(sums, steal))
	return nil
}

// FailedPoints counts the points of specs whose every trial in rows failed.
func FailedPoints(specs []Spec, rows []Row) int {
	failed := 0
	for _, s := range SummarizePoints(specs, rows) {
		if s.Failed == s.Trials {
			failed++
		}
	}
	return failed
}
