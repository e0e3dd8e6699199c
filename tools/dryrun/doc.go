// Package dryrun is the loopback check of admit's dry-run mode (issue 18):
// a CPU-bound backend behind levee in dry-run, offered three times its
// capacity by open-loop clients without retries, must reject nothing,
// count as "would reject" about what it could not serve (offered minus
// the capacity measured in the same run, within ±15%), and never count
// CRITICAL_PLUS among it.
//
// Wrap is the backend's protection, plugged into the loopback harness
// (package loopback) with loopback.HijackWith: leveehttp.NewHandler over
// an admit.Controller in dry-run fed by pressure.Default, trusting its
// caller, with the requests' criticalities mixed in equal parts (the load
// generator sends none). It records the controller's counters to the file
// named by the environment variable OutEnv every RecordEvery. The check
// itself is a build-tagged test:
//
//	go test -tags realtime -run TestDryRun -v -timeout 10m ./tools/dryrun/
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), dryrun is a tool in the tools module
// (github.com/levee-dev/levee/tools): the package imports leveehttp, admit and
// pressure only, its realtime test adds the loopback harness (tools/loopback,
// tools/backend, tools/load, tools/report), and nothing imports it.
package dryrun
