#!/usr/bin/env bash
# Install what the test cluster needs (Debian packages): slurm-wlm (slurmctld, slurmd, the
# client commands), slurmdbd, munge, mariadb-server. Does nothing when they are installed.
# Services are not started by the install (a temporary policy-rc.d says no); .ci/slurm/up.sh
# starts its own daemons on their own ports and sockets.
# Exit status 3: they cannot be installed here (not root, no apt-get, or apt-get failed).
set -uo pipefail

needed=(slurmctld slurmd slurmdbd sbatch sacct sacctmgr munged mariadbd mariadb-install-db)
missing=()
for cmd in "${needed[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "slurm install: missing ${missing[*]}; installing slurm-wlm slurmdbd munge mariadb-server" >&2
# shellcheck source=../apt-ready.sh
. "$(dirname "$0")/../apt-ready.sh"
apt_ready slurm || exit 3

policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    own_policy=1
fi
status=0
export DEBIAN_FRONTEND=noninteractive
{ apt-get update -qq && apt-get install -y -qq --no-install-recommends \
    slurm-wlm slurmdbd munge mariadb-server; } >/tmp/shiftwork-slurm-install.log 2>&1 || status=$?
[ "$own_policy" -eq 1 ] && rm -f "$policy"
if [ "$status" -ne 0 ]; then
    tail -20 /tmp/shiftwork-slurm-install.log >&2
    echo "slurm install: CANNOT INSTALL: apt-get failed ($status)" >&2
    exit 3
fi
echo "slurm install: done" >&2
