package quicprobe

import "testing"

// compareWithTshark is filled in below.
func compareWithTshark(t *testing.T, pcap, keylogPath string, _ any) {}
