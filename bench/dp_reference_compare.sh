#!/usr/bin/env bash
# The paper's reference DP (msr-fiddle/dnn-partitioning, throughput-dp/dp.cpp) and
# `dnnplace plan`, side by side on the published GNMT layer graphs with k = 8 and 16
# accelerators, l = 2 CPUs and memory per accelerator 1.3 x (total size)/k: the rows
# `gnmt-{inference,training}-k{8,16}-l2-mem1.3` of `dnnplace bench --hard`
# (src/cli/bench_hard.rs, src/cli/bench_scale.rs::gnmt).
#
# The reference is built with g++ -O3 in a temporary folder from a checkout given on the
# command line (never committed, nothing fetched here); a ready binary may be given
# instead. The inputs are the published files with maxFPGAs, maxCPUs and maxSizePerFPGA
# rewritten by jq into the temporary folder; both programs read the same file. Each pair
# runs REPEATS times alternated (reference, ours), under `nice`; the table gives the
# median user+sys CPU seconds of each (ours runs on up to 2 threads, the reference on 1),
# ours' median wall seconds, the ratio of the medians, and both optima (the reference's:
# `maxLoad` of the JSON it prints; ours: `value` of `plan --json`).
#
# Usage: bench/dp_reference_compare.sh REFERENCE [DNNPLACE_BINARY] [WORKLOAD_DIR] [REPEATS]
#   REFERENCE     a checkout of msr-fiddle/dnn-partitioning (with throughput-dp/dp.cpp
#                 and nlohmann/), or an executable built from it
#   WORKLOAD_DIR  the published layer graphs (default ../shared/workloads/paper/throughput/layer)
#   REPEATS       runs per program and case (default 3)
# Environment: REF_TIMEOUT_S (default 600): a reference run beyond it is reported as such.
set -u
ref=${1:-}
bin=${2:-target/release/dnnplace}
dir=${3:-../shared/workloads/paper/throughput/layer}
repeats=${4:-3}
ref_timeout=${REF_TIMEOUT_S:-600}
if [ -z "$ref" ]; then
  echo "usage: $0 REFERENCE [DNNPLACE_BINARY] [WORKLOAD_DIR] [REPEATS]" >&2; exit 2
fi
for tool in jq /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "skipped: no $tool"; exit 0; }
done
if [ ! -x "$bin" ]; then
  echo "no dnnplace binary at $bin (cargo build --release --locked)"; exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -d "$ref" ]; then
  if [ ! -f "$ref/throughput-dp/dp.cpp" ]; then
    echo "no throughput-dp/dp.cpp under $ref"; exit 2
  fi
  command -v g++ >/dev/null || { echo "skipped: no g++ to build the reference"; exit 0; }
  echo "building the reference ($(g++ --version | head -1), -O3) in $work ..." >&2
  nice -n 10 g++ -O3 -w -o "$work/dp.exe" "$ref/throughput-dp/dp.cpp" || { echo "the reference did not build"; exit 2; }
  dp="$work/dp.exe"
elif [ -x "$ref" ]; then
  dp=$ref
else
  echo "$ref is neither a checkout of msr-fiddle/dnn-partitioning nor an executable"; exit 2
fi

median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }

printf '| workload | k | ours CPU s | ours wall s | reference CPU s | ratio | ours optimum | reference optimum | same |\n'
printf '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n'
for kind in inference training; do
  for k in 8 16; do
    src="$dir/gnmt_$kind.json"
    [ -f "$src" ] || { echo "no $src"; exit 2; }
    in="$work/gnmt_${kind}_k$k.json"
    jq -c --argjson k "$k" '([.nodes[].size] | add) as $t
      | .maxFPGAs = $k | .maxCPUs = 2 | .maxSizePerFPGA = (1.3 * $t / $k)' "$src" >"$in"
    : >"$work/ref.cpu"; : >"$work/ours.cpu"; : >"$work/ours.wall"
    robj="" oobj=""
    for _ in $(seq "$repeats"); do
      if /usr/bin/time -f "TIME %U %S %e" -o "$work/t" nice timeout "$ref_timeout" "$dp" <"$in" >"$work/r.json" 2>/dev/null; then
        robj=$(jq -r '.maxLoad' "$work/r.json")
        awk '/^TIME/ {printf "%.3f\n", $2+$3}' "$work/t" >>"$work/ref.cpu"
      else
        robj="did not finish in ${ref_timeout} s"
      fi
      /usr/bin/time -f "TIME %U %S %e" -o "$work/t" nice "$bin" plan "$in" --json >"$work/o.json" 2>/dev/null
      oobj=$(jq -r '.value // empty' "$work/o.json" 2>/dev/null)
      [ -n "$oobj" ] || oobj=$(grep -o '"value": [^,]*' "$work/o.json" | head -1 | cut -d' ' -f2)
      awk '/^TIME/ {printf "%.3f\n", $2+$3}' "$work/t" >>"$work/ours.cpu"
      awk '/^TIME/ {printf "%.3f\n", $4}' "$work/t" >>"$work/ours.wall"
    done
    rcpu=$(median <"$work/ref.cpu"); ocpu=$(median <"$work/ours.cpu"); owall=$(median <"$work/ours.wall")
    ratio=$(awk -v r="$rcpu" -v o="$ocpu" 'BEGIN { if (r == "-") { print "-"; exit } if (o <= 0) o = 0.001; printf "%.1f", r / o }')
    same=$(awk -v a="$oobj" -v b="$robj" 'BEGIN { d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); if (b !~ /^[0-9.eE+-]+$/) print "-"; else print (d <= 1e-9 * (m > 1 ? m : 1) ? "yes" : "NO") }')
    printf '| gnmt_%s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$kind" "$k" "$ocpu" "$owall" "$rcpu" "$ratio" "$oobj" "$robj" "$same"
  done
done
