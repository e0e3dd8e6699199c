// Package proxy is levee's load-balancing reverse proxy: the tier in front
// of services written in any language, where the founding text's
// avalanche runs (an overloaded instance is marked unhealthy, its traffic
// fails over to the next one, which falls in turn).
package proxy
