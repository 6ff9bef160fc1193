#!/usr/bin/env bash
# mutate.sh: plant known bugs one at a time and check that the tests catch
# each of them (mutation testing with a fixed, hand-written list of mutants).
#
# Each mutant is a real bug that would break a promise the broker makes
# (docs/architecture.md, "Mutation testing", lists them). It is one or more
# literal substitutions ("edits"), each anchored on a short piece of code
# that must occur EXACTLY ONCE in its package (or file). A mutant whose anchor is gone
# or ambiguous (the code moved on), or whose mutated package does not build
# or vet, FAILS the run and is named: it never drops out of the count.
#
# The working tree is never modified. A mutated file is written to a
# temporary directory and handed to the go command with -overlay, so the
# uncommitted edits of the tree are what is tested, and no copy of the tree
# is made. (An overlay is seen by the compiler only: a test that reads
# source files at run time reads the unmutated ones.)
#
# Modes:
#   scripts/mutate.sh [name...]          plant each mutant (no names: all),
#                                        vet its package, run the tests of
#                                        its packages, report caught or not
#   scripts/mutate.sh --check [name...]  only plant each mutant and build
#                                        its package (go build): no test
#                                        runs (seconds; make test runs it,
#                                        so CI fails once a mutant is stale)
#   scripts/mutate.sh --self-test        plant mutants made to fail (a
#                                        missing and an ambiguous anchor, a
#                                        compile error, a -run filter that
#                                        names no test, a change no test
#                                        sees): each must fail, by name
#   scripts/mutate.sh --list             the mutants, their packages and
#                                        the promise each breaks
#
# A mutant is "caught" when a test fails with it planted and that same test
# passes on the unmutated tree (run again at once, alone: a flaky test does
# not count as a catch). It "survived" when its tests pass. The exit status
# is 0 only when every selected mutant applies, builds and is caught
# (--self-test: when each of its mutants fails as it should).
#
# Environment: MUTATE_TIMEOUT (go test -timeout, default 10m), MUTATE_FULL=1
# runs every test of a mutant's packages instead of its -run filter,
# MUTATE_JOBS (mutants planted and compiled at once, default 2),
# MUTATE_KEEP=1 keeps the temporary directory (mutated files, test logs).
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 2
timeout="${MUTATE_TIMEOUT:-10m}"

mode=run selftest=0
case "${1:-}" in
--check) mode=check; shift ;;
--list) mode=list; shift ;;
--self-test) mode=run selftest=1; shift ;;
-h | --help)
	sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
	exit 0
	;;
-*)
	echo "mutate: unknown option $1 (see $0 --help)" >&2
	exit 2
	;;
esac

# The registry. mutant starts a mutant; edit adds a substitution to the
# mutant started last.
#   mutant NAME PACKAGES RUN PROMISE
#     PACKAGES  the packages whose tests can catch it (space separated)
#     RUN       a go test -run filter within them ("" for every test):
#               used where a package's other tests take minutes and cannot
#               meet the bug; MUTATE_FULL=1 ignores it
#     PROMISE   what the bug breaks
#   edit WHERE FROM TO
#     WHERE is a file, or a package directory ending in "/": then FROM
#     must occur exactly once in all the package's non-test Go files
#     together, so the mutant follows code moved between the package's
#     files (other packages' refactors do that) but never picks one of
#     two matches. FROM must occur exactly once (after the mutant's
#     earlier edits); it is replaced by TO. Both are literal text (write
#     tabs and newlines with bash's $'...'). Keep FROM short: what the
#     bug needs, not the receivers and names around it that a refactor
#     renames.
names=()
declare -A mpkgs mrun mwhat nedits efile efrom eto
cur=""
mutant() {
	cur=$1
	if [[ -n "${mwhat[$cur]:-}" ]]; then
		echo "mutate: mutant $cur defined twice" >&2
		exit 2
	fi
	names+=("$1")
	mpkgs[$1]=$2
	mrun[$1]=$3
	mwhat[$1]=$4
	nedits[$1]=0
}
edit() {
	local i=${nedits[$cur]}
	efile[$cur,$i]=$1
	efrom[$cur,$i]=$2
	eto[$cur,$i]=$3
	nedits[$cur]=$((i + 1))
}

# --- The mutants -----------------------------------------------------------

