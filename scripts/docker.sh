#!/usr/bin/env bash
# Makes a Docker engine usable for the container tests on a machine that reaches only the
# package registries: installs Debian's docker.io, docker-compose and debootstrap when
# missing, starts dockerd (no bridge: the tests use host networking), and makes the base
# image the Dockerfiles start from, `debian:bookworm-slim`, with debootstrap from the Debian
# mirror (no image registry is reachable). Idempotent: what exists is kept.
set -euo pipefail

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v docker-compose >/dev/null || need+=(docker-compose)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  echo "docker: installing ${need[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  echo "docker: starting dockerd" >&2
  nohup dockerd --iptables=false --bridge=none >/tmp/trawl-dockerd.log 2>&1 &
  for _ in $(seq 1 100); do
    docker info >/dev/null 2>&1 && break
    sleep 0.2
  done
  docker info >/dev/null 2>&1 || { echo "docker: dockerd did not start (see /tmp/trawl-dockerd.log)" >&2; exit 1; }
fi

base=debian:bookworm-slim
if ! docker image inspect "$base" >/dev/null 2>&1; then
  echo "docker: making $base with debootstrap" >&2
  root="$(mktemp -d)"
  trap 'rm -rf "$root"' EXIT
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/tmp/trawl-debootstrap.log 2>&1 \
    || { echo "docker: debootstrap failed (see /tmp/trawl-debootstrap.log)" >&2; exit 1; }
  # As Debian's own slim image: apt keeps no downloaded packages or caches, dpkg installs
  # no documentation, manuals or translations; none are left from debootstrap either.
  cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'APT'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
  echo 'Acquire::Languages "none";' >"$root/etc/apt/apt.conf.d/docker-no-languages"
  cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'DPKG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
DPKG
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
  tar -C "$root" -c . | docker import - "$base" >/dev/null
fi
echo "docker: engine up, $base present" >&2
