#!/bin/sh
# Prints search=megatron's options for a layout written as dash-separated
# words, e.g. `tp2-pp2-v2-m4-sp-distopt-selective`:
#   tpN ppN vN (virtual stages) mN (micro-batches) sp (sequence parallel)
#   distopt (distributed optimizer) selective | full (recomputation)
#   cpN (context parallel) a2a (its all-to-all exchange) kb (its key
#   blocks exchange) ring (its ring exchange) epN (expert parallel) etpN
#   (expert tensor parallel)
# usage: megatron_options.sh WORDS    (exit 1 on an unknown word)
set -e
options=""
for word in $(echo "$1" | tr - ' '); do
  case $word in
  tp*) options="$options tp=${word#tp}" ;;
  pp*) options="$options pp=${word#pp}" ;;
  cp*) options="$options cp=${word#cp}" ;;
  ep*) options="$options ep=${word#ep}" ;;
  etp*) options="$options etp=${word#etp}" ;;
  a2a) options="$options cp-comm=all-to-all" ;;
  kb) options="$options cp-comm=key-blocks" ;;
  ring) options="$options cp-comm=ring" ;;
  v*) options="$options virtual-stages=${word#v}" ;;
  m*) options="$options microbatches=${word#m}" ;;
  sp) options="$options sequence-parallel=true" ;;
  distopt) options="$options distributed-optimizer=true" ;;
  selective | full) options="$options recompute=$word" ;;
  *) echo "megatron_options.sh: unknown word '$word' in $1" >&2; exit 1 ;;
  esac
done
echo "$options"
