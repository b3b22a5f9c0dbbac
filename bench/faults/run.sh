#!/usr/bin/env bash
# The cluster's fault crawls (tests/cluster/restarts.rs) at scale: a synthetic web of
# PAGES pages on HOSTS loopback hosts (default 20,000 on 20, as issue 47 measured), the
# four stages (two fetchers) over a nats-server (JetStream, file store) and a
# redis-server (AOF every second) of their own, with the text index (no vectors); each
# fault's crawl beside the same crawl without faults, in one run. Prints one line a fault:
# both times, how soon pages flowed again, pages fetched again, lines against URLs.
#
#   bench/faults/run.sh [PAGES] [HOSTS] [PROFILE]
#
# PROFILE is the cargo profile the services are built with (default dev, which the test
# command builds; release for figures to set beside release figures).
set -euo pipefail
cd "$(dirname "$0")/../.."
pages=${1:-20000}
hosts=${2:-20}
profile=${3:-dev}
./scripts/services.sh >/dev/null
cargo build --profile "$profile" --workspace --bins
export TRAWL_FAULTS_PAGES=$pages TRAWL_FAULTS_HOSTS=$hosts TRAWL_FAULTS_INDEX=1
export TRAWL_TEST_WAIT_S=3600 TRAWL_REQUIRE_SERVICES=1
cargo test --profile "$profile" -p trawl-tests --test cluster -- \
  restarts::replicas_killed restarts::a_nats_kill restarts::a_redis_kill \
  restarts::replicas_nats --test-threads 1 --nocapture 2>&1 |
  grep -E '^(Replicas|Nats|Redis|All):|^test |test result'
