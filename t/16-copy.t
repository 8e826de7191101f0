use strict;
use warnings;

# file_copy against its model (t/lib/Reference.pm: the reference reader,
# then the reference writer), case by case: the target's bytes and mode,
# the croak text, $!, temps left. Then what strace sees: the kernel moves
# the bytes (copy_file_range), and where it refuses (faults injected), read
# and write of large blocks do; signals mid-copy; a source that grows or
# shrinks while it is copied.

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }
use POSIX qw(setlocale LC_ALL);
BEGIN { setlocale(LC_ALL, 'C') }

use Test::More;
use B ();
use Cwd qw(getcwd);
use Errno qw(ENOENT EISDIR ENOSPC EIO ENOTTY);
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in strace_why strace_call errno_text io_calls calls_named run_perl);
use Reference qw(ref_file_copy);
use FastFile qw(:all);
use FastFS;

my $MIB = 1 << 20;
my $top = tempdir();
my $cwd = getcwd();
my $n = 0;
umask 022;

# bytes in which every 4-byte word differs, so a misplaced block shows
my $PATTERN = pack 'N*', 0 .. (4 * $MIB + 100) / 4;
sub pattern {
    my ($len) = @_;
    die "pattern: $len bytes is more than it holds\n" if $len > length $PATTERN;
    return substr($PATTERN, 0, $len);
}

# The outcome of $code run in $dir (relative names, so texts compare):
# returns or croaks, $!, and what is at 'dst' afterwards.
sub run_in {
    my ($dir, $code) = @_;
    chdir $dir or die "chdir $dir: $!\n";
    $! = EIO;     # what the call leaves in $! is its own, not this
    my $ok = eval { $code->(); 1 };
    my %r = (ok => $ok ? 1 : 0, err => $ok ? '' : $@, errno => $! + 0);
    my @st = lstat 'dst';
    $r{dst} = @st ? sprintf('%04o:%s', $st[2] & 07777, slurp('dst')) : 'missing';
    $r{temps} = join ',', temps_in('.');
    chdir $cwd or die "chdir $cwd: $!\n";
    return \%r;
}

# Both in fresh directories set up by $setup->($dir); the same outcome.
sub compare {
    my ($label, $setup, $args, %o) = @_;
    my %dir;
    for my $who (qw(ff ref)) {
        $dir{$who} = "$top/" . ++$n . "-$who";
        mkdir $dir{$who} or die "mkdir: $!\n";
        chdir $dir{$who} or die;
        $setup->();
        chdir $cwd or die;
    }
    my $got = run_in($dir{ff}, sub { file_copy(@$args) });
    my $ref = run_in($dir{ref}, sub { ref_file_copy(@$args) });
    is($got->{ok}, $ref->{ok}, "$label: " . ($ref->{ok} ? 'returns' : 'croaks') . ' as the model does')
        or diag("got: $got->{err}");
    is($got->{err}, $ref->{err}, "$label: same message");
    is($got->{errno}, $ref->{errno}, "$label: \$! is " . errno_text($ref->{errno}));
    ok($got->{dst} eq $ref->{dst}, "$label: same target (mode and bytes)")
        or diag('got ' . length($got->{dst}) . " bytes: " . substr($got->{dst}, 0, 40)
              . ', want ' . length($ref->{dst}) . ': ' . substr($ref->{dst}, 0, 40));
    is($got->{temps}, '', "$label: no temp left");
    like($got->{err}, $o{err}, "$label: the message expected") if $o{err};
    return $got;
}

# ------------------------------------------------ against the model

for my $case ([ 'empty', 0 ], [ '1 byte', 1 ], [ '8191', 8191 ], [ '8192', 8192 ], [ '8193', 8193 ],
              [ '64 KiB', 65536 ], [ '1 MiB (the default max)', $MIB ],
              [ '1 MiB + 1 (past the default max)', $MIB + 1, undef, qr/too long/ ],
              [ '4 MiB, max its size', 4 * $MIB, 4 * $MIB ],
              [ '4 MiB, max one less', 4 * $MIB, 4 * $MIB - 1, qr/too long/ ],
              [ '100 KiB, max 10000', 102400, 10000, qr/too long/ ],
              [ '100 KiB, max "nan" (no limit)', 102400, 'nan' ],
              [ '3 bytes, max 0 (the default)', 3, 0 ]) {
    my ($label, $size, $max, $err) = @$case;
    my $data = pattern($size);
    compare($label, sub { spew('src', $data); spew('dst', 'old') }, [ 'src', 'dst', $max ], err => $err);
}

