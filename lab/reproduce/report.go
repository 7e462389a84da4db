package reproduce

import (
	"bytes"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strings"
)

const reportIntro = `This report re-runs, on emulated paths with real Linux TCP (CUBIC with HyStart, route initcwnd, no route metrics cache, no slow start after idle), the experiments of Dukkipati et al., "An Argument for Increasing TCP's Initial Congestion Window" (CCR 2010) and of the Stanford CS244 Mininet reproduction (2012), and sets their published numbers beside ours.

Definitions. FCT paper: from the first response byte to the last byte, at the client (the paper measures at the server from the first byte to the last ACK: the same span, shifted). FCT user-felt: from the connect to the last byte, as a user waits (handshake and request included). Improvement = (base − exp) / base, the paper's definition; CS244 used base / exp − 1, given beside it where they published it. Every lab number is a median over the trials, with the half-width of the 95% confidence interval of the mean. The model is slowstart's packet-level model (docs/model.md), drawn as dashed lines.`

// writeReport writes report.md and report.html into dir.
func writeReport(dir string, res *Result, quick bool) (mdPath, htmlPath string, err error) {
	mode := "full"
	if quick {
		mode = "quick (--quick: fewer points and trials)"
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Increasing TCP's initial window: a lab reproduction\n\n%s\n\nRun: %s, %d trials (%d failed), %s.\n\n", reportIntro, mode, res.Trials, res.Failed, res.Elapsed.Round(1e9))
	for i, s := range res.Sections {
		fmt.Fprintf(&md, "## %d. %s\n\n%s\n\n", i+1, s.Title, s.Setup)
		md.WriteString("| " + strings.Join(s.Header, " | ") + " |\n|" + strings.Repeat("---|", len(s.Header)) + "\n")
		for _, r := range s.Rows {
			md.WriteString("| " + strings.Join(r, " | ") + " |\n")
		}
		md.WriteString("\n")
		for _, f := range s.Figures {
			fmt.Fprintf(&md, "![%s](%s.png)\n\n", f, f)
		}
		for _, p := range s.Findings {
			md.WriteString(p + "\n\n")
		}
		fmt.Fprintf(&md, "Data: `%s.csv` (every trial), `%s_summary.csv` (per point, with the model).\n\n", s.Name, s.Name)
	}
	if len(res.Notes) > 0 {
		md.WriteString("## What the plots leave out\n\n")
		for _, n := range res.Notes {
			md.WriteString("- " + n + "\n")
		}
		md.WriteString("\n")
	}
	mdPath = filepath.Join(dir, "report.md")
	if err := os.WriteFile(mdPath, []byte(md.String()), 0o644); err != nil {
		return "", "", fmt.Errorf("writing the report: %w", err)
	}

	type htmlSection struct {
		Section
		Index int
		SVGs  []template.HTML
	}
	var secs []htmlSection
	inlined := 0
	for i, s := range res.Sections {
		hs := htmlSection{Section: s, Index: i + 1}
		for _, f := range s.Figures {
			svg, err := os.ReadFile(filepath.Join(dir, f+".svg"))
			if err != nil {
				return "", "", fmt.Errorf("inlining the plot %s: %w", f, err)
			}
			// Drop the XML prolog: the SVG goes inline into HTML.
			text := string(svg)
			if i := strings.Index(text, "<svg"); i > 0 {
				text = text[i:]
			}
			// The font every plot embeds is declared for the whole page by the
			// first one: the others drop their copy.
			if inlined > 0 {
				text = dropEmbeddedFonts(text)
			}
			inlined++
			hs.SVGs = append(hs.SVGs, template.HTML(text)) // produced by the plotting library from our own data
		}
		secs = append(secs, hs)
	}
	var buf bytes.Buffer
	err = reportTemplate.Execute(&buf, struct {
		Intro    []string
		Mode     string
		Trials   int
		Failed   int
		Elapsed  string
		Sections []htmlSection
		Notes    []string
	}{strings.Split(reportIntro, "\n\n"), mode, res.Trials, res.Failed, res.Elapsed.Round(1e9).String(), secs, res.Notes})
	if err != nil {
		return "", "", fmt.Errorf("rendering the HTML report: %w", err)
	}
	htmlPath = filepath.Join(dir, "report.html")
	if err := os.WriteFile(htmlPath, buf.Bytes(), 0o644); err != nil {
		return "", "", fmt.Errorf("writing the report: %w", err)
	}
	return mdPath, htmlPath, nil
}

var reportTemplate = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Increasing TCP's initial window: a lab reproduction</title>
<style>
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;line-height:1.45;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right}
th{background:#f3f3f3}
figure{margin:1em 0}
figure svg{max-width:100%;height:auto}
.meta{color:#666}
</style></head><body>
<h1>Increasing TCP's initial window: a lab reproduction</h1>
{{range .Intro}}<p>{{.}}</p>
{{end}}<p class="meta">Run: {{.Mode}}, {{.Trials}} trials ({{.Failed}} failed), {{.Elapsed}}.</p>
{{range .Sections}}<h2>{{.Index}}. {{.Title}}</h2>
<p>{{.Setup}}</p>
<table><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{range .SVGs}}<figure>{{.}}</figure>
{{end}}{{range .Findings}}<p>{{.}}</p>
{{end}}<p class="meta">Data: {{.Name}}.csv (every trial), {{.Name}}_summary.csv (per point, with the model).</p>
{{end}}{{if .Notes}}<h2>What the plots leave out</h2>
<ul>{{range .Notes}}<li>{{.}}</li>{{end}}</ul>
{{end}}</body></html>
`))

// dropEmbeddedFonts removes the <style> of @font-face rules from an SVG.
func dropEmbeddedFonts(svg string) string {
	start := strings.Index(svg, "<style>")
	end := strings.Index(svg, "</style>")
	if start < 0 || end < start || !strings.Contains(svg[start:end], "@font-face") {
		return svg
	}
	return svg[:start] + svg[end+len("</style>"):]
}
