#!/bin/sh
# `ork run` with no model and greedy sampling tells the built-in model's
# story: its output must be the beginning of golden/stories260K_greedy_256.txt
# (greedy from BOS; the default prompt "Once upon a time" is that story's
# own first words). Usage: builtin_story.sh ORK TESTDATA
set -eu
ork=$1 golden=$2/golden/stories260K_greedy_256.txt
if [ ! -f "$golden" ]; then echo "SKIPPED: $golden missing"; exit 77; fi
out=$("$ork" run --temp 0 -n 160 2>/dev/null)
story=$(cat "$golden")
case "$story" in
  "$out"*) [ ${#out} -gt 300 ] && { echo "the built-in story, ${#out} characters, as golden"; exit 0; } ;;
esac
printf 'ork run printed:\n%s\n--- the golden story begins:\n%.600s\n' "$out" "$story"
exit 1
