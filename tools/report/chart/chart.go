package chart

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Series is one line of a chart: Y[i] at X[i]. X and Y must have the same
// length; NaN values leave a gap.
type Series struct {
	Name string
	X, Y []float64
}

// Uniform returns a Series whose i-th point is at x0 + i·dx.
func Uniform(name string, x0, dx float64, y []float64) Series {
	x := make([]float64, len(y))
	for i := range x {
		x[i] = x0 + float64(i)*dx
	}
	return Series{Name: name, X: x, Y: y}
}

// Chart is a line chart.
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
	// Step draws each series as a staircase (states, counts per bucket).
	Step bool
	// YMin and YMax fix the y range when YMax > YMin; otherwise it fits
	// the data, from 0 when every value is non-negative.
	YMin, YMax float64
	// Width and Height in points; defaults 640×260.
	Width, Height float64
}

// Table is a small table of text cells.
type Table struct {
	Header []string
	Rows   [][]string
}

// Section is a heading, a paragraph, an optional table and charts.
type Section struct {
	Title  string
	Text   string
	Pre    string // preformatted text (e.g. a CLI table), optional
	Table  *Table
	Charts []Chart
}

// Page is a whole chart.
type Page struct {
	Title    string
	Intro    string
	Sections []Section
}

// palette: colour-blind-safe (Okabe–Ito), fixed order for determinism.
var palette = []color.RGBA{
	{0, 114, 178, 255},   // blue
	{230, 159, 0, 255},   // orange
	{0, 158, 115, 255},   // green
	{213, 94, 0, 255},    // vermillion
	{204, 121, 167, 255}, // purple
	{86, 180, 233, 255},  // sky
	{240, 228, 66, 255},  // yellow
	{0, 0, 0, 255},       // black
}

// SVG renders c as an SVG document (without an XML prolog, ready to inline
// in HTML).
func SVG(c Chart) ([]byte, error) {
	if len(c.Series) == 0 {
		return nil, errors.New("chart: chart without series")
	}
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	p.Legend.Top = true
	p.Y.Tick.Marker = plainTicks{}
	p.X.Tick.Marker = plainTicks{}
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range c.Series {
		if len(s.X) != len(s.Y) {
			return nil, fmt.Errorf("chart: series %q: %d x values, %d y values", s.Name, len(s.X), len(s.Y))
		}
		pts := make(plotter.XYs, 0, len(s.X))
		for k := range s.X {
			if math.IsNaN(s.Y[k]) || math.IsInf(s.Y[k], 0) {
				continue
			}
			pts = append(pts, plotter.XY{X: s.X[k], Y: s.Y[k]})
			lo, hi = math.Min(lo, s.Y[k]), math.Max(hi, s.Y[k])
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, fmt.Errorf("chart: series %q: %w", s.Name, err)
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.5)
		if i >= len(palette) {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		if c.Step {
			l.StepStyle = plotter.PostStep
		}
		p.Add(l)
		if s.Name != "" {
			p.Legend.Add(s.Name, l)
		}
	}
	switch {
	case c.YMax > c.YMin:
		p.Y.Min, p.Y.Max = c.YMin, c.YMax
	case lo >= 0 && !math.IsInf(lo, 0):
		p.Y.Min = 0
		if hi <= 0 {
			p.Y.Max = 1
		} else {
			p.Y.Max = hi * 1.15 // room for the legend
		}
	}
	w, h := c.Width, c.Height
	if w <= 0 {
		w = 640
	}
	if h <= 0 {
		h = 260
	}
	cv := vgsvg.New(vg.Points(w), vg.Points(h))
	p.Draw(draw.New(cv))
	var buf bytes.Buffer
	if _, err := cv.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	out := buf.Bytes()
	if i := bytes.Index(out, []byte("<svg")); i > 0 {
		out = out[i:]
	}
	return out, nil
}

// plainTicks labels ticks without trailing zeros: 50000, not 50000.00.
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			v := ts[i].Value
			if math.Abs(v) >= 1e6 {
				ts[i].Label = strconv.FormatFloat(v, 'f', 0, 64)
			} else {
				ts[i].Label = strconv.FormatFloat(v, 'g', 6, 64)
			}
		}
	}
	return ts
}

const page = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child,td:last-child,th:last-child{text-align:left}
pre{background:#f7f7f7;padding:.8em;overflow-x:auto;font-size:.8em}
.chart{margin:1em 0}.chart svg{max-width:100%;height:auto}
</style></head><body>
<h1>{{.Title}}</h1>
{{if .Intro}}<p>{{.Intro}}</p>{{end}}
{{range .Sections}}<section>
<h2>{{.Title}}</h2>
{{if .Text}}<p>{{.Text}}</p>{{end}}
{{if .Pre}}<pre>{{.Pre}}</pre>{{end}}
{{with .Table}}<table><thead><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody></table>{{end}}
{{range .SVGs}}<div class="chart">{{.}}</div>
{{end}}</section>
{{end}}</body></html>
`

var tmpl = template.Must(template.New("page").Parse(page))

// WriteHTML renders p as one self-contained HTML document.
func (p *Page) WriteHTML(w io.Writer) error {
	type sec struct {
		Section
		SVGs []template.HTML
	}
	data := struct {
		Title, Intro string
		Sections     []sec
	}{Title: p.Title, Intro: p.Intro}
	for _, s := range p.Sections {
		x := sec{Section: s}
		for _, c := range s.Charts {
			b, err := SVG(c)
			if err != nil {
				return err
			}
			x.SVGs = append(x.SVGs, template.HTML(b)) // produced by vgsvg, not user input
		}
		data.Sections = append(data.Sections, x)
	}
	var buf strings.Builder
	if err := tmpl.Execute(&buf, data); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	_, err := io.WriteString(w, buf.String())
	return err
}
