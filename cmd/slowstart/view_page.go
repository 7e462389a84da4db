package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/internal/outpath"
	"github.com/slowstart/slowstart/pageload"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/web"
)

// readPageLoad reads path as a page load's JSON (probe --browser --json); nil
// when the file is something else (a capture, a Report).
func readPageLoad(path string) (*pageload.Page, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, withCode(exitFile, err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	head, _ := br.Peek(256)
	if first := bytes.TrimLeft(head, " \t\r\n"); len(first) == 0 || first[0] != '{' || !bytes.Contains(head, []byte(pageload.Schema)) {
		return nil, nil
	}
	if err := tooLargeForView(f, path); err != nil {
		return nil, err
	}
	data, err := readViewJSON(br, path)
	if err != nil {
		return nil, err
	}
	var page pageload.Page
	if err := json.Unmarshal(data, &page); err != nil || page.Schema != pageload.Schema {
		return nil, nil // not a page load after all: read as a Report
	}
	if page.Report == nil || page.Report.Schema != report.Schema {
		return nil, withCode(exitFile, fmt.Errorf("%s: a page load without its Report (schema %s): make it again with this version", path, report.Schema))
	}
	return &page, nil
}

// viewPageLoad shows a page load: as one HTML file, or served on ln (taken
// before the file was read) until Ctrl-C.
func viewPageLoad(cmd *cobra.Command, path string, page *pageload.Page, htmlPath string, ln net.Listener) error {
	if htmlPath != "" {
		if err := outpath.CheckFile("html", htmlPath); err != nil {
			return err
		}
		return writePageHTMLFile(cmd, htmlPath, page)
	}
	anyHost := true
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		anyHost = !a.IP.IsLoopback()
	}
	h, err := web.NewPageHandler(page.Report, page, web.HandlerOptions{AnyHost: anyHost})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "slowstart: the view of %s is at http://%s/ (Ctrl-C to stop)\n", path, ln.Addr())
	return web.Serve(cmd.Context(), ln, h, nil)
}
