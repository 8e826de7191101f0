#!/bin/sh
# xt/tools/leakcheck.sh - the test suite under valgrind (run by `make leakcheck`
# after the normal build): fails if any "definitely lost" block, or any invalid
# memory access, has a stack frame in FastFile's own code (FastFile.so:
# FastFile.xs, *.xsh, ff_*.c, xs_*.c). perl itself leaks a little at exit even
# with PERL_DESTRUCT_LEVEL=2; those records are counted and shown, not fatal.
#
# Every t/*.t runs, with smaller workloads where a test is heavy (valgrind is
# ~30x slower): 85-concurrency with 2 writers x 40 rounds, 90-fuzz with 1,500
# strings. Excluded:
#   t/82-signals.t  its FUSE part asserts that `alarm 1` cuts a blocked write
#                   short within 2.5 s; under valgrind perl itself is too slow
#                   for that timing to mean anything (its strace part, which
#                   is timing-free, runs in t/80-faults.t's style anyway).
# Children that exec (strace, perl -e, fusermount) are not traced (their perl
# is not ours to check); forked children are, each in its own log.
#
# Environment:
#   PERL             the perl to test with (make leakcheck: the one that ran
#                    Makefile.PL, whose build is in blib)
#   LEAKCHECK_TESTS  test files to run instead of t/*.t
#   LEAKCHECK_KEEP=1 keep the valgrind logs (their directory is printed)
#   LEAKCHECK_JOBS   tests run in parallel (default: number of CPUs)
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
PERL=${PERL:-perl}

command -v valgrind >/dev/null 2>&1 || { echo "leakcheck: valgrind not installed" >&2; exit 1; }
[ -f blib/arch/auto/FastFile/FastFile.so ] || { echo "leakcheck: build first (make)" >&2; exit 1; }

EXCLUDE="t/82-signals.t"
if [ -n "${LEAKCHECK_TESTS:-}" ]; then
    TESTS=$LEAKCHECK_TESTS
else
    TESTS=
    for t in t/*.t; do
        case " $EXCLUDE " in *" $t "*) echo "leakcheck: skipping $t (see the header of $0)";; *) TESTS="$TESTS $t";; esac
    done
fi

. "$ROOT/xt/tools/workdir.sh"
work_dir leakcheck leakcheck "${LEAKCHECK_KEEP:-0}"
LOGS=$WORK

JOBS=${LEAKCHECK_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}
echo "leakcheck: valgrind $(valgrind --version | sed 's/valgrind-//'), $JOBS job(s), logs in $LOGS"

run_one() {
    t=$1
    name=$(basename "$t" .t)
    start=$(date +%s)
    taint=
    head -n 1 "$t" | grep -q -- '-T' && taint=-T     # as prove does with the #! line
    PERL_DESTRUCT_LEVEL=2 PERL_HASH_SEED=0 \
    FASTFILE_CONC_WRITERS=2 FASTFILE_CONC_ROUNDS=40 FASTFILE_FUZZ_CASES=1500 FASTFILE_FUZZ_COMBOS=200 \
    FASTFILE_LEAKCHECK=1 \
        valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite \
            --errors-for-leak-kinds=definite --num-callers=40 --trace-children=no \
            --child-silent-after-fork=no --log-file="$LOGS/$name.%p.vg" \
            "$PERL" $taint -Iblib/lib -Iblib/arch "$t" >"$LOGS/$name.tap" 2>&1
    rc=$?
    echo "$rc" >"$LOGS/$name.rc"
    echo "leakcheck: $t exit $rc ($(($(date +%s) - start)) s)"
}

# a small job pool
running=0
for t in $TESTS; do
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait
        running=0
    fi
done
wait

# Each log: records of definitely lost blocks and invalid accesses; ours if
# a frame is in FastFile's code.
"$PERL" - "$LOGS" <<'PARSE'
use strict;
use warnings;
my ($logs) = @ARGV;
my $OURS = qr{FastFile\.so|FastFile\.xs|FastFile\.c\b|\w+\.xsh\b|\b(?:ff|xs)_\w+\.[ch]\b|\bS_file_|\bff(?:xs)?_[a-z_]+\b|XS_FastFile};
my (%perl_lost, @ours, $files, $processes, @failed_tests);
opendir my $dh, $logs or die "$logs: $!";
my @logs = sort grep { /\.vg\z/ } readdir $dh;
for my $log (@logs) {
    open my $fh, '<', "$logs/$log" or next;
    my @lines = <$fh>;
    $processes++;
    my ($test) = $log =~ /^(.*)\.\d+\.vg\z/;
    my $rec;
    my $flush = sub {
        return unless $rec;
        my $text = join '', @{ $rec->{lines} };
        if ($text =~ $OURS) {
            push @ours, "$test ($log):\n$text";
        } elsif ($rec->{kind} eq 'lost') {
            $perl_lost{$test}{records}++;
            $perl_lost{$test}{bytes} += $rec->{bytes};
        }
        undef $rec;
    };
    for my $l (@lines) {
        if ($l =~ /^==\d+== ([\d,]+) (?:\([\d,]+ direct, [\d,]+ indirect\) )?bytes in [\d,]+ blocks are definitely lost/) {
            $flush->();
            (my $b = $1) =~ tr/,//d;
            $rec = { kind => 'lost', bytes => $b, lines => [$l] };
        } elsif ($l =~ /^==\d+== (Invalid (?:read|write|free)|Conditional jump or move depends on uninitialised|Syscall param .* uninitialised|Use of uninitialised value|Mismatched free|Source and destination overlap)/) {
            $flush->();
            $rec = { kind => 'error', lines => [$l] };
        } elsif ($rec && $l =~ /^==\d+==\s+(?:at|by|Address|Uninitialised value)/) {
            push @{ $rec->{lines} }, $l;
        } elsif ($rec && $l =~ /^==\d+==\s*$/) {
            $flush->();
        }
    }
    $flush->();
}
opendir $dh, $logs or die;
for my $rc (sort grep { /\.rc\z/ } readdir $dh) {
    open my $fh, '<', "$logs/$rc" or next;
    chomp(my $v = <$fh> // '');
    (my $t = $rc) =~ s/\.rc\z//;
    push @failed_tests, "$t (exit $v)" if $v ne '0';
}
printf "leakcheck: %d valgrind logs (test processes and their forks)\n", $processes // 0;
for my $t (sort keys %perl_lost) {
    printf "leakcheck: %-20s perl's own definitely lost: %d record(s), %d bytes (not ours: ignored)\n",
        $t, $perl_lost{$t}{records}, $perl_lost{$t}{bytes};
}
if (@failed_tests) {
    print "leakcheck: note: under valgrind these tests did not pass (see their .tap): @failed_tests\n";
}
if (@ours) {
    print "leakcheck: FAILED: ", scalar(@ours), " record(s) through FastFile's code:\n\n";
    print "$_\n" for @ours;
    exit 1;
}
print "leakcheck: no definitely lost block and no invalid access through FastFile's code\n";
exit 0;
PARSE
status=$?
if [ $status != 0 ] && [ "${LEAKCHECK_KEEP:-0}" != 1 ]; then
    echo "leakcheck: (LEAKCHECK_KEEP=1 keeps the logs)"
fi
exit $status