mutant clock-ignores-replay "./engine/" "TestRestartWithClockBehind" \
	"recovery raises the broker clock to the times of the checkpoint only, not of the replayed records: after a crash with the wall clock behind, a delay counts from the older time and fires early"
edit engine/ \
	'.Raise(max(st.Written, st.Frontier, ' \
	$'.Raise(max(st.Written, st.Frontier)) // mutant: the replayed records\' times are ignored\n\t_ = (max(0, '

mutant cancel-hold-after-append "./engine/" "FireRace" \
	"cancel/reschedule takes the message out of the wheel only after its record is appended, so it can fire while the change is made durable (a cancelled message delivered)"
edit engine/ \
	$'\th := e.' \
	$'\tholdLater := func() hold { return e.'
edit engine/ \
	$'holdLocked(id.Pos, due, w == nil, newDue)\n\te.mu.Unlock()\n' \
	$'holdLocked(id.Pos, due, w == nil, newDue) } // mutant: called only after the append\n\te.mu.Unlock()\n'
edit engine/ \
	$'\tdefer e.mu.Unlock()\n\tif aerr != nil {\n' \
	$'\tdefer e.mu.Unlock()\n\th := holdLater()\n\tif aerr != nil {\n'

mutant checkpoint-drops-done "./engine/" "TestPowerLossGroups" \
	"the checkpoint leaves out a group's acked offsets above its contiguous acked prefix: acked messages come back after a restart"
edit engine/ \
	$'\t\t\t\t\tcq.Done = append(cq.Done, off)\n' \
	$'\t\t\t\t\t_ = off // mutant: out-of-order acks not recorded\n'

mutant timer-remove-disabled "./timerstore/" "" \
	"the timer index never forgets a bucket that fired: its runs grow with every message ever sent, and a forgotten bucket's entries come back"
edit timerstore/ \
	$'\tcut := s.BucketOf(t)\n' \
	$'\tcut := int64(math.MinInt64) // mutant: nothing is ever dead\n'

mutant ack-not-appended "./engine/" "TestPowerLossGroups" \
	"an ack (alone, not carried by a receive) is applied without its record: acked messages come back after a restart"
edit engine/ \
	'c.log.Append(a.appendRecord(nil)...)' \
	'c.log.Head(), error(nil) // mutant: the ack record is never appended'

mutant fire-1ms-early "./engine/" "TestDelayedDeliveryNeverEarly|TestRescheduleFireRace" \
	"fire batches take messages due up to 1 ms after the broker clock: a message becomes visible 1 ms before its due time"
edit engine/ \
	'upTo := min(now, ' \
	'upTo := min(now+1, '

mutant segment-dir-not-synced "./commitlog/" "" \
	"a new log segment's directory entry is never fsynced: after a power loss the segment, and every acknowledged record in it, can be gone"
edit commitlog/ \
	$'\t\t\terr = fsys.SyncDir(dir)\n' \
	$'\t\t\terr = nil // mutant: fsys.SyncDir(dir) skipped\n'

mutant dedup-window-seconds "./engine/" "TestDedup" \
	"the dedup window is taken as seconds where it is milliseconds: a retry 90 s after the first send (default window 24 h) stores a second message"
edit engine/ \
	'live := now < first.Sent+first.DedupWindow' \
	'live := now < first.Sent+first.DedupWindow/1000'

mutant schedule-catchup-once-sends-all "./schedule/" "" \
	"a schedule with catch_up=once sends every fire time missed while the broker was down instead of only the latest"
edit schedule/ \
	$'\t\tcase CatchUpOnce:\n\t\t\tnext = lastAtOrBefore(e.spec, next, now, sc.Created)\n' \
	$'\t\tcase CatchUpOnce: // mutant: behaves as all\n'

mutant receipt-not-bound-to-group "./engine/" "Receipt" \
	"a receipt's seal leaves out the group: a receipt of one group acks (or nacks) the lease of another group"
edit engine/ \
	'uint64(gid)<<32|uint64(seq)^uint64(queue)<<16' \
	'uint64(seq)^uint64(queue)<<16'

mutant sortedrun-block-check-skipped "./sortedrun/ ./timerstore/ ./keyindex/" "" \
	"a sorted run's block CRC-32C is not verified (the timer index's and the key index's runs alike): a damaged run is served (wrong due times, keys naming wrong messages) instead of refused and rebuilt from the log"
