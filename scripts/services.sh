#!/usr/bin/env bash
# Starts NATS (with JetStream) and Redis on loopback when they are not already answering,
# installing them from Debian's packages when missing. The cluster runtime's tests use them;
# the embedded crawler needs neither.
set -euo pipefail

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

need_pkgs=()
port_open 4222 || command -v nats-server >/dev/null || need_pkgs+=(nats-server)
# The binary too when a server already runs: tests start servers of their own (shards).
command -v redis-server >/dev/null || need_pkgs+=(redis-server)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "services: installing ${need_pkgs[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

if ! port_open 4222; then
  echo "services: starting nats-server (JetStream) on 127.0.0.1:4222" >&2
  mkdir -p /tmp/trawl-nats
  nohup nats-server -a 127.0.0.1 -p 4222 -js -sd /tmp/trawl-nats >/tmp/trawl-nats.log 2>&1 &
fi
if ! port_open 6379; then
  echo "services: starting redis-server on 127.0.0.1:6379" >&2
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
fi
for i in $(seq 1 50); do
  if port_open 4222 && port_open 6379; then
    echo "services: NATS and Redis are up" >&2
    exit 0
  fi
  sleep 0.2
done
echo "services: NATS or Redis did not come up (see /tmp/trawl-nats.log)" >&2
exit 1