compare('no old target', sub { spew('src', 'abc') }, [ 'src', 'dst' ]);
compare('perm 0600', sub { spew('src', 'abc') }, [ 'src', 'dst', undef, 0600 ]);
compare('perm 0755 under umask 022', sub { spew('src', 'abc') }, [ 'src', 'dst', 0, 0777 ]);
compare('missing source', sub { spew('dst', 'old') }, [ 'nosuch', 'dst' ], err => qr/^can't open 'nosuch' - /);
compare('source is a directory', sub { mkdir 'd'; spew('dst', 'old') }, [ 'd', 'dst' ],
        err => qr/^unable to read file 'd' - Is a directory/);
compare('target directory missing', sub { spew('src', 'abc') }, [ 'src', 'nodir/dst' ],
        err => qr/^unable to open file 'nodir\/dst\.tmp\.\d+' - No such file/);
compare('source too long and target directory missing', sub { spew('src', 'abcd') }, [ 'src', 'nodir/dst', 3 ],
        err => qr/^file 'src' too long/);
# a source of unknown size (a device, a FIFO) longer than FastFile's first
# block (64 KiB) and past max, into a target that cannot be made: the
# reference reads it all first, so "too long" is its error, not the target's
compare('/dev/zero past max, target directory missing', sub { }, [ '/dev/zero', 'nodir/dst', 100_000 ],
        err => qr/^file '\/dev\/zero' too long/);
# a target name that is refused before anything is opened (undef, '', a
# NUL in it) is the target's error too: the source's come first (it was
# "file name is undefined or empty" or ENOENT before "too long")
for my $dst ([ 'undef', undef ], [ "''", '' ], [ 'a NUL', "a\0b" ]) {
    no warnings 'syscalls';
    compare("/dev/zero past max, target name $dst->[0]", sub { }, [ '/dev/zero', $dst->[1], 100_000 ],
            err => qr/^file '\/dev\/zero' too long/);
    compare("a directory as the source, target name $dst->[0]", sub { mkdir 'src' }, [ 'src', $dst->[1] ],
            err => qr/^unable to read file 'src' - Is a directory/);
}
{
    my @writers;
    # a FIFO whose writer puts $size bytes in it (and ends when the reader
    # has gone)
    my $fifo_of = sub {
        my ($size) = @_;
        return sub {
            POSIX::mkfifo('fifo', 0600) or die "mkfifo: $!\n";
            my $path = getcwd() . '/fifo';
            my $pid = fork // die "fork: $!\n";
            if (!$pid) {
                $SIG{PIPE} = 'IGNORE';
                open my $fh, '>', $path or POSIX::_exit(1);
                syswrite($fh, pattern($size)) // POSIX::_exit(0);
                POSIX::_exit(0);
            }
            push @writers, $pid;
        };
    };
    compare('FIFO of 200 KB past max 100 KB, target directory missing', $fifo_of->(200_000),
            [ 'fifo', 'nodir/dst', 100_000 ], err => qr/^file 'fifo' too long/);
    compare('FIFO of 200 KB within max, target directory missing', $fifo_of->(200_000),
            [ 'fifo', 'nodir/dst', 300_000 ], err => qr/^unable to open file 'nodir\/dst\.tmp\.\d+' - No such file/);
    waitpid $_, 0 for @writers;
}
compare('a symlink at the target is replaced', sub { spew('src', 'new'); spew('x', 'x'); symlink 'x', 'dst' },
        [ 'src', 'dst' ]);
compare('/proc file (size 0)', sub { spew('dst', 'old') }, [ '/proc/sys/kernel/ostype', 'dst' ]);
compare('/proc file past max', sub { spew('dst', 'old') }, [ '/proc/self/maps', 'dst', 10 ],
        err => qr/too long/);
for my $sys (grep { -r } '/sys/kernel/mm/transparent_hugepage/enabled', '/sys/power/state') {
    compare("sysfs file $sys (says 4096)", sub { spew('dst', 'old') }, [ $sys, 'dst' ]);
    # fstat's 4096 is more than max, the bytes are not: they decide
    compare("sysfs file $sys, max 200 (says 4096)", sub { spew('dst', 'old') }, [ $sys, 'dst', 200 ]);
    {
        my $d = "$top/sys-if-changed";
        mkdir $d or die;
        ok(eval { file_copy($sys, "$d/dst", 200, { if_changed => 1 }); 1 },
           "sysfs file $sys, max 200, if_changed: copied") or diag($@);
        is(slurp("$d/dst"), slurp($sys), '... its bytes');
    }
    compare("sysfs file $sys, max 2 (too long)", sub { spew('dst', 'old') }, [ $sys, 'dst', 2 ],
            err => qr/too long/);
    last;
}
{
    local $\ = "\n";
    compare('$\\ appended, as print appends it', sub { spew('src', 'abc') }, [ 'src', 'dst' ]);
    compare('$\\ after an empty source', sub { spew('src', '') }, [ 'src', 'dst' ]);
}
{
    my $r = compare('$! after an empty copy', sub { spew('src', '') }, [ 'src', 'dst' ]);
    is($r->{errno}, ENOTTY, '... ENOTTY, as the reference\'s sysopen leaves it');
}

# FastFile's options (the model has none: compared with what they mean)
{
    my $d = "$top/opts";
    mkdir $d or die;
    spew("$d/src", "caf\xe9");
    spew("$d/dst", "caf\xe9");
    my $ino = (stat "$d/dst")[1];
    is(file_copy("$d/src", "$d/dst", undef, { if_changed => 1 }), 0, 'if_changed: identical target, 0');
    is((stat "$d/dst")[1], $ino, 'if_changed: the target left alone');
    is(file_copy("$d/src", "$d/dst", undef, { utf8 => 1, perm => 0600 }), 1, 'utf8: copied');
    is(slurp("$d/dst"), "caf\xc3\xa9", 'utf8: Latin-1 encoded as UTF-8, as file_set_contents(..., 1)');
    is((stat "$d/dst")[2] & 07777, 0600, 'perm option');
    is(file_copy("$d/src", "$d/dst", undef, { if_changed => 1 }), 1, 'if_changed: different target, 1');
    is(slurp("$d/dst"), "caf\xe9", 'if_changed: rewritten');
    ok(!eval { file_copy("$d/src", "$d/dst", undef, { bogus => 1 }); 1 }, 'unknown option refused');
    like($@, qr/^unknown option 'bogus'/, '... with the writer\'s text');
    is(file_copy("$d/src", "$d/sub/dir/dst", undef, { mkdir => 1, fsync => 1 }), 1, 'mkdir and fsync');
    is(slurp("$d/sub/dir/dst"), "caf\xe9", '... copied');
    ok(!eval { file_copy(undef, "$d/dst"); 1 }, 'undef source');
    is($@, "file name is undefined or empty\n", '... croaks early, as file_get_contents');
    ok(!eval { file_copy("$d/src", ''); 1 }, 'empty target name');
    is($@, "file name is undefined or empty\n", '... croaks early, as file_set_contents');
    is(slurp("$d/dst"), "caf\xe9", 'target untouched by the failures');
    is_deeply([ temps_in($d) ], [], 'no temp left');
}

# a FIFO source: read and write, bytes as written
{
    my $d = "$top/fifo";
    mkdir $d or die;
    POSIX::mkfifo("$d/fifo", 0600) or die "mkfifo: $!\n";
    my $data = pattern(300_000);
    for my $case ([ 'FIFO source', undef, $data ], [ 'FIFO source past max', 200_000 ]) {
        my ($label, $max, $want) = @$case;
        spew("$d/dst", 'old');
        my $pid = fork // die;
        if (!$pid) {
            local $SIG{PIPE} = 'IGNORE';
            open my $fh, '>', "$d/fifo" or POSIX::_exit(1);
            for (my $off = 0; $off < length $data; $off += 50_000) {
                defined syswrite($fh, $data, 50_000, $off) or last;
                select undef, undef, undef, 0.01;
            }
            POSIX::_exit(0);
        }
        my $ok = eval { file_copy("$d/fifo", "$d/dst", $max); 1 };
        waitpid $pid, 0;
        if (defined $want) {
            ok($ok, "$label: copied") or diag($@);
            ok(slurp("$d/dst") eq $want, "$label: the bytes written");
        } else {
            is($@, "file '$d/fifo' too long - aborting\n", "$label: too long");
            is($! + 0, 0, "$label: \$! is 0");
            is(slurp("$d/dst"), 'old', "$label: target untouched");
        }
        is_deeply([ temps_in($d) ], [], "$label: no temp left");
    }
}

# under -T: a tainted target name or perm is refused as the reference's
# sysopen refuses it, a tainted source name is only read
{
    my $d = "$top/taint";
    mkdir $d or die;
    spew("$d/src", 'abc');
    my $code = 'use FastFile "file_copy"; my ($s, $t, $p) = @ARGV; ($t) = $t =~ /(.*)/ if $p ne "dst";'
             . ' my $perm = $p eq "perm" ? 0600 + (0 * length $ARGV[0]) : 0644;'
             . ' eval { file_copy($s, $t, undef, $perm); 1 } ? print "ok" : print $@';
    for my $case ([ 'tainted source name', 'src', 'ok' ],
                  [ 'tainted target name', 'dst', qr/^Insecure dependency in file_copy while running with -T switch/ ],
                  [ 'tainted perm', 'perm', qr/^Insecure dependency in file_copy while running with -T switch/ ]) {
        my ($label, $what, $want) = @$case;
        my (undef, $out) = run_perl($code, switches => ['-T'], args => [ "$d/src", "$d/dst-$what", $what ]);
        if (ref $want) { like($out, $want, "-T, $label: refused") }
        else           { is($out, $want, "-T, $label: copied") }
    }
    ok(-e "$d/dst-src" && !-e "$d/dst-dst" && !-e "$d/dst-perm", '-T: only the untainted target written');
    # what the POD says of the return value: tainted when an argument is
    my $ret = 'use FastFile "file_copy"; use Scalar::Util "tainted"; my ($s, $t, $max) = @ARGV; ($s) = $s =~ /(.*)/;'
            . ' ($t) = $t =~ /(.*)/; ($max) = $max =~ /(.*)/ if $max eq "clean";'
            . ' $max = $max eq "clean" ? undef : 1000 + 0 * length $max;'
            . ' my $r = file_copy($s, $t, $max); print "$r ", tainted($r) ? "tainted" : "clean"';
    for my $max ('clean', 'tainted') {
        my (undef, $out) = run_perl($ret, switches => ['-T'], args => [ "$d/src", "$d/dst-ret", $max ]);
        is($out, "1 $max", "-T, $max arguments: returns a $max 1");
    }
    is_deeply([ temps_in($d) ], [], '-T: no temp left');
}

# the caller's variables are not changed: no string form cached in a number
{
    my $d = "$top/types";
    mkdir $d or die;
    spew("$d/src", 'abc');
    my ($max, $perm) = (100, 0640);
    file_copy("$d/src", "$d/dst", $max, $perm);
    ok(!(B::svref_2object(\$max)->FLAGS & B::SVf_POK()), '$max stays a number');
    ok(!(B::svref_2object(\$perm)->FLAGS & B::SVf_POK()), '$perm stays a number');
}

# A failure once the temp exists (a source that is longer than max, but
# whose size fstat cannot tell; a read error midway) removes the temp
# before it dies: $SIG{__DIE__} never sees one
{
    my $d = "$top/die-hook";
    mkdir $d or die;
    spew("$d/dst", 'old');
    my @seen;
    local $SIG{__DIE__} = sub { push @seen, join ',', temps_in($d) };
    ok(!eval { file_copy('/dev/zero', "$d/dst", 100000); 1 }, 'endless source: croaks');
    is($@, "file '/dev/zero' too long - aborting\n", '... too long, after the temp was made');
    is_deeply(\@seen, [''], '... $SIG{__DIE__} saw no temp');
    is(slurp("$d/dst"), 'old', '... target untouched');
}

# -------------------------------------------------------------- strace

SKIP: {
    my $why = strace_why();
    skip $why, 1 if $why;
    my $info = FastFile::_build_info();
    my $d = "$top/trace";
    mkdir $d or die;
    spew("$d/src4m", pattern(4 * $MIB));
    my $want = pattern(4 * $MIB);

    my $traced = sub {
        my ($label, %o) = @_;
        spew("$d/dst", 'old');
        # a perl of its own where a signal is injected
        my $attach = !grep { /:signal=/ } @{ $o{inject} || [] };
        my $r = strace_call(delete $o{code} // 'file_copy($ARGV[0], $ARGV[1], 4 << 20)',
                            args => [ "$d/src4m", "$d/dst" ], target => "$d/dst", attach => $attach, %o);
        ok($r->{traced}, "$label: traced") or diag($r->{err}, $r->{stderr});
        return $r;
    };

    # 4 MiB: the kernel copies, at most 10 syscalls
    {
        my $r = $traced->('4 MiB');
        ok($r->{ok}, '4 MiB: copied') or diag($r->{err});
        my @names = grep { $_ ne 'getpid' } map { $_->{name} } io_calls($r);
        ok(@names <= 10, '4 MiB: at most 10 syscalls (' . scalar(@names) . ": @names)");
        if ($info->{copy_file_range}) {
            # the source's fstatfs: a FUSE source of more than one request
            # is read whole and checked (t/78); the copy short at fstat's
            # size is the end (no copy_file_range that finds 0)
            is("@names", 'openat fstat fstatfs openat fstatfs copy_file_range close rename close',
               '4 MiB: open, fstat and fstatfs (not FUSE) of the source, the temp, fstatfs (not FUSE), one copy_file_range, close, rename, close');
            my ($first) = calls_named($r, 'copy_file_range');
            is($first && $first->{ret}, 4 * $MIB, '4 MiB: one copy_file_range moved it all');
            ok(!calls_named($r, 'read') && !calls_named($r, 'write'), '4 MiB: no read, no write');
        } else {
            ok(!calls_named($r, 'copy_file_range'), 'a build without copy_file_range never calls it');
            is(scalar(calls_named($r, 'write')), 1, 'one write of the whole file');
        }
        ok(slurp("$d/dst") eq $want, '4 MiB: the bytes');
        is((stat "$d/dst")[2] & 07777, 0644, '4 MiB: mode 0644');
    }

    # longer than max by fstat, and a byte past max is there: too long
    # before anything is read or made (one pread of that byte)
    {
        my $r = $traced->('4 MiB, max one less', code => 'file_copy($ARGV[0], $ARGV[1], (4 << 20) - 1)');
        is($r->{err}, "file '$d/src4m' too long - aborting\n", 'max one less: too long');
        my @names = grep { $_ ne 'getpid' } map { $_->{name} } io_calls($r);
        is("@names", 'openat fstat pread64 close', 'max one less: open, fstat, one pread, close');
        is(slurp("$d/dst"), 'old', 'max one less: target untouched');
    }

    SKIP: {
        skip 'this build has no copy_file_range', 1 unless $info->{copy_file_range};
        # the kernel refuses: read and write of large blocks take over
        for my $errno (qw(EXDEV EINVAL EOPNOTSUPP ENOSYS)) {
            my $r = $traced->("copy_file_range $errno", inject => ["copy_file_range:error=$errno"]);
            ok($r->{ok}, "$errno: copied by the fallback") or diag($r->{err});
            ok(slurp("$d/dst") eq $want, "$errno: the bytes");
            my @w = calls_named($r, 'write');
            my @rd = calls_named($r, 'read');
            is(scalar(@w), 1, "$errno: one write of the whole file");
            is(scalar(@rd), 2, "$errno: one read of the whole file, one at its end");
            is_deeply([ temps_in($d) ], [], "$errno: no temp left");
        }
        # refused midway: read and write go on from where the kernel stopped
        {
            my $r = $traced->('refused after a first chunk', code => 'file_copy($ARGV[0], $ARGV[1], 4 << 20)',
                              inject => ['copy_file_range:error=EXDEV:when=2+']);
            ok($r->{ok}, 'refused midway: copied') or diag($r->{err});
            ok(slurp("$d/dst") eq $want, 'refused midway: the bytes');
        }
        # a write error: reported on the temp, nothing left
        {
            my $r = $traced->('ENOSPC', inject => [ 'copy_file_range:error=ENOSPC', 'write:error=ENOSPC' ],
                              pid => $FFTest::PID, paths => ['%TMP%']);
            ok(!$r->{ok}, 'ENOSPC: croaks');
            like($r->{err}, qr/^unable to write '\Q$d\E\/dst\.tmp\.\d+' - No space left on device\n\z/,
                 'ENOSPC: the writer\'s text, naming the temp');
            is($r->{errno}, ENOSPC, 'ENOSPC: $!');
            is(slurp("$d/dst"), 'old', 'ENOSPC: target untouched');
            is_deeply([ temps_in($d) ], [], 'ENOSPC: no temp left');
        }
        # a read error: reported on the source
        {
            my $r = $traced->('EIO', inject => [ 'copy_file_range:error=EIO', 'read:error=EIO' ],
                             paths => [ "$d/src4m" ]);
            ok(!$r->{ok}, 'EIO: croaks');
            is($r->{err}, "unable to read file '$d/src4m' - Input/output error\n", 'EIO: the reader\'s text');
            is($r->{errno}, EIO, 'EIO: $!');
            is(slurp("$d/dst"), 'old', 'EIO: target untouched');
            is_deeply([ temps_in($d) ], [], 'EIO: no temp left');
        }
        # EINTR with a signal: the handler runs, the copy goes on; a
        # handler that dies leaves nothing
        {
            my $r = $traced->('EINTR', setup => 'our $hits = 0; $SIG{ALRM} = sub { $hits++ }',
                              code => 'file_copy($ARGV[0], $ARGV[1], 4 << 20); $hits',
                              inject => ['copy_file_range:error=EINTR:signal=SIGALRM:when=1']);
            ok($r->{ok}, 'EINTR: copied') or diag($r->{err});
            is($r->{ret}, 1, 'EINTR: the handler ran once');
            ok(slurp("$d/dst") eq $want, 'EINTR: the bytes');
            $r = $traced->('EINTR, dying handler', setup => '$SIG{ALRM} = sub { die "alarm\n" }',
                           inject => ['copy_file_range:error=EINTR:signal=SIGALRM:when=1']);
            is($r->{err}, "alarm\n", 'dying handler: its die');
            is(slurp("$d/dst"), 'old', 'dying handler: target untouched');
            is_deeply([ temps_in($d) ], [], 'dying handler: no temp left');
        }
    }

    # file_copy of $src (holding $before) with $max, whose first copy or
    # read is held back a second while a child runs $change 0.3 s in
    my $changed_mid_copy = sub {
        my ($src, $before, $max, $change) = @_;
        spew($src, $before);
        spew("$d/dst", 'old');
        my $pid = fork // die;
        if (!$pid) {
            select undef, undef, undef, 0.3;
            $change->();
            POSIX::_exit(0);
        }
        my $r = strace_call('file_copy($ARGV[0], $ARGV[1], $ARGV[2])', args => [ $src, "$d/dst", $max ],
                            target => "$d/dst", trace => 1,
                            inject => [ 'copy_file_range:delay_enter=1000000', 'read:delay_enter=1000000' ],
                            paths => [$src]);
        waitpid $pid, 0;
        return $r;
    };
    # the source grows past $max while it is copied (after fstat): too
    # long, as the reference, nothing written
    {
        my $r = $changed_mid_copy->("$d/grow", 'x' x 1000, 4000, sub {
            open my $fh, '>>', "$d/grow" or POSIX::_exit(1);
            syswrite $fh, 'y' x 5000;
        });
        is($r->{err}, "file '$d/grow' too long - aborting\n", 'grown past max: too long');
        is($r->{errno}, 0, 'grown past max: $! is 0, as the reference leaves it');
        is(slurp("$d/dst"), 'old', 'grown past max: target untouched');
        is_deeply([ temps_in($d) ], [], 'grown past max: no temp left');
    }
    # ... or shrinks: what it holds when it is read
    {
        my $r = $changed_mid_copy->("$d/shrink", 'x' x 5000, 0, sub { truncate "$d/shrink", 100 });
        ok($r->{ok}, 'shrunk: copied') or diag($r->{err});
        is(slurp("$d/dst"), 'x' x 100, 'shrunk: what it held');
    }
}

# ---------------------------------------------------------------- FUSE

# to, from and within a FUSE filesystem (fastfs, which has no
# copy_file_range: the kernel refuses, read and write copy): the bytes,
# one write(2) of the whole file, so ceil(size / max_write) WRITE requests
SKIP: {
    my $why = FastFS::available();
    skip "fastfs: $why", 1 if $why;
    my $fs = FastFS->mount(max_write => 131072);
    my $local = "$top/fuse-local";
    mkdir $local or die;
    my $size = 4 * $MIB + 100;
    my $data = pattern($size);
    spew("$local/src", $data);
    my $want = POSIX::ceil($size / 131072);
    for my $case ([ 'local to FUSE', "$local/src", $fs->dir . '/a' ],
                  [ 'FUSE to FUSE', $fs->dir . '/a', $fs->dir . '/b' ],
                  [ 'FUSE to local', $fs->dir . '/b', "$local/dst" ]) {
        my ($label, $from, $to) = @$case;
        $fs->reset;
        ok(eval { file_copy($from, $to, $size); 1 }, "$label: copied") or diag($@);
        ok(slurp($to) eq $data, "$label: the bytes");
        is($fs->counters->{write_requests}, $to =~ /^\Q$local\E/ ? 0 : $want,
           "$label: " . ($to =~ /^\Q$local\E/ ? 'no' : $want) . ' WRITE requests (one write(2))');
    }
    is_deeply([ temps_in($fs->dir, $local) ], [], 'FUSE: no temp left');
    $fs->unmount;
}

done_testing;