edit sortedrun/ \
	'if crc32.Update(f.blockSeed(seq, block), castagnoli, b[:checkOff]) != c {' \
	'if false { // mutant: the block check is never verified'

mutant sortedrun-sum-unchecked "./sortedrun/ ./timerstore/ ./keyindex/" "" \
	"a sorted run's sum (of its block checks, recorded in the state) is not compared: a run with blocks missing or taken from another run opens as whole"
edit sortedrun/ \
	'if it.sum != it.Meta.Sum {' \
	'if false { // mutant: the run sum is never compared'

mutant kafka-commit-past-pending "./kafkamode/" "" \
	"Kafka mode commits the delay partition one offset past its first unresolved record: a take-over after a crash never forwards that message"
edit kafkamode/ \
	$'\t\tpl.commit = o\n' \
	$'\t\tpl.commit = o + 1 // mutant\n'

# --- Self-test mutants -----------------------------------------------------
# Used by --self-test only: one whose anchor is gone, one whose anchor is
# ambiguous, one that applies but does not compile, one whose -run filter
# names no test, and one that changes nothing a test can see. Each must
# fail the run, by name (only the last runs tests: errs', a second).
selftest_names=()
if [[ $selftest == 1 ]]; then
	mutant selftest-stale "./errs/" "" "an anchor that is not in the file"
	edit errs/errs.go 'this text is not in errs.go' 'x'
	mutant selftest-broken "./errs/" "" "a substitution that does not compile"
	edit errs/errs.go $'func New(code Code, format string, args ...any) *Error {\n' \
		$'func New(code Code, format string, args ...any) *Error {\n\tvar unused int // declared and not used\n'
	mutant selftest-filter "./errs/" "TestNoSuchTestAnywhere" "a -run filter that names no test"
	edit errs/errs.go $'package errs\n' $'package errs // the edit applies\n'
	mutant selftest-ambiguous "./errs/" "" "an anchor that is in the file more than once"
	edit errs/ 'return ' 'return  '
	mutant selftest-survives "./errs/" "" "a change no test can see"
	edit errs/errs.go $'package errs\n' $'package errs // a comment\n'
	selftest_names=(selftest-stale selftest-ambiguous selftest-broken selftest-filter selftest-survives)
fi

# --- Running them ----------------------------------------------------------

if [[ $mode == list ]]; then
	for n in "${names[@]}"; do
		printf '%s\n  packages: %s%s\n  breaks: %s\n' "$n" "${mpkgs[$n]}" \
			"${mrun[$n]:+ (-run ${mrun[$n]})}" "${mwhat[$n]}"
	done
	exit 0
fi

selected=("$@")
if [[ $selftest == 1 ]]; then
	selected=("${selftest_names[@]}")
