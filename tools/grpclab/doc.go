// Package grpclab is levee's loopback lab for gRPC, beside the HTTP one
// (tools/loopback): a gRPC backend in a child process of its own (the
// current binary re-executed; GOMAXPROCS=1, every thread pinned to the
// first allowed CPU) serves a unary method that burns a fixed CPU time
// and ignores cancellation, bare or protected by leveegrpc.Protect as its
// documentation gives it; this process, pinned to the second CPU, drives
// it open-loop with naive clients (grpc-go's retry off, two immediate
// retries within one 1 s deadline) through the load generator (package
// load). A run ends in levee's one report schema (package report): the
// same phases, goodput, recovery and wasted handler runs as the HTTP lab.
//
// Hijack must be called first thing in main or TestMain, so that a
// re-executed child runs the backend instead of the program. Run runs one
// configuration with a fresh backend; Capacity measures the bare server's
// closed-loop peak. The lab itself is a build-tagged test (about 3 minutes
// of load with the defaults; run it on a quiet machine):
//
//	go test -tags realtime -run TestGRPCLab -count=1 -v -timeout 30m ./tools/grpclab/
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), grpclab is a tool in the tools module
// (github.com/levee-dev/levee/tools): it imports leveegrpc, leveehttp, admit
// and config, and the loopback harness and its parts (tools/loopback,
// tools/backend, tools/load, tools/report); nothing imports it.
package grpclab
