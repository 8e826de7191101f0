#!perl
# file_set_contents_many at scale and in unusual directories: a bounded
# number of fds (under `ulimit -n 32`, counted with strace), write-only
# directories, nothing made when a batch fails (new directories included),
# everything relative to the directory fds (a parent moved mid-call leaves
# no temp behind), no signal handler between the renames, and errors that
# name the directory that failed.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }
use POSIX qw(setlocale LC_ALL);
BEGIN { setlocale(LC_ALL, 'C') }

use Test::More tests => 70;
use Errno qw(ENOENT ENOTDIR EISDIR EIO EACCES ESTALE);
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in check_error errno_text run_perl in_child strace_why strace_call
              full_testing);
use FastFile qw(:all);

my $dir = tempdir();
my $strace_why = strace_why();

# The lines "file => data" the child checks: every target holds its data.
my $WRITE_AND_CHECK = <<'PERL';
my ($base, $n, $ndirs, $fsync) = @ARGV;
my @l = map { my $d = $ndirs > 1 ? "$base/d" . ($_ % $ndirs) : $base; ("$d/f$_" => "data $_\n") } 1 .. $n;
if ($ndirs > 1) { mkdir "$base/d$_" or die "mkdir: $!" for 0 .. $ndirs - 1 }
my $w = FastFile::file_set_contents_many(\@l, { fsync => $fsync });
my $bad = 0;
for (my $i = 0; $i < @l; $i += 2) {
    open my $fh, '<', $l[$i] or do { $bad++; next };
    local $/;
    $bad++ if <$fh> ne $l[$i + 1];
}
print "written $w bad $bad\n";
PERL

# --- 1. bounded fds: ulimit -n 32 ---
{
    my $n = full_testing() ? 5000 : 300;
    for my $case ([ 'one directory', 1 ], [ "$n directories", $n ]) {
        my ($where, $ndirs) = @$case;
        for my $fsync (0, 1) {
            my $base = "$dir/ulimit-$ndirs-$fsync";
            mkdir $base or die "mkdir: $!";
            my ($status, $out) = run_perl("use FastFile; $WRITE_AND_CHECK", args => [$base, $n, $ndirs, $fsync],
                                          ulimit_n => 32);
            is($out, "written $n bad 0\n", "ulimit -n 32: $n files in $where, fsync $fsync: all written");
            is_deeply([ temps_in($base) ], [], '... no temp left');
        }
    }
}

