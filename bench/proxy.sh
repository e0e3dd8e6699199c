#!/usr/bin/env bash
# levee proxy beside the classic load balancer, a bare
# httputil.ReverseProxy and nginx, on loopback, in one run (package
# tools/proxylab, build tag realtime): the founding text's failover
# cascade, a backend killed and restarted, and the CPU per request below
# saturation. Installs Debian's nginx if it is missing (needs root), then
# writes the tables into bench/README.md between the proxy markers.
#
# Run it on a quiet machine: about 6 minutes with the defaults below.
#   bench/proxy.sh                                  # figures of record
#   DURATION=20s OVERHEAD=3s ROUNDS=2 bench/proxy.sh   # a smoke run (~1 min)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

DURATION=${DURATION:-60s}   # each cascade run (classic, levee, the failover)
OVERHEAD=${OVERHEAD:-20s}   # each overhead measurement (3 proxies × ROUNDS)
ROUNDS=${ROUNDS:-5}
RATE=${RATE:-1500}          # overhead: requests/s, well below every proxy's saturation (a one-core Go proxy at ~150 µs a request saturates near 6000/s)

if [ ! -x /usr/sbin/nginx ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
{
  echo "Measured $(date -u +%Y-%m-%d) on $(uname -sm), $(nproc) CPUs, $(go env GOVERSION), nginx $(/usr/sbin/nginx -v 2>&1 | sed 's|.*/||'), commit $(git rev-parse --short HEAD)."
  echo
  echo "\`bench/proxy.sh\` with DURATION=$DURATION OVERHEAD=$OVERHEAD ROUNDS=$ROUNDS RATE=$RATE."
  echo
} >"$out"
status=0
go test -tags realtime -count=1 -timeout 60m -run 'TestProxyCascade|TestProxyFailover|TestProxyOverhead' -v ./tools/proxylab/ \
  -args -proxylab.duration="$DURATION" -proxylab.overhead="$OVERHEAD" -proxylab.rounds="$ROUNDS" \
  -proxylab.rate="$RATE" -proxylab.out="$out" || status=$?

awk -v f="$out" '
  /<!-- proxy:begin -->/ { print; while ((getline l < f) > 0) print l; skip = 1; next }
  /<!-- proxy:end -->/ { skip = 0 }
  !skip { print }
' bench/README.md >bench/README.md.new && mv bench/README.md.new bench/README.md
echo "tables written to bench/README.md (test status $status)"
exit "$status"
