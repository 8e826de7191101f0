use strict;
use warnings;

# PVE::File's helpers when the kernel says no (faults injected with strace
# -e inject, limited by path or syscall): the reference's texts (compared
# with the model in t/lib/Reference.pm under the same fault), nothing left
# behind, no fd leaked; tempfile's fallbacks where O_TMPFILE is unsupported
# (a memfd without a dir option, else the named file); fd exhaustion.

use Test::More;
use lib 't/lib';
use FFTest qw(:strace_tests tempdir spew strace_call strace_calls calls_named run_perl full_testing);
use Errno ();
use FastFile ();

my $dir = tempdir();
my $portable = FastFile::_build_info()->{portable};
my $default_dir = -d "/run/user/$<" ? "/run/user/$<" : $< == 0 ? '/run' : '/tmp';

sub show { my ($r) = @_; return join '', map { "  $_->{line}\n" } @{ $r->{calls} } }
sub entries { my ($d) = @_; opendir my $dh, $d or die "$d: $!"; return sort grep { !/\A\.\.?\z/ } readdir $dh }
sub cut { my ($e) = @_; $e //= ''; $e =~ s/ at \S+ line \d+\.\n\z/ at LOCATION/; return $e }

# the child's open fds after the code (a leak shows as one more)
my $FDS = 'do { opendir my $__d, "/proc/self/fd"; my $__n = () = readdir $__d; closedir $__d; $__n }';

# the same code with FastFile and with the model, under the same faults
# (one strace session): [ FastFile's result, the model's ]
sub both {
    my ($code, %o) = @_;
    my $setup = join '; ', 'use Reference (); require IO::File', $o{setup} // ();
    return @{ strace_calls([ map { { attach => 1, %o, setup => $setup, code => $_ } } both_code($code) ]) };
}

# the code, and the same calling the model
sub both_code {
    my ($code) = @_;
    (my $ref = $code) =~ s/\b(file_read_last_line|tempfile_contents|tempfile|create_owned_file_fh)\(/Reference::ref_$1(/g;
    $ref =~ s/ref_file_read_last_line/ref_read_last_line/g;
    return ($code, $ref);
}

# ----------------------------------------------- tempfile's fallbacks

SKIP: {
    skip 'the portable build has no O_TMPFILE: always the named file', 10 if $portable;
    # no dir option: a memfd, nothing in any directory
    my $r = strace_call('my $fh = tempfile(0640); print {$fh} "data"; $fh->flush; seek $fh, 0, 0; '
                        . 'die "read\n" if <$fh> ne "data"; FFTest::tempfile_kind($fh)', attach => 1,
                        paths => [$default_dir], inject => ['openat:error=EOPNOTSUPP:when=1'],
                        setup => 'require IO::File; use FFTest ()');
    ok($r->{ok}, 'EOPNOTSUPP, no dir: returns a handle that works') or diag($r->{err}, $r->{stderr});
    is($r->{injected}, 1, 'EOPNOTSUPP, no dir: injected');
    is($r->{ret}, 'memfd', 'EOPNOTSUPP, no dir: a memfd');

    # memfd_create missing too (before Linux 3.17): the reference's named
    # file in /tmp. -P would hide memfd_create (no path): the open of the
    # directory is found by its place among the opens of a first run
    my $code = 'my $fh = tempfile(); FFTest::tempfile_kind($fh)';
    $r = strace_call($code, attach => 1, trace => ['openat'], setup => 'require IO::File; use FFTest ()');
    my @opens = grep { /openat\(/ } split /\n/, $r->{log};
    my ($k) = grep { $opens[$_ - 1] =~ /"\Q$default_dir\E", [^)]*O_TMPFILE/ } 1 .. @opens;
    $r = strace_call($code, attach => 1, trace => [qw(openat memfd_create)], setup => 'require IO::File; use FFTest ()',
                     inject => ['memfd_create:error=ENOSYS', "openat:error=EOPNOTSUPP:when=$k"]);
    ok($r->{ok}, 'EOPNOTSUPP, memfd ENOSYS: returns') or diag($r->{err}, $r->{stderr});
    is($r->{ret}, 'named', 'EOPNOTSUPP, memfd ENOSYS: the named file') or diag(show($r));
    my ($named) = grep { $_->{args} =~ m{"/tmp/\.tmpfile\.\d+"} } calls_named($r, 'openat');
    like($named ? $named->{args} : '', qr/O_RDWR\|O_CREAT\|O_EXCL\|O_CLOEXEC, 0600/, 'EOPNOTSUPP, memfd ENOSYS: /tmp/.tmpfile.<pid>, exclusive');
    is(join(',', grep { /\A\.tmpfile\./ } entries('/tmp')), '', 'EOPNOTSUPP, memfd ENOSYS: nothing left in /tmp');

    # a dir option: the named file there, unlinked at once
    $r = strace_call('my $fh = tempfile(undef, dir => $T); FFTest::tempfile_kind($fh)', attach => 1,
                     target => $dir, paths => [$dir], inject => ['openat:error=EOPNOTSUPP:when=1'],
                     setup => 'require IO::File; use FFTest ()');
    ok($r->{ok}, 'EOPNOTSUPP, dir: returns') or diag($r->{err}, $r->{stderr});
    is($r->{ret}, 'named', 'EOPNOTSUPP, dir: the named file');
    is(join(',', entries($dir)), '', 'EOPNOTSUPP, dir: nothing left in the directory');
}

# other open failures: no fallback, the reference's text
for my $e ($portable ? () : qw(EACCES ENOSPC EMFILE)) {    # (portable: the named open, another path)
    my ($got, $ref) = both('tempfile(undef, dir => $T)', target => $dir, paths => [$dir],
                           inject => ["openat:error=$e:when=1"]);
    ok(!$got->{ok} && $got->{injected}, "tempfile, open $e: dies");
    is($got->{err}, $ref->{err}, "tempfile, open $e: as the reference ($ref->{err})");
}

# ------------------------------------- tempfile_contents' write failures

# (every errno at every size when testing in full, FFTest::full_testing)
# PerlIO's 8 KiB buffer decides the reference's text: shorter data fails at
# its flush, longer inside print; the handle closed, no fd left
{
    my (@cases, @specs);
    for my $case ([ '1 KiB', 1024, 'flush' ], [ '8191 bytes', 8191, 'flush' ], [ '8 KiB', 8192, 'write' ],
                  [ '64 KiB', 65536, 'write' ]) {
        for my $e (full_testing() ? qw(ENOSPC EIO EFBIG) : $case->[1] == 8192 ? qw(ENOSPC EIO) : 'ENOSPC') {
            push @cases, [ @$case, $e ];
            push @specs, map { { code => $_, target => $dir, attach => 1, trace => ['write'], inject => ["write:error=$e:when=1"],
                                 setup => "use Reference (); require IO::File; my \$data = 'w' x $case->[1]" } }
                both_code("my \$n = $FDS; my \@r = eval { tempfile_contents(\$data, undef, dir => \$T) }; "
                          . "die \$@ . ' fds ' . ($FDS - \$n) . \"\\n\" if \$@; 1");
        }
    }
    my $res = strace_calls(\@specs);
    for my $i (0 .. $#cases) {
        my ($label, $size, $what, $e) = @{ $cases[$i] };
        my ($got, $ref) = @{$res}[ 2 * $i, 2 * $i + 1 ];
        my $text = "unable to $what to tempfile: " . do { local $! = Errno->can($e)->(); "$!" } . "\n";
        is($got->{err}, "$text fds 0\n", "$label, write $e: '$what' text, no fd left");
        is($got->{err}, $ref->{err}, "$label, write $e: as the reference");
    }
}
is(join(',', entries($dir)), '', 'write failures: nothing left in the directory');

# a short write (strace's retval= skips the call: 100 bytes said, none
# written): the rest is written from where it said it stopped
{
    my $r = strace_call('my ($p, $fh) = tempfile_contents($data, undef, dir => $T); -s $p', attach => 1,
                        target => $dir, trace => ['write'], inject => ['write:retval=100:when=1'],
                        setup => 'require IO::File; my $data = "s" x 65536');
    ok($r->{ok}, 'short write: succeeded') or diag($r->{err});
    my @w = map { ($_->{args} =~ /, (\d+)\z/)[0] } calls_named($r, 'write');
    is("@w", '65536 65436', 'short write: the rest written after it') or diag(show($r));
}

# a signal handler that dies while the data is written (EINTR + SIGALRM):
# its die, the fd closed; one that returns: the write retried, all there
{
    my $r = strace_call("my \$n = $FDS; local \$SIG{ALRM} = sub { die \"timeout\\n\" }; "
                        . "my \@r = eval { tempfile_contents(\$data, undef, dir => \$T) }; die \$@ . ' fds ' . ($FDS - \$n) . \"\\n\" if \$@; 1", attach => 1,
                        target => $dir, trace => ['write'], inject => ['write:error=EINTR:signal=ALRM:when=1'],
                        setup => 'require IO::File; my $data = "a" x 65536');
    is($r->{err}, "timeout\n fds 0\n", 'write EINTR, SIGALRM handler dies: its die, no fd left');
    $r = strace_call('our $k = 0; local $SIG{ALRM} = sub { $k++ }; my ($p, $fh) = tempfile_contents($data, undef, dir => $T); '
                     . '(-s $p) . " $k"', attach => 1,
                     target => $dir, trace => ['write'], inject => ['write:error=EINTR:signal=ALRM:when=1'],
                     setup => 'require IO::File; my $data = "a" x 65536');
    is($r->{ret}, '65536 1', 'write EINTR, SIGALRM handler returns: it ran once, the data all written');
    spew("$dir/siglog", "a\nb\n");
    $r = strace_call('local $SIG{ALRM} = sub { die "timeout\n" }; file_read_last_line($T)', attach => 1,
                     target => "$dir/siglog", paths => ["$dir/siglog"], inject => ['pread64:error=EINTR:signal=ALRM:when=1']);
    is($r->{err}, "timeout\n", 'file_read_last_line, pread EINTR, SIGALRM handler dies: its die');
    unlink "$dir/siglog";
}
is(join(',', entries($dir)), '', 'signals: nothing left in the directory');

# --------------------------------------------- file_read_last_line's errors

{
    my $file = "$dir/log";
    spew($file, "a\nb\n" x 10);
    for my $case ([ 'lseek EINVAL', 'lseek:error=EINVAL', 'sysseek failed - Invalid argument at LOCATION' ],
                  [ 'lseek EIO', 'lseek:error=EIO', 'sysseek failed - Input/output error at LOCATION' ],
                  [ 'read EIO', 'read:error=EIO;pread64:error=EIO', 'sysread failed - Input/output error at LOCATION' ],
                  [ 'open EACCES', 'openat:error=EACCES', "file '$file' exists but open for reading failed - Permission denied\n" ],
                  [ 'open ENOENT', 'openat:error=ENOENT', '' ]) {
        my ($label, $inject, $want) = @$case;
        my @inject = split /;/, $inject;
        my ($got, $ref) = both('my $l = file_read_last_line($T); defined $l ? $l : "undef"', target => $file,
                               paths => [$file], inject => \@inject);
        is(cut($got->{err}), $want, "last line, $label: the reference's text");
        is(cut($got->{err}), cut($ref->{err}), "last line, $label: same as the reference");
        is($got->{ret}, 'undef', "last line, $label: undef") if $label eq 'open ENOENT';
    }
    # EINTR is retried (the reference would die)
    my $r = strace_call('file_read_last_line($T)', attach => 1, target => $file, paths => [$file],
                        inject => ['pread64:error=EINTR:when=1']);
    is($r->{ret}, 'b', 'last line, pread EINTR: retried');
}

# --------------------------------------- create_owned_file_fh's fchown

{
    my $file = "$dir/owned";
    my ($got, $ref) = both('create_owned_file_fh($T, 1234, 1234)', target => $file, trace => ['fchown', 'fchown32'],
                           inject => ['fchown:error=EPERM']);
    is(cut($got->{err}), "failed to change owner of '$file' to 1234:1234 - Operation not permitted at LOCATION",
       'fchown EPERM: the reference text');
    is(cut($got->{err}), cut($ref->{err}), 'fchown EPERM: same as the reference');
    is_deeply($got->{warnings}, [], 'fchown EPERM: FastFile removed the file: no warning');
    like($ref->{warnings}[0] // '', qr/\Afailed to unlink '\Q$file\E' after failing to set owner: No such file or directory\n\z/,
         'the reference warns that its unlink (of the handle) failed');
    ok(-e $file, 'the reference leaves the file (its bug: an intended difference)');
    unlink $file;
    ($got) = strace_call('create_owned_file_fh($T, 1234, 1234)', attach => 1, target => $file, trace => ['fchown'],
                         inject => ['fchown:error=EPERM'], setup => 'require IO::File; use FFTest ()');
    ok(!-e $file, 'FastFile leaves no file');
}

# After a failed fchown, create_owned_file_fh removes only the file it
# made, or nothing (issue 35): while fchown is held (strace's delay_exit,
# the failure injected), a child that may write the directories swaps the
# parent for a symlink to another directory, or moves another file to the
# name. The file is removed in the directory it was created in, while its
# fd is open and only when the name there is still it; the file now behind
# the name is left alone (main removed it: unlink by the path, resolved
# again).
{
    my $code = <<'CODE';
my ($base, $how) = @ARGV;
my $pid = fork // die "fork: $!";
if (!$pid) {
    for (1 .. 5000) {
        if (-e "$base/work/f") {
            if ($how eq 'symlink') {
                rename("$base/work", "$base/work.old") && symlink("$base/victim", "$base/work") or POSIX::_exit(2);
            } else {
                rename("$base/victim/f", "$base/work/f") or POSIX::_exit(2);
            }
            POSIX::_exit(0);
        }
        select undef, undef, undef, 0.002;
    }
    POSIX::_exit(1);
}
my $ok = eval { create_owned_file_fh("$base/work/f", 4242, 4242); 1 };
my $err = $@;
waitpid $pid, 0;
die "the swapper failed: $?\n" if $?;
die $err if !$ok;
'returned'
CODE
    for my $case ([ 'parent swapped for a symlink', 'symlink' ], [ 'another file moved to the name', 'replace' ]) {
        my ($label, $how) = @$case;
        my $base = "$dir/swap-$how";
        mkdir $_ or die "mkdir $_: $!" for $base, "$base/work", "$base/victim";
        spew("$base/victim/f", "victim's\n");
        my $r = strace_call($code, args => [ $base, $how ], setup => 'use POSIX ()', trace => ['fchown'],
                            inject => ['fchown:error=EPERM:delay_exit=500000']);
        like($r->{err}, qr/\Afailed to change owner of '\Q$base\E\/work\/f' to 4242:4242 - Operation not permitted/,
             "$label: fchown fails (injected)") or diag($r->{err}, $r->{stderr});
        my $victim = $how eq 'symlink' ? "$base/victim/f" : "$base/work/f";
        ok(-e $victim, "$label: the other file is not removed");
        is(-e $victim ? FFTest::slurp($victim) : 'gone', "victim's\n", "$label: ... and holds its bytes");
        if ($how eq 'symlink') {
            ok(!-e "$base/work.old/f", "$label: the file made is removed, in the directory it was made in");
            is_deeply($r->{warnings}, [], "$label: no warning");
        } else {
            is_deeply($r->{warnings}, ["failed to unlink '$base/work/f' after failing to set owner: Stale file handle\n"],
                      "$label: nothing removed, with the reference's warning (ESTALE: another file)");
        }
    }
}

# A signal handler run on an EINTR of the directory's open (a FUSE parent)
# that removes the directory just made, or changes the working directory:
# the open's ENOENT, as the reference's open would meet it, and nothing made
# (make_path's croak was emulated with a real mkdir: it made the level again,
# in the handler's directory after a chdir, and said "mkdir sub: File
# exists")
for my $how (qw(rmdir chdir)) {
    my $base = "$dir/eintr-$how";
    mkdir $_ or die "mkdir $_: $!" for $base, "$base/a", "$base/b";
    my $r = strace_call('chdir "$T/a" or die; $SIG{ALRM} = $ARGV[0] eq "rmdir" ? sub { rmdir "sub" or die "rmdir: $!" } '
                        . ': sub { chdir "$T/b" or die }; create_owned_file_fh("sub/file", $<)', args => [$how],
                        target => $base, setup => 'require IO::File', trace => ['openat'], paths => ['sub'],
                        inject => ['openat:error=EINTR:signal=ALRM:when=1']);
    is($r->{err}, "unable to create file 'sub/file' - No such file or directory\n",
       "directory's open EINTR, a handler that does $how: the open's ENOENT") or diag($r->{stderr});
    is(join(',', map { -e "$base/$_/sub" ? $_ : () } qw(a b)), $how eq 'rmdir' ? '' : 'a',
       "... no directory made again or in the handler's directory");
}

# ----------------------------------------------------------- fd exhaustion

{
    my $code = 'use FastFile qw(tempfile tempfile_contents create_owned_file_fh); require IO::File; my @h; '
             . 'while (open my $h, "<", "/dev/null") { push @h, $h } '
             . 'for my $c (sub { tempfile(undef, dir => $ARGV[0]) }, sub { tempfile_contents("x", undef, dir => $ARGV[0]) }, '
             . 'sub { create_owned_file_fh("$ARGV[0]/f", $<) }) { eval { $c->() }; print $@ } '
             . 'pop @h; my $o = create_owned_file_fh("$ARGV[0]/g", $<); print ref $o, "\n"; close $o; '
             . 'my ($p, $fh) = tempfile_contents("ok", undef, dir => $ARGV[0]); print -s $p, "\n"';
    my ($status, $out) = run_perl($code, args => [$dir], ulimit_n => 32);
    is($out, "failed to create tempfile: Too many open files\n" x 2
             . "unable to create file '$dir/f' - Too many open files\nIO::File\n2\n",
       'ulimit -n: the open fails with the reference\'s texts, and works again with one fd free '
       . '(create_owned_file_fh too: its directory is not held then, as the reference holds none)');
    ok(!-e "$dir/f", 'ulimit -n: no file made');
    ok(-f "$dir/g", 'ulimit -n, one fd free: create_owned_file_fh made its file');
    unlink "$dir/g";

    # its fchown failing then: no fd to look at the directory with, so
    # nothing is removed, with the reference's warning (and the reason)
    my $r = strace_call('my @h; while (open my $h, "<", "/dev/null") { push @h, $h } pop @h; '
                        . 'create_owned_file_fh($T, 4242, 4242)', target => "$dir/h", ulimit_n => 32,
                        setup => 'require IO::File', trace => ['fchown'], inject => ['fchown:error=EPERM']);
    like($r->{err}, qr/\Afailed to change owner of '\Q$dir\E\/h' to 4242:4242 - Operation not permitted/,
         'ulimit -n, one fd free, fchown EPERM: dies') or diag($r->{err}, $r->{stderr});
    is_deeply($r->{warnings}, ["failed to unlink '$dir/h' after failing to set owner: Too many open files\n"],
              '... nothing removed (no fd to hold the directory), with the warning');
    ok(-f "$dir/h", '... the file stays, as the reference leaves it');
    unlink "$dir/h";
}

# ------------------------- the named file's open, a dying signal handler

# A FUSE directory answers O_TMPFILE with EOPNOTSUPP (fastfs has no tmpfile
# operation): the named file is opened, and an EINTR there runs perl's
# handlers, one of which dies. The call is left by that die from inside
# the C code: nothing it allocated may be lost (the name was malloc'd: 60
# bytes a call, +180 KiB over 3000 calls; 0 now).
SKIP: {
    require FastFS;
    my $fs_why = FastFS::available();
    skip "fastfs: $fs_why", 3 if $fs_why;
    skip 'the portable build has no O_TMPFILE', 3 if $portable;
    my $fs = FastFS->mount;
    my $mnt = $fs->dir;
    my $setup = 'require IO::File; $SIG{ALRM} = sub { die "alarm\n" }';
    # every second openat from the loop's first: the named file's (the first
    # of each pair is O_TMPFILE's, refused by the filesystem itself)
    my $r = strace_call('1', attach => 1, target => $mnt, trace => ['openat'], setup => $setup);
    my ($before) = split /nonexistent-fftest-begin/, $r->{log};
    my $named = (() = $before =~ /openat\(/g) + 2;
    my $calls = 3000;
    $r = strace_call('my $rss = sub { open my $s, "<", "/proc/self/statm"; (split " ", <$s>)[1] * 4 }; '
                     . 'my $e; for (1 .. 200) { eval { tempfile(undef, dir => $T) }; $e = $@ } my $kib = $rss->(); '
                     . "for (1 .. $calls) { eval { tempfile(undef, dir => \$T) }; \$e .= \$@ } "
                     . '($e =~ tr/\n//) . " " . ($rss->() - $kib)', attach => 1,
                     target => $mnt, trace => ['openat'], setup => $setup, timeout => 120,
                     inject => ["openat:error=EINTR:signal=SIGALRM:when=$named+2"]);
    my ($died, $grew) = split / /, $r->{ret} // '';
    ok($r->{ok}, 'named file, EINTR and a dying handler: the loop ran') or diag($r->{err});
    is($died, $calls + 1, "named file, EINTR and a dying handler: each call died with the handler's die")
        or diag(show($r));
    SKIP: {
        # (ASan's quarantine holds freed memory: the process grows anyway)
        skip 'the size of the process says nothing under ASan', 1 if ($ENV{LD_PRELOAD} // '') =~ /asan/;
        cmp_ok($grew // 1e9, '<=', 64, "named file, EINTR and a dying handler: the process did not grow ($calls calls)");
    }
    $fs->unmount;
}

# ------------------------------- a write the kernel stops part way (EFBIG)

# Under `ulimit -f` the kernel takes the bytes up to the limit, then says
# EFBIG (SIGXFSZ ignored): the reference's print fails when one of its full
# 8 KiB buffers does, its flush when only the rest does. The same texts,
# data and $\ around the limit L (a multiple of 8 KiB).
{
    my $code = 'use FastFile qw(tempfile_contents); use Reference (); require IO::File; $SIG{XFSZ} = "IGNORE"; '
             . 'open my $p, ">", "$ARGV[0]/limit" or die; syswrite $p, "x" x (1 << 20); close $p; my $L = -s "$ARGV[0]/limit"; '
             . 'unlink "$ARGV[0]/limit"; '
             . 'for my $c ([$L, ""], [$L + 1, ""], [$L + 8191, ""], [$L + 8192, ""], [$L + 8191, "\n"], [$L - 8192, "\n"]) { '
             . '  my ($n) = $c->[0] - $L; '
             . '  print "L", ($n < 0 ? $n : "+$n"), (length $c->[1] ? " \$\\\\" : ""), ": ", join(" | ", map { my $f = $_; '
             . '    local $\ = $c->[1]; eval { my @r = $f->("z" x $c->[0], undef, dir => $ARGV[0]); "ok" } // ($@ =~ s/\n//r) } '
             . '    \&tempfile_contents, \&Reference::ref_tempfile_contents), "\n" }';
    my ($status, $out) = run_perl($code, args => [$dir], ulimit_f => 128);
    my @lines = split /\n/, $out;
    is(scalar @lines, 6, '`ulimit -f`: six cases') or diag($out);
    for (@lines) {
        my ($case, $got, $ref) = /^(.*?): (.*) \| (.*)\z/ or next;
        is($got, $ref, "`ulimit -f`, data of $case: as the reference ($ref)");
    }
    like($out, qr/^L\+1: unable to flush to tempfile: File too large \|/m, '`ulimit -f`: the rest fails at the flush');
    like($out, qr/^L\+8192: unable to write to tempfile: File too large \|/m, '`ulimit -f`: a full buffer fails at the print');
}

done_testing();
