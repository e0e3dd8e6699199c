// Package chart draws levee's reports: self-contained HTML pages with SVG
// charts rendered by gonum.org/v1/plot, with no scripts and no network,
// one file to attach to an incident review or a README.
//
// A Page holds Sections; a Section has a heading, a paragraph, an optional
// Table and Charts; a Chart draws one or more Series (y over x) as lines.
// ReportPage lays out any report of the one schema (package report): per
// run, the client-side rates over time, the latency, and every instance's
// series that the tool filled in. The simulator, the demo and levee load
// use it. Output is deterministic: the same Page gives the same bytes.
//
// The package sits with the tools (it depends on gonum); the schema it
// draws, package report, uses the standard library only.
package chart
