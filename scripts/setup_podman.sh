#!/usr/bin/env bash
# Makes the daemonless sandbox (sandbox.kind: podman) usable on this machine: installs Debian's
# podman, buildah (podman build) and catatonit (the --init process) when missing, then checks that
# podman answers. Nothing to start: podman has no daemon. Idempotent; needs root only when
# something is missing. The base image is copied in by `trajforge base-image --sandbox podman`.
set -euo pipefail

missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v buildah >/dev/null 2>&1 || missing+=(buildah)
# podman looks for its init binary here (containers.conf init_path); Debian's catatonit puts it there.
[ -x /usr/libexec/podman/catatonit ] || missing+=(catatonit)

if [ ${#missing[@]} -gt 0 ]; then
  echo "podman: installing Debian's ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "podman: already installed"
fi

podman info >/dev/null 2>&1 || { echo "podman: installed but \`podman info\` fails; run it to see why" >&2; exit 1; }
