package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/report"
)

func testCaptures(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob("../../testdata/captures/*.pcap*")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Skip("no captures in testdata/captures")
	}
	return paths
}

// The per-connection rendering must write exactly what report.WriteJSON writes,
// or its timings say nothing about a streaming analyze --json.
func TestPerConnectionRenderingMatchesWriteJSON(t *testing.T) {
	reports := map[string]*report.Report{
		"no connections (nil)":   {Schema: "slowstart.report/v1", Tool: "t", Warnings: []string{"w"}},
		"no connections (empty)": {Schema: "slowstart.report/v1", Connections: []report.Connection{}},
		"two connections":        {Schema: "slowstart.report/v1", Connections: []report.Connection{{Index: 1}, {Index: 2}}},
	}
	for _, path := range testCaptures(t) {
		rep, err := analysis.File(context.Background(), path, analysis.Options{Tool: "test"})
		if err != nil {
			t.Fatalf("analyze %s: %v", path, err)
		}
		reports[filepath.Base(path)] = rep
	}
	for name, rep := range reports {
		t.Run(name, func(t *testing.T) {
			var want, got bytes.Buffer
			if err := report.WriteJSON(&want, rep); err != nil {
				t.Fatal(err)
			}
			if err := writePerConnection(&got, rep); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Errorf("per-connection rendering differs from WriteJSON:\ngot  %.300q\nwant %.300q", got.String(), want.String())
			}
		})
	}
}

// The two-goroutine prototype must find the same connections as analysis.File.
func TestPipelinedFileMatchesFile(t *testing.T) {
	for _, path := range testCaptures(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			want, err := analysis.File(context.Background(), path, analysis.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := pipelinedFile(context.Background(), path, analysis.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Source.Packets != want.Source.Packets {
				t.Errorf("packets: got %d, want %d", got.Source.Packets, want.Source.Packets)
			}
			gotJSON, _ := json.Marshal(got.Connections)
			wantJSON, _ := json.Marshal(want.Connections)
			if !bytes.Equal(gotJSON, wantJSON) {
				t.Errorf("connections differ:\ngot  %.300s\nwant %.300s", gotJSON, wantJSON)
			}
		})
	}
}
