// Package report turns time series into a self-contained HTML page with
// SVG charts drawn by gonum.org/v1/plot: no scripts, no network, one file
// to attach to an incident review or a README.
//
// A Page holds Sections; a Section has a heading, a paragraph, an optional
// Table and Charts; a Chart draws one or more Series (y over x) as lines.
// The simulator (levee sim --html) and the demo use it. Output is
// deterministic: the same Page gives the same bytes.
package report
