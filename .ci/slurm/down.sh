#!/usr/bin/env bash
# Take down the test cluster of .ci/slurm/up.sh: cancel its jobs, then stop slurmd,
# slurmctld, slurmdbd, MariaDB and munged, each by the pid file it wrote under
# $SHIFTWORK_SLURM_DIR (default /tmp/shiftwork-slurm). Nothing is stopped by name.
# Pass --purge to also delete that directory.
set -uo pipefail

DIR=${SHIFTWORK_SLURM_DIR:-/tmp/shiftwork-slurm}
export SLURM_CONF=$DIR/etc/slurm.conf

say() { echo "slurm down: $*" >&2; }

alive() { kill -0 "$1" 2>/dev/null; }

# jobs first, while slurmctld and slurmd can still end them (their slurmstepd go with them)
if [ -f "$DIR/run/slurmctld.pid" ] && alive "$(cat "$DIR/run/slurmctld.pid")"; then
    jobs=$(squeue -h -o %A 2>/dev/null | tr '\n' ' ')
    if [ -n "${jobs// /}" ]; then
        say "cancelling jobs $jobs"
        # shellcheck disable=SC2086
        scancel $jobs 2>/dev/null
        for _ in $(seq 60); do
            [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break
            sleep 0.5
        done
    fi
fi

# stop_by_pidfile PIDFILE EXECUTABLE: SIGTERM the pid in PIDFILE if it is still that program
# (a pid may have been reused), wait up to 30 s, then SIGKILL
stop_by_pidfile() {
    local file=$1 name=$2 pid exe
    [ -f "$file" ] || return 0
    pid=$(cat "$file")
    exe=$(basename "$(readlink "/proc/$pid/exe" 2>/dev/null)")
    # Debian installs e.g. slurmctld as slurmctld-wlm
    if [ -n "$pid" ] && alive "$pid" && [[ "$exe" == "$name" || "$exe" == "$name"-* ]]; then
        kill -TERM "$pid"
        for _ in $(seq 60); do
            alive "$pid" || break
            sleep 0.5
        done
        if alive "$pid"; then
            say "$name ($pid) ignored SIGTERM; SIGKILL"
            kill -KILL "$pid"
        fi
        say "stopped $name ($pid)"
    elif [ -n "$pid" ] && alive "$pid"; then
        say "pid $pid of $file is now '$exe', not $name: left alone"
    fi
    rm -f "$file"
}

stop_by_pidfile "$DIR/run/slurmd.pid" slurmd
stop_by_pidfile "$DIR/run/slurmctld.pid" slurmctld
stop_by_pidfile "$DIR/run/slurmdbd.pid" slurmdbd
stop_by_pidfile "$DIR/db/mariadbd.pid" mariadbd
stop_by_pidfile "$DIR/run/munged.pid" munged

# the default-path link that up.sh made, and only that
if [ "$(readlink /etc/slurm/slurm.conf)" = "$SLURM_CONF" ]; then
    rm -f /etc/slurm/slurm.conf
fi

if [ "${1:-}" = "--purge" ]; then
    rm -rf "$DIR"
fi
exit 0
