# benchmarks/hw/ab_step.sh: the step helper of the device-machine A/B scripts
# (side_stream_run.sh, ht_tf32_run.sh), sourced after they set LOG and SUM.
#   step NAME TIMEOUT CMD...  runs CMD under timeout, its output appended to
#                             $LOG after a "==== NAME: CMD" line, and writes
#                             "NAME rc=RC Ns" to stdout and $SUM
step() {
  local name=$1 t=$2
  shift 2
  echo "==== $name: $*" >>"$LOG"
  local s=$(date +%s)
  timeout "$t" "$@" >>"$LOG" 2>&1
  local rc=$?
  echo "$name rc=$rc $(($(date +%s) - s))s" | tee -a "$SUM"
}
