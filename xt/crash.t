#!perl
# Crash test (make xtest): 1000 rounds of a child replacing a 4 MiB file
# while the parent SIGKILLs it at a random moment. After every kill the
# target must be exactly the old or the new content, never a mix or a part.
# Some rounds write it with file_set_contents_many, together with two side
# files (with and without fsync): each of them must be old or new, too.
# Killed writers leave their temp files behind (expected: a SIGKILL runs no
# cleanup; the POD documents them): they are counted, reported and removed.
#
# FASTFILE_CRASH_SEED=<n> replays a run (the seed is printed),
# FASTFILE_CRASH_ROUNDS (default 1000), FASTFILE_CRASH_DIR (default TMPDIR).
use strict;
use warnings;

# `make xtest` runs this without -Mblib: use the build in the tree if there is one
BEGIN { if (-d "blib/arch" && !grep { m{blib/arch} } @INC) { require blib; blib->import } }

use Test::More;
use lib 't/lib';
use FFTest qw(temps_in);
use File::Spec ();
use File::Temp ();
use POSIX ();
use Time::HiRes qw(time sleep);

use FastFile qw(:all);
use FastFile::Writer;

my $SEED = $ENV{FASTFILE_CRASH_SEED};
$SEED = (time * 1000 ^ $$) % 2**31 unless defined $SEED && $SEED =~ /^\d+\z/;
srand $SEED;
diag "crash seed: $SEED (FASTFILE_CRASH_SEED=$SEED to replay)";

my $ROUNDS = $ENV{FASTFILE_CRASH_ROUNDS} || 1000;
my $SIZE = 4 * 1024 * 1024;

my $dir = File::Temp::tempdir('ffcrash-XXXXXX',
    DIR => $ENV{FASTFILE_CRASH_DIR} || File::Spec->tmpdir, CLEANUP => 1);
my $target = "$dir/big.img";

# two contents that differ in every 4 KiB block, so any mix is visible
my @CONTENT = map {
    my $tag = $_;
    my $block = join '', map { sprintf "%s%07d|", $tag, $_ } 0 .. 511;    # 4096 bytes
    substr($block x ($SIZE / 4096), 0, $SIZE);
} qw(A B);
die 'content size' if grep { length != $SIZE } @CONTENT;

# how a round's child writes: mostly file_set_contents, some options, and
# the streaming writer when it is built
my @HOW = (
    ['file_set_contents',            sub { file_set_contents($target, $_[0]) }],
    ['file_set_contents positional', sub { file_set_contents($target, $_[0], 0644, 1) }],
    ['file_set_contents {perm}',     sub { file_set_contents($target, $_[0], { perm => 0640 }) }],
);
my @SIDES = ("$dir/side1.cfg", "$dir/side2.cfg");
sub side_content { my ($content, $i) = @_; return substr($content, 4096 * $i, 65536) }
for my $fsync (0, 1) {
    push @HOW, ["file_set_contents_many 3 files" . ($fsync ? ' {fsync}' : ''), sub {
        file_set_contents_many([ $SIDES[0] => side_content($_[0], 1), $target => $_[0],
                                 $SIDES[1] => side_content($_[0], 2) ], { fsync => $fsync });
    }];
}
push @HOW, ['FastFile::Writer 1 MiB buffer', sub {
    my $w = FastFile::Writer->new($target, { perm => 0644 });
    $w->print($_[0]);
    $w->commit;
}];

sub writer_child {
    my ($content, $how) = @_;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        $how->[1]->($content);
        POSIX::_exit(0);
    }
    return $pid;
}

file_set_contents($target, $CONTENT[0]);
my $current = 0;

# calibrate: how long a round takes when nobody interrupts it
my $t0 = time;
for (1 .. 5) {
    my $pid = writer_child($CONTENT[1 - $current], $HOW[0]);
    waitpid $pid, 0;
    $current = 1 - $current;
}
my $cycle = (time - $t0) / 5;
diag sprintf 'one uninterrupted replacement of 4 MiB (fork included): %.1f ms', $cycle * 1000;

my %n = (old => 0, new => 0, finished => 0, stale => 0, bad => 0);
my %by_how;
my @bad;
my $start = time;
for my $round (1 .. $ROUNDS) {
    my $new = 1 - $current;
    my $how = $HOW[ int rand @HOW ];
    # kill anywhere from right after fork to a little after a normal finish
    my $delay = rand($cycle * 1.1);
    my $pid = writer_child($CONTENT[$new], $how);
    sleep $delay;
    kill 'KILL', $pid;
    waitpid $pid, 0;
    my $killed = ($? & 127) == POSIX::SIGKILL();

    open my $fh, '<:raw', $target or die "open $target: $!";
    my $got = do { local $/; <$fh> };
    close $fh;
    my $which = $got eq $CONTENT[$current] ? 'old' : $got eq $CONTENT[$new] ? 'new' : undef;
    if (!defined $which) {
        $n{bad}++;
        push @bad, sprintf 'round %d (%s, killed after %.2f ms): %d bytes, neither old nor new',
            $round, $how->[0], $delay * 1000, length $got;
        # go on from whatever is there, as a file_set_contents user would
        $which = 'old';
    }
    for my $i (1, 2) {      # a batch's side files: old or new (or not written yet)
        my $side = $SIDES[$i - 1];
        next unless -e $side;
        open my $sh, '<:raw', $side or die "open $side: $!";
        my $s = do { local $/; <$sh> };
        next if grep { $s eq side_content($_, $i) } @CONTENT;
        $n{bad}++;
        push @bad, sprintf 'round %d (%s): side file %d: %d bytes, neither old nor new',
            $round, $how->[0], $i, length $s;
    }
    $n{$killed ? $which : 'finished'}++;
    $by_how{ $how->[0] }++;
    $current = $new if $which eq 'new';

    my @stale = temps_in($dir);
    $n{stale} += @stale;
    unlink map { "$dir/$_" } @stale;
}
my $took = time - $start;

is $n{bad}, 0, "$ROUNDS rounds: the target was always exactly the old or the new content"
    or diag join "\n", @bad[0 .. ($#bad < 9 ? $#bad : 9)];
cmp_ok $n{old}, '>', 0, "some kills came before the rename ($n{old} rounds kept the old content)";
cmp_ok $n{new}, '>', 0, "some kills came after it ($n{new} rounds had the new content)";
cmp_ok $n{stale}, '>', 0, 'killed writers left temp files (counted and removed)';
is_deeply [ temps_in($dir) ], [], 'none left now';
diag sprintf 'crash: %d rounds in %.1f s (seed %d): killed with old content %d, with new '
    . 'content %d, finished before the kill %d; stale temps from killed writers: %d; %s',
    $ROUNDS, $took, $SEED, @n{qw(old new finished stale)},
    join ', ', map { "$_ x$by_how{$_}" } sort keys %by_how;
done_testing;
