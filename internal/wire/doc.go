// Package wire is levee's wire protocol: the names of the headers (HTTP) and
// metadata keys (gRPC) that carry a call's criticality, tenant, time budget
// and attempt number from hop to hop, and the rejection and load headers that
// come back, with their parsers and formatters. leveehttp and leveegrpc share
// it so that both protocols speak exactly the same dialect.
//
// Every parser takes the header's values as a []string, as http.Header and
// gRPC metadata hold them, so that repeated headers (and comma-separated
// lists inside one value) are handled in one place, and returns the value and
// an ok flag. Malformed elements are ignored; when nothing valid remains the
// parser returns the documented default and ok == false, never an error:
// hostile input must cost little and decide nothing. When several valid
// elements disagree the parser picks the most conservative one (the shortest
// timeout, the least important criticality, the highest attempt, the longest
// retry delay).
//
// The parsers do not allocate, except ParseTenant for ids that must be hashed.
// The Append* formatters append to a caller's buffer without allocating.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), wire is a
// leaf: it imports the standard library and package levee only, and only the
// adapters (leveehttp, leveegrpc) use it, so that the dialect is defined once
// for both protocols.
package wire
