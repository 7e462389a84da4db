package units

import (
	"strings"
	"testing"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		input     string
		wantNs    int64
		wantError string
	}{
		{"70ms", 70_000_000, ""},
		{"0.5ms", 500_000, ""},
		{"250us", 250_000, ""},
		{"250µs", 250_000, ""},
		{" 1.5s ", 1_500_000_000, ""},
		{"0", 0, ""},
		{"70", 0, "has no unit: write e.g. 70ms"},
		{"-5ms", 0, "negative"},
		{"fast", 0, "write a number and a unit"},
	}
	for _, test := range tests {
		got, err := ParseDuration(test.input)
		if test.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), test.wantError) {
				t.Errorf("ParseDuration(%q) error = %v, want %q", test.input, err, test.wantError)
			}
			continue
		}
		if err != nil || got != test.wantNs {
			t.Errorf("ParseDuration(%q) = %d, %v; want %d", test.input, got, err, test.wantNs)
		}
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		input     string
		want      int64
		wantError bool
	}{
		{"1.2mbit", 1_200_000, false},
		{"100Mbit/s", 100_000_000, false},
		{"15mbps", 15_000_000, false},
		{"15Mbps", 15_000_000, false},
		{"800kbit", 800_000, false},
		{"1gbit", 1_000_000_000, false},
		{"1Gbit/s", 1_000_000_000, false},
		{"10MB/s", 80_000_000, false},
		{"10MBps", 80_000_000, false},
		{"1Mibit", 1 << 20, false},
		{"64000", 0, true}, // no unit: bits, kilobits or megabits per second?
		{"1.2", 0, true},
		{"0", 0, false},
		{"64kb/s", 64_000, false},
		{"2 mbits", 2_000_000, false},
		{"unlimited", 0, false},
		{"10 furlongs", 0, true},
		{"mbit", 0, true},
		{"-1mbit", 0, true},
		{"", 0, true},
	}
	for _, test := range tests {
		got, err := ParseRate(test.input)
		if (err != nil) != test.wantError || got != test.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d, error %v", test.input, got, err, test.want, test.wantError)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		input     string
		want      int64
		wantError bool
	}{
		{"42KB", 42_000, false},
		{"64KiB", 65_536, false},
		{"1.5MB", 1_500_000, false},
		{"29x1448", 41_992, false},
		{"10x1.5KB", 15_000, false},
		{"1500", 0, true}, // no unit: bytes or kilobytes?
		{"0", 0, false},
		{"42", 0, true},
		{"1500B", 1500, false},
		{"1500 bytes", 1500, false},
		{"64k", 64_000, false},
		{"1GiB", 1 << 30, false},
		{"x1448", 0, true},
		{"3 parsecs", 0, true},
		{"-5KB", 0, true},
	}
	for _, test := range tests {
		got, err := ParseSize(test.input)
		if (err != nil) != test.wantError || got != test.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, error %v", test.input, got, err, test.want, test.wantError)
		}
	}
}

func TestParsePercent(t *testing.T) {
	tests := []struct {
		input     string
		want      float64
		wantError string
	}{
		{"1%", 0.01, ""},
		{"0.5%", 0.005, ""},
		{"0.01", 0.01, ""},
		{"0", 0, ""},
		{"100%", 1, ""},
		{"5", 0, "write 5%"},
		{"150%", 0, "outside"},
		{"-1%", 0, "outside"},
		{"often", 0, "write a percentage"},
	}
	for _, test := range tests {
		got, err := ParsePercent(test.input)
		if test.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), test.wantError) {
				t.Errorf("ParsePercent(%q) error = %v, want %q", test.input, err, test.wantError)
			}
			continue
		}
		if err != nil || got != test.want {
			t.Errorf("ParsePercent(%q) = %g, %v; want %g", test.input, got, err, test.want)
		}
	}
}

func TestFormat(t *testing.T) {
	tests := []struct{ got, want string }{
		{FormatSize(10_500), "10.5 KB"},
		{FormatSize(512), "512 B"},
		{FormatSize(1_460_000), "1.46 MB"},
		{FormatSize(999_999), "1 MB"},
		{FormatRate(1_200_000), "1.2 Mbit/s"},
		{FormatRate(1_000_000_000), "1 Gbit/s"},
		{FormatRate(800_000), "800 kbit/s"},
	}
	for _, test := range tests {
		if test.got != test.want {
			t.Errorf("got %q, want %q", test.got, test.want)
		}
	}
}

func FuzzParseRate(f *testing.F) {
	for _, seed := range []string{"1.2mbit", "15MBps", "64KiB", "1e9", "..", "0x10"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input string) {
		if rate, err := ParseRate(input); err == nil && rate < 0 {
			t.Fatalf("ParseRate(%q) = %d, a negative rate without an error", input, rate)
		}
		if size, err := ParseSize(input); err == nil && size < 0 {
			t.Fatalf("ParseSize(%q) = %d, a negative size without an error", input, size)
		}
	})
}
