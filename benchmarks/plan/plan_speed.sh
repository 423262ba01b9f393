#!/bin/sh
# plan_speed.sh: how long `placer plan` takes on the rows of issue 38, for
# one or more placer binaries side by side (a "before" and an "after" build
# in one run, so both see the same machine and the same load).
#
#   benchmarks/plan/plan_speed.sh [--cpu LIST] [--rows LIST] [--threads N]
#                                 [--exhaustive] [--out DIR] BIN [BIN ...]
#
#   BIN           a placer binary; each row runs under each binary in turn
#   --cpu LIST    pin every run with taskset -c LIST (e.g. 0 for one core)
#   --rows LIST   comma-separated row names (default: all of them, below)
#   --threads N   pass --threads N to binaries that take it (see --help);
#                 "all" leaves it to the default (all cores)
#   --exhaustive  also run each binary that takes --exhaustive with it, on
#                 the 70B/128 rows (the full enumeration with no pruning:
#                 minutes), and say whether its best layout and step match
#   --out DIR     keep every run's stdout and /usr/bin/time -v output there
#   --timeout S   stop a run after S seconds (SIGINT: a binary with Ctrl-C
#                 handling prints its best so far; default 3600); its wall
#                 then reads as S and its best layout as "(stopped)"
#
# Prints one line per (row, binary): wall seconds, CPU seconds (user + system:
# what one core needs when the machine is loaded), peak RSS, the layouts
# considered and simulated (the plan's "layouts:" line), and the best layout
# with its step time; then, per row, whether every binary chose the same
# best layout and step. Needs /usr/bin/time (Debian's `time` package).
set -eu
cpu= rows= threads= exhaustive=0 out= limit=3600
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) cpu="$2"; shift 2 ;;
    --rows) rows="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --exhaustive) exhaustive=1; shift ;;
    --out) out="$2"; shift 2 ;;
    --timeout) limit="$2"; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "plan_speed.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "plan_speed.sh: give at least one placer binary (see --help)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "plan_speed.sh: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
out="${out:-$(mktemp -d)}"
mkdir -p "$out"

L70="--model llama-3-70b --cluster dgx-h100 --gpus 128 --global-batch 512 --seq 8192"
DSV3="--model deepseek-v3 --cluster h800-deepseek --gpus 2048 --global-batch 15360 --seq 4096"
L405="--model llama-3-405b --cluster llama3-h100 --gpus 16384 --global-batch 2048 --seq 8192"
ALL="--schedules all --precision bf16,fp8"
# name|arguments (the issue's five rows, 405B with every option, DeepSeek-V3 with every option)
ROWS="70b|$L70
70b-fp8|$L70 --precision bf16,fp8
70b-sched|$L70 --schedules all
70b-all|$L70 $ALL
dsv3|$DSV3
405b-all|$L405 $ALL
dsv3-all|$DSV3 $ALL"

pin() { if [ -n "$cpu" ]; then taskset -c "$cpu" "$@"; else "$@"; fi; }

# takes(BIN, OPTION): 1 when BIN's `plan --help` lists OPTION
takes() { "$1" plan --help 2>/dev/null | grep -q -- "$2"; }

# run_one ROW BIN TAG EXTRA...: one timed run; prints the table line
run_one() {
  row="$1" bin="$2" tag="$3"; shift 3
  args=$(printf '%s\n' "$ROWS" | sed -n "s/^$row|//p")
  f="$out/$row.$tag"
  # shellcheck disable=SC2086
  pin /usr/bin/time -v timeout -s INT "$limit" "$bin" plan $args "$@" >"$f.out" 2>"$f.time" || true
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$f.time" |
         awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f", s }')
  cpu_s=$(awk -F': ' '/User time|System time/ { s += $2 } END { printf "%.2f", s }' "$f.time")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$f.time")
  cons=$(sed -n 's/^layouts: \([0-9]*\) considered.*/\1/p' "$f.out")
  sims=$(sed -n 's/^layouts: .* \([0-9]*\) simulated.*/\1/p' "$f.out")
  best=$(awk '$1 == "1*" { l = ""; for (i = 2; i <= NF && $i !~ /^[0-9]+[.][0-9]+$/; i++) l = l (l ? " " : "") $i;
                            print l " | " $i; exit }' "$f.out")
  if grep -q -e "Exit status: 124" -e "Exit status: 130" -e "interrupted" "$f.time"; then
    best="(stopped at ${limit} s) ${best:-}"
  fi
  printf '%-10s %-14s %8s %8s %7s %10s %9s  %s\n' "$row" "$tag" "$wall" "$cpu_s" "$((${rss:-0} / 1024))" \
    "${cons:-?}" "${sims:-?}" "${best:-(none: see $f.out)}"
  printf '%s|%s\n' "$row" "$best" >>"$out/best.$tag"
}

printf 'placer plan speed, %s, cpu %s, load: %s\n' "$(date -u +%Y-%m-%dT%H:%MZ)" "${cpu:-any}" \
  "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %-14s %8s %8s %7s %10s %9s  %s\n' row binary wall_s cpu_s rss_MB considered simulated "best layout | step ms"
want="${rows:-70b,70b-fp8,70b-sched,70b-all,dsv3,405b-all,dsv3-all}"
n=0
for b in "$@"; do
  n=$((n + 1))
  : >"$out/best.$n"
done
for row in $(echo "$want" | tr ',' ' '); do
  printf '%s\n' "$ROWS" | grep -q "^$row|" || { echo "plan_speed.sh: no row $row" >&2; exit 2; }
  n=0
  for b in "$@"; do
    n=$((n + 1))
    if [ -n "$threads" ] && takes "$b" --threads; then
      if [ "$threads" = all ]; then run_one "$row" "$b" "$n" ; else run_one "$row" "$b" "$n" --threads "$threads"; fi
    else
      run_one "$row" "$b" "$n"
    fi
    if [ "$exhaustive" = 1 ] && takes "$b" --exhaustive && case "$row" in 70b*) true ;; *) false ;; esac; then
      run_one "$row" "$b" "$n-exhaustive" --exhaustive
    fi
  done
done
echo
echo "binaries: $(n=0; for b in "$@"; do n=$((n + 1)); printf '%s=%s ' "$n" "$b"; done)"
n=0
for b in "$@"; do
  n=$((n + 1))
  if [ "$n" -gt 1 ]; then
    if cmp -s "$out/best.1" "$out/best.$n"; then echo "best layouts and steps: binary $n = binary 1 on every row"
    else echo "best layouts and steps DIFFER between binary 1 and binary $n:"; diff "$out/best.1" "$out/best.$n" || true; fi
  fi
  ex="$out/best.$n-exhaustive"
  if [ -s "$ex" ]; then
    rows_ex=$(wc -l <"$ex")
    same=$(grep -c -F -x -f "$ex" "$out/best.$n" || true)
    if [ "$same" = "$rows_ex" ]; then
      echo "binary $n: best layout and step of the pruned search = the exhaustive one on $rows_ex rows"
    else
      echo "binary $n: pruned and exhaustive DIFFER; exhaustive:"
      cat "$ex"
    fi
  fi
done
echo "runs kept in $out"
