#!/usr/bin/env bash
# mutate.sh: plant known bugs one at a time in a copy of the tree and check
# that the test suite catches each of them.
#
# The working tree is never modified: it is copied to a temporary directory
# (uncommitted edits included, since they are what is being tested), and
# each mutant is made in a fresh copy of that. A mutation is a small
# substitution whose anchor text is verified first: if the anchor is gone
# (the code moved on), the script says so and fails, rather than report a
# mutant that was never planted.
#
# The tests are run once unmutated (the baseline) and once per mutant. A
# mutant is "caught" when a test that passed in the baseline fails, or a
# package that passed fails (a panic or time-out); "survived" otherwise. A
# mutant that does not compile is reported as "broken": the substitution
# itself is wrong.
#
# Usage: scripts/mutate.sh [name...]   (no names: every mutation)
# Environment: MUTATE_PKGS (packages to test), MUTATE_TIMEOUT (go test
# -timeout, default 10m), MUTATE_KEEP=1 keeps the temporary directory.
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
pkgs="${MUTATE_PKGS:-./engine/ ./timerstore/ ./commitlog/ ./queueindex/}"
timeout="${MUTATE_TIMEOUT:-10m}"
work="$(mktemp -d "${TMPDIR:-/tmp}/hourglass-mutate.XXXXXX")"
if [[ "${MUTATE_KEEP:-}" != 1 ]]; then
	trap 'rm -rf "$work"' EXIT
fi

# Copy the tree as it is, without version-control data and build outputs.
mkdir -p "$work/base"
tar -C "$root" --exclude=./.git --exclude=./bin -cf - . | tar -C "$work/base" -xf -

# Each mutation: name, file, and a perl substitution over the whole file
# (-0777) that must match exactly once. The perl program dies with
# "anchor not found" when it matches nothing.
names=()
declare -A mfile mprog mwhat

add() { # name file what perl-program
	names+=("$1")
	mfile[$1]=$2
	mwhat[$1]=$3
	mprog[$1]=$4
}

add cancel-timer-after-append engine/control.go \
	"cancel/reschedule takes the timer out of the wheel only after its record is appended" \
	's/\tif t := e\.disp\.near\[pos\]; t != nil \{\n\t\te\.disp\.wheel\.Cancel\(t\)\n\t\tdelete\(e\.disp\.near, pos\)\n\t\th\.timer = t\n\t\}\n/\t\/\/ mutant: the timer stays in the wheel during the append\n/ == 1 or die "anchor not found (timer removal before the append)\n";
	 s/(\t_, aerr := e\.clog\.Append\(rec\)\n\n\te\.mu\.Lock\(\)\n\tdefer e\.mu\.Unlock\(\)\n)/$1\tif t := e.disp.near[id.Pos]; t != nil {\n\t\te.disp.wheel.Cancel(t)\n\t\tdelete(e.disp.near, id.Pos)\n\t\th.timer = t\n\t}\n/ == 1 or die "anchor not found (relock after the append)\n";'

add checkpoint-drops-done engine/checkpoint.go \
	"the checkpoint leaves out a group's acked offsets above its contiguous acked prefix" \
	's/\t\t\t\tcq\.Done = append\(cq\.Done, off\)\n/\t\t\t\t_ = off \/\/ mutant: out-of-order acks not recorded\n/ == 1 or die "anchor not found (cq.Done append)\n";'

add trim-disabled timerstore/verify.go \
	"timerstore.Trim does nothing" \
	's/(func \(s \*Store\) Trim\(keep map\[int64\]int64\) error \{\n)/$1\tif keep != nil {\n\t\treturn nil \/\/ mutant\n\t}\n/ == 1 or die "anchor not found (func (s *Store) Trim)\n";'

add ack-not-appended engine/ack.go \
	"Ack never appends its record" \
	's/\t_, err := e\.clog\.Append\(encodeProgress\(recAck, g\.id, items\)\)\n/\tvar err error \/\/ mutant: the ack record is never appended\n/ == 1 or die "anchor not found (ack append)\n";'

