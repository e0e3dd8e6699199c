// Package admit is levee's server-side admission controller: it decides,
// per request and without locks or allocations, whether to start work, and
// steers a shed level from resource signals so that they stay at target.
package admit
