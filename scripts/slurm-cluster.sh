#!/usr/bin/env bash
# A real two-node Slurm cluster (nodes n1 and n2) on this one machine, for the tests.
#
#   scripts/slurm-cluster.sh start    install Slurm if missing, start munged, slurmctld, 2 slurmd
#   scripts/slurm-cluster.sh status   print sinfo; exit 0 when both nodes are usable
#   scripts/slurm-cluster.sh stop     cancel jobs, stop what start started, remove all state
#
# Needs root. Everything it writes lives in ${BENCHLIB_SLURM_DIR:-/tmp/benchlib-slurm}:
# slurm.conf, spool and state folders, pid files, logs, and `env`, a file to source:
#   . /tmp/benchlib-slurm/env && srun -N2 -n2 hostname
# which sets SLURM_CONF and puts shims for sbatch, srun, squeue, ... first on PATH.
#
# Topology. Preferred: two network namespaces joined by a veth pair that is created inside
# them (nothing appears in the root namespace): n1 = 10.213.7.1 runs slurmctld and slurmd n1,
# n2 = 10.213.7.2 runs slurmd n2. Client commands must run in n1's namespace; the shims do
# that when called from the root namespace. Fallback when namespaces cannot be made: both
# slurmd on loopback with their own ports. Either way each slurmd runs in its own UTS and
# mount namespace with hostname n1/n2 and a private /etc/hosts naming n1 and n2, so a job
# on n1 sees `hostname` = n1 and can reach n2 by name. With namespaces nothing can reach
# the daemons from outside them; on loopback they listen on all of the machine's addresses
# (Slurm has no bind-address setting), ports 17000-17002. BENCHLIB_SLURM_TOPOLOGY=loopback
# forces the fallback.
#
# munged is started only when none is running, and then stopped again by `stop`.
# start and stop hold a lock (on this file), so two test sessions never race.
set -euo pipefail

DIR=${BENCHLIB_SLURM_DIR:-/tmp/benchlib-slurm}
CONF=$DIR/slurm.conf
START_TIMEOUT_S=${BENCHLIB_SLURM_START_TIMEOUT:-30}
STOP_GRACE_S=10

NODES=(n1 n2)
NETNS=(benchlib-slurm-n1 benchlib-slurm-n2)   # names under /run/netns
NET_ADDRS=(10.213.7.1 10.213.7.2)              # private test subnet, only inside the namespaces
VETH=(blslurm1 blslurm2)
CTLD_PORT=17000
SLURMD_PORTS=(17001 17002)                     # distinct so the loopback fallback works too
CLIENTS=(sbatch srun squeue scontrol scancel sinfo sacct salloc)
PACKAGES=(slurmctld slurmd slurm-client munge)
MARKER=.made-by-slurm-cluster.sh               # stop removes only a folder holding this

log() { echo "slurm-cluster: $*"; }
die() { echo "slurm-cluster: error: $*" >&2; exit 1; }

# Seconds since $1 (an $EPOCHREALTIME value), with one decimal.
elapsed_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

require_root() {
    # Exit status 77 ("skipped") lets callers tell "not root" from a real failure.
    if [[ $(id -u) -ne 0 ]]; then
        echo "slurm-cluster: needs root (to install Slurm, create namespaces, run slurmd)" >&2
        exit 77
    fi
}

topology() { cat "$DIR/topology" 2>/dev/null || true; }

# Run a Slurm client command against this cluster, from the namespace where the
# controller's address is reachable.
client() {
    if [[ $(topology) == netns ]]; then
        SLURM_CONF=$CONF nsenter --net="/run/netns/${NETNS[0]}" "/usr/bin/$1" "${@:2}"
    else
        SLURM_CONF=$CONF "/usr/bin/$1" "${@:2}"
    fi
}

# "n1 idle" lines; empty when the controller does not answer.
node_states() { client sinfo -h -N -p debug -o '%N %t' 2>/dev/null | sort -u || true; }

# True when the daemon whose pid file is $DIR/run/$1.pid runs (slurmctld, slurmd-n1, ...).
daemon_alive() {
    local pid
    pid=$(cat "$DIR/run/$1.pid" 2>/dev/null || true)
    safe_pid "$pid" && running "$pid" &&
        [[ $(cat "/proc/$pid/comm" 2>/dev/null || true) == "${1%%-*}" ]]
}

