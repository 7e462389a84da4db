// Package units reads and writes the quantities of the command line: durations,
// rates, sizes and probabilities. Every verb takes its flags through it, so that
// "42KB", "1.2mbit" and "70ms" mean the same everywhere.
//
// It is for the strings people type and read, not for any computation on them.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Help is the one sentence on units that --help prints.
const Help = `Units: sizes are bytes, with decimal or binary prefixes (1 KB = 1000 bytes,
1 KiB = 1024 bytes, 1 MB = 1,000,000 bytes); rates are bits per second (1.2mbit =
1.2 Mbit/s = 1,200,000 bit/s; 10MB/s with an upper-case B is bytes per second);
durations need a unit (70ms, 1.5s). A size, rate or duration without a unit is
refused, except 0.`

// Units on the command line.
//
// Decimal prefixes are powers of 1000 and binary prefixes powers of 1024, as in SI and
// IEC: 1 KB = 1000 bytes, 1 KiB = 1024 bytes, 1 Mbit/s = 1,000,000 bit/s, 1 Mibit/s =
// 1,048,576 bit/s. A rate is in bits unless its unit is an upper-case B (bytes): "15mbps",
// "15Mbit/s", "15mbit" are all 15,000,000 bit/s, while "15MB/s" and "15MBps" are
// 15,000,000 bytes per second (120 Mbit/s). Note that tc reads "mbps" as megabytes; here
// it is megabits, as people mostly mean it. Sizes are always bytes, so "kb" is 1000 bytes.

