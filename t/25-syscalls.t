use strict;
use warnings;

# The syscalls file_set_contents makes, seen with strace, and what it does
# when the kernel fails them (faults injected with strace -e inject, limited
# to the temp file with -P, see t/lib/FFTest.pm).

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }
use POSIX qw(setlocale LC_ALL);
BEGIN { setlocale(LC_ALL, 'C') }

use Test::More;
use Errno qw(ENOSPC EIO EXDEV EFBIG);
use lib 't/lib';
use FastFile ();
use FFTest qw(tempdir slurp spew temps_in strace_why strace_call calls_named errno_text io_calls respell);

my $why = strace_why();
plan skip_all => $why if $why;

my $dir = tempdir();
my $n = 0;

sub names { return map { $_->{name} } io_calls($_[0]) }
sub last_arg { my ($c) = @_; return ($c->{args} =~ /,\s*(\d+)\z/)[0] }

sub show { my ($r) = @_; return join '', map { "  $_->{line}\n" } @{ $r->{calls} } }

# Every C library's spelling of a call reads as one (respell, issue 39): glibc
# 2.36 (Debian 12) makes fstat(fd) as newfstatat(fd, ""), 2.41 (Debian 13) as
# fstat, 32-bit glibc as statx; musl opens, stats and renames by the old names
my $ST = '{st_mode=S_IFREG|0644, st_size=5, ...}';
for my $c ([ qq{newfstatat(3, "", $ST, AT_EMPTY_PATH) = 0}, "fstat(3, $ST) = 0" ],
           [ "fstat(3, $ST) = 0", "fstat(3, $ST) = 0" ],
           [ 'statx(3, "", AT_STATX_SYNC_AS_STAT|AT_EMPTY_PATH, STATX_BASIC_STATS, {stx_size=5}) = 0',
             'fstat(3, {stx_size=5}) = 0' ],
           [ qq{4242  stat("a b", $ST) = 0}, qq{4242  newfstatat(AT_FDCWD, "a b", $ST, 0) = 0} ],
           [ qq{lstat("a\\"), b", $ST) = 0}, qq{newfstatat(AT_FDCWD, "a\\"), b", $ST, AT_SYMLINK_NOFOLLOW) = 0} ],
           [ 'open("a", O_RDONLY|O_CLOEXEC) = 3', 'openat(AT_FDCWD, "a", O_RDONLY|O_CLOEXEC) = 3' ],
           [ 'renameat(AT_FDCWD, "a.tmp", AT_FDCWD, "a") = 0', 'rename("a.tmp", "a") = 0' ],
           [ 'renameat2(AT_FDCWD, "a.tmp", AT_FDCWD, "a", 0) = 0', 'rename("a.tmp", "a") = 0' ],
           [ 'renameat2(5, "a.tmp", 5, "a", 0) = 0', 'renameat(5, "a.tmp", 5, "a") = 0' ],
           # other calls as they are
           [ 'renameat2(AT_FDCWD, "a.tmp", AT_FDCWD, "a", RENAME_NOREPLACE) = 0' ],
           [ 'renameat(5, "a.tmp", 5, "a") = 0' ],
           [ qq{newfstatat(5, "a", $ST, AT_SYMLINK_NOFOLLOW) = 0} ],
           [ 'write(3, "", 0) = 0' ]) {
    is(respell($c->[0]), $c->[1] // $c->[0], "respell: $c->[0]");
}
# an operation's fault is injected whatever this C library calls it
{
    my $file = "$dir/stat-me";
    spew($file, 'hello');
    # (perl's open makes an fstat: attach, so the file is opened before strace starts)
    my $r = strace_call('my @st = stat $fh; die "stat: $!\n" unless @st; $st[7]', attach => 1,
                        setup => 'open our $fh, "<", $ARGV[0] or die',
                        args => [$file], paths => [$file], trace => 'injected', inject => ['fstat:error=EIO:when=1']);
    is($r->{err}, 'stat: ' . errno_text(EIO) . "\n", "inject fstat: perl's stat of a handle fails with EIO") or diag(show($r));
    is($r->{injected}, 1, '... injected once');
    is(join(' ', names($r)), 'fstat', '... into the fstat, by its one name') or diag(show($r));
}

# the full list of syscalls between the markers
for my $case ([ '1 byte', 'setup' => 'my $data = "x";', 1 ],
              [ '64 KiB', 'setup' => 'my $data = "y" x 65536;', 65536 ],
              [ '8 MiB', 'setup' => 'my $data = join("", map { chr } 0 .. 255) x 32768;', 8 << 20 ],
              [ 'empty', 'setup' => 'my $data = "";', 0 ],
              [ 'Latin-1 with force_utf8', 'setup' => 'my $data = "\xe9" x 100; my $force = 1;', 200 ],
              [ 'upgraded Latin-1 (downgraded copy)', 'setup' => 'my $data = "\xe9" x 100; utf8::upgrade($data);', 100 ]) {
    my ($label, undef, $setup, $size) = @$case;
    my $file = "$dir/full-" . ++$n;
    spew($file, 'old');
    my $code = $setup =~ /\$force/ ? 'file_set_contents($ARGV[0], $data, undef, $force)'
                                   : 'file_set_contents($ARGV[0], $data)';
    # a call before the traced one, as in any process that writes more
    # than once: the pid is kept from then on (xs_pid.c), no getpid a call
    my $warm = 'file_set_contents($ARGV[0], "warm");';
    my $r = strace_call($code, setup => "$warm $setup", args => [$file], target => $file);
    ok($r->{traced} && $r->{ok}, "$label: traced call succeeded") or diag($r->{err}, $r->{stderr});
    my @names = names($r);
    if (FastFile::_build_info()->{pid_cache}) {
        my $getpids = grep { $_ eq 'getpid' } @names;
        is($getpids, 0, "$label: no getpid (the pid is kept)");
    }
    @names = grep { $_ ne 'getpid' } @names;
    my @want = $size ? qw(openat write close rename) : qw(openat close rename);
    is("@names", "@want", "$label: exactly " . join(', ', @want)) or diag(show($r));
    my ($open) = calls_named($r, 'openat');
    is($open && $open->{args}, qq{AT_FDCWD, "$r->{tmp}", O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0644},
       "$label: openat of <file>.tmp.<pid> with O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0644");
    if ($size) {
        my ($w) = calls_named($r, 'write');
        is(last_arg($w), $size, "$label: one write of the whole $size bytes");
        is($w->{ret}, $size, "$label: ... which wrote them all");
    }
    my ($close) = calls_named($r, 'close');
    is($close && $close->{ret}, 0, "$label: close returned 0");
    my ($rename) = calls_named($r, 'rename');
    is($rename && $rename->{args}, qq{"$r->{tmp}", "$file"}, "$label: rename(temp, file)");
    is(-s $file, $size, "$label: file size");
    is_deeply([ temps_in($dir) ], [], "$label: no temp left");
}

# item 3: $\ (perl -l) is appended with one writev(2) of data and
# separator: still one write syscall, no copy of the data
# ($\ is set inside the traced code: the child reports its result with print)
for my $case ([ '64 KiB + $\\', 'my $data = "y" x 65536;', '"\\n"', [qw(openat writev close rename)], 65537 ],
              [ 'empty + $\\', 'my $data = "";', '"\\n"', [qw(openat write close rename)], 1 ],
              [ '$\\ = ""', 'my $data = "abc";', '""', [qw(openat write close rename)], 3 ]) {
    my ($label, $setup, $ors, $want, $size) = @$case;
    my $file = "$dir/ors-" . ++$n;
    my $r = strace_call("local \$\\ = $ors; file_set_contents(\$ARGV[0], \$data)", attach => 1, setup => $setup,
                        args => [$file], target => $file);
    ok($r->{traced} && $r->{ok}, "$label: traced call succeeded") or diag($r->{err}, $r->{stderr});
    my @names = grep { $_ ne 'getpid' } names($r);
    is("@names", "@$want", "$label: exactly " . join(', ', @$want)) or diag(show($r));
    my ($w) = calls_named($r, $want->[1]);
    is($w && $w->{ret}, $size, "$label: one call wrote all $size bytes");
    like($w ? $w->{args} : '', qr/iov_len=65536\}, \{iov_base="\\n", iov_len=1\}\], 2\z/,
         "$label: data and separator from their own buffers") if $want->[1] eq 'writev';
    is(-s $file, $size, "$label: file size");
}

