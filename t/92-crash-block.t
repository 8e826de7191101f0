#!perl
# Crash consistency at the block level, on real filesystems: every write and
# cache flush that ext4, xfs or btrfs sends to its disk (a loop device over
# t/blockrec's image file) is recorded while FastFile's calls run; then each
# disk state a power cut could leave is mounted (journal replay), checked
# with the filesystem's checker, mounted read-only and FastFile's promises
# asserted on it (t/lib/BlockRec.pm).
#
# States of a workload: the disk after every flush, and inside each epoch
# between two flushes (a disk may persist the writes since the last flush in
# any order, or only some) prefixes of its writes (all of them in the epoch
# the call returned in, else at most PREFIXES, evenly spread) and SUBSETS
# seeded random subsets. The seed is printed; set
# FF_CRASH_SEED to replay it. FF_CRASH_FS=ext4,xfs picks the filesystems
# (ext4, ext4-writeback, xfs, btrfs), FF_CRASH_ONLY=regex the workloads.
#
# Asserted in every state:
# - each target holds its old or its new bytes in full, or (created by the
#   call) is missing or new; never empty, never a mix;
# - a call with fsync => 1 that returned before the state's epoch ended
#   (its flushes are all in the state) left the new bytes; with mkdir every
#   directory it made exists; a batch with fsync: every target new;
# - no other file changed (temps "*.tmp.<pid>*" may stay);
# - without fsync: the target is never missing when it existed; what it held
#   (old, new, empty, zeros: its size but no data, partial, missing) is
#   counted: the table of bench/results.md.
#
# It can fail (shown once with throwaway builds, FF_CRASH_SEED=1):
# - without the directory fsync (ff_io.c sync_one_dir: no fsync(2)) it fails
#   on ext4, ext4 data=writeback, xfs and btrfs: after an fsync'd
#   file_set_contents, writer or file_copy returned, the flush states that
#   follow hold the old file ("t is old, not new") or none ("a/b/c/t is
#   missing"); file_set_contents_many (its own barrier) still passed;
# - without the file's fdatasync (ff_io.c commit_in) it fails on all four
#   too: the target renamed into place but empty ("t is empty, not new")
#   on ext4 for created files (replaced ones survive: auto_da_alloc), on
#   ext4 data=writeback, xfs and btrfs for replaced ones as well;
# - without mkdir's fsyncs of the parents (ff_io.c sync_parents_at: no
#   level) it still passes on all four: ext4's and xfs' journal commits
#   everything, btrfs commits its transaction on the fsync of a directory
#   made in it. That barrier is for other filesystems (t/72's model).
#
# Default `make test`: ext4 only, a small seeded sample (at most ~20 s).
# RELEASE_TESTING=1 (`make crash-test`): every workload on ext4,
# ext4 data=writeback,noauto_da_alloc, xfs and btrfs.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use FFTest;
use BlockRec;
use FastFile qw(:all);
use Time::HiRes ();

my $FULL = FFTest::full_testing();
my $SEED = $ENV{FF_CRASH_SEED} // (time ^ $$) % 1_000_000;
my $PREFIXES = $FULL ? 6 : 3;
my $SUBSETS  = $FULL ? 3 : 1;

# name => [ filesystem, mount options ]
my %CONFIG = (
    ext4 => [ 'ext4', 'commit=1' ],
    'ext4-writeback' => [ 'ext4', 'commit=1,data=writeback,noauto_da_alloc' ],
    xfs => [ 'xfs', '' ],
    btrfs => [ 'btrfs', 'commit=1' ],
);
my @CONFIGS = $ENV{FF_CRASH_FS} ? split(/,/, $ENV{FF_CRASH_FS})
            : $FULL ? qw(ext4 ext4-writeback xfs btrfs) : qw(ext4);
for (grep { !$CONFIG{$_} } @CONFIGS) {
    BAIL_OUT("FF_CRASH_FS: no configuration '$_' (" . join(', ', sort keys %CONFIG) . ')');
}

my @usable = grep { !BlockRec::available($CONFIG{$_}[0]) } @CONFIGS;
# FF_CRASH_REQUIRE=1 (CI): a filesystem that cannot be tested fails
if ($ENV{FF_CRASH_REQUIRE}) {
    for my $config (@CONFIGS) {
        my $why = BlockRec::available($CONFIG{$config}[0]);
        BAIL_OUT("t/92-crash-block.t: $config: $why (FF_CRASH_REQUIRE is set)") if $why;
    }
}
if (!@usable) {
    my $why = BlockRec::available($CONFIG{ $CONFIGS[0] }[0]);
    plan skip_all => "block-level crash test: $why";
}
BlockRec::private_mounts();
diag "crash-block: seed $SEED (FF_CRASH_SEED=$SEED replays it)";

