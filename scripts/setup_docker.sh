#!/usr/bin/env bash
# Makes a Docker engine answer on this machine: installs Debian's docker.io (and debootstrap, which
# builds the base image when no registry is reachable) if missing, then starts dockerd if it is not
# running; installs docker-registry (a local registry for environment images; the tests start their
# own on a free port). Idempotent; needs root only when something is missing.
set -euo pipefail

if docker info >/dev/null 2>&1; then
  echo "docker: engine already running"
else
  if ! command -v dockerd >/dev/null 2>&1; then
    echo "docker: installing Debian's docker.io"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
  fi
  echo "docker: starting dockerd (log: /var/log/dockerd.log)"
  nohup dockerd >/var/log/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  docker info >/dev/null 2>&1 || { echo "docker: dockerd did not start; see /var/log/dockerd.log" >&2; exit 1; }
fi

if ! command -v debootstrap >/dev/null 2>&1; then
  echo "docker: installing debootstrap (builds the base image offline)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

if ! command -v docker-registry >/dev/null 2>&1; then
  echo "docker: installing Debian's docker-registry (environment images: push, pull, tests)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >/dev/null
fi