# the mode argument reaches open(2) as given
{
    my $file = "$dir/mode";
    my $r = strace_call('file_set_contents($ARGV[0], "m", 0600)', attach => 1, args => [$file], target => $file);
    my ($open) = calls_named($r, 'openat');
    like($open ? $open->{args} : '', qr/, 0600\z/, 'perm 0600 is passed to openat');
}

# inject(label, inject => [...], code/setup..., expect: ok/err/errno/content)
sub injected {
    my ($label, %o) = @_;
    my $file = "$dir/inject-" . ++$n;
    my $old = "old content of $file";
    spew($file, $old);
    my $ino = (stat $file)[1];
    my $code = $o{code} || 'file_set_contents($ARGV[0], $data)';
    my $r = strace_call($code, setup => $o{setup}, args => [$file], target => $file,
                        pid => $FFTest::PID, paths => $o{paths} || ['%TMP%'], inject => $o{inject}, ulimit_f => $o{ulimit_f},
                        env => { LC_ALL => 'C' });
    ok($r->{traced}, "$label: traced") or diag($r->{stderr});
    is($r->{status}, 0, "$label: child exited normally") or diag($r->{stderr});
    is($r->{stderr} . join('', @{ $r->{warnings} }), '', "$label: child said nothing on stderr, warned nothing");
    my $tmp = $r->{tmp};
    if ($o{ok}) {
        ok($r->{ok}, "$label: succeeds") or diag($r->{err});
        ok(slurp($file) eq $o{content}, "$label: content right");
    } else {
        ok(!$r->{ok}, "$label: croaks");
        my $text = ref $o{err} ? $o{err}->($r) : $o{err};
        is($r->{err}, $text, "$label: message");
        is($r->{errno}, $o{errno}, "$label: \$! is " . errno_text($o{errno})) if defined $o{errno};
        is(slurp($file), $old, "$label: target content unchanged");
        is((stat $file)[1], $ino, "$label: target is the same file");
        ok((grep { $_->{name} eq 'unlink' && $_->{args} eq qq{"$tmp"} && $_->{ret} == 0 } @{ $r->{calls} }),
           "$label: the temp was unlinked") or diag(show($r));
    }
    is_deeply([ temps_in($dir) ], [], "$label: no temp left");
    return $r;
}

