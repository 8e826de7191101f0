#!perl
# Crash consistency, proven on fastfs's durability model (t/fusefs): data
# is volatile until an fsync of its file, directory entries until an fsync of
# their directory, and "crash" keeps only what was durable. Each scenario
# runs once, fastfs copying the durable state after each FUSE request it
# makes ("crashpoints"); a crash into each copy in turn ("crash N") shows
# what a crash right after that request keeps, and a crash after the call
# returned what the return promises.
#
# Asserted, at every crash point:
# - with fsync (file_set_contents_many and file_set_contents): every target
#   is exactly its old or its new contents, no temp file survives, and after
#   the return every target is new;
# - without fsync: what the POD says may be lost, exactly: the new contents
#   (the old stay), and if someone else makes the directory durable before
#   the data (an fsync'd write next door), the target can be empty.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use FFTest;
use FastFS;
use FastFile qw(:all);
use File::Path ();

my $why = FastFS::available();
plan skip_all => "fastfs: $why" if $why;

local $SIG{ALRM} = sub { die "t/72-batch-crash.t: watchdog: took more than 300 s\n" };
alarm 300;

my $fs = FastFS->mount;
my $root = $fs->dir;
my $sub = "$root/sub";

my %OLD = ("$root/a" => "old a\n" x 50, "$root/b" => "old b\n", "$sub/c" => "old c\n" x 700);
my %NEW = ("$root/a" => "new a\n" x 60, "$root/b" => '', "$root/n" => "new n\n",
           "$sub/c" => "new c\n" x 900, "$sub/m" => "new m\n" x 3);
my @TARGETS = sort keys %NEW;
my $TOTAL_POINTS = 0;

sub short { my ($p) = @_; $p =~ s{^\Q$root\E/}{}; $p }

sub entries {
    my ($dir) = @_;
    opendir my $dh, $dir or return;
    my @e = grep { !/^\.\.?\z/ } readdir $dh;
    closedir $dh;
    return @e;
}

# A fresh start: exactly the old files, all of them durable.
sub setup {
    for my $d ($sub, $root) {
        unlink map { "$d/$_" } grep { $_ ne 'sub' } entries($d);
    }
    mkdir $sub;
    file_set_contents($_, $OLD{$_}) for sort keys %OLD;
    $fs->control('sync');
}

# What is there now: each target's contents (undef: absent) and temps.
sub observe {
    my %s;
    for my $t (@TARGETS) {
        $s{$t} = -e $t ? file_get_contents($t) : undef;
    }
    my @temps = map { my $d = $_; map { short("$d/$_") } grep { /\.tmp\./ } entries($d) } $root, $sub;
    return (\%s, \@temps);
}

# Which of old, new, empty (or "other") each target holds, as one string.
sub describe {
    my ($s) = @_;
    return join ' ', map {
        my $t = $_;
        my $v = $s->{$t};
        my $what = !defined $v ? (exists $OLD{$t} ? 'LOST' : 'old')
            : defined $OLD{$t} && $v eq $OLD{$t} ? 'old'
            : $v eq $NEW{$t} ? 'new'
            : $v eq '' ? 'empty'
            : 'other';
        short($t) . "=$what";
    } @TARGETS;
}

# Runs $op once, fastfs keeping the durable state after each of its N
# requests ("crashpoints"); then crashes right after the return, and into
# each of the N states in turn ("crash K"). $check->(\%state, \@temps,
# $point, $after_return) sees each: points 1 .. N, and N + 1 for the crash
# after the return (checked first). Returns N and the distinct states seen.
sub crash_points {
    my ($op, $check) = @_;
    my %seen;
    setup();
    $fs->control('crashpoints');
    $op->();
    my $points = $fs->counters->{crashpoints};
    die "fastfs kept no state of the call's requests\n" unless $points;
    for my $n ($points + 1, 1 .. $points) {
        my $after = $n > $points;
        $fs->control($after ? 'crash' : "crash $n");
        my ($state, $temps) = observe();
        $seen{ describe($state) }++;
        $check->($state, $temps, $n, $after);
    }
    $TOTAL_POINTS += $points;
    return ($points, \%seen);
}

sub old_or_new_no_temps {
    my ($label, $state, $temps, $n, $after, $targets) = @_;
    my @bad = grep {
        my $v = $state->{$_};
        !(defined $v ? ((defined $OLD{$_} && $v eq $OLD{$_}) || $v eq $NEW{$_}) : !exists $OLD{$_});
    } @$targets;
    my $ok = !@bad && !@$temps;
    ok $ok, "$label, crash after request $n: every target old or new, no temp"
        or diag "bad: @{[map short($_), @bad]}; temps: @$temps; " . describe($state)
        unless $ok && !$after;    # one line per point would be thousands: only failures
    if ($after) {
        my @stale = grep { !defined $state->{$_} || $state->{$_} ne $NEW{$_} } @$targets;
        ok !@stale, "$label, crash after the return: all new"
            or diag describe($state);
    }
    return $ok;
}

