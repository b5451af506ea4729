package bench

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"sync"
	"time"
)

// The page: one self-contained HTML document (inline CSS and SVG, no
// script, nothing fetched), so that it can be mailed, attached to a CI run
// or opened from disk.
//
//go:embed page.html.tmpl
var pageText string

// page is parsed when first written, not at start: every agentrun process
// (each sandbox's init and runner too) would parse it otherwise.
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Funcs(template.FuncMap{
		"pct":  func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
		"usd":  usd,
		"secs": func(ms int64) string { return secs(float64(ms)) },
		"f1":   func(f float64) string { return fmt.Sprintf("%.1f", f) },
		"f0":   func(f float64) string { return fmt.Sprintf("%.0f", f) },
	}).Parse(pageText))
})

// Plot geometry, in SVG user units.
const (
	plotW, plotH     = 560.0, 340.0
	marginL, marginR = 64.0, 24.0
	marginT, marginB = 20.0, 48.0
	innerW, innerH   = plotW - marginL - marginR, plotH - marginT - marginB
	maxPlotTicks     = 5
)

const noCostNote = "no run had a known cost (a model without a price, such as a local one, counts 0)"

// palette colours the agents/models, in order (distinct in print and for
// the common colour blindnesses).
var palette = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#f0e442", "#000000"}

type pageData struct {
	Title     string
	Summary   Summary
	Generated string
	Plots     []plot
	Colours   map[string]string
}

type plot struct {
	ID     string
	Title  string
	XLabel string
	Note   string
	XTicks []tick
	YTicks []tick
	Points []point
	W, H   float64
	X0, Y0 float64 // the plot area's origin (bottom left)
	X1, Y1 float64 // its top right
}

type tick struct {
	Pos   float64
	Label string
}

type point struct {
	Model    string
	Colour   string
	CX, CY   float64
	PassRate float64
	X        float64
	XText    string
	Runs     int
}

// WriteHTML writes the summary as one page: pass rate against mean cost
// per run and against median wall time, a point per agent/model, and the
// per-model and per-task tables.
func WriteHTML(w io.Writer, s Summary, generated time.Time) error {
	d := pageData{Title: "agentrun bench " + s.Bench, Summary: s, Generated: generated.Format("2006-01-02 15:04 MST"), Colours: map[string]string{}}
	for i, m := range s.Models {
		d.Colours[m.Name] = palette[i%len(palette)]
	}
	cost := makePlot("cost", "Pass rate against mean cost per run", "mean cost per run (US dollars)", s.Models, d.Colours,
		func(g Group) float64 { return g.MeanCostUSD }, usd)
	if allZero(s.Models, func(g Group) float64 { return g.MeanCostUSD }) {
		cost.Note = noCostNote
	}
	wall := makePlot("wall", "Pass rate against median wall time", "median wall time per run", s.Models, d.Colours,
		func(g Group) float64 { return float64(g.MedianWallMS) }, secs)
	d.Plots = []plot{cost, wall}
	return page().Execute(w, d)
}

func makePlot(id, title, xlabel string, models []Group, colours map[string]string, x func(Group) float64, format func(float64) string) plot {
	p := plot{ID: id, Title: title, XLabel: xlabel, W: plotW, H: plotH,
		X0: marginL, Y0: marginT + innerH, X1: marginL + innerW, Y1: marginT}
	hi := 0.0
	for _, g := range models {
		hi = max(hi, x(g))
	}
	step := niceStep(hi / maxPlotTicks)
	top := step * math.Ceil(hi/step)
	if top == 0 {
		step, top = 0.2, 1 // nothing to scale by: a unit axis
	}
	xpos := func(v float64) float64 { return marginL + innerW*v/top }
	ypos := func(rate float64) float64 { return marginT + innerH*(1-rate) }
	for v := 0.0; v <= top+step/2; v += step {
		p.XTicks = append(p.XTicks, tick{Pos: xpos(v), Label: format(v)})
	}
	for _, r := range []float64{0, 0.25, 0.5, 0.75, 1} {
		p.YTicks = append(p.YTicks, tick{Pos: ypos(r), Label: fmt.Sprintf("%.0f%%", 100*r)})
	}
	for _, g := range models {
		if g.Runs == g.Errors {
			continue // nothing judged: no point to place
		}
		p.Points = append(p.Points, point{Model: g.Name, Colour: colours[g.Name], CX: xpos(x(g)), CY: ypos(g.PassRate),
			PassRate: g.PassRate, X: x(g), XText: format(x(g)), Runs: g.Runs - g.Errors})
	}
	return p
}

// niceStep is a round tick step (1, 2 or 5 times a power of ten) near
// raw; 1 for raw 0.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	exp := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*exp {
			return m * exp
		}
	}
	return 10 * exp
}

func allZero(gs []Group, x func(Group) float64) bool {
	for _, g := range gs {
		if x(g) != 0 {
			return false
		}
	}
	return true
}

func usd(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v < 0.01:
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

func secs(ms float64) string {
	switch {
	case ms == 0:
		return "0s"
	case ms < 1000:
		return fmt.Sprintf("%.0fms", ms)
	case ms < 10000:
		return fmt.Sprintf("%.1fs", ms/1000)
	case ms < 120000:
		return fmt.Sprintf("%.0fs", ms/1000)
	}
	return fmt.Sprintf("%.1fm", ms/60000)
}
