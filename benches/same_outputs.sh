#!/usr/bin/env bash
# Compares two nsys-lens binaries' outputs, byte for byte: every analysis command (JSON), both
# traces and the HTML report, on the fixtures, a synth run of each preset (nsys and torch.profiler forms), and every
# real capture in ../shared/real-data when present. For changes that must not change any output
# (a restructure): `benches/same_outputs.sh OLD_BINARY NEW_BINARY`. Prints each difference; exits
# 1 when there is one.
set -u
old=$1
new=$2
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export NSYS_LENS_CACHE=$work/cache
"$new" synth -o "$work/ddp" --preset ddp --nodes 2 --gpus-per-node 2 --nccl-payloads >/dev/null
"$new" synth -o "$work/fsdp" --preset fsdp >/dev/null
"$new" synth -o "$work/megatron" --preset megatron --tp 2 --pp 2 --names 2026 >/dev/null
"$new" synth -o "$work/pithtrain" --preset pithtrain --renumber-streams >/dev/null
"$new" synth -o "$work/kineto" --preset ddp --format kineto >/dev/null
inputs=("$root"/fixtures/*/ "$work"/ddp "$work"/fsdp "$work"/megatron "$work"/pithtrain "$work"/kineto)
real=$root/../shared/real-data
if [ -d "$real" ]; then
  inputs+=("$real"/nsys/*.sqlite "$real"/nsys/fs24_nccl_allreduce_tree_3nodes_9gpus
           "$real"/kineto/*.json.gz "$real"/gpu/*)
fi
differ=0
checked=0
for input in "${inputs[@]}"; do
  case $input in *.md) continue ;; esac
  for command in "overlap" "streams" "kernels --whole" "idle --whole" "bubbles" \
                 "collectives --whole --p2p" "ranks" "window" "info"; do
    a=$("$old" $command --format json -q "$input" 2>&1; echo "rc=$?")
    b=$("$new" $command --format json -q "$input" 2>&1; echo "rc=$?")
    checked=$((checked + 1))
    if [ "$a" != "$b" ]; then
      echo "differs: $command $input"
      differ=1
    fi
  done
  for bin in old new; do
    "${!bin}" convert -q -o "$work/$bin" "$input" >/dev/null 2>&1
    "${!bin}" report -q -o "$work/$bin.html" "$input" >/dev/null 2>&1
  done
  for out in "$work"/old.*; do
    [ -e "$out" ] || continue
    checked=$((checked + 1))
    if ! cmp -s "$out" "$work/new.${out##*/old.}"; then
      echo "differs: convert $input (${out##*/})"
      differ=1
    fi
  done
  rm -f "$work"/old.* "$work"/new.*
done
echo "$checked outputs compared"
exit $differ