// ParseDuration reads a duration such as "70ms", "0.5ms", "250us" (or "250µs"), "1.5s"
// into nanoseconds. A unit is required and negative durations are refused.
func ParseDuration(s string) (int64, error) {
	text := strings.TrimSpace(s)
	if _, err := strconv.ParseFloat(text, 64); err == nil && text != "0" {
		return 0, fmt.Errorf("duration %q has no unit: write e.g. %sms or %ss", s, text, text)
	}
	d, err := time.ParseDuration(text)
	if err != nil {
		return 0, fmt.Errorf("duration %q: write a number and a unit, e.g. 70ms, 0.5ms, 250us or 1.5s", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return int64(d), nil
}

// ParseRate reads a rate such as "1.2mbit", "100Mbit/s", "15mbps", "800kbit", "1gbit",
// "10MB/s" into bits per second (see the unit notes above). A number needs a unit
// (is "1.2" bits, kilobits or megabits per second?); "unlimited" and "0" are 0.
func ParseRate(s string) (int64, error) {
	text := strings.TrimSpace(s)
	if strings.EqualFold(text, "unlimited") {
		return 0, nil
	}
	value, unit, err := splitNumber(text)
	if err != nil {
		return 0, fmt.Errorf("rate %q: %w; write e.g. 10mbit, 1.2Mbit/s or 800kbit", s, err)
	}
	if unit == "" && value != 0 {
		return 0, fmt.Errorf("rate %q has no unit: write e.g. %smbit (megabits per second) or %skbit", s, text, text)
	}
	originalUnit := unit
	lowerUnit := strings.ToLower(unit)
	switch {
	case strings.HasSuffix(lowerUnit, "/s"):
		unit = unit[:len(unit)-2]
	case strings.HasSuffix(lowerUnit, "ps"):
		unit = unit[:len(unit)-2]
	}
	bitsPerUnit := 1.0
	lowerUnit = strings.ToLower(unit)
	switch {
	case strings.HasSuffix(lowerUnit, "bits"):
		unit = unit[:len(unit)-4]
	case strings.HasSuffix(lowerUnit, "bit"):
		unit = unit[:len(unit)-3]
	case strings.HasSuffix(unit, "b"):
		unit = unit[:len(unit)-1]
	case strings.HasSuffix(unit, "B"):
		unit = unit[:len(unit)-1]
		bitsPerUnit = 8
	}
	multiplier, ok := prefixMultiplier(unit)
	if !ok {
		return 0, fmt.Errorf("rate %q: unknown unit %q; write e.g. 10mbit, 1.2Mbit/s, 800kbit or 1gbit", s, originalUnit)
	}
	bitsPerSecond := value * multiplier * bitsPerUnit
	if bitsPerSecond > math.MaxInt64/2 {
		return 0, fmt.Errorf("rate %q is too large", s)
	}
	return int64(math.Round(bitsPerSecond)), nil
}

// ParseSize reads a size such as "42KB", "64KiB", "1.5MB" or "1500B" into bytes, or a
// count of segments as "29x1448" (29 times 1448 bytes). A number needs a unit (is
// "42" bytes or kilobytes?), except 0 and the segment size after the x.
func ParseSize(s string) (int64, error) {
	return parseSize(s, true)
}

func parseSize(s string, needUnit bool) (int64, error) {
	text := strings.TrimSpace(s)
	if count, size, found := strings.Cut(text, "x"); found {
		n, errCount := strconv.ParseInt(strings.TrimSpace(count), 10, 64)
		bytesEach, errSize := parseSize(size, false)
		if errCount != nil || errSize != nil || n < 0 {
			return 0, fmt.Errorf("size %q: write COUNTxBYTES such as 29x1448", s)
		}
		if bytesEach > 0 && n > math.MaxInt64/bytesEach {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return n * bytesEach, nil
	}
	value, unit, err := splitNumber(text)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w; write e.g. 42KB, 64KiB, 1.5MB or 29x1448", s, err)
	}
	if unit == "" && value != 0 && needUnit {
		return 0, fmt.Errorf("size %q has no unit: write e.g. %sB (bytes) or %sKB (1 KB = 1000 bytes)", s, text, text)
	}
	lowerUnit := strings.ToLower(unit)
	switch {
	case strings.HasSuffix(lowerUnit, "bytes"):
		unit = unit[:len(unit)-5]
	case strings.HasSuffix(lowerUnit, "byte"):
		unit = unit[:len(unit)-4]
	case strings.HasSuffix(lowerUnit, "b"):
		unit = unit[:len(unit)-1]
	}
	multiplier, ok := prefixMultiplier(unit)
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit; write e.g. 42KB, 64KiB, 1.5MB or 29x1448", s)
	}
	bytes := value * multiplier
	if bytes > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(math.Round(bytes)), nil
}

// ParsePercent reads a probability written as a percentage ("1%", "0.5%") or a fraction
// ("0.01") and returns the fraction, which must lie in [0, 1].
func ParsePercent(s string) (float64, error) {
	text := strings.TrimSpace(s)
	number, isPercent := strings.CutSuffix(text, "%")
	value, err := strconv.ParseFloat(strings.TrimSpace(number), 64)
	if err != nil || math.IsNaN(value) || math.IsInf(value, 0) {
		return 0, fmt.Errorf("probability %q: write a percentage such as 1%% or a fraction such as 0.01", s)
	}
	if isPercent {
		value /= 100
	}
	if value < 0 || value > 1 {
		hint := ""
		if !isPercent && value > 1 && value <= 100 {
			hint = fmt.Sprintf(" (for %g percent write %g%%)", value, value)
		}
		return 0, fmt.Errorf("probability %q is outside 0..1 (0%%..100%%)%s", s, hint)
	}
	return value, nil
}

// splitNumber splits "1.5MB" into 1.5 and "MB". The number must not be negative.
func splitNumber(text string) (float64, string, error) {
	end := 0
	for end < len(text) && (text[end] >= '0' && text[end] <= '9' || text[end] == '.') {
		end++
	}
	if end == 0 {
		return 0, "", fmt.Errorf("no number at the start")
	}
	value, err := strconv.ParseFloat(text[:end], 64)
	if err != nil {
		return 0, "", fmt.Errorf("%q is not a number", text[:end])
	}
	return value, strings.TrimSpace(text[end:]), nil
}

// prefixMultiplier returns the value of a decimal (k, M, G, T) or binary (Ki, Mi, Gi, Ti)
// prefix, in any case; the empty prefix is 1.
func prefixMultiplier(prefix string) (float64, bool) {
	switch strings.ToLower(prefix) {
	case "":
		return 1, true
	case "k":
		return 1e3, true
	case "m":
		return 1e6, true
	case "g":
		return 1e9, true
	case "t":
		return 1e12, true
	case "ki":
		return 1 << 10, true
	case "mi":
		return 1 << 20, true
	case "gi":
		return 1 << 30, true
	case "ti":
		return 1 << 40, true
	}
	return 0, false
}

// FormatSize writes bytes with a decimal prefix and three significant digits, e.g.
// "10.5 KB", "1.46 MB", "512 B".
func FormatSize(bytes int64) string {
	return formatDecimal(float64(bytes), []string{"B", "KB", "MB", "GB", "TB"})
}

// FormatRate writes bits per second with a decimal prefix, e.g. "1.2 Mbit/s".
func FormatRate(bitsPerSecond int64) string {
	return formatDecimal(float64(bitsPerSecond), []string{"bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"})
}

func formatDecimal(value float64, units []string) string {
	unit := 0
	for math.Abs(value) >= 999.5 && unit+1 < len(units) {
		value /= 1000
		unit++
	}
	return strconv.FormatFloat(value, 'g', 3, 64) + " " + units[unit]
}