local $SIG{ALRM} = sub { die "t/92-crash-block.t: watchdog: took more than 900 s\n" };
alarm 900;

my %SIZE = ('1k' => 1024, '64k' => 65536, '1m' => 1 << 20);

# bytes of $len for file $name, $which 'old' or 'new'
sub bytes_for {
    my ($name, $which, $len) = @_;
    my $unit = "$which:$name:";
    return substr($unit x (int($len / length $unit) + 1), 0, $len);
}

# The workloads: name, targets (relative path => [old or undef, new]),
# dirs the call makes, whether it fsyncs, whether it is a batch, the calls.
sub workloads {
    my @w;
    my @sizes = $FULL ? qw(1k 64k 1m) : qw(64k);
    for my $size (@sizes) {
        my $len = $SIZE{$size};
        for my $mode ('replace', 'create') {
            my $old = sub { $mode eq 'replace' ? bytes_for($_[0], 'old', $len) : undef };
            my $single = sub {
                my ($kind, $opt, %x) = @_;
                my $path = $x{path} // 't';
                my $new = bytes_for($path, 'new', $len);
                push @w, { name => "$kind/$size/$mode", fsync => $opt->{fsync} ? 1 : 0,
                    targets => { $path => [ $old->($path), $new ] }, made => $x{made} || [],
                    mode => $x{mode}, setup => $x{setup},
                    run => $x{run} || sub { file_set_contents("$_[0]/$path", $new, $opt) } };
            };
            $single->('plain', {});
            $single->('fsync', { fsync => 1 });
            $single->('preserve', { fsync => 1, preserve => 1 }, mode => 0640) if $mode eq 'replace';
            if ($mode eq 'create') {
                $single->('mkdir', { fsync => 1, mkdir => 1 }, path => 'a/b/c/t', made => [qw(a a/b a/b/c)]);
                $single->('noclobber', { fsync => 1, noclobber => 1 });
            }
            my $wnew = bytes_for('t', 'new', $len);
            $single->('writer', {}, run => sub {
                my $w = atomic_writer("$_[0]/t", { fsync => 1 });
                $w->print(substr($wnew, 0, $len / 2));
                $w->print(substr($wnew, $len / 2));
                $w->commit;
            });
            $w[-1]{fsync} = 1;
            $single->('copy', {}, setup => sub { FFTest::spew("$_[0]/src", $wnew) },
                run => sub { file_copy("$_[0]/src", "$_[0]/t", 2 << 20, { fsync => 1 }) });
            $w[-1]{fsync} = 1;
            for my $fsync (1, 0) {
                my %t = map { $_ => [ $old->($_), bytes_for($_, 'new', $len) ] } qw(x/t1 y/t2 z/t3);
                push @w, { name => ($fsync ? 'many-fsync' : 'many') . "/$size/$mode", fsync => $fsync,
                    batch => 1, targets => \%t, made => [],
                    run => sub { my ($d) = @_;
                        file_set_contents_many([ map { ("$d/$_" => $t{$_}[1]) } sort keys %t ],
                            $fsync ? { fsync => 1 } : ()) } };
            }
        }
    }
    # the sample: one of each kind that fsyncs, and the plain replace
    @w = grep { $_->{name} =~ m{^(?:fsync/64k/replace|mkdir/|many-fsync/64k/create|writer/64k/replace|copy/64k/create)} } @w
        unless $FULL;
    @w = grep { $_->{name} =~ /$ENV{FF_CRASH_ONLY}/ } @w if $ENV{FF_CRASH_ONLY};
    return @w;
}

# what a file holds, against its old and new bytes
sub classify {
    my ($data, $old, $new) = @_;
    return 'missing' unless defined $data;
    return 'new' if $data eq $new;
    return 'old' if defined $old && $data eq $old;
    return 'empty' if $data eq '';
    return 'zeros' if $data !~ /[^\0]/;     # the size written, not the data: a hole
    return 'partial';
}