add fire-1ms-early engine/loop.go \
	"the wheel is advanced 1 ms ahead of the clock, so timers fire 1 ms early" \
	's/\t_, more := d\.wheel\.AdvanceN\(to, expireChunk, e\.expireLocked\)\n/\t_, more := d.wheel.AdvanceN(to+1, expireChunk, e.expireLocked) \/\/ mutant\n/ == 1 or die "anchor not found (wheel advance in the loop)\n";'

add segment-dir-not-synced commitlog/recover.go \
	"a new segment file's directory entry is never fsynced" \
	's/(\t\t\tstep = "sync dir for"\n\t\t\terr = )fsys\.SyncDir\(dir\)\n/$1nil \/\/ mutant: fsys.SyncDir(dir) skipped\n/ == 1 or die "anchor not found (sync dir after creating a segment)\n";'

selected=("$@")
if [[ ${#selected[@]} -eq 0 ]]; then
	selected=("${names[@]}")
fi
for n in "${selected[@]}"; do
	if [[ -z "${mfile[$n]:-}" ]]; then
		echo "mutate: unknown mutation $n (known: ${names[*]})" >&2
		exit 2
	fi
done

# failures prints the failing tests and packages of a go test output.
failures() {
	grep -oE -e '--- FAIL: [^ ]+' -e '^FAIL[[:space:]]+[^ ]+' "$1" | sed -E 's/[[:space:]]+/ /g' | sort -u
}

run_tests() { # dir log
	(cd "$1" && go test -count=1 -timeout "$timeout" $pkgs) >"$2" 2>&1
}

echo "mutate: baseline run of $pkgs (unmutated copy)"
run_tests "$work/base" "$work/baseline.log"
failures "$work/baseline.log" >"$work/baseline.fail"
if grep -q -e '\[build failed\]' -e '\[setup failed\]' "$work/baseline.log"; then
	echo "mutate: the unmutated tree does not build:" >&2
	grep -v '^ok' "$work/baseline.log" | head -20 >&2
	exit 2
fi
if [[ -s "$work/baseline.fail" ]]; then
	echo "mutate: note: the baseline already fails these (a mutant is caught only by other failures):"
	sed 's/^/  /' "$work/baseline.fail"
fi

caught=0 survived=0 broken=0 missing=0
table=""
for n in "${selected[@]}"; do
	dir="$work/m-$n"
	cp -a "$work/base" "$dir"
	file="$dir/${mfile[$n]}"
	if [[ ! -f "$file" ]] || ! perl -0777 -i -pe "${mprog[$n]}" "$file" 2>"$work/$n.perl"; then
		result="ANCHOR MISSING"
		missing=$((missing + 1))
		detail="$(cat "$work/$n.perl" 2>/dev/null || echo "no file ${mfile[$n]}")"
	else
		echo "mutate: $n: ${mwhat[$n]}"
		run_tests "$dir" "$work/$n.log"
		if grep -q -e '\[build failed\]' -e '\[setup failed\]' "$work/$n.log"; then
			result="broken"
			broken=$((broken + 1))
			detail="$(grep -m3 -E '\.go:[0-9]+' "$work/$n.log" | tr '\n' ' ')"
		else
			new="$(failures "$work/$n.log" | comm -23 - "$work/baseline.fail")"
			if [[ -n "$new" ]]; then
				result="caught"
				caught=$((caught + 1))
				detail="$(echo "$new" | grep -- '--- FAIL' | sed 's/--- FAIL: //' | head -6 | tr '\n' ' ')"
			else
				result="survived"
				survived=$((survived + 1))
				detail=""
			fi
		fi
	fi
	rm -rf "$dir"
	line="$(printf '%-26s %-15s %s' "$n" "$result" "$detail")"
	echo "mutate: $line"
	table+="$line"$'\n'
done

echo
echo "mutation                   result          failing tests"
printf '%s' "$table"
echo "caught $caught, survived $survived, broken $broken, anchor missing $missing (of ${#selected[@]})"
if [[ $survived -gt 0 || $broken -gt 0 || $missing -gt 0 ]]; then
	exit 1
fi