# a program that holds most of its fds itself: the batch runs out (EMFILE),
# gives back directories and runs its barriers early, and goes on
for my $fsync (0, 1) {
    my $base = "$dir/emfile-$fsync";
    mkdir $base or die "mkdir: $!";
    my ($status, $out) = run_perl('use FastFile; my @hold = map { open my $h, "<", "/dev/null" or die "open: $!"; $h } 1 .. 22;'
                                  . " $WRITE_AND_CHECK", args => [$base, 60, 60, $fsync], ulimit_n => 32);
    is($out, "written 60 bad 0\n", "ulimit -n 32 with 22 fds held: 60 files in 60 directories, fsync $fsync");
}
SKIP: {
    skip $strace_why, 1 if $strace_why;
    my $base = "$dir/emfile-mkdir";
    mkdir $base;
    my $r = strace_call('my @hold = map { open my $h, "<", "/dev/null" or die; $h } 1 .. 22;'
                        . ' FastFile::file_set_contents_many(\@l, { fsync => 1, mkdir => 1 })',
                        setup => 'my @l = map { ("$ARGV[0]/n$_/f" => "x") } 1 .. 30;', args => [$base], ulimit_n => 32);
    ok($r->{ok} && (grep { $_->{name} =~ /^open/ && ($_->{errno} // '') eq 'EMFILE' } @{ $r->{calls} }),
       '... and with mkdir: EMFILE met (strace) and overcome') or diag $r->{err};
}

# the fds open at once, counted from strace's openat/close: a batch of 40
# files in 40 directories with fsync holds at most 16 under ulimit -n 32
# (half of it), whatever the count of files and directories
SKIP: {
    skip $strace_why, 2 if $strace_why;
    my $base = "$dir/peak";
    mkdir $base;
    mkdir "$base/d$_" for 1 .. 40;
    my $r = strace_call('FastFile::file_set_contents_many(\@l, { fsync => 1 })',
                        setup => 'my @l = map { ("$ARGV[0]/d$_/f" => "x") } 1 .. 40;', args => [$base],
                        ulimit_n => 32);
    ok($r->{ok}, 'traced: 40 files in 40 directories with fsync') or diag $r->{err};
    my (%open, $peak);
    for my $c (@{ $r->{calls} }) {
        if ($c->{name} =~ /^open(?:at)?\z/ && defined $c->{ret} && $c->{ret} =~ /^\d+\z/) { $open{ $c->{ret} } = 1 }
        elsif ($c->{name} eq 'close' && $c->{args} =~ /^(\d+)/) { delete $open{$1} }
        my $now = keys %open;
        $peak = $now if !defined $peak || $now > $peak;
    }
    cmp_ok($peak, '<=', 16, "... at most 16 fds open at once (saw $peak)");
}

# --- 2. a write-only directory (0300): O_PATH needs no read permission ---
SKIP: {
    my $nobody = getpwnam('nobody');
    skip 'root without a user nobody', 3 if $> == 0 && !defined $nobody;
    my $wo = "$dir/writeonly";
    mkdir $wo;
    my @who;
    if ($> == 0) {
        chmod 0711, $dir;       # the child must reach it
        chown $nobody, -1, $wo;
        @who = ($nobody, (getpwnam 'nobody')[3]);
    }
    chmod 0300, $wo;
    my $out = in_child(sub {
        my $w = file_set_contents_many(["$wo/a" => 'A', "$wo/b" => 'B']);
        file_set_contents("$wo/c", 'C');
        return $w;
    }, @who);
    chmod 0700, $wo;
    if (FastFile::_build_info()->{O_PATH}) {
        is($out, 'ok 2', 'a 0300 directory: the batch writes (as file_set_contents does)');
        is(join('', map { slurp("$wo/$_") // '-' } qw(a b c)), 'ABC', '... the bytes');
    } else {    # the portable build opens directories for reading (POD: SYSTEMS AND BUILDS)
        is($out, "died unable to open directory '$wo' - " . errno_text(EACCES) . "\n",
           'a 0300 directory, portable build: the batch cannot open it');
        is(join('', map { slurp("$wo/$_") // '-' } qw(a b c)), '---', '... nothing written (the child died first)');
    }
    is_deeply([ temps_in($wo) ], [], '... no temp left');
    chmod 0700, $dir;
}

# --- 3. nothing made before every pair is checked; a failed batch removes
#        the directories it made ---
mkdir "$dir/isdir";
check_error('mkdir, then a target that is a directory',
            sub { file_set_contents_many(["$dir/new1/a/f" => 1, "$dir/isdir" => 2], { mkdir => 1 }) },
            text => "unable to replace '$dir/isdir' - " . errno_text(EISDIR) . "\n", errno => EISDIR,
            watch => ["$dir/new1"], dir => $dir);
check_error('a trailing slash never gets its directory made',
            sub { file_set_contents_many(["$dir/ok" => 1, "$dir/new2/sub/" => 2], { mkdir => 1 }) },
            text => "unable to replace '$dir/new2/sub/' - " . errno_text(EISDIR) . "\n", errno => EISDIR,
            watch => ["$dir/ok", "$dir/new2"], dir => $dir);
SKIP: {
    skip $strace_why, 9 if $strace_why;
    # the second write fails: both new directory trees go again
    my $r = strace_call('FastFile::file_set_contents_many(\@l, { mkdir => 1, fsync => 1 })',
                        setup => 'my @l = map { ($_ => "new") } @ARGV;',
                        args => ["$dir/new3/x/f1", "$dir/new3/y/f2"], inject => ['write:error=EIO:when=2']);
    like($r->{err}, qr{^unable to write '\Q$dir\E/new3/y/f2\.tmp\.\d+' - \Q@{[errno_text(EIO)]}\E\n\z},
         'mkdir, then the second write fails: its error');
    ok(!-e "$dir/new3", '... the directories made are removed');

    # the second rename fails: the first directory keeps its new file, the
    # second (empty) is removed
    spew("$dir/keep", 'old');
    $r = strace_call('FastFile::file_set_contents_many(\@l, { mkdir => 1 })',
                     setup => 'my @l = map { ($_ => "new") } @ARGV;',
                     args => ["$dir/new4/x/f1", "$dir/new4/y/f2", "$dir/keep"], inject => ['renameat:error=EIO:when=2']);
    is($r->{err}, "file_set_contents_many: replaced '$dir/new4/x/f1', then close (rename) atomic file "
                  . "'$dir/new4/y/f2' failed: " . errno_text(EIO) . "\n", 'mkdir, then the second rename fails');
    is(slurp("$dir/new4/x/f1"), 'new', '... the file renamed stays, in its new directory');
    ok(!-e "$dir/new4/y", '... the directory nothing was renamed into is removed');
    is(slurp("$dir/keep"), 'old', '... the rest untouched');
    is_deeply([ temps_in("$dir/new4") ], [], '... no temp left');

    # mkdir fails halfway down (new5 made, new5/a refused): new5 removed,
    # the error names the level that failed
    $r = strace_call('FastFile::file_set_contents_many(\@l, { mkdir => 1 })',
                     setup => 'my @l = map { ($_ => "new") } @ARGV;',
                     args => ["$dir/new5/a/b/f"], inject => ['mkdir:error=EACCES:when=4'],
                     paths => ["$dir/new5", "$dir/new5/a", "$dir/new5/a/b"]);   # not ASan's own calls
    is($r->{err}, "unable to create directory '$dir/new5/a' - " . errno_text(EACCES) . "\n",
       'mkdir fails on the second level made: names that level');
    ok(!-e "$dir/new5", '... the level made above it is removed');
}

# --- 4. every step relative to the directory fd: a parent moved while the
#        batch runs (by a signal handler that runs before the renames)
#        leaves no temp behind ---
SKIP: {
    skip $strace_why, 12 if $strace_why;
    my $i = 0;
    my $renameat2 = FastFile::_build_info()->{renameat2};
    for my $case ([ 'rename', {}, 'renameat:error=EIO:when=2', 3 ],
                  $renameat2 ? [ 'noclobber (renameat2)', { noclobber => 1 }, 'renameat2:error=EIO:when=2', 0 ]
                             : [ 'noclobber (link, portable build)', { noclobber => 1 }, 'linkat:error=EIO:when=2', 0 ],
                  [ 'noclobber (link fallback)', { noclobber => 1 }, 'linkat:error=EIO:when=2', 0,
                    'renameat2:error=EINVAL' ]) {
        my ($how, $opt, $inject, $old, @more) = @$case;
        $i++;
        my ($p, $q) = ("$dir/moved$i-p", "$dir/moved$i-q");
        mkdir $p;
        mkdir "$p/d";
        my @t = map { "$p/d/f$_" } 1 .. 3;
        if ($old) { spew($_, 'old') for @t }
        my $r = strace_call('local $SIG{ALRM} = sub { rename $P, $Q or die "rename: $!" };'
                            . ' FastFile::file_set_contents_many(\@l, $O)',
                            setup => 'my ($P, $Q, @t) = @ARGV; my @l = map { ($_ => "new") } @t;',
                            args => [$p, $q, @t], opts => $opt,
                            inject => ['write:signal=SIGALRM:when=3', @more, $inject]);
        is($r->{err}, "file_set_contents_many: replaced '$p/d/f1', then close (rename) atomic file '$p/d/f2' failed: "
                      . errno_text(EIO) . "\n", "$how: parent moved mid-call, the second rename fails");
        ok(!-e $p && -d "$q/d", '... the parent was moved');
        is(slurp("$q/d/f1"), 'new', '... the first target replaced, in the moved directory');
        is_deeply([ temps_in($q) ], [], '... no temp left in the moved directory');
    }
}

# --- 5. no perl signal handler between the renames: EINTR retried, the
#        handler runs (and dies) after the last one ---
SKIP: {
    skip $strace_why, 8 if $strace_why;
    for my $fsync (0, 1) {
        my @t = map { "$dir/eintr$fsync-$_" } 1 .. 3;
        spew($_, 'old') for @t;
        my $r = strace_call('local $SIG{ALRM} = sub { die "timeout\n" }; FastFile::file_set_contents_many(\@l, $O)',
                            setup => 'my @l = map { ($_ => "new") } @ARGV;', args => \@t, opts => { fsync => $fsync },
                            inject => ['renameat:error=EINTR:signal=SIGALRM:when=2']);
        is($r->{err}, "timeout\n", "fsync $fsync: EINTR and a dying handler on the second rename: its die propagates");
        is(join(' ', map { slurp($_) } @t), 'new new new', '... after every target was replaced');
        my @ren = grep { $_->{name} eq 'renameat' } @{ $r->{calls} };
        is(scalar @ren, 4, '... the interrupted rename retried at once (4 renameat)');
        is_deeply([ temps_in($dir) ], [], '... no temp left');
    }
}

# --- 6. errors name the step and the directory that failed ---
spew("$dir/plain", 'x');
check_error('a missing directory',
            sub { file_set_contents_many(["$dir/ok" => 1, "$dir/nodir/x" => 2]) },
            text => "unable to open directory '$dir/nodir' - " . errno_text(ENOENT) . "\n", errno => ENOENT,
            watch => ["$dir/ok"], dir => $dir);
check_error('a file where a directory should be',
            sub { file_set_contents_many(["$dir/ok" => 1, "$dir/plain/x" => 2], { mkdir => 1 }) },
            text => "unable to open directory '$dir/plain' - " . errno_text(ENOTDIR) . "\n", errno => ENOTDIR,
            watch => ["$dir/ok", "$dir/plain"], dir => $dir);
SKIP: {
    skip $strace_why, 3 if $strace_why;
    mkdir "$dir/sd";
    my @t = ("$dir/sd/a", "$dir/sd/b");
    my $r = strace_call('FastFile::file_set_contents_many(\@l, { fsync => 1 })',
                        setup => 'my @l = map { ($_ => "new") } @ARGV;', args => \@t,
                        inject => ['fsync:error=EIO']);
    is($r->{err}, "file_set_contents_many: replaced '$dir/sd/a', '$dir/sd/b', then unable to sync directory "
                  . "'$dir/sd' - " . errno_text(EIO) . "\n", 'the fsync of a directory fails: names the directory');

    # more directories than the cache holds (ulimit -n 32: 16): one replaced
    # by another while the batch runs is found when it is opened again
    my $base = "$dir/stale";
    mkdir $base;
    mkdir "$base/d$_" for 1 .. 24;
    spew("$base/d$_/f", 'old') for 1 .. 24;
    $r = strace_call('local $SIG{ALRM} = sub { rename "$B/d1", "$B/gone" or die; mkdir "$B/d1" or die };'
                     . ' FastFile::file_set_contents_many(\@l)',
                     setup => 'my $B = $ARGV[0]; my @l = map { ("$B/d$_/f" => "new") } 1 .. 24;', args => [$base],
                     inject => ['write:signal=SIGALRM:when=24'], ulimit_n => 32);
    is($r->{err}, "unable to open directory '$base/d1' again, it was moved or replaced during the call - "
                  . errno_text(ESTALE) . "\n", 'a directory replaced while out of the cache: named');
    is(join('', map { slurp("$base/d$_/f") // '' } 2 .. 24), 'old' x 23, '... no target replaced');
}
