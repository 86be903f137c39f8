#!/usr/bin/env bash
# A real one-node Slurm (Debian's slurm-wlm, as root) runs the doctor the way a cluster job does:
#   srun -N1 -n2 rocmcheck doctor --node-per-rank --across-nodes --bundle-dir JOBDIR
# then checks what each rank read from Slurm's variables, the bundles written, the cross-node collective between
# the two ranks, and `rocmcheck compare` on the bundles. Runnable alone: bash .ci/slurm.sh (a few minutes at most).
# Slurm and munge are started here only when no controller answers, and stopped again by the pids started here.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
T0=$(date +%s)
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
STARTED=()
cleanup() {
    for pidfile in "${STARTED[@]}"; do
        [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
    done
}
trap cleanup EXIT

if ! sinfo -h >/dev/null 2>&1; then
    if ! command -v slurmctld >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null
    fi
    H=$(hostname -s)
    mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
    cat > /etc/slurm/slurm.conf <<CONF
ClusterName=local
SlurmctldHost=$H
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
SchedulerType=sched/backfill
SelectType=select/cons_tres
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
JobAcctGatherType=jobacct_gather/none
NodeName=$H CPUs=$(nproc) RealMemory=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 )) State=UNKNOWN
PartitionName=debug Nodes=$H Default=YES MaxTime=INFINITE State=UP
CONF
    [ -f /etc/munge/munge.key ] || mungekey -c
    chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
    if ! pgrep -u munge -x munged >/dev/null; then
        su -s /bin/sh munge -c "/usr/sbin/munged --pid-file=/run/munge/munged.pid"
        STARTED+=(/run/munge/munged.pid)
    fi
    /usr/sbin/slurmctld && STARTED+=(/run/slurmctld.pid)
    /usr/sbin/slurmd && STARTED+=(/run/slurmd.pid)
    for _ in $(seq 30); do sinfo -h -o %t 2>/dev/null | grep -q idle && break; sleep 1; done
fi
sinfo

JOB=$(mktemp -d /tmp/rocmcheck-slurm-job.XXXXXX)
# The per-node line of docs/distributed.md: two tasks on one node, so local rank 1 must leave quietly (exit 0, no
# output) and local rank 0 writes the node's one bundle, named after the host.
set +e
srun -N1 -n2 --time=10 --output="$JOB/node-%t.out" python -m rocmcheck doctor --no-train --no-gpu-probes --bundle-dir "$JOB/node"
set -e
test "$(ls "$JOB/node")" = "$(hostname).json" || { ls -la "$JOB/node"; echo "expected one bundle, $(hostname).json" >&2; exit 1; }
test ! -s "$JOB/node-1.out" || { cat "$JOB/node-1.out"; echo "local rank 1 should print nothing" >&2; exit 1; }
grep -q "(node 0 of 1, slurm)" "$JOB/node-0.out" || { cat "$JOB/node-0.out"; exit 1; }
# A second run must not overwrite it without --force.
if python -m rocmcheck doctor --no-train --no-gpu-probes --bundle-dir "$JOB/node" 2> "$JOB/again.err"; then
    echo "a second run replaced the bundle without --force" >&2; exit 1
fi
grep -q "use --force" "$JOB/again.err"
echo "slurm: one bundle per node, local rank 1 silent, no overwrite without --force"

# Each rank records what it saw; the doctor on each rank writes its bundle. --node-per-rank: the two tasks of this
# one machine stand in for two nodes, so the rendezvous and the cross-node collective run for real.
srun -N1 -n2 --time=10 --output="$JOB/rank-%t.out" bash -c '
    python -c "import os, json, platform; from rocmcheck.facts.launch import read_launch, node_per_rank;
l = read_launch(os.environ, platform.node()); print(json.dumps({\"launch\": l.to_dict(), \"stand_in\": node_per_rank(l).to_dict()}))" > '"$JOB"'/env-$SLURM_PROCID.json
    exec python -m rocmcheck doctor --no-train --node-per-rank --across-nodes --across-timeout 120 --bundle-dir '"$JOB"'/bundles
' || true   # the doctor exits 1 on this GPU-less box (no GPU found): the checks below judge the job
cat "$JOB"/rank-*.out

python - "$JOB" <<'PY'
import json, pathlib, sys
job = pathlib.Path(sys.argv[1])
for rank in (0, 1):
    seen = json.loads((job / f"env-{rank}.json").read_text())
    launch, stand_in = seen["launch"], seen["stand_in"]
    assert launch["launcher"] == "slurm", launch
    assert (launch["rank"], launch["world_size"], launch["local_rank"]) == (rank, 2, rank), launch
    assert (launch["node_rank"], launch["nnodes"], launch["local_world_size"]) == (0, 1, 2), launch
    assert launch["master_addr"] and launch["master_port"], launch  # from SLURM_STEP_NODELIST's first host
    assert launch["job_id"], launch
    assert (stand_in["node_rank"], stand_in["nnodes"], stand_in["local_rank"]) == (rank, 2, 0), stand_in
bundles = sorted((job / "bundles").glob("*.json"))
assert [b.name.rsplit("-rank", 1)[1] for b in bundles] == ["0.json", "1.json"], bundles
for b in bundles:
    facts = json.loads(b.read_text())["facts"]
    assert facts["launch"]["launcher"] == "slurm", facts["launch"]
    cluster = [r for r in facts["recorded_results"] if r["id"] == "cluster.collective"]
    assert cluster and cluster[0]["status"] == "pass", cluster
    assert cluster[0]["data"]["nodes"] == 2 and cluster[0]["data"]["all_reduce"]["ok"], cluster[0]["data"]
print("slurm: launch variables and bundles as expected:", ", ".join(b.name for b in bundles))
PY

set +e
python -m rocmcheck compare "$JOB/bundles" --json > "$JOB/compare.json"
rc=$?
set -e
python -m rocmcheck compare "$JOB/bundles" || true
python - "$JOB/compare.json" "$rc" <<'PY'
import json, sys
doc, rc = json.load(open(sys.argv[1])), int(sys.argv[2])
assert doc["mode"] == "nodes" and len(doc["nodes"]) == 2, doc["nodes"]
# Two tasks of one machine: nothing differs, so nothing may be named: the one verdict says they agree.
assert doc["comparison"] == "same" and rc == 0, (doc["results"], rc)
assert [(r["id"], r["status"]) for r in doc["results"]] == [("compare.nodes_agree", "pass")], doc["results"]
print("slurm: compare found the two stand-in nodes alike")
PY
rm -rf "$JOB"
echo "slurm stage: $(( $(date +%s) - T0 )) s"