my @batch = map { ($_ => $NEW{$_}) } @TARGETS;

# 1. file_set_contents_many with fsync, over two directories
{
    my $bad = 0;
    my ($points, $seen) = crash_points(
        sub { file_set_contents_many([@batch], { fsync => 1 }) },
        sub { $bad++ unless old_or_new_no_temps('batch fsync', @_, \@TARGETS) });
    is $bad, 0, "batch with fsync: old-or-new at all $points crash points";
    diag "batch with fsync: $points crash points, durable states seen: "
        . join('; ', map { "[$_] x$seen->{$_}" } sort keys %$seen);
    # one directory is one fsync: its targets turn new together
    ok !(grep { /(?:^| )a=new/ && /(?:^| )b=old/ } keys %$seen),
        'targets in one directory became durable together';
}

# 1b. the same with 8 files: the barrier's fdatasyncs run from threads
{
    my %new_was = %NEW;         # (both restored below)
    my @targets_was = @TARGETS;
    %NEW = (%NEW, map { ("$root/x$_" => "new x$_\n") } 1 .. 3);
    @TARGETS = sort keys %NEW;
    my @batch8 = map { ($_ => $NEW{$_}) } @TARGETS;
    my $bad = 0;
    my ($points) = crash_points(
        sub { file_set_contents_many([@batch8], { fsync => 1 }) },
        sub { $bad++ unless old_or_new_no_temps('batch of 8, fsync', @_, \@TARGETS) });
    is $bad, 0, "batch of 8 with fsync (threaded barrier): old-or-new at all $points crash points";
    %NEW = %new_was;
    @TARGETS = @targets_was;
}

# 2. file_set_contents with fsync, each file on its own
{
    my $bad = 0;
    my ($points, $seen) = crash_points(
        sub { file_set_contents("$root/a", $NEW{"$root/a"}, { fsync => 1 }) },
        sub { $bad++ unless old_or_new_no_temps('single fsync', @_, ["$root/a"]) });
    is $bad, 0, "file_set_contents with fsync: old-or-new at all $points crash points";
    diag "file_set_contents with fsync: $points crash points";
}

# 3. without fsync: the new contents may be lost, the old are kept
for my $case (['batch', sub { file_set_contents_many([@batch]) }],
              ['single', sub { file_set_contents("$root/a", $NEW{"$root/a"}) }]) {
    my ($name, $op) = @$case;
    my $bad = 0;
    my ($points) = crash_points($op, sub {
        my ($state, $temps, $n, $after) = @_;
        my @changed = grep { ($state->{$_} // "\0absent") ne ($OLD{$_} // "\0absent") } @TARGETS;
        $bad++ if @changed || @$temps;
        diag "$name without fsync, point $n: changed @{[map short($_), @changed]}, temps @$temps"
            if @changed || @$temps;
    });
    is $bad, 0, "$name without fsync: a crash at any of $points points (or after the return) "
        . 'keeps the old contents, leaves no temp';
}

# 4. without fsync, then someone fsyncs the directory (an fsync'd write next
#    door): the rename is durable, the data is not: the target is empty
for my $case (['batch', sub { file_set_contents_many([@batch]) }],
              ['single', sub { file_set_contents("$root/a", $NEW{"$root/a"}) }]) {
    my ($name, $op) = @$case;
    setup();
    $op->();
    file_set_contents("$root/other", "x", { fsync => 1 });
    $fs->control('crash');
    my ($state) = observe();
    is $state->{"$root/a"}, '', "$name without fsync, directory synced by another write: "
        . "'a' is empty after a crash (the POD's warning)";
    unlink "$root/other";
}

# 5. mkdir with fsync: the new directories are durable too (their parents
#    are synced), at every point old (absent) or new; batch and single call
for my $case (['batch', ["$root/new1/deeper/y", "$sub/new2/z"]],   # no file in root, new1 or sub
              ['single', ["$root/new1/deeper/y"]]) {
    my ($name, $deep) = @$case;
    my @deep = @$deep;
    my $op = $name eq 'batch'
        ? sub { file_set_contents_many([ map { ($_ => "made $_") } @deep ], { mkdir => 1, fsync => 1 }) }
        : sub { file_set_contents($deep[0], "made $deep[0]", { mkdir => 1, fsync => 1 }) };
    my $bad = 0;
    my ($points) = crash_points($op,
        sub {
            my ($state, $temps, $n, $after) = @_;
            my @wrong = grep {
                my $v = -e $_ ? file_get_contents($_) : undef;
                $after ? !defined $v || $v ne "made $_"
                       : defined $v && $v ne "made $_";
            } @deep;
            $bad++ if @wrong;
            diag "$name mkdir + fsync, point $n: wrong: @{[map short($_), @wrong]}" if @wrong;
        });
    File::Path::remove_tree("$root/new1", "$sub/new2");    # setup leaves directories
    is $bad, 0, "$name with mkdir and fsync: old-or-new at all $points points, "
        . 'new directories and files durable after the return';
}

diag "crash points tested in all: $TOTAL_POINTS";
done_testing;