my @ten = (setup => 'my $data = "0123456789";');

{
    my $r = injected('ENOSPC on write', @ten, inject => ['write:error=ENOSPC:when=1'],
        err => sub { "unable to write '$_[0]{tmp}' - " . errno_text(ENOSPC) . "\n" }, errno => ENOSPC);
    is(scalar(calls_named($r, 'write')), 1, 'ENOSPC on write: no retry');
    is(scalar(calls_named($r, 'close')), 1, 'ENOSPC on write: fd closed once');
}
{
    my $r = injected('write returns 0', @ten, inject => ['write:retval=0:when=1'],
        err => sub { "unable to write '$_[0]{tmp}' - " . errno_text(ENOSPC) . "\n" }, errno => ENOSPC);
    is(scalar(calls_named($r, 'write')), 1, 'write returns 0: reported, not looped on');
}
{
    my $r = injected('EINTR on the first write', 'setup' => 'my $data = "z" x 100000;',
        inject => ['write:error=EINTR:when=1'], ok => 1, content => 'z' x 100000);
    my @w = calls_named($r, 'write');
    is(scalar @w, 2, 'EINTR on the first write: exactly two write calls') or diag(show($r));
    is($w[0] && $w[0]{errno}, 'EINTR', '... the first got EINTR');
    is($w[1] && last_arg($w[1]), 100000, '... the second wrote everything');
}
{
    my $r = injected('EIO on close', @ten, inject => ['close:error=EIO:when=1'],
        err => sub { "closing file '$_[0]{tmp}' failed - " . errno_text(EIO) . "\n" }, errno => EIO);
    is(scalar(calls_named($r, 'close')), 1, 'EIO on close: close not called again (the fd is gone)');
}
{
    injected('EXDEV on rename', @ten, inject => ['rename:error=EXDEV'],
        err => sub { my $f = $_[0]{tmp}; $f =~ s/\.tmp\.\d+\z//; "close (rename) atomic file '$f' failed: " . errno_text(EXDEV) . "\n" },
        errno => EXDEV);
}
{
    # retval= makes strace skip the real write and report 3 bytes written:
    # the loop must go on from byte 3, so the file holds the rest only
    my $r = injected('short write (injected)', @ten, inject => ['write:retval=3:when=1'],
        ok => 1, content => '3456789');
    my @w = calls_named($r, 'write');
    is(scalar @w, 2, 'short write: two writes') or diag(show($r));
    is($w[1] && last_arg($w[1]), 7, 'short write: the second asks for the remaining 7 bytes');
    like($w[1] ? $w[1]{args} : '', qr/^\d+, "3456789", 7\z/, 'short write: ... starting at byte 3');
}
{
    # item 3: a short writev goes on with write(2) of what is left, in the
    # data or in the separator (retval= skips the real writev: only the
    # calls are checked)
    for my $case ([ 3, [ '"3456789", 7', '"AB", 2' ] ], [ 11, [ '"B", 1' ] ]) {
        my ($ret, $rest) = @$case;
        my $file = "$dir/short-writev-" . ++$n;
        my $r = strace_call('local $\\ = "AB"; file_set_contents($ARGV[0], $data)', attach => 1, setup => 'my $data = "0123456789";',
                            args => [$file], target => $file, pid => $FFTest::PID, paths => ['%TMP%'],
                            inject => ["writev:retval=$ret:when=1"]);
        ok($r->{traced} && $r->{ok}, "short writev ($ret of 12): succeeds") or diag($r->{err}, $r->{stderr});
        my @w = map { ($_->{args} =~ /^\d+, (.*)\z/)[0] } calls_named($r, 'write');
        is_deeply(\@w, $rest, "short writev ($ret of 12): the rest with write(2): @$rest") or diag(show($r));
        is(scalar(calls_named($r, 'writev')), 1, "short writev ($ret of 12): one writev");
    }

    # a real short write: the file size limit (ulimit -f 1: 512 bytes) lets
    # the first write through in part, the next one fails with EFBIG
    my $r = injected('file size limit (real short write, then EFBIG)',
        'setup' => '$SIG{XFSZ} = "IGNORE"; my $data = "q" x 2000;', ulimit_f => 1,
        err => sub { "unable to write '$_[0]{tmp}' - " . errno_text(EFBIG) . "\n" }, errno => EFBIG);
    my @w = calls_named($r, 'write');
    is(scalar @w, 2, 'file size limit: two writes') or diag(show($r));
    is($w[0] && $w[0]{ret}, 512, 'file size limit: the first wrote 512 of 2000 bytes');
    is($w[1] && last_arg($w[1]), 1488, 'file size limit: the second asked for the rest');
    is($w[1] && $w[1]{errno}, 'EFBIG', 'file size limit: ... and got EFBIG');
}
{
    # SIGALRM arrives while write is interrupted; its handler dies
    my $r = injected('alarm during write', 'setup' => '$SIG{ALRM} = sub { die "timeout\n" }; my $data = "a" x 100000;',
        inject => ['write:error=EINTR:signal=ALRM:when=1'], err => "timeout\n");
    ok((grep { $_->{name} eq 'signal' && $_->{sig} eq 'SIGALRM' } @{ $r->{calls} }), 'alarm during write: SIGALRM delivered');
    is(scalar(calls_named($r, 'write')), 1, 'alarm during write: the handler ran before any retry');
    is(scalar(calls_named($r, 'rename')), 0, 'alarm during write: no rename');
}
{
    # SIGALRM arrives while write is interrupted; its handler returns: it runs
    # inside the call (between the interrupted write and the retry), and the
    # write is retried to the end
    my $mark = "/nonexistent-fftest-handler-$$";
    my $r = injected('alarm during write, handler returns',
        'setup' => qq{\$SIG{ALRM} = sub { chdir '$mark' }; my \$data = "h" x 100000;},
        inject => ['write:error=EINTR:signal=ALRM:when=1'], paths => ['%TMP%', $mark],
        ok => 1, content => 'h' x 100000);
    my @seq = map { $_->{name} eq 'chdir' ? 'handler' : $_->{name} } grep { $_->{name} ne 'signal' } @{ $r->{calls} };
    # the temp's identity noted (fstat, and its file handle where the
    # build has them) before the handler runs, checked (the handle, else
    # fstatat) before the rename, and the temp read back (open, read to
    # its end, close): a handler may replace it by name, or write into it
    my $handle = FastFile::_build_info()->{file_handle};
    is("@seq", $handle ? 'openat write fstat name_to_handle_at handler write close name_to_handle_at openat read read close rename'
                       : 'openat write fstat handler write close newfstatat openat read read close rename',
       'alarm during write, handler returns: handler ran between the EINTR and the retry') or diag(show($r));
}
{
    # the plain temp name exists (EEXIST): another name is used, the file
    # still lands, and the plain name is not touched again (no unlink, no
    # rename from it). (-P matches rename by its first path only, so the
    # rename from the other name is not in the trace.)
    my $r = injected('EEXIST on the temp name', @ten, inject => ['openat:error=EEXIST:when=1'],
        ok => 1, content => '0123456789');
    my @names = names($r);
    is("@names", 'openat', 'EEXIST on the temp name: the plain name only opened (and refused)') or diag(show($r));
    my ($open) = calls_named($r, 'openat');
    is($open && $open->{errno}, 'EEXIST', 'EEXIST on the temp name: first open refused');
}

done_testing;