# every file below $dir, relative, => bytes (directories => 'DIR')
sub tree {
    my ($dir) = @_;
    my %t;
    my @todo = ('');
    while (defined(my $rel = shift @todo)) {
        opendir my $dh, "$dir/$rel" or die "opendir $dir/$rel: $!\n";
        for my $e (grep { !/^\.\.?\z/ } readdir $dh) {
            my $p = $rel eq '' ? $e : "$rel/$e";
            if (-d "$dir/$p") { $t{$p} = 'DIR'; push @todo, $p }
            else { $t{$p} = FFTest::slurp("$dir/$p") }
        }
    }
    return \%t;
}

# The states of a log (entries before $end): [ n, [more], epoch end ],
# deduplicated: after each flush, prefixes and random subsets of each epoch.
sub states {
    my ($log, $end, $ret, $rng) = @_;
    my @flush = grep { $log->[$_][0] eq 'F' } 0 .. $end - 1;
    my @bounds = (-1, @flush, $end);
    my (%seen, @s);
    my $add = sub {
        my ($n, $more, $b, $kind) = @_;
        my $key = "$n @$more";
        push @s, [ $n, $more, $b, $kind ] unless $seen{$key}++;
    };
    for my $e (0 .. $#bounds - 1) {
        my ($a, $b) = @bounds[ $e, $e + 1 ];
        my @w = grep { $log->[$_][0] eq 'W' } $a + 1 .. $b - 1;
        $add->($a + 1, [], $b, 'flush');
        # prefixes: 1 .. @w writes (the full epoch is the next flush state),
        # all in the epoch the call returned in, else PREFIXES evenly spread
        my $all = @w <= $PREFIXES || $a < $ret && $ret < $b;
        my @k = $all ? (1 .. $#w) : map { int($_ * @w / ($PREFIXES + 1)) || 1 } 1 .. $PREFIXES;
        $add->($w[ $_ - 1 ] + 1, [], $b, 'prefix') for grep { $_ >= 1 && $_ < @w } @k;
        next if @w < 2;
        for (1 .. $SUBSETS) {
            my @chosen = grep { $rng->() < 0.5 } @w;
            $add->($a + 1, \@chosen, $b, 'subset');
        }
    }
    $add->($end, [], $end, 'flush') if !@flush || $flush[-1] != $end - 1;
    return @s;
}

# a small seeded generator (perl's rand differs between builds)
sub rng {
    my ($seed) = @_;
    my $x = $seed % 2147483647 || 1;
    return sub { $x = ($x * 48271) % 2147483647; $x / 2147483647 };
}

my (%TABLE, @REPORT);

for my $config (@CONFIGS) {
    my ($fsname, $opts) = @{ $CONFIG{$config} };
    if (my $why = BlockRec::available($fsname)) {
        SKIP: { skip "$config: $why", 1 }
        next;
    }
    my $t0 = Time::HiRes::time();
    my $r = BlockRec->new(fs => $fsname, mount_opts => $opts);
    $r->mount_disk;
    my @work = workloads();
    for my $i (0 .. $#work) {
        my $w = $work[$i];
        my $wd = "$r->{mnt}/w$i";
        mkdir $wd or die "mkdir $wd: $!\n";
        mkdir "$wd/$_" for qw(x y z);
        FFTest::spew("$wd/other", "bystander $i\n" x 100);
        $w->{setup}->($wd) if $w->{setup};
        for my $t (sort keys %{ $w->{targets} }) {
            my $old = $w->{targets}{$t}[0];
            FFTest::spew("$wd/$t", $old, $w->{mode}) if defined $old;
        }
        FFTest::run_cmd('sync', '-f', $wd);
        my $before = tree($wd);
        $r->start;
        $w->{run}->($wd);
        $r->mark("return");
        unless ($w->{fsync}) {
            # no fsync: let the filesystem commit by itself (commit=1: ext4's
            # journal, btrfs' transaction; xfs has no such timer), then sync
            Time::HiRes::sleep(1.2) if $opts =~ /commit=/;
            FFTest::run_cmd('sync', '-f', $wd);
        }
        $r->mark('end');
        my @log = $r->log;
        my ($end) = grep { $log[$_][0] eq 'M' && $log[$_][1] eq 'end' } 0 .. $#log;
        my ($ret) = grep { $log[$_][0] eq 'M' && $log[$_][1] eq 'return' } 0 .. $#log;
        # per filesystem and workload, so FF_CRASH_ONLY replays one alone
        my $seed = ($SEED + unpack('%32C*', "$config $w->{name}") * 7919) % 2147483647;
        my @states = states(\@log, $end, $ret, rng($seed));
        diag "log of $w->{name}: " . join " ", map { join ":", @$_ } @log[0 .. $end] if $ENV{FF_CRASH_DEBUG};
        my ($checked, @fail, %seen) = (0);
        for my $s (@states) {
            my ($n, $more, $b, $kind) = @$s;
            my $returned = $ret < $b ? 1 : 0;
            my $err = $r->check_state($n, $more, sub {
                my ($root) = @_;
                my $now = tree("$root/w$i");
                my @bad;
                my %target = map { $_ => 1 } keys %{ $w->{targets} };
                for my $t (sort keys %target) {
                    my ($old, $new) = @{ $w->{targets}{$t} };
                    my $c = classify($now->{$t}, $old, $new);
                    $seen{$c}++;
                    diag sprintf "state %d+[%s]: %s is %s: %d bytes, %s...", $n, "@$more", $t, $c,
                        length $now->{$t}, unpack('H40', $now->{$t}) if $ENV{FF_CRASH_DEBUG} && $c =~ /partial|zeros/;
                    $TABLE{$config}{ $w->{name} =~ s{/.*}{}r }{ $w->{name} =~ m{/(\w+)$} ? $1 : '' }{$c}++
                        unless $w->{fsync};
                    if ($w->{fsync} && $returned) {
                        push @bad, "$t is $c, not new, after the fsync'd call returned" if $c ne 'new';
                    } elsif ($w->{fsync} || $c eq 'missing' && defined $old) {
                        push @bad, "$t is $c" unless $c eq 'new' || $c eq 'old' || $c eq 'missing' && !defined $old;
                    }
                    if ($c eq 'new' && $w->{mode}) {
                        my $m = (stat "$root/w$i/$t")[2] & 07777;
                        push @bad, sprintf "$t has mode %04o, not %04o", $m, $w->{mode} if $m != $w->{mode};
                    }
                }
                if ($w->{fsync} && $returned) {
                    push @bad, "directory $_ made with mkdir and fsync is missing"
                        for grep { ($now->{$_} // '') ne 'DIR' } @{ $w->{made} };
                }
                my %made = map { $_ => 1 } @{ $w->{made} };
                for my $p (sort keys %{ { %$before, %$now } }) {
                    next if $target{$p} || $made{$p} || $p =~ /\.tmp\.\d+/;
                    my ($was, $is) = ($before->{$p}, $now->{$p});
                    push @bad, "$p changed" if ($was // "\0missing") ne ($is // "\0missing");
                }
                return join '; ', @bad;
            });
            $checked++;
            push @fail, "state $n+[@$more] ($kind, epoch end $b): $err" if $err;
        }
        ok !@fail, "$config $w->{name}: " . scalar(@states) . " crash states"
            or diag "seed $seed (FF_CRASH_SEED=$SEED), log of " . scalar(@log) . " entries, return at $ret:\n  "
                . join("\n  ", @fail[ 0 .. ($#fail < 9 ? $#fail : 9) ]);
        push @REPORT, [ $config, $w->{name}, $checked, scalar(grep { $_->[0] eq 'F' } @log[ 0 .. $end - 1 ]),
                        scalar(grep { $_->[0] eq 'W' } @log[ 0 .. $end - 1 ]), $seed,
                        join(',', map { "$_=$seen{$_}" } sort keys %seen) ];
    }
    $r->umount_disk;
    $r->destroy;
    note sprintf "%s: %d workloads, %d states, %.1f s", $config, scalar @work,
        eval { my $n = 0; $n += $_->[2] for grep { $_->[0] eq $config } @REPORT; $n }, Time::HiRes::time() - $t0;
}

note "states checked (filesystem, workload, states, flushes, writes, seed, what the targets held):";
note join ' ', @$_ for @REPORT;
if (%TABLE) {
    note "without fsync, what each target held over the states (old/new/empty/zeros/partial/missing):";
    for my $c (sort keys %TABLE) {
        for my $k (sort keys %{ $TABLE{$c} }) {
            for my $m (sort keys %{ $TABLE{$c}{$k} }) {
                my $h = $TABLE{$c}{$k}{$m};
                note "$c $k $m: " . join ' ', map { "$_=" . ($h->{$_} // 0) } qw(old new empty zeros partial missing);
            }
        }
    }
}
done_testing;
