// Package hotpath holds benchmarks only: the cost of one decision on the
// accept path of levee's policies beside the peers a user would otherwise
// pick (failsafe-go, go-kratos/aegis, sentinel-golang,
// go-concurrency-limits, x/time/rate), measured in the same run.
//
//	cd bench && go test -run '^$' -bench . -benchmem ./hotpath
//
// Every peer is configured as its documentation recommends; where a peer
// needs to be pushed into rejecting, the benchmark says how.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands) the bench/ module sits beside the commands, at the top: it
// imports levee's policies together with its peers, in a module of its own
// outside the workspace, so that neither the library nor the tools carry the
// peers' dependencies.
package hotpath
