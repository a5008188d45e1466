#!/usr/bin/env bash
# Install the SLURM daemons and MUNGE (Debian's slurmctld, slurmd, slurm-client and munge, 22.05 on
# Debian 12) so that tests/integration/test_slurm.py can start its private single-node cluster. Idempotent: exits 0
# at once when every binary is already there. Quiet: prints one line, or apt's errors.
#
#   .ci/slurm-setup.sh          # as root (or with sudo available)
#
# No daemon is started or enabled here: the test starts its own munged, slurmctld and slurmd with a
# generated key and slurm.conf in a temporary folder, and stops them. Package scripts that would start
# the distribution's services are blocked during the install (policy-rc.d), so nothing keeps running.
set -euo pipefail

BINARIES=(slurmctld slurmd munged sbatch squeue scontrol sinfo)
PACKAGES=(slurmctld slurmd slurm-client munge)

missing=()
for binary in "${BINARIES[@]}"; do
    PATH="$PATH:/usr/sbin:/sbin" command -v "$binary" >/dev/null 2>&1 || missing+=("$binary")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "slurm-setup: SLURM and MUNGE already installed"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "slurm-setup: missing ${missing[*]}; run as root (or install: apt-get install ${PACKAGES[*]})" >&2
        exit 1
    fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "slurm-setup: missing ${missing[*]} and no apt-get; install SLURM and MUNGE with your package manager" >&2
    exit 1
fi

# Keep the packages' maintainer scripts from starting munge/slurmctld/slurmd services (Docker images
# usually ship this file already; add it only for the install and remove only what we added).
POLICY=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod 755 "$POLICY"
    added_policy=1
fi
cleanup() { if [ "$added_policy" -eq 1 ]; then $SUDO rm -f "$POLICY"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "slurm-setup: apt-get install ${PACKAGES[*]} failed" >&2
    exit 1
fi
rm -f "$log"
echo "slurm-setup: installed ${PACKAGES[*]} ($(dpkg-query -W -f='${Version}' slurmctld))"
