#!/usr/bin/env bash
# Prints the scaling table of docs/load-model.md: the failure rate of the bug report's pattern
# (nvshmem-3.7, ops=barrier,alltoall:576) against the number of ranks and the background flood,
# under today's `rss` profile, the load-dependent `load` profile, and `cpu` (`load` plus the
# host's CPUs: the application's CPU time on its core).
#
#   scripts/load-table.sh [SEEDS] [RANKS] [FLOODS] [EXTRA]
#   SEEDS   seeds per cell (default 200)
#   RANKS   comma-separated world sizes (default 2,4,8,16,32,64)
#   FLOODS  comma-separated flood_rate values for the `load` rows, packets/s per host
#           (default 0,300000,600000)
#   EXTRA   more rows, `;`-separated, each a profile and kernel knobs at the largest flood,
#           e.g. 'cpu cpus=4;cpu rps=on' (default none)
# BOOTSIM names the binary (default target/release/bootsim; build it with cargo build --release).
set -euo pipefail
seeds=${1:-200}
ranks=${2:-2,4,8,16,32,64}
floods=${3:-0,300000,600000}
extra=${4:-}
bin=${BOOTSIM:-target/release/bootsim}
[ -x "$bin" ] || { echo "no executable $bin: run cargo build --release, or set BOOTSIM" >&2; exit 2; }

# Failure rate (error + corruption + hang) of one cell, as a percentage with two decimals:
# cell RANKS PROFILE [KNOB=VALUE...].
cell() {
    local line sets=()
    for kv in "${@:3}"; do sets+=(--set "$kv"); done
    line=$("$bin" sweep --variant nvshmem-3.7 --workload custom --set ops=barrier,alltoall:576 \
        --ranks "$1" --adversary "$2" --seeds "$seeds" "${sets[@]}" | grep 'runs=')
    echo "$line" | awk '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "%.2f %%", 100 * (v["error"] + v["corruption"] + v["hang"]) / v["runs"] }'
}

IFS=, read -ra rs <<<"$ranks"
IFS=, read -ra fs <<<"$floods"
printf '| profile | flood (pkt/s/host) |'
for n in "${rs[@]}"; do printf ' n=%s |' "$n"; done
printf '\n|---|---|'
for _ in "${rs[@]}"; do printf -- '---|'; done
printf '\n| rss (today) | stalls only |'
for n in "${rs[@]}"; do printf ' %s |' "$(cell "$n" rss)"; done
printf '\n'
for p in load cpu; do
    for f in "${fs[@]}"; do
        printf '| %s | %s |' "$p" "$f"
        for n in "${rs[@]}"; do printf ' %s |' "$(cell "$n" "$p" "flood_rate=$f")"; done
        printf '\n'
    done
done
IFS=';' read -ra xs <<<"$extra"
for x in "${xs[@]}"; do
    read -ra words <<<"$x"
    printf '| %s | %s |' "$x" "${fs[-1]}"
    for n in "${rs[@]}"; do printf ' %s |' "$(cell "$n" "${words[0]}" "flood_rate=${fs[-1]}" "${words[@]:1}")"; done
    printf '\n'
done
printf '\n(%s seeds per cell; failure = error + corruption + hang)\n' "$seeds"
