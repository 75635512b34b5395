#!/bin/sh
# Runs a command and checks its exit status and output.
# usage: expect.sh pass|fail REGEX COMMAND [ARGS...]
#   pass: exit status 0; fail: any other status. Either way the command's
#   stdout and stderr together must match REGEX (grep -E).
mode=$1
regex=$2
shift 2
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [ "$mode" = pass ] && [ "$status" -ne 0 ]; then
  echo "expect.sh: exit status $status, expected 0"
  exit 1
fi
if [ "$mode" = fail ] && [ "$status" -eq 0 ]; then
  echo "expect.sh: exit status 0, expected a failure"
  exit 1
fi
if ! printf '%s\n' "$output" | grep -Eq -- "$regex"; then
  echo "expect.sh: the output does not match '$regex'"
  exit 1
fi
