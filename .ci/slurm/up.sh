#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for tests: munged, MariaDB, slurmdbd (accounting,
# with a cluster, an account and the current user added by sacctmgr), slurmctld and slurmd.
# The node is named after `hostname -s` and has two fake GPUs (character devices made with
# mknod: SLURM's gres/gpu plugin accepts nothing else) and more CPUs and memory than the
# machine has (SlurmdParameters=config_overrides), so the profile's resources fit.
#
# Everything lives under $SHIFTWORK_SLURM_DIR (default /tmp/shiftwork-slurm): configuration,
# state, logs and the daemons' pid files, by which .ci/slurm/down.sh stops them. The daemons
# listen on ports $SHIFTWORK_SLURM_PORT..+3 (default 16817..16820) and use their own munge
# socket, so a system SLURM or MariaDB is left alone.
#
#   .ci/slurm/up.sh && export SLURM_CONF=/tmp/shiftwork-slurm/etc/slurm.conf
#   sinfo; sbatch --gpus=1 --wrap 'echo $CUDA_VISIBLE_DEVICES'; ...
#   .ci/slurm/down.sh
#
# Needs root. Installs the Debian packages when missing (.ci/slurm/install.sh).
# Exit status 3: SLURM cannot be installed here; anything else non-zero: it did not come up
# (the daemons already started are stopped again).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${SHIFTWORK_SLURM_DIR:-/tmp/shiftwork-slurm}
PORT=${SHIFTWORK_SLURM_PORT:-16817}
CTLD_PORT=$PORT
SLURMD_PORT=$((PORT + 1))
DBD_PORT=$((PORT + 2))
DB_PORT=$((PORT + 3))
NODE=$(hostname -s)
CLUSTER=shiftwork
ACCOUNT=shiftwork
USER_NAME=$(id -un)

say() { echo "slurm up: $*" >&2; }

status=0
"$HERE/install.sh" || status=$?
[ "$status" -eq 0 ] || exit "$status"

# leftovers of an earlier run that was not taken down
"$HERE/down.sh" >/dev/null 2>&1 || true
rm -rf "$DIR"

for port in "$CTLD_PORT" "$SLURMD_PORT" "$DBD_PORT" "$DB_PORT"; do
    if ss -Hltn "sport = :$port" | grep -q .; then
        say "port $port is in use; set SHIFTWORK_SLURM_PORT to a free range of four"
        exit 1
    fi
done

trap 'say "failed; logs in $DIR/log"; "$HERE/down.sh" >&2 || true; exit 1' ERR

mkdir -p "$DIR"/{etc,munge,db,state,spool,log,run,dev}
chmod 755 "$DIR" "$DIR/munge"

# two fake GPUs: character devices (the /dev/null driver) whose names carry the index
mknod "$DIR/dev/nvidia0" c 1 3
mknod "$DIR/dev/nvidia1" c 1 3

# --- munge -------------------------------------------------------------------------------
MUNGE_SOCKET=$DIR/munge/munge.socket
dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$DIR/munge/munge.key"
munged --force --key-file="$DIR/munge/munge.key" --socket="$MUNGE_SOCKET" \
    --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
munge --socket="$MUNGE_SOCKET" -n | unmunge --socket="$MUNGE_SOCKET" >/dev/null

wait_for() {  # wait_for SECONDS COMMAND...: until COMMAND succeeds
    local limit=$1
    shift
    for _ in $(seq $((limit * 2))); do
        timeout 10 "$@" >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    say "timed out waiting for: $*"
    return 1
}

# --- MariaDB (slurmdbd's store; runs as mysql, so its socket, pid file and log are in db/) -
chown mysql:mysql "$DIR/db"
mariadb-install-db --no-defaults --user=mysql --datadir="$DIR/db/data" \
    --auth-root-authentication-method=socket --skip-test-db >"$DIR/log/mariadb-install.log" 2>&1
DB_SOCKET=$DIR/db/mysqld.sock
setsid mariadbd --no-defaults --user=mysql --datadir="$DIR/db/data" --socket="$DB_SOCKET" \
    --pid-file="$DIR/db/mariadbd.pid" --port="$DB_PORT" --bind-address=127.0.0.1 \
    --log-error="$DIR/db/mariadb.log" --innodb-buffer-pool-size=32M </dev/null >/dev/null 2>&1 &
wait_for 60 mariadb-admin --no-defaults --socket="$DB_SOCKET" -u root ping
mariadb --no-defaults --socket="$DB_SOCKET" -u root <<SQL
CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'shiftwork';
CREATE USER 'slurm'@'localhost' IDENTIFIED BY 'shiftwork';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL

# --- configuration ------------------------------------------------------------------------
cat >"$DIR/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=shiftwork
StorageLoc=slurm_acct_db
EOF
chmod 600 "$DIR/etc/slurmdbd.conf"

cat >"$DIR/etc/slurm.conf" <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$MUNGE_SOCKET
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=300
KillWait=5
InactiveLimit=0
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=16 RealMemory=131072 Gres=gpu:2 State=UNKNOWN
PartitionName=main Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF

cat >"$DIR/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=$NODE Name=gpu File=$DIR/dev/nvidia[0-1]
EOF

export SLURM_CONF=$DIR/etc/slurm.conf
echo "export SLURM_CONF=$SLURM_CONF" >"$DIR/env.sh"

# Inside a job, snakemake-executor-plugin-slurm-jobstep (0.6.1) runs srun with every SLURM_*
# variable removed, SLURM_CONF included, so srun reads the default /etc/slurm/slurm.conf:
# link it to ours for as long as the cluster is up (down.sh removes the link).
DEFAULT_CONF=/etc/slurm/slurm.conf
if [ -e "$DEFAULT_CONF" ] || [ -L "$DEFAULT_CONF" ]; then
    if [ "$(readlink "$DEFAULT_CONF")" != "$SLURM_CONF" ]; then
        say "$DEFAULT_CONF exists (a SLURM is configured on this machine); the test cluster needs that path"
        false
    fi
else
    mkdir -p "$(dirname "$DEFAULT_CONF")"
    ln -s "$SLURM_CONF" "$DEFAULT_CONF"
fi

# --- accounting ---------------------------------------------------------------------------
slurmdbd
wait_for 60 sacctmgr -n show cluster
sacctmgr -i add cluster "$CLUSTER" >/dev/null
sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description=tests Organization=shiftwork >/dev/null
sacctmgr -i add user "$USER_NAME" Account="$ACCOUNT" Cluster="$CLUSTER" >/dev/null

# --- controller and node ------------------------------------------------------------------
slurmctld -c
wait_for 60 scontrol ping
slurmd
wait_for 60 bash -c "[ \"\$(sinfo -h -n $NODE -o %T)\" = idle ]"

trap - ERR
say "cluster '$CLUSTER' up: node $NODE, 2 GPUs, state in $DIR"
say "use it with: export SLURM_CONF=$SLURM_CONF"
