// Package proxyprom exports a levee proxy (proxy.Handler) as Prometheus
// metrics, through a collector registered on your own
// prometheus.Registerer (the levee proxy command serves it at /metrics
// beside leveeprom's):
//
//	reg.MustRegister(proxyprom.NewCollector(h))
//
// It reads Handler.Status when scraped and adds nothing to the request
// path. Per backend (label backend, its address; a removed backend
// disappears once drained) and per route (label route, the configuration's
// route names, at most 256):
//
//	levee_proxy_backend_in_flight{backend}                    gauge    requests in flight
//	levee_proxy_backend_capacity{backend}                     gauge    in flight allowed now (limit × slow-start weight)
//	levee_proxy_backend_limit{backend}                        gauge    adaptive concurrency limit
//	levee_proxy_backend_weight_ratio{backend}                 gauge    slow-start share of the limit
//	levee_proxy_backend_load_ratio{backend}                   gauge    last Levee-Load, faded with age
//	levee_proxy_backend_baseline_seconds{backend}             gauge    learned no-queue latency
//	levee_proxy_backend_state{backend,state}                  gauge    1 for serving, slow_start, probing, ejected, capped
//	levee_proxy_backend_ejections{backend}                    gauge    consecutive ejections
//	levee_proxy_backend_consecutive_failures{backend}         gauge    failed attempts in a row
//	levee_proxy_backend_throttle_reject_probability{backend,criticality} gauge
//	levee_proxy_backend_attempts_total{backend,outcome}       counter  answered, overloaded, failed, unreached
//	levee_proxy_backend_retries_total{backend}                counter  attempts that were retries
//	levee_proxy_backend_resets_total{backend}                 counter  responses cut while streaming
//	levee_proxy_requests_total{route,class}                   counter  answered, by status class
//	levee_proxy_edge_shed_total{route}                        counter  rejected by the edge's controller
//	levee_proxy_answers_total{route,kind}                     counter  the proxy's own answers (Levee-Proxy-Error)
//	levee_proxy_retries_total{route}                          counter  retries to another backend
//	levee_proxy_request_duration_seconds{route}               histogram
//	levee_proxy_waiting, levee_proxy_ejected, levee_proxy_max_ejected, levee_proxy_draining          gauges
//	levee_proxy_retry_budget_{requests,retries,refused}_total                                         counters
//
// Its metrics are outside levee's internal/instrument table (which
// leveeprom and leveeotel read): the table has no histogram, and being a
// core package it cannot read a proxy's Status.
//
// Within levee's layers, proxyprom is an adapter: it imports proxy and
// github.com/prometheus/client_golang (already a dependency of the
// library module through leveeprom). It is a package of its own because
// leveehttp uses leveeprom and the proxy uses leveehttp.
package proxyprom
