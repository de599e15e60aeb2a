#!/usr/bin/env bash
# Out-of-core sampling + feature fetch (issue 38, items 3 and 4): graphfeed bench sample on a
# dataset whose features do not fit a memory cgroup, with fio's random-read rate of the same
# feature file measured just before and just after it (this VM's disk drifts by 2-4x within
# minutes, so only figures of the same run compare).
#
#   benchmarks/out_of_core.sh DATASET_DIR [LIMIT] [-- extra bench sample flags]
#   benchmarks/out_of_core.sh $GRAPHFEED_HOME/datasets/synthetic-papers-v1 12G -- \
#       --features disk --cache-size 4GB --cache-policy degree --batches 40
#
# Prints fio's IOPS before and after, the bench's JSON line and its reads/s against the mean of
# the two fio figures. Needs fio and root (the memory cgroup).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
data=${1:?dataset folder}; shift
limit=${1:-12G}; [ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
py=${PYTHON:-$here/.venv/bin/python}
feat="$data/node_features/feat.npy"
fio_iops() {
  fio --name=r --filename="$feat" --readonly --rw=randread --bs=4k --direct=1 \
      --ioengine=io_uring --iodepth=64 --runtime="${FIO_SECONDS:-15}" --time_based \
      --output-format=json 2>/dev/null |
    "$py" -c "import json,sys; print(round(json.load(sys.stdin)['jobs'][0]['read']['iops']))"
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
before=$(fio_iops)
echo "fio before: $before IOPS (4 KiB random reads, queue depth 64, O_DIRECT)" >&2
out=$(mktemp)
"$here/../shared/tools/with-memory-limit" "$limit" "$py" -m graphfeed bench sample \
    --graph "$data" --rounds 1 --json "$@" > "$out"
after=$(fio_iops)
echo "fio after: $after IOPS" >&2
cat "$out"
"$py" - "$out" "$before" "$after" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
fio = (float(sys.argv[2]) + float(sys.argv[3])) / 2
d = r.get("disk")
if d:
    print(f"seeds/s {r['seeds_per_s']:,.0f}; disk {d['reads_per_s']:,.0f} reads/s = "
          f"{d['reads_per_s'] / fio:.2f}x fio's {fio:,.0f} IOPS, {d['rows_per_read']:.2f} rows per "
          f"read, cache hit rate {d['cache_hit_rate']:.1%}; {r['seeds_per_s'] / fio * 1000:.1f} "
          f"seeds/s per 1k IOPS", file=sys.stderr)
EOF
rm -f "$out"
