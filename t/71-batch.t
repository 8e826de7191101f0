#!perl
# file_set_contents_many: bytes as file_set_contents writes them, the order
# of its syscalls (strace), its errors (faults injected by fastfs, the FUSE
# test filesystem): every temp written before any rename, no target touched
# on an error before the renames, and a failed rename naming what was
# already replaced.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }
use POSIX qw(setlocale LC_ALL);
BEGIN { setlocale(LC_ALL, 'C') }

use Test::More;
use Errno qw(ENOENT EISDIR EINVAL EEXIST EACCES ENOSPC EIO);
use Fcntl qw(F_SETFD);
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in warnings_of strace_why strace_call errno_text io_calls run_cmd);
use FastFS;
use FastFile qw(:all);

my $dir = tempdir();

sub check_error { FFTest::check_error($_[0], $_[1], dir => $dir, @_[2 .. $#_]) }

# --- exports and arguments ---
ok(!defined &main::file_set_contents_many || defined &FastFile::file_set_contents_many,
   'exported via :all');
{
    package Plain;
    use FastFile;
    ::ok(!defined &Plain::file_set_contents_many, 'not exported by default');
}
is(file_set_contents_many([]), 0, 'an empty batch writes nothing, returns 0');
check_error('not an array reference', sub { file_set_contents_many({ a => 1 }) },
            text => "file_set_contents_many: expects an array reference of file => data pairs\n");
check_error('odd number of elements', sub { file_set_contents_many(["$dir/x"]) },
            text => "file_set_contents_many: odd number of elements: expects file => data pairs\n",
            watch => ["$dir/x"]);
check_error('options not a hash', sub { file_set_contents_many(["$dir/x" => 1], [1]) },
            text => "file_set_contents_many: options must be a hash reference\n", watch => ["$dir/x"]);
check_error('unknown option', sub { file_set_contents_many(["$dir/x" => 1], { fsnyc => 1 }) },
            text => "unknown option 'fsnyc'\n", watch => ["$dir/x"]);
check_error('undefined file name', sub { file_set_contents_many(["$dir/x" => 1, undef, 2]) },
            text => "file name is undefined or empty\n", watch => ["$dir/x"]);

# --- bytes: each file exactly as file_set_contents writes it ---
{
    my @cases = (
        [ bytes => "plain\n\x00\xff" ],
        [ latin1_upgraded => do { my $s = "caf\xe9"; utf8::upgrade($s); $s } ],
        [ number => 42.5 ],
        [ empty => '' ],
        [ big => 'z' x 300_000 ],
    );
    my (@batch, %want);
    for my $c (@cases) {
        my ($name, $data) = @$c;
        file_set_contents("$dir/ref-$name", $data);
        push @batch, "$dir/many-$name" => $data;
    }
    is(file_set_contents_many(\@batch), scalar @cases, 'returns the number of files written');
    for my $c (@cases) {
        is(slurp("$dir/many-$c->[0]"), slurp("$dir/ref-$c->[0]"), "bytes of $c->[0] as file_set_contents");
        is((stat "$dir/many-$c->[0]")[2] & 07777, 0644 & ~umask, "$c->[0]: mode 0644 & ~umask");
    }
    my @w = warnings_of { file_set_contents_many(["$dir/wide" => "\x{263a}", "$dir/undef" => undef]) };
    is(scalar @w, 2, 'two warnings');
    like($w[0], qr/^Wide character in file_set_contents_many at /, 'wide character warning');
    like($w[1], qr/^Use of uninitialized value in file_set_contents_many at /, 'undef warning');
    is(slurp("$dir/wide"), "\xe2\x98\xba", 'wide characters as UTF-8');
    is(slurp("$dir/undef"), '', 'undef: an empty file');
    {
        no warnings 'utf8';
        is(scalar(warnings_of { file_set_contents_many(["$dir/wide" => "\x{263a}"]) }), 0,
           "no warnings 'utf8' silences it");
    }
    file_set_contents_many(["$dir/u8" => "caf\xe9"], { utf8 => 1, perm => 0600 });
    is(slurp("$dir/u8"), "caf\xc3\xa9", 'utf8 option: Latin-1 encoded');
    is((stat "$dir/u8")[2] & 07777, 0600 & ~umask, 'perm option');
}

# --- arguments read once, the caller's variables unchanged ---
{
    package CountFetch;
    sub TIESCALAR { my ($c, $v) = @_; bless { v => $v, n => 0 }, $c }
    sub FETCH { $_[0]{n}++; $_[0]{v} }
    package Str;
    use overload '""' => sub { $_[0]{n}++; $_[0]{v} }, fallback => 1;
    package main;
    tie my $name, 'CountFetch', "$dir/tied-name";
    tie my $data, 'CountFetch', 'tied data';
    my $obj = bless { v => 'overloaded', n => 0 }, 'Str';
    my @list = ($name, $data);     # FETCHes now: copies
    file_set_contents_many([ $name, $data, "$dir/obj" => $obj ]);
    is(slurp("$dir/tied-name"), 'tied data', 'tied name and data');
    is(slurp("$dir/obj"), 'overloaded', 'overloaded data');
    is(tied($name)->{n}, 2, 'tied name: FETCH once in the call (once for @list)');
    is(tied($data)->{n}, 2, 'tied data: FETCH once in the call');
    is($obj->{n}, 1, 'overloading called once');
    my $d = 'keep';
    my $arr = ["$dir/ro" => $d];
    file_set_contents_many($arr);
    ok(!Internals::SvREADONLY($arr->[1]), 'the data scalar is writable again afterwards');
    $arr->[1] .= '!';
    is($arr->[1], 'keep!', '... and can be changed');
}

# --- checked before anything is renamed ---
spew("$dir/t1", 'old1');
spew("$dir/t2", 'old2');
mkdir "$dir/isdir";
my @watch = ("$dir/t1", "$dir/t2");
check_error('the same file twice', sub { file_set_contents_many(["$dir/t1" => 1, "$dir/t2" => 2, "$dir/t1" => 3]) },
            text => "file_set_contents_many: '$dir/t1' is given twice\n", errno => EINVAL, watch => \@watch);
check_error('the same file under two names',
            sub { file_set_contents_many(["$dir/t1" => 1, "$dir/../" . (split m{/}, $dir)[-1] . "/t1" => 3]) },
            text => qr/^file_set_contents_many: '\Q$dir\E\/t1' and '.*\/t1' are the same file\n\z/,
            errno => EINVAL, watch => \@watch);
check_error('a target that is a directory', sub { file_set_contents_many(["$dir/t1" => 1, "$dir/isdir" => 2]) },
            text => "unable to replace '$dir/isdir' - " . errno_text(EISDIR) . "\n", errno => EISDIR,
            watch => [@watch, "$dir/isdir"]);
check_error('a target with a trailing slash', sub { file_set_contents_many(["$dir/t1" => 1, "$dir/isdir/" => 2]) },
            text => "unable to replace '$dir/isdir/' - " . errno_text(EISDIR) . "\n", errno => EISDIR,
            watch => \@watch);
check_error('a missing directory', sub { file_set_contents_many(["$dir/t1" => 1, "$dir/nodir/x" => 2]) },
            text => "unable to open directory '$dir/nodir' - " . errno_text(ENOENT) . "\n",
            errno => ENOENT, watch => \@watch);
check_error('NUL in a path', sub { no warnings 'syscalls'; file_set_contents_many(["$dir/t1" => 1, "$dir/a\0b" => 2]) },
            text => "unable to open file '$dir/a\0b.tmp.$$' - " . errno_text(ENOENT) . "\n", errno => ENOENT,
            watch => \@watch);
# names with the UTF-8 flag (a plain name's snapshot is its bytes, the
# message's SV made from them later): the message has its characters
{
    my $wide_dir = "$dir/\x{263a}dir";
    my $latin = "$dir/caf\x{e9}dir";
    utf8::upgrade($latin);
    mkdir $_ or die "mkdir $_: $!" for $wide_dir, $latin;
    check_error('a directory target with a wide name', sub { file_set_contents_many(["$dir/t1" => 1, $wide_dir => 2]) },
                text => "unable to replace '$dir/\x{263a}dir' - " . errno_text(EISDIR) . "\n", errno => EISDIR,
                watch => \@watch);
    check_error('a directory target with an upgraded Latin-1 name', sub { file_set_contents_many(["$dir/t1" => 1, $latin => 2]) },
                text => "unable to replace '$dir/caf\x{e9}dir' - " . errno_text(EISDIR) . "\n", errno => EISDIR,
                watch => \@watch);
    check_error('a missing directory with a wide name', sub { file_set_contents_many(["$dir/t1" => 1, "$wide_dir/no/x" => 2]) },
                text => "unable to open directory '$dir/\x{263a}dir/no' - " . errno_text(ENOENT) . "\n",
                errno => ENOENT, watch => \@watch);
    rmdir $_ for $wide_dir, $latin;
}
check_error('noclobber and an existing target', sub { file_set_contents_many(["$dir/new1" => 1, "$dir/t2" => 2], { noclobber => 1 }) },
            text => "close (rename) atomic file '$dir/t2' failed: " . errno_text(EEXIST) . "\n", errno => EEXIST,
            watch => [@watch, "$dir/new1"]);

# --- options ---
{
    file_set_contents_many(["$dir/deep/er/f" => 'd', "$dir/deep/g" => 'g'], { mkdir => 1 });
    is(slurp("$dir/deep/er/f") . slurp("$dir/deep/g"), 'dg', 'mkdir: missing directories made');

    spew("$dir/same", 'same');
    spew("$dir/diff", 'old');
    my $ino = (stat "$dir/same")[1];
    is(file_set_contents_many(["$dir/same" => 'same', "$dir/diff" => 'new'], { if_changed => 1 }), 1,
       'if_changed: counts only the file written');
    is((stat "$dir/same")[1], $ino, 'if_changed: the identical file was left alone');
    is(slurp("$dir/diff"), 'new', 'if_changed: the other was written');

    spew("$dir/kept", 'old', 0600);
    file_set_contents_many(["$dir/kept" => 'new'], { preserve => 1 });
    is((stat "$dir/kept")[2] & 07777, 0600, 'preserve: the old mode');

    spew("$dir/real", 'old');
    symlink 'real', "$dir/link" or die "symlink: $!";
    file_set_contents_many(["$dir/link" => 'via link'], { follow_symlinks => 1 });
    ok(-l "$dir/link" && slurp("$dir/real") eq 'via link', 'follow_symlinks: the file behind the link');

    is(file_set_contents_many(["$dir/nc1" => 1, "$dir/nc2" => 2], { noclobber => 1 }), 2, 'noclobber: new files');
    is(file_set_contents_many(["$dir/fs1" => 1, "$dir/fs2" => 2], { fsync => 1 }), 2, 'fsync');
    is(slurp("$dir/fs1") . slurp("$dir/fs2"), '12', 'fsync: the contents');
    my @many = map { ("$dir/lots-$_" => "n$_") } 1 .. 600;    # over FF_BATCH_OPEN_MAX open temps
    is(file_set_contents_many(\@many, { fsync => 1 }), 600, '600 files with fsync (barrier in groups)');
    is(slurp("$dir/lots-600"), 'n600', '... all written');
    is_deeply([ temps_in($dir) ], [], 'no temps after all that');
}

# --- the syscalls, in order ---
SKIP: {
    my $why = strace_why();
    skip $why, 1 if $why;
    my @t = map { "$dir/sys$_" } 1 .. 3;
    mkdir "$dir/sub";
    spew($_, 'old') for @t, "$dir/sub/x";
    my $setup = 'my @l = map { ($_ => "data of $_") } @ARGV;';
    my $r = strace_call('FastFile::file_set_contents_many(\@l)', attach => 1, setup => $setup, args => \@t);
    ok($r->{traced} && $r->{ok}, 'traced batch succeeded') or diag $r->{err}, $r->{stderr};
    my @calls = grep { $_->{name} ne 'getpid' } io_calls($r);
    my $seq = join ' ', map { $_->{name} } @calls;
    my $look = FastFile::_build_info()->{statx} ? 'statx' : 'newfstatat';
    is($seq, 'openat ' . join(' ', ($look) x 3) . ' ' . join(' ', ('openat write close') x 3)
             . ' rt_sigprocmask ' . join(' ', ('renameat') x 3) . ' rt_sigprocmask close',
       "without fsync: directory fd, 3 x $look, 3 x (openat write close), 3 x renameat (signals blocked around them): 5 syscalls a file")
        or diag join '', map { "  $_->{line}\n" } @{ $r->{calls} };
    my @ren = map { /"([^"]+)"\)?\s*$/ ? $1 : '?' } map { $_->{args} } grep { $_->{name} eq 'renameat' } @calls;
    is("@ren", 'sys1 sys2 sys3', 'renames in the caller\'s order, relative to the directory fd');

    $r = strace_call('FastFile::file_set_contents_many(\@l, { fsync => 1 })', attach => 1, setup => $setup, args => [@t, "$dir/sub/x"]);
    ok($r->{ok}, 'traced batch with fsync succeeded') or diag $r->{err};
    @calls = grep { $_->{name} ne 'getpid' } io_calls($r);
    my @names = map { $_->{name} } @calls;
    my $first_rename = (grep { $names[$_] eq 'renameat' } 0 .. $#names)[0];
    my @before = @names[0 .. $first_rename - 1];
    # without sync_file_range (FF_PORTABLE) each fdatasync starts its own writeback
    my $early = FastFile::_build_info()->{sync_file_range} ? 4 : 0;
    is(scalar(grep { $_ eq 'sync_file_range' } @before), $early, "writeback started early for $early temps (sync_file_range)");
    is(scalar(grep { $_ eq 'fdatasync' } @before), 4, 'every temp fdatasynced before the first rename');
    my @after = @names[$first_rename .. $#names];
    is(join(' ', grep { $_ ne 'close' } @after), 'renameat renameat renameat renameat rt_sigprocmask openat fsync openat fsync',
       'then the renames (signals blocked until they are done), then one fsync per directory (2 directories, each through a readable fd of it)')
        or diag join '', map { "  $_->{line}\n" } @calls;
    is(slurp("$dir/sub/x"), "data of $dir/sub/x", 'written');
}

# --- the look at a target without preserve and if_changed: its type only,
# from the kernel's cache (statx, AT_STATX_DONT_SYNC: no GETATTR to a FUSE
# server); no statx in the kernel (ENOSYS) or a seccomp filter refusing it
# (EPERM): fstatat; any other error fails the batch before anything is made
SKIP: {
    my $why = strace_why() || (FastFile::_build_info()->{statx} ? '' : 'built without statx');
    skip $why, 11 if $why;
    my @t = map { "$dir/look$_" } 1 .. 2;
    my $setup = 'my @l = map { ($_ => "new") } @ARGV;';
    my $stat_calls = sub { join ' ', map { $_->{name} } grep { $_->{name} =~ /stat/ } io_calls($_[0]) };
    spew($_, 'old') for @t;
    my $r = strace_call('FastFile::file_set_contents_many(\@l)', attach => 1, setup => $setup, args => \@t);
    is($stat_calls->($r), 'statx statx', 'the look: one statx a target');
    my ($statx) = grep { $_->{name} eq 'statx' } io_calls($r);
    like($statx->{args}, qr/AT_STATX_DONT_SYNC/, '... answered from the cache (AT_STATX_DONT_SYNC)');
    like($statx->{args}, qr/STATX_TYPE\b/, '... for the type');
    like($statx->{args}, qr/AT_NO_AUTOMOUNT/, '... triggering no automount (as fstatat)');
    for my $e (qw(ENOSYS EPERM)) {
        spew($_, 'old') for @t;
        $r = strace_call('FastFile::file_set_contents_many(\@l)', attach => 1, setup => $setup, args => \@t,
                         inject => ["statx:error=$e"]);
        ok($r->{ok}, "statx fails with $e: the batch writes") or diag $r->{err};
        is($stat_calls->($r), 'statx newfstatat statx newfstatat', '... looking with fstatat instead');
    }
    is(join('', map { slurp($_) } @t), 'newnew', '... the bytes');
    spew($_, 'old') for @t;
    $r = strace_call('FastFile::file_set_contents_many(\@l)', attach => 1, setup => $setup, args => \@t,
                     inject => ['statx:error=EIO:when=2']);
    is($r->{err}, "unable to stat '$t[1]' - " . errno_text(EIO) . "\n", 'statx fails (EIO): names the target');
    is(join('', map { slurp($_) } @t), 'oldold', '... nothing replaced');
    is_deeply([ grep { m{/look} } temps_in($dir) ], [], '... no temp made');
}

# --- an automount point (autofs) as a target: a directory, as fstatat
# sees it, and nothing mounted (statx without AT_NO_AUTOMOUNT asked the
# automount daemon and waited for its answer: for ever, here) ---
SKIP: {
    skip 'autofs: needs root on Linux', 3 unless $> == 0 && $^O eq 'linux';
    my $auto = "$dir/automount";
    mkdir $auto or die "$auto: $!";
    pipe(my $req, my $daemon) or die "pipe: $!";
    fcntl($daemon, F_SETFD, 0) or die "fcntl: $!";     # the mount takes it
    # the daemon's process group is a sleeper's: ours must not be it (the
    # daemon's own lookups trigger nothing)
    my $sleeper = fork // die "fork: $!";
    if (!$sleeper) { sleep 60; FFTest::exit_child(0) }
    # mount's complaint (a kernel without autofs) goes into the skip, not to stderr
    my ($mount_st, $mount_out) = run_cmd('mount', '-t', 'autofs', '-o', 'fd=' . fileno($daemon)
                                         . ",pgrp=$sleeper,minproto=5,maxproto=5,direct", 'fftest', $auto);
    my $mounted = $mount_st == 0;
    $mount_out =~ s/\s+\z//;
    $mount_out =~ s/\n\s*/ /g;
    kill 'KILL', $sleeper;
    waitpid $sleeper, 0;
    close $daemon;
    skip "autofs: cannot mount here: $mount_out", 3 unless $mounted;
    pipe(my $res, my $w) or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $res;
        eval { file_set_contents_many(["$dir/am1" => 'x', $auto => 'y']) };
        print {$w} $@;
        close $w;
        FFTest::exit_child(0);
    }
    close $w;
    my $rin = '';
    vec($rin, fileno($_), 1) = 1 for $req, $res;
    select(my $rout = $rin, undef, undef, 20);
    my $asked = vec($rout, fileno($req), 1);
    kill 'KILL', $pid if $asked || !vec($rout, fileno($res), 1);
    my $err = $asked ? 'none: waits for the automount daemon' : do { local $/; <$res> } // '';
    waitpid $pid, 0;
    system('umount', $auto) == 0 or system('umount', '-l', $auto);
    ok(!$asked, 'an automount point as a target: no automount asked for');
    is($err, "unable to replace '$auto' - Is a directory\n", '... a directory target');
    ok(!-e "$dir/am1", '... nothing written');
    rmdir $auto;
}

# --- on FUSE with pmxcfs' caching: a batch of existing targets written a
# moment ago asks the server no more than the loop of single calls
# (fstatat's GETATTR, one a file, made it ask more: a write leaves the
# attributes stale). A target not looked up for a second costs a LOOKUP
# either way: the rename's own lookup of its target is always sent. A
# build without statx (portable, musl) looks with fstatat: one GETATTR a
# file more, as the POD says. ---
SKIP: {
    my $why = FastFS::available();
    skip "fastfs: $why", 2 if $why;
    skip 'built without statx: the look is fstatat, a GETATTR a file', 2
        unless FastFile::_build_info()->{statx};
    my $fs = FastFS->mount(cache => 1);
    my $m = $fs->dir;
    my @batch = map { ("$m/c$_" => "data $_") } 1 .. 16;
    file_set_contents_many([@batch]);
    my %asked;
    for my $how ('loop', 'batch') {
        for my $counted (0, 1) {            # once to warm up, once counted
            $fs->control('reset');
            if ($how eq 'batch') { file_set_contents_many([@batch]) }
            else { file_set_contents($batch[$_], $batch[$_ + 1]) for grep { $_ % 2 == 0 } 0 .. $#batch }
            $asked{$how} = $fs->counters->{requests};
        }
    }
    cmp_ok($asked{batch}, '<=', $asked{loop}, "fastfs (cached): the batch's requests ($asked{batch}) not above the loop's ($asked{loop})");
    is(join('', map { slurp($_) } grep { m{/c\d+\z} } @batch), join('', map { "data $_" } 1 .. 16), '... the bytes');
}

# --- faults: fastfs fails one step of one file ---
SKIP: {
    my $why = FastFS::available();
    skip "fastfs: $why", 1 if $why;
    my $fs = FastFS->mount;
    my $m = $fs->dir;
    my @t = map { "$m/f$_" } 1 .. 4;
    my $reset = sub { $fs->control('clear'); spew($_, "old $_") for @t };
    my @batch = map { ($_ => "new $_") } @t;
    for my $f ([ 'create', 'unable to open file', EACCES ], [ 'write', 'unable to write', ENOSPC ],
               [ 'close', 'closing file', EIO ]) {
        my ($op, $text, $errno) = @$f;
        $reset->();
        $fs->control("fail $op $errno /f3.tmp.*");
        my $sep = $op eq 'close' ? ' failed - ' : ' - ';
        my $want = $op eq 'close' ? "closing file '$m/f3.tmp.$$' failed - " : "$text '$m/f3.tmp.$$' - ";
        check_error("$op of the third temp fails", sub { file_set_contents_many([@batch]) },
                    text => $want . errno_text($errno) . "\n", errno => $errno, watch => \@t, dir => $m);
    }
    $reset->();
    $fs->control('fail fsync ' . EIO . ' /f2.tmp.*');
    check_error('fdatasync of the second temp fails', sub { file_set_contents_many([@batch], { fsync => 1 }) },
                text => "unable to sync '$m/f2.tmp.$$' - " . errno_text(EIO) . "\n", errno => EIO,
                watch => \@t, dir => $m);

    # rename k fails: the ones before it are replaced, it and the rest are not
    $reset->();
    $fs->control('fail rename ' . EACCES . ' /f3.tmp.*');
    my $ok = eval { file_set_contents_many([@batch]); 1 };
    ok(!$ok, 'third rename fails: croaks');
    is($@, "file_set_contents_many: replaced '$m/f1', '$m/f2', then close (rename) atomic file '$m/f3' failed: "
           . errno_text(EACCES) . "\n", '... naming what was replaced');
    is(join('|', map { slurp($_) } @t), "new $m/f1|new $m/f2|old $m/f3|old $m/f4",
       '... the first two replaced, the rest untouched');
    is_deeply([ temps_in($m) ], [], '... no temp left');

    $reset->();
    $fs->control('fail rename ' . EACCES . ' /f1.tmp.*');
    check_error('first rename fails', sub { file_set_contents_many([@batch], { fsync => 1 }) },
                text => "close (rename) atomic file '$m/f1' failed: " . errno_text(EACCES) . "\n",
                errno => EACCES, watch => \@t, dir => $m);
    $fs->control('clear');

    # the order on the wire: every temp complete before the first rename
    $fs->control('reset');
    file_set_contents_many([@batch], { fsync => 1 });
    my $c = $fs->counters;
    is($c->{fsync_requests}, 4, 'fastfs: one FSYNC per temp');
    is($c->{fsyncdir_requests}, 1, 'fastfs: one FSYNCDIR for the directory');
    $fs->unmount;
}

# --- signals: EINTR retried after the handlers; a handler that dies leaves nothing ---
SKIP: {
    my $why = strace_why();
    skip $why, 1 if $why;
    my @t = map { "$dir/sig$_" } 1 .. 3;
    spew($_, 'old') for @t;
    my $r = strace_call('my $n = 0; local $SIG{ALRM} = sub { $n++ }; FastFile::file_set_contents_many(\@l); print "handled $n\n"',
                        attach => 1, setup => 'my @l = map { ($_ => "new") } @ARGV;', args => \@t,
                        inject => ['write:error=EINTR:when=2:signal=SIGALRM']);
    ok($r->{ok}, 'EINTR on the second write: retried') or diag $r->{err};
    like($r->{stdout}, qr/handled 1/, '... after the handler ran');
    is(join('', map { slurp($_) } @t), 'newnewnew', '... all written');

    $r = strace_call('local $SIG{ALRM} = sub { die "timeout\n" }; FastFile::file_set_contents_many(\@l)',
                     attach => 1, setup => 'my @l = map { ($_ => "newer") } @ARGV;', args => \@t,
                     inject => ['write:error=EINTR:when=3:signal=SIGALRM']);
    ok(!$r->{ok}, 'a handler that dies on the third write') ;
    is($r->{err}, "timeout\n", '... its die propagates');
    is(join('', map { slurp($_) } @t), 'newnewnew', '... no target touched');
    is_deeply([ temps_in($dir) ], [], '... no temp left');
}

# --- $\ as file_set_contents appends it; a handler pending at the renames runs first ---
{
    local $\ = "<ORS>";
    file_set_contents("$dir/ors-ref", "data");
    file_set_contents_many(["$dir/ors1" => "data", "$dir/ors2" => ""]);
    is(slurp("$dir/ors1"), slurp("$dir/ors-ref"), '$\ appended as file_set_contents does');
    is(slurp("$dir/ors2"), '<ORS>', '... to empty data too');
    file_set_contents_many(["$dir/ors3" => "d"], { utf8 => 1 });
    is(slurp("$dir/ors3"), 'd', '... not with utf8');
    is(file_set_contents_many(["$dir/ors1" => "data"], { if_changed => 1 }), 0,
       'if_changed compares with $\ appended');
}
SKIP: {
    my $why = strace_why();
    skip $why, 1 if $why;
    my @t = map { "$dir/pend$_" } 1 .. 3;
    spew($_, 'old') for @t;
    my $r = strace_call('local $SIG{ALRM} = sub { die "late\n" }; FastFile::file_set_contents_many(\@l)',
                        attach => 1, setup => 'my @l = map { ($_ => "new") } @ARGV;', args => \@t,
                        inject => ['write:signal=SIGALRM:when=3']);
    is($r->{err}, "late\n", 'a signal during the last write: its handler dies before the renames');
    is(join('', map { slurp($_) } @t), 'oldoldold', '... every target untouched');
    is_deeply([ temps_in($dir) ], [], '... no temp left');
    ok(!grep({ $_->{name} eq 'renameat' } @{ $r->{calls} }), '... no rename was tried');
}

# a handler that forks: whether the child exits (unwinding its copy of the
# cleanup) or returns into the batch, it never removes, writes or renames its
# parent's temps (one that returns dies at once); the parent finishes it
for my $child (['exits', 'exit 0'], ['returns', 'return']) {
    my ($how, $code) = @$child;
    SKIP: {
        my $why = strace_why();
        skip $why, 1 if $why;
        my @t = map { "$dir/fork-$how$_" } 1 .. 3;
        spew($_, 'old') for @t;
        my $r = strace_call('my $parent = $$;'
                            . ' local $SIG{ALRM} = sub { return if $$ != $parent; my $p = fork; if (!$p) { ' . $code . ' } waitpid $p, 0 };'
                            . ' my $ok = eval { FastFile::file_set_contents_many(\@l); 1 };'
                            . ' if ($$ != $parent) { open my $c, ">", "$l[0].child" or die; print {$c} $@; close $c; POSIX::_exit(0) }'
                            . ' die $@ unless $ok',
                            attach => 1, setup => 'use POSIX (); my @l = map { ($_ => "new $_") } @ARGV;', args => \@t,
                            inject => ['write:signal=SIGALRM:when=2']);
        ok($r->{ok}, "a handler forks mid-batch and the child $how: the parent finishes the batch")
            or diag $r->{err};
        is(join(' ', map { slurp($_) } @t), join(' ', map { "new $_" } @t), '... every file written once, by the parent');
        my $child_err = slurp("$t[0].child");
        unlink "$t[0].child";
        if ($how eq 'returns') {
            like($child_err // '', qr/\AFastFile: a process forked by a signal handler may not go on with the write of process \d+\n\z/,
                 '... the child died before touching the batch');
        } else {
            is($child_err, undef, '... the child ended in the handler');
        }
        is_deeply([ temps_in($dir) ], [], '... no temp left');
    }
}

# a process that assigned $$ (the temps are named after it) is still the
# owner of its temps: a failed batch removes them all, as file_set_contents
# does (the fork check compares $$, not getpid)
SKIP: {
    my $why = strace_why();
    skip $why, 1 if $why;
    my @t = map { "$dir/ownpid$_" } 1 .. 3;
    spew($_, 'old') for @t;
    my $r = strace_call('FastFile::file_set_contents_many(\@l)', pid => 4242,
                        attach => 1, setup => 'my @l = map { ($_ => "new") } @ARGV;', args => \@t,
                        inject => ['renameat:error=EIO:when=2']);
    ok(!$r->{ok} && $r->{errno} == EIO, 'with $$ assigned, rename 2 fails: EIO') or diag $r->{err};
    is(join(' ', map { slurp($_) } @t), 'new old old', '... the first replaced, the rest untouched');
    is_deeply([ temps_in($dir) ], [], '... no temp left');
}

# a handler that dies in a directory step (mkdir, the fsync of a made
# directory's parent) leaves no fd behind: what such a step holds is the
# batch's, released by its cleanup
SKIP: {
    my $why = strace_why();
    skip $why, 1 if $why;
    for my $step ('mkdir', 'fsync') {
        my $base = "$dir/leak-$step";
        my $r = strace_call('my $fds = sub { opendir my $d, "/proc/self/fd" or return -1; scalar grep { /^\d+$/ } readdir $d };'
                            . ' local $SIG{ALRM} = sub { die "timeout\n" }; my $n0 = $fds->();'
                            . ' eval { FastFile::file_set_contents_many(\@l, { mkdir => 1, fsync => 1 }) }; my $e = $@;'
                            . ' print "fds $n0 ", $fds->(), "\n"; die $e if $e',
                            attach => 1, setup => 'my @l = map { ($_ => "new") } @ARGV;', args => ["$base/a/b/f1", "$base/a/b/f2"],
                            paths => ["$base/a", "$base/a/b"],    # perl's (or ASan's) own calls are not hit
                            inject => ["$step:error=EINTR:signal=SIGALRM:when=" . ($step eq 'mkdir' ? 2 : 1)]);
        is($r->{err}, "timeout\n", "$step: the handler's die propagates") or diag $r->{stderr};
        my ($before, $after) = $r->{stdout} =~ /fds (\d+) (\d+)/;
        is($after, $before, "$step: no fd left behind");
        ok(!-e "$base/a/b/f1" && !-e "$base/a/b/f2" || $step eq 'fsync', "$step: no target made");
        is_deeply([ -d "$base/a/b" ? temps_in("$base/a/b") : () ], [], "$step: no temp left");
    }
}

done_testing;