# True when both nodes answer and can take jobs (idle, or busy with jobs).
healthy() {
    [[ -f $CONF ]] || return 1
    local states n
    # Cheap checks first: Slurm clients retry for seconds when the controller is gone.
    daemon_alive slurmctld || return 1
    for n in "${NODES[@]}"; do daemon_alive "slurmd-$n" || return 1; done
    states=$(node_states)
    for n in "${NODES[@]}"; do
        grep -Eq "^$n (idle|mix|alloc|comp)$" <<<"$states" || return 1
    done
}

all_idle() {
    local states n
    states=$(node_states)
    for n in "${NODES[@]}"; do
        grep -Eq "^$n idle$" <<<"$states" || return 1
    done
}

# ---------------------------------------------------------------- install

install_packages() {
    local missing=0 cmd
    for cmd in slurmctld slurmd sinfo munged; do
        command -v "$cmd" >/dev/null || [[ -x /usr/sbin/$cmd ]] || missing=1
    done
    [[ $missing -eq 1 ]] || return 0
    local t0=$EPOCHREALTIME apt_log=$DIR/log/apt.log
    log "installing ${PACKAGES[*]} with apt-get (log: $apt_log)"
    if ! { DEBIAN_FRONTEND=noninteractive apt-get -qq update &&
           DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends \
               "${PACKAGES[@]}"; } >"$apt_log" 2>&1; then
        tail -n 20 "$apt_log" >&2
        die "apt-get failed; see $apt_log"
    fi
    log "installed in $(elapsed_since "$t0") s"
}

# ---------------------------------------------------------------- processes

# Wait up to $2 seconds for pid file $1; print the pid.
wait_for_pidfile() {
    local file=$1 deadline=$((SECONDS + $2)) pid=""
    while [[ $SECONDS -le $deadline ]]; do
        pid=$(cat "$file" 2>/dev/null || true)
        if [[ $pid =~ ^[0-9]+$ ]] && running "$pid"; then
            echo "$pid"
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# True when process $1 exists and is not a zombie (a daemon's parent here, pid 1, may be
# slow to reap, and a dead daemon must not look alive meanwhile).
running() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }                        # the fields after "(comm) "
    [[ ${stat%% *} != Z ]]
}

# A pid we may signal: a number, not pid 1, not this script or its parent.
safe_pid() {
    local pid=$1
    [[ $pid =~ ^[0-9]+$ ]] && ((pid > 1 && pid != $$ && pid != BASHPID && pid != PPID))
}