elif [[ ${#selected[@]} -eq 0 ]]; then
	selected=("${names[@]}")
fi
for n in "${selected[@]}"; do
	if [[ -z "${mwhat[$n]:-}" ]]; then
		echo "mutate: unknown mutant $n (known: ${names[*]})" >&2
		exit 2
	fi
done

work="$(mktemp -d "${TMPDIR:-/tmp}/hourglass-mutate.XXXXXX")" || exit 2
if [[ "${MUTATE_KEEP:-}" != 1 ]]; then
	trap 'rm -rf "$work"' EXIT
else
	echo "mutate: keeping $work"
fi

# substitute FILE-IN FILE-OUT (FROM and TO in MUT_FROM, MUT_TO): the one
# literal substitution, refused unless FROM occurs exactly once.
substitute() {
	MUT_FROM=$3 MUT_TO=$4 perl -e '
		my ($in, $out) = @ARGV;
		my ($from, $to) = ($ENV{MUT_FROM}, $ENV{MUT_TO});
		open(my $f, "<", $in) or die "cannot read $in: $!\n";
		my $s = do { local $/; <$f> };
		close $f;
		if ($from eq $to) {
			print STDERR "the edit changes nothing\n";
			exit 3;
		}
		my ($n, $at, $i) = (0, -1, 0);
		while (length($from) && ($i = index($s, $from, $i)) >= 0) {
			$at = $i if $n++ == 0;
			$i += length $from;
		}
		if ($n != 1) {
			(my $show = $from) =~ s/\t/\\t/g;
			$show =~ s/\n/\\n/g;
			print STDERR "anchor found $n times (want exactly once): \"$show\"\n";
			exit 3;
		}
		substr($s, $at, length $from) = $to;
		open(my $o, ">", $out) or die "cannot write $out: $!\n";
		print $o $s;
		close $o or die "cannot write $out: $!\n";
	' "$1" "$2"
}

# locate PKG/ FROM COPIES: prints the one non-test Go file of PKG/ that
# holds FROM, which must occur exactly once in all of them together (read
# from the mutated copy, in the associative array named COPIES, once a
# file has one).
locate() {
	local pkg=$1 from=$2 g src args=()
	local -n cp=$3
	for g in "$root/$pkg"*.go; do
		[[ $g == *_test.go || ! -f $g ]] && continue
		g=${g#"$root/"}
		src=${cp[$g]:-$root/$g}
		args+=("$g" "$src")
	done
	MUT_FROM=$from perl -e '
		my $from = $ENV{MUT_FROM};
		my ($n, @in);
		while (my ($name, $path) = splice(@ARGV, 0, 2)) {
			open(my $f, "<", $path) or die "cannot read $path: $!\n";
			my $s = do { local $/; <$f> };
			my ($k, $i) = (0, 0);
			while (length($from) && ($i = index($s, $from, $i)) >= 0) {
				$k++;
				$i += length $from;
			}
			$n += $k;
			push @in, $name if $k;
		}
		if ($n != 1) {
			(my $show = $from) =~ s/\t/\\t/g;
			$show =~ s/\n/\\n/g;
			printf STDERR "anchor found %d times in the package (want exactly once)%s: \"%s\"\n",
				$n, (@in ? " in @in" : ""), $show;
			exit 3;
		}
		print "$in[0]\n";
	' "${args[@]}"
}

# plant NAME DIR: writes the mutated files and DIR/overlay.json, and the
# mutated packages to DIR/pkgs. On failure the reason is in DIR/plant.err.
plant() {
	local n=$1 dir=$2 i f copy json="" sep=""
	declare -A copies=()
	mkdir -p "$dir/files"
	: >"$dir/pkgs"
	if [[ ${nedits[$n]} -eq 0 ]]; then
		echo "the mutant has no edit" >"$dir/plant.err"
		return 1
	fi
	for ((i = 0; i < ${nedits[$n]}; i++)); do
		f=${efile[$n,$i]}
		if [[ $f == */ ]]; then
			# A package: the one non-test file that holds the anchor.
			if ! f=$(locate "$f" "${efrom[$n,$i]}" copies 2>"$dir/plant.err"); then
				sed -i "s|^|${efile[$n,$i]}: edit $((i + 1)): |" "$dir/plant.err"
				return 1
			fi
		fi
		if [[ ! -f "$root/$f" ]]; then
			echo "$f: no such file" >"$dir/plant.err"
			return 1
		fi
		if [[ "$root/$f$dir" == *[\"\\]* ]]; then
			echo "$f: a path with a quote or backslash cannot go into the overlay" >"$dir/plant.err"
			return 1
		fi
		copy=${copies[$f]:-}
		if [[ -z $copy ]]; then
			copy="$dir/files/${f//\//__}"
			cp "$root/$f" "$copy" || return 1
			copies[$f]=$copy
			json+="$sep\"$root/$f\": \"$copy\""
			sep=", "
			echo "./$(dirname "$f")/" >>"$dir/pkgs"
		fi
		if ! substitute "$copy" "$copy.new" "${efrom[$n,$i]}" "${eto[$n,$i]}" 2>"$dir/plant.err"; then
			sed -i "s|^|$f: edit $((i + 1)): |" "$dir/plant.err"
			return 1
		fi
		mv "$copy.new" "$copy"
	done
	printf '{"Replace": {%s}}\n' "$json" >"$dir/overlay.json"
	sort -u -o "$dir/pkgs" "$dir/pkgs"
}

# unmap DIR: names the mutated copies of DIR in a message by the files they
# replace.
unmap() {
	MUT_DIR="$1/files/" perl -pe 's{\Q$ENV{MUT_DIR}\E(\S+?\.go)}{$1 =~ s/__/\//gr}ge'
}

# filter_matches NAME: the mutant's -run filter (if any) matches a test
# function of its packages, so that a renamed test cannot turn the mutant's
# run into one of no tests. (Top-level names only, as the filters are.)
filter_matches() {
	local n=$1 p tests
	[[ -z ${mrun[$n]} ]] && return 0
	for p in ${mpkgs[$n]}; do
		# Into a variable first: grep -q ending a pipe early would fail it
		# (pipefail).
		tests=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' "$root/$p"*_test.go 2>/dev/null)
		grep -qE -- "${mrun[$n]}" <<<"$tests" && return 0
	done
	return 1
}

# prepare NAME: plants the mutant in $work/NAME and compiles its
# packages: go build under --check (the mutated package alone, a second or
# two), go vet for a full run (each package with its tests, type-checked
# and vetted). A mutant that does not compile fails here. It writes the
# outcome to $work/NAME/status (applies, STALE or BROKEN) and a line of
# detail to $work/NAME/detail. No test runs.
prepare() {
	local n=$1 dir="$work/$1" pkgs start=$SECONDS
	mkdir -p "$dir"
	if ! plant "$n" "$dir"; then
		echo STALE >"$dir/status"
		tr '\n' ' ' <"$dir/plant.err" >"$dir/detail"
	elif ! filter_matches "$n"; then
		echo STALE >"$dir/status"
		echo "the -run filter ${mrun[$n]} names no test of ${mpkgs[$n]} (renamed?)" >"$dir/detail"
	else
		mapfile -t pkgs <"$dir/pkgs"
		local tool=vet
		[[ $mode == run ]] || tool=build
		if ! go "$tool" -overlay "$dir/overlay.json" "${pkgs[@]}" >"$dir/build.log" 2>&1; then
			echo BROKEN >"$dir/status"
			{ echo -n "go $tool fails: "; grep -m2 -E '\.go:[0-9]+' "$dir/build.log" | unmap "$dir" | tr '\n' ' '; } >"$dir/detail"
		else
			echo applies >"$dir/status"
			tr '\n' ' ' <"$dir/pkgs" >"$dir/detail"
		fi
	fi
	echo $((SECONDS - start)) >"$dir/seconds"
}

# failed_tests LOG: a line "package test..." for each package with failed
# top-level tests, and "package -" for one that failed with no test named
# (a panic outside a test, a time-out, a build failure).
failed_tests() {
	perl -ne '
		next unless /"Action":"(fail|build-fail)"/;
		my ($p) = /"(?:Package|ImportPath)":"([^"]+)"/;
		next unless defined $p;
		if (/"Test":"([^"]+)"/) {
			my $t = $1;
			$tests{$p}{$t} = 1 unless $t =~ m{/}; # a subtest: its parent fails too
		} else {
			$pkg{$p} = 1;
		}
		END {
			for my $p (sort(keys %pkg), sort(keys %tests)) {
				next if $seen{$p}++;
				my @t = sort keys %{$tests{$p} // {}};
				print "$p ", (@t ? join(" ", @t) : "-"), "\n";
			}
		}
	' "$1"
}

result_line() { # name result seconds detail
	local line
	line="$(printf '%-32s %-9s %5ss  %s' "$1" "$2" "$3" "$4")"
	echo "mutate: $line"
	table+="$line"$'\n'
}

table=""
declare -A count=([caught]=0 [survived]=0 [STALE]=0 [BROKEN]=0 [flaky]=0 [applies]=0)

# Plant and vet every selected mutant first, MUTATE_JOBS at a time (default
# 2): a vet is one compile and cannot use more than a core.
jobs=${MUTATE_JOBS:-2} running=0
for n in "${selected[@]}"; do
	if [[ $running -ge $jobs ]]; then
		wait -n
		running=$((running - 1))
	fi
	prepare "$n" &
	running=$((running + 1))
done
wait

for n in "${selected[@]}"; do
	dir="$work/$n"
	status=$(cat "$dir/status" 2>/dev/null || echo BROKEN)
	if [[ $status != applies || $mode != run ]]; then
		count[$status]=$((count[$status] + 1))
		result_line "$n" "$status" "$(cat "$dir/seconds" 2>/dev/null)" "$(cat "$dir/detail" 2>/dev/null)"
		continue
	fi

	start=$SECONDS
	run=${mrun[$n]}
	[[ "${MUTATE_FULL:-}" == 1 ]] && run=""
	echo "mutate: $n: ${mwhat[$n]}"
	read -r -a pkgs <<<"${mpkgs[$n]}"
	go test -json -count=1 -timeout "$timeout" -overlay "$dir/overlay.json" ${run:+-run "$run"} "${pkgs[@]}" >"$dir/test.json" 2>"$dir/test.err"
	rc=$?
	failed_tests "$dir/test.json" >"$dir/failed"
	if grep -q -e '"Action":"build-fail"' -e '\[build failed\]' -e '\[setup failed\]' "$dir/test.json" "$dir/test.err"; then
		count[BROKEN]=$((count[BROKEN] + 1))
		result_line "$n" BROKEN $((SECONDS - start)) "its tests do not build: $(grep -m2 -E '\.go:[0-9]+' "$dir/test.err" | tr '\n' ' ')"
		continue
	fi
	if [[ ! -s "$dir/failed" && $rc -ne 0 ]]; then
		count[BROKEN]=$((count[BROKEN] + 1))
		result_line "$n" BROKEN $((SECONDS - start)) "go test failed (status $rc) without naming a failure: $(head -c 300 "$dir/test.err" | tr '\n' ' ')"
		continue
	fi
	if [[ ! -s "$dir/failed" ]]; then
		count[survived]=$((count[survived] + 1))
		result_line "$n" SURVIVED $((SECONDS - start)) "every test of ${mpkgs[$n]}${run:+ -run $run} passed"
		continue
	fi
	# Confirm: the tests that failed pass on the unmutated tree.
	confirmed=1 caughtby=""
	while read -r pkg tests; do
		if [[ $tests == - ]]; then
			runagain=$run # no test named: the same run again
		else
			runagain="^(${tests// /|})\$"
		fi
		caughtby+="${tests} "
		if ! go test -count=1 -timeout "$timeout" ${runagain:+-run "$runagain"} "$pkg" >>"$dir/confirm.log" 2>&1; then
			confirmed=0
		fi
	done <"$dir/failed"
	if [[ $confirmed == 1 ]]; then
		count[caught]=$((count[caught] + 1))
		read -r -a by <<<"$caughtby"
		if [[ ${#by[@]} -gt 5 ]]; then
			caughtby="${by[*]:0:5} (+$((${#by[@]} - 5)) more)"
		fi
		result_line "$n" caught $((SECONDS - start)) "$caughtby"
	else
		count[flaky]=$((count[flaky] + 1))
		result_line "$n" FLAKY $((SECONDS - start)) "these failed, and fail unmutated too: $caughtby"
	fi
done

echo
printf '%-32s %-9s %6s  %s\n' mutant result time detail
printf '%s' "$table"
total=${#selected[@]}
if [[ $mode == run ]]; then
	echo "mutate: caught ${count[caught]} of $total; survived ${count[survived]}, stale ${count[STALE]}, broken ${count[BROKEN]}, flaky ${count[flaky]}"
	bad=$((total - count[caught]))
else
	echo "mutate: ${count[applies]} of $total mutants apply and build; stale ${count[STALE]}, broken ${count[BROKEN]}"
	bad=$((total - count[applies]))
fi

if [[ $selftest == 1 ]]; then
	# Each self-test mutant must have failed, by name.
	if [[ $bad -ne $total ]] || ! grep -q '^selftest-stale  *STALE' <<<"$table" ||
		! grep -q '^selftest-ambiguous  *STALE.*found [0-9]* times' <<<"$table" ||
		! grep -q '^selftest-broken  *BROKEN' <<<"$table" || ! grep -q '^selftest-filter  *STALE' <<<"$table" ||
		! grep -q '^selftest-survives  *SURVIVED' <<<"$table"; then
		echo "mutate: self-test FAILED: a stale or broken mutant was not reported as one" >&2
		exit 1
	fi
	echo "mutate: self-test ok: stale, broken and surviving mutants each fail the run, by name"
	exit 0
fi
if [[ $bad -gt 0 ]]; then
	echo "mutate: FAILED: $bad of $total mutants are not $([[ $mode == run ]] && echo caught || echo usable)" >&2
	exit 1
fi
