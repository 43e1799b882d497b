#!/usr/bin/env bash
# Piper (NeurIPS 2021, msr-fiddle/piper) and `dnnplace plan --cost-model piper`, side by side
# on Piper's own inputs: BERT-32 at 64, 512 and 2,048 devices; ResNet-50 and GNMT at 16.
#
# Piper is built with g++ -O3 in a temporary folder from the local mirror (never committed),
# with a 20-line driver that reads one input, sets maxDevices and prints runDP's objective
# (getTPSForResult of its plan) and its CPU seconds. Both programs run under `nice` and
# `timeout`; a Piper run that does not finish is reported as such.
#
# Usage: bench/piper_compare.sh [DNNPLACE_BINARY] [PIPER_TIMEOUT_S]
# Environment: PIPER_MIRROR (default /work/.mirror/msr-fiddle+piper/repo).
set -u
bin=${1:-target/release/dnnplace}
piper_timeout=${2:-600}
mirror=${PIPER_MIRROR:-/work/.mirror/msr-fiddle+piper/repo}
if ! git -C "$mirror" rev-parse --verify -q HEAD:algo.cpp >/dev/null 2>&1; then
  echo "skipped: no Piper mirror at $mirror (set PIPER_MIRROR to a clone of msr-fiddle/piper)"
  exit 0
fi
if ! command -v g++ >/dev/null; then
  echo "skipped: no g++ to build Piper"
  exit 0
fi
if [ ! -x "$bin" ]; then
  echo "no dnnplace binary at $bin (cargo build --release --locked)"; exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$mirror" archive HEAD | tar -x -C "$work"
cat > "$work/driver.cpp" <<'CPP'
#define main piper_paper_main
#include "algo.cpp"
#undef main
int main(int argc, char **argv) {
    if (argc != 3) { cerr << "usage: piper INPUT.json DEVICES" << endl; return 2; }
    json j; ifstream f(argv[1]); f >> j;
    Instance ins = j.get<Instance>();
    ins.maxDevices = atoi(argv[2]);
    clock_t start = clock();
    Graph g(ins);
    Result r = g.runDP();
    double runtime = (clock() - start) * 1.0 / CLOCKS_PER_SEC;
    double tps = r.stages.empty() ? INFTY : g.getTPSForResult(r);
    cout << setprecision(12) << "objective " << tps << " cpu_s " << runtime << endl;
    return 0;
}
CPP
echo "building Piper (g++ -O3) in $work ..." >&2
(cd "$work" && nice -n 10 g++ -O3 -std=c++17 -w -o piper driver.cpp) || { echo "Piper did not build"; exit 2; }
printf '| case | devices | Piper objective | ours | Piper CPU s | ours CPU s | ours wall s | ratio (CPU) |\n'
printf '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n'
for c in "bert32a100 64" "bert32a100 512" "bert32a100 2048" "resnet 16" "gnmt 16"; do
  set -- $c
  name=$1 k=$2
  in="$work/inputs/$name.json"
  # Piper: user+sys CPU seconds from /usr/bin/time (its own clock() figure is printed too).
  pout=$(cd "$work" && /usr/bin/time -f "TIME %U %S %e %M" nice timeout "$piper_timeout" ./piper "$in" "$k" 2>&1 >"$work/p.out"; cat "$work/p.out")
  pobj=$(grep -o 'objective [^ ]*' <<<"$pout" | cut -d' ' -f2)
  pcpu=$(grep -o 'TIME .*' <<<"$pout" | awk '{printf "%.2f", $2+$3}')
  if [ -z "$pobj" ]; then pobj="did not finish in ${piper_timeout} s"; fi
  oout=$(/usr/bin/time -f "TIME %U %S %e %M" nice "$bin" plan "$in" --cost-model piper --devices "$k" --json 2>&1)
  oobj=$(grep -o '"value": [^,]*' <<<"$oout" | head -1 | cut -d' ' -f2)
  ocpu=$(grep -o 'TIME .*' <<<"$oout" | awk '{printf "%.2f", $2+$3}')
  owall=$(grep -o 'TIME .*' <<<"$oout" | awk '{printf "%.2f", $4}')
  ratio=$(awk -v p="$pcpu" -v o="$ocpu" -v f="$pobj" 'BEGIN{ if (o <= 0) o = 0.01; r = p / o; if (f ~ /did not/) printf "> %.0f", r; else printf "%.1f", r }')
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$k" "$pobj" "$oobj" "$pcpu" "$ocpu" "$owall" "$ratio"
done