# Pids of daemons this cluster started, as "pid comm" lines, from the pid files in
# $DIR/run (each written by start). A pid whose process has another name is skipped:
# the daemon is gone and the number may belong to someone else now.
our_daemons() {
    local file pid comm want
    for file in "$DIR"/run/*.pid; do
        [[ -f $file ]] || continue
        pid=$(cat "$file" 2>/dev/null || true)
        want=$(basename "$file" .pid)
        want=${want%%-*}                     # slurmd-n1 -> slurmd
        safe_pid "$pid" || continue
        comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
        if [[ $comm == "$want" ]]; then echo "$pid $comm"; fi
    done
    return 0
}

# Pids of the processes other than slurmd in the mount namespace of each live slurmd:
# slurmstepd and job tasks. Only while its slurmd holds a namespace is its id sure to be
# ours (ids are reused once a namespace is gone), so call this before stopping slurmd.
leftovers_on_nodes() {
    local n ns pid slurmd_pid root_mnt
    root_mnt=$(readlink /proc/1/ns/mnt 2>/dev/null || readlink /proc/$$/ns/mnt)
    for n in "${NODES[@]}"; do
        daemon_alive "slurmd-$n" || continue
        slurmd_pid=$(cat "$DIR/run/slurmd-$n.pid")
        ns=$(cat "$DIR/run/slurmd-$n.mntns" 2>/dev/null || true)
        [[ -n $ns && $ns != "$root_mnt" ]] || continue
        for pid in /proc/[0-9]*; do
            pid=${pid#/proc/}
            [[ $pid != "$slurmd_pid" ]] || continue
            if [[ $(readlink "/proc/$pid/ns/mnt" 2>/dev/null || true) == "$ns" ]]; then
                echo "$pid"
            fi
        done
    done
    return 0
}

# Pids of every process inside the network namespaces this cluster created (they exist
# until drop_netns deletes them, so these ids cannot be someone else's).
leftovers_in_netns() {
    local name
    if [[ -f $DIR/netns ]]; then
        while read -r name; do
            if [[ -n $name && -e /run/netns/$name ]]; then
                ip netns pids "$name" 2>/dev/null || true
            fi
        done <"$DIR/netns"
    fi
    return 0
}

# Send $1 to each safe pid given on stdin.
signal_pids() {
    local sig=$1 pid
    while read -r pid _; do
        safe_pid "$pid" && kill -s "$sig" "$pid" 2>/dev/null || true
    done
}

# ---------------------------------------------------------------- start

write_config() {
    local ctld_addr=$1 i
    shift
    local -a addrs=("$@")
    cat >"$CONF" <<EOF
# Written by scripts/slurm-cluster.sh ($(topology) topology); removed by its stop.
ClusterName=benchlib
# "localhost" stands for this machine's own hostname; the address is the one nodes use.
SlurmctldHost=localhost($ctld_addr)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MailProg=/bin/true
# No cgroups on this machine.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# Schedule batch jobs at once (default: up to 3 s later), every 0.1 s at most (default 2 s).
SchedulerParameters=batch_sched_delay=0,sched_min_interval=100000
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
# Nodes keep their configured CPUs whatever the hardware says; cancelled jobs die fast.
SlurmdParameters=config_overrides
KillWait=2
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
EOF
    for i in 0 1; do
        echo "NodeName=${NODES[i]} NodeHostname=${NODES[i]} NodeAddr=${addrs[i]}" \
             "Port=${SLURMD_PORTS[i]} CPUs=2 RealMemory=1024 State=UNKNOWN" >>"$CONF"
    done
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$CONF"
    # a one-node partition: what a sweep sent to a smaller partition is checked against
    echo "PartitionName=solo Nodes=${NODES[0]} MaxTime=INFINITE State=UP" >>"$CONF"

    # The /etc/hosts each node sees (bind-mounted in its own mount namespace only).
    {
        echo "127.0.0.1 localhost"
        echo "::1 localhost ip6-localhost ip6-loopback"
        for i in 0 1; do echo "${addrs[i]} ${NODES[i]}"; done
    } >"$DIR/etc/hosts"
}

# Client shims. Inside a node's namespace (a job on n1 or n2, which inherits PATH) they
# run the real command; anywhere else they enter n1's network namespace first. The test
# is "am I in one of the cluster's namespaces", by namespace id, and not "am I in pid 1's
# namespace": /proc/1/ns/net can be unreadable (sandboxes), and a client that ran in the
# root namespace by mistake would send its messages for 10.213.7.1 out of the machine.
write_env() {
    local cmd ns="" ids="" i
    if [[ $(topology) == netns ]]; then
        ns=${NETNS[0]}
        for i in 0 1; do
            ids+="$(nsenter --net="/run/netns/${NETNS[i]}" readlink /proc/self/ns/net) "
        done
    fi
    for cmd in "${CLIENTS[@]}"; do
        cat >"$DIR/bin/$cmd" <<EOF
#!/bin/sh
# Written by scripts/slurm-cluster.sh: $cmd for the test cluster in $DIR.
ns="$ns"
case " $ids" in
    *" \$(readlink /proc/self/ns/net) "*) exec /usr/bin/$cmd "\$@" ;;  # on a node
esac
if [ -n "\$ns" ]; then
    exec nsenter --net="/run/netns/\$ns" /usr/bin/$cmd "\$@"
fi
exec /usr/bin/$cmd "\$@"
EOF
        chmod 0755 "$DIR/bin/$cmd"
    done
    cat >"$DIR/env" <<EOF
# Source this file to use the test cluster started by scripts/slurm-cluster.sh.
export SLURM_CONF="$CONF"
export PATH="$DIR/bin:\$PATH"
EOF
}

start_munged() {
    if munge -n </dev/null >/dev/null 2>&1; then
        log "munged is already running; leaving it alone"
        return 0
    fi
    local other
    for other in $(pgrep -x munged || true); do
        running "$other" &&
            die "munged (pid $other) runs but does not answer (munge -n fails); fix or stop it"
    done
    install -d -o munge -g munge -m 0755 /run/munge   # no systemd to create it
    # --force: a stale socket from an earlier munged that died must not block the start.
    runuser -u munge -- /usr/sbin/munged --force 9<&-
    local pid
    pid=$(wait_for_pidfile /run/munge/munged.pid 10) || die "munged did not start"
    echo "$pid" >"$DIR/run/munged.pid"                # stop stops only a munged we started
    local deadline=$((SECONDS + 10))
    until munge -n </dev/null >/dev/null 2>&1; do
        [[ $SECONDS -le $deadline ]] || die "munged (pid $pid) does not answer"
        sleep 0.05
    done
}

# Create the two network namespaces and the veth pair between them. Returns non-zero,
# having removed what it made, when this machine does not allow it.
make_netns() {
    local i
    for i in 0 1; do
        if [[ -e /run/netns/${NETNS[i]} ]]; then
            # Left over from a run that died; ours by name. Refuse if anything lives there.
            if [[ -n $(ip netns pids "${NETNS[i]}" 2>/dev/null) ]]; then
                die "network namespace ${NETNS[i]} exists and has processes; stop them first"
            fi
            ip netns delete "${NETNS[i]}"
        fi
        if ! ip netns add "${NETNS[i]}" 2>>"$DIR/log/netns.log"; then
            drop_netns
            return 1
        fi
        echo "${NETNS[i]}" >>"$DIR/netns"
    done
    if ! link_netns 2>>"$DIR/log/netns.log"; then
        drop_netns
        return 1
    fi
}

# The veth pair is created inside n1's namespace with its peer inside n2's: it never
# exists in the root namespace. Each end gets its node's address.
link_netns() {
    local i ns
    nsenter --net="/run/netns/${NETNS[0]}" \
        ip link add "${VETH[0]}" type veth peer name "${VETH[1]}" netns "${NETNS[1]}" || return 1
    for i in 0 1; do
        ns=/run/netns/${NETNS[i]}
        nsenter --net="$ns" ip link set lo up || return 1
        nsenter --net="$ns" ip addr add "${NET_ADDRS[i]}/24" dev "${VETH[i]}" || return 1
        nsenter --net="$ns" ip link set "${VETH[i]}" up || return 1
    done
}

# Delete the network namespaces listed in $DIR/netns (only those this script made).
drop_netns() {
    [[ -f $DIR/netns ]] || return 0
    local name
    while read -r name; do
        if [[ -n $name && -e /run/netns/$name ]]; then ip netns delete "$name" || true; fi
    done <"$DIR/netns"
    rm -f "$DIR/netns"
}

# Run "$@" in node i's network namespace (or the root one on loopback).
in_node_net() {
    local i=$1
    shift
    if [[ $(topology) == netns ]]; then
        nsenter --net="/run/netns/${NETNS[i]}" "$@"
    else
        "$@"
    fi
}

start_slurmd() {
    local i=$1 node=${NODES[$1]}
    # Own UTS + mount namespace: hostname n1/n2 and a private /etc/hosts naming both nodes.
    in_node_net "$i" unshare --uts --mount --propagation private \
        /bin/sh -c 'hostname "$1" && mount --bind "$2" /etc/hosts &&
                    exec /usr/sbin/slurmd -f "$3" -N "$1"' \
        sh "$node" "$DIR/etc/hosts" "$CONF" \
        </dev/null >>"$DIR/log/slurmd-$node.out" 2>&1 9<&-
    local pid
    pid=$(wait_for_pidfile "$DIR/run/slurmd-$node.pid" 10) ||
        die "slurmd $node did not write its pid file; see $DIR/log/slurmd-$node.log and .out"
    # Remembered so that stop can find slurmstepd and job processes of this node.
    readlink "/proc/$pid/ns/mnt" >"$DIR/run/slurmd-$node.mntns"
}

show_logs() {
    local f
    for f in "$DIR"/log/*.log "$DIR"/log/*.out; do
        [[ -s $f ]] || continue
        echo "---- last lines of $f" >&2
        tail -n 15 "$f" >&2
    done
}

cmd_start() {
    require_root
    if healthy; then
        log "cluster already up in $DIR ($(topology) topology)"
        client sinfo
        return 0
    fi
    if [[ -e $DIR/$MARKER ]]; then
        log "found an unhealthy cluster in $DIR; stopping it first"
        cmd_stop
    elif [[ -d $DIR && -n $(ls -A "$DIR") ]]; then
        die "$DIR exists, is not empty and was not made by this script; set BENCHLIB_SLURM_DIR"
    fi
    install -d -m 0755 "$DIR" "$DIR/bin" "$DIR/etc" "$DIR/log" "$DIR/run" "$DIR/state" \
        "$DIR/spool/${NODES[0]}" "$DIR/spool/${NODES[1]}"
    touch "$DIR/$MARKER"
    install_packages

    local t0=$EPOCHREALTIME
    if [[ ${BENCHLIB_SLURM_TOPOLOGY:-netns} != loopback ]] && make_netns; then
        echo netns >"$DIR/topology"
        write_config "${NET_ADDRS[0]}" "${NET_ADDRS[@]}"
    else
        [[ ${BENCHLIB_SLURM_TOPOLOGY:-netns} == loopback ]] ||
            log "cannot create network namespaces (see $DIR/log/netns.log); using loopback"
        echo loopback >"$DIR/topology"
        write_config 127.0.0.1 127.0.0.1 127.0.0.1
    fi
    write_env
    start_munged

    in_node_net 0 /usr/sbin/slurmctld -f "$CONF" \
        </dev/null >>"$DIR/log/slurmctld.out" 2>&1 9<&-
    wait_for_pidfile "$DIR/run/slurmctld.pid" 10 >/dev/null ||
        { show_logs; die "slurmctld did not start; see $DIR/log/slurmctld.log"; }
    start_slurmd 0
    start_slurmd 1

    local deadline=$((SECONDS + START_TIMEOUT_S))
    until all_idle; do
        if [[ $SECONDS -gt $deadline ]]; then
            node_states >&2
            show_logs
            die "nodes n1 and n2 not idle after ${START_TIMEOUT_S} s; logs in $DIR/log/" \
                "(clean up with: $0 stop)"
        fi
        sleep 0.1
    done
    log "cluster up in $(elapsed_since "$t0") s ($(topology) topology); state in $DIR"
    log "use it with: . $DIR/env"
    client sinfo
}

# ---------------------------------------------------------------- stop

cmd_stop() {
    require_root
    local t0=$EPOCHREALTIME
    if [[ ! -d $DIR ]]; then
        log "not running (no $DIR)"
        return 0
    fi
    # Only a folder this script made (it holds the marker) is ever removed.
    [[ -f $DIR/$MARKER ]] ||
        die "$DIR was not made by this script (no $MARKER in it); not touching it"

    # Cancel all jobs while the controller still runs, and give them KillWait to go.
    local jobs=""
    if daemon_alive slurmctld; then
        jobs=$(client squeue -h -o %A 2>/dev/null || true)
    fi
    if [[ -n $jobs ]]; then
        # shellcheck disable=SC2086  # one argument per job id
        client scancel $jobs 2>/dev/null || true
        local deadline=$((SECONDS + 5))
        while [[ -n $(client squeue -h -o %A 2>/dev/null || true) && $SECONDS -le $deadline ]]
        do sleep 0.2; done
    fi

    # Job processes that outlived scancel, while their slurmd still marks them as ours.
    local rest
    rest=$(leftovers_on_nodes)
    [[ -z $rest ]] || signal_pids KILL <<<"$rest"

    # SIGTERM every daemon we started at once, then wait; SIGKILL after the grace period.
    local daemons
    daemons=$(our_daemons)
    signal_pids TERM <<<"$daemons"
    local deadline=$((SECONDS + STOP_GRACE_S)) pid alive
    while :; do
        alive=""
        while read -r pid _; do
            if [[ -n $pid ]] && running "$pid"; then alive+="$pid "; fi
        done <<<"$daemons"
        [[ -n $alive ]] || break
        if [[ $SECONDS -gt $deadline ]]; then
            log "still running after ${STOP_GRACE_S} s, sending SIGKILL: $alive"
            signal_pids KILL <<<"${alive// /$'\n'}"
            sleep 0.2
            break
        fi
        sleep 0.1
    done

    # Whatever is left inside our network namespaces (clients, stray job processes) too.
    rest=$(leftovers_in_netns)
    if [[ -n $rest ]]; then
        signal_pids KILL <<<"$rest"
        sleep 0.2
    fi

    drop_netns
    rm -rf --one-file-system -- "$DIR"
    log "stopped in $(elapsed_since "$t0") s"
}

# ---------------------------------------------------------------- status

cmd_status() {
    if [[ ! -f $CONF ]]; then
        echo "slurm-cluster: not running (no $CONF)"
        return 1
    fi
    if daemon_alive slurmctld; then client sinfo -N || true; fi
    if healthy; then
        echo "slurm-cluster: healthy ($(topology) topology, $DIR)"
    else
        echo "slurm-cluster: NOT healthy; logs in $DIR/log/"
        return 1
    fi
}

# One start or stop at a time on this machine; daemons are started with fd 9 closed so
# that they do not hold the lock.
lock() {
    exec 9<"${BASH_SOURCE[0]}"
    flock -w 300 9 || die "another start or stop of the test cluster did not finish in 300 s"
}

case ${1:-} in
    start) require_root; lock; cmd_start ;;
    stop) require_root; lock; cmd_stop ;;
    status) cmd_status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
