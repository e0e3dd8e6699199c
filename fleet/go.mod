module github.com/levee-dev/levee/fleet

go 1.26.0

replace github.com/levee-dev/levee => ../

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/levee-dev/levee v0.0.0-00010101000000-000000000000 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
