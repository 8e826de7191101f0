#!perl
# A signal handler that chdirs in the middle of a call with a relative name
# (dispatched on an EINTR that strace injects with signal=USR1, at each step
# where one can come): the call goes on in the directory it started in.
# The target lands there, no temp is left in either directory, the other
# directory stays empty; a handler that chdirs and dies: the old target
# (or, after the rename, the new one) and no temp, in the right directory.
# Also: tempfile_contents' file is made in the directory it started in.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use lib 't/lib';
use FFTest qw(strace_why strace_calls strace_call slurp spew xattr_nr acl_of run_cmd inc_args);
use File::Temp ();
use FastFile ();

plan skip_all => strace_why() if strace_why();

umask 022;
my $ROOT = File::Temp::tempdir('ff88-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $SEQ  = 0;
my $OLD  = "old\n";
my $NEW  = "new\n";

# Each case: the call, its options, the fault, and whether the handler's
# die comes after the rename (the directory's fsync).
my @steps = (
    [ 'openat of the temp',            {},                  ['openat:error=EINTR:signal=USR1:when=1'] ],
    [ 'write (file_copy: copy_file_range)', {},                  ['write:error=EINTR:signal=USR1:when=1'] ],
    [ 'rename',                        {},                  ['rename:error=EINTR:signal=USR1:when=1'] ],
    [ 'fdatasync (fsync => 1)',        { fsync => 1 },      ['fdatasync:error=EINTR:signal=USR1:when=1'] ],
    [ 'fsync of the dir (fsync => 1)', { fsync => 1 },      ['fsync:error=EINTR:signal=USR1:when=1'], 'after' ],
    [ 'mkdir (mkdir => 1)',            { mkdir => 1 },      ['mkdir:error=EINTR:signal=USR1:when=1'], undef, 'sub/rel' ],
    [ 'renameat2 (noclobber => 1)',    { noclobber => 1 },  ['renameat2:error=EINTR:signal=USR1:when=1'], undef, undef, 'new' ],
    [ 'linkat (noclobber => 1, no renameat2)', { noclobber => 1 },
      ['renameat2:error=EINVAL', 'linkat:error=EINTR:signal=USR1:when=1'], undef, undef, 'new' ],
);

# What this build calls (the portable one: no renameat2, no copy_file_range)
my $BUILD = FastFile::_build_info();
@steps = grep { $BUILD->{renameat2} || $_->[2][0] !~ /^renameat2:error=EINTR/ } @steps;
@steps = grep { $BUILD->{fdatasync} || $_->[2][0] !~ /^f(?:data)?sync:/ } @steps;   # (one fsync for both)

# file_copy's first openat is its source's; the kernel copies (copy_file_range)
my %copy_inject = ('openat:error=EINTR:signal=USR1:when=1' => 'openat:error=EINTR:signal=USR1:when=2',
                   $BUILD->{copy_file_range}
                   ? ('write:error=EINTR:signal=USR1:when=1' => 'copy_file_range:error=EINTR:signal=USR1:when=1') : ());

# Each case a strace session of its own (strace_calls shares one among the
# specs with the same strace arguments: -s, the string length logged, tells
# them apart): the case then runs in the attached worker itself, and no
# injection (signal=USR1, to which only the case has a handler) can land in
# the worker's own syscalls between cases.
my $SESSION = 0;
sub session { return [ '-s', 32 + $SESSION++ ] }

my (@specs, @cases);
for my $fn (qw(file_set_contents file_copy)) {
    for my $step (@steps) {
        my ($label, $opts, $inject, $after, $name, $new) = @$step;
        $name //= 'rel';
        $inject = [ map { $fn eq 'file_copy' ? $copy_inject{$_} // $_ : $_ } @$inject ];
        for my $die (0, 1) {
            my $dir = "$ROOT/" . ++$SEQ;
            my ($a, $b) = ("$dir/a", "$dir/b");
            mkdir $_ or die "mkdir $_: $!" for $dir, $a, $b;
            spew("$a/$name", $OLD) unless $new || $name =~ m{/};
            spew("$dir/src", $NEW);
            my $call = $fn eq 'file_copy' ? 'file_copy($S, $N, undef, $O)' : 'file_set_contents($N, "new\n", $O)';
            push @cases, { label => "$fn, $label" . ($die ? ', handler dies' : ''), a => $a, b => $b,
                           name => $name, die => $die, after => $after, new => $new };
            push @specs, {
                code => 'my ($A, $B, $N, $S, $DIE) = @ARGV; chdir $A or die "chdir $A: $!\n";'
                      . ' local $SIG{USR1} = sub { chdir $B or die "chdir $B: $!\n"; die "handler died\n" if $DIE };'
                      . " my \$r = eval { $call; 1 }; my \$e = \$\@; chdir '/'; die \$e unless \$r; 1",
                args => [ $a, $b, $name, "$dir/src", $die ], opts => $opts,
                inject => $inject, trace => 'injected', attach => 1, timeout => 120, strace => session() };
        }
    }
}

# file_copy's read phase: the handler runs while the source is opened or
# read, before any temp exists (no atomic to hold the directory then): the
# relative source's open is retried, and the target made, where the call
# started. Before, the source's open went on in the handler's directory
# (ENOENT there), and a source of unknown size (/proc: read before the temp
# is made) had its target land in the handler's directory, with success.
my $OSTYPE = do { open my $fh, '<', '/proc/sys/kernel/ostype' or die "/proc/sys/kernel/ostype: $!"; local $/; <$fh> };
for my $phase ([ 'openat of the relative source', 'openat', 'src' ],
               [ 'read of a source of unknown size (/proc)', 'read', '/proc/sys/kernel/ostype' ]) {
    my ($label, $syscall, $src) = @$phase;
    for my $die (0, 1) {
        my $dir = "$ROOT/" . ++$SEQ;
        my ($a, $b) = ("$dir/a", "$dir/b");
        mkdir $_ or die "mkdir $_: $!" for $dir, $a, $b;
        spew("$a/rel", $OLD);
        spew("$a/src", $NEW) if $src eq 'src';
        push @cases, { label => "file_copy, $label" . ($die ? ', handler dies' : ''), a => $a, b => $b,
                       name => 'rel', die => $die, content => $src eq 'src' ? $NEW : $OSTYPE,
                       keep_a => $src eq 'src' ? ['src'] : [] };
        push @specs, {
            code => 'my ($A, $B, $S, $DIE) = @ARGV; chdir $A or die "chdir $A: $!\n";'
                  . ' local $SIG{USR1} = sub { chdir $B or die "chdir $B: $!\n"; die "handler died\n" if $DIE };'
                  . ' my $r = eval { file_copy($S, "rel"); 1 }; my $e = $@; chdir "/"; die $e unless $r; 1',
            args => [ $a, $b, $src, $die ], inject => ["$syscall:error=EINTR:signal=USR1:when=1"],
            trace => 'injected', attach => 1, timeout => 120, strace => session() };
    }
}

# tempfile_contents in a relative directory: the open's EINTR
for my $die (0, 1) {
    my $dir = "$ROOT/" . ++$SEQ;
    my ($a, $b) = ("$dir/a", "$dir/b");
    mkdir $_ or die "mkdir $_: $!" for $dir, $a, $b, "$a/t", "$b/t";
    push @cases, { label => 'tempfile_contents, open' . ($die ? ', handler dies' : ''), a => $a, b => $b,
                   die => $die, tempfile => 1 };
    push @specs, {
        code => 'my ($A, $B, $DIE) = @ARGV; chdir $A or die "chdir $A: $!\n";'
              . ' local $SIG{USR1} = sub { chdir $B or die "chdir $B: $!\n"; die "handler died\n" if $DIE };'
              . ' my ($path, $fh) = eval { tempfile_contents("new\n", 0600, dir => "t") }; my $e = $@; chdir "/";'
              . ' die $e unless $fh; my $l = readlink $path; die "no link: $!\n" unless defined $l; $l',
        setup => 'require IO::File',    # its loading opens files: before the traced call
        args => [ $a, $b, $die ], inject => ['openat:error=EINTR:signal=USR1:when=1'],
        trace => 'injected', attach => 1, timeout => 120, strace => session() };
}

my $res = strace_calls(\@specs, jobs => 2);

sub listing {
    my ($d) = @_;
    opendir my $dh, $d or return "($d: $!)";
    my @n;
    for my $e (sort grep { !/^\.\.?\z/ } readdir $dh) {
        my $in = -d "$d/$e" ? listing("$d/$e") : undef;
        push @n, !defined $in ? $e : $in eq '' ? "$e/" : map { "$e/$_" } split / /, $in;
    }
    return join ' ', @n;
}

for my $i (0 .. $#cases) {
    my ($c, $r) = ($cases[$i], $res->[$i]);
    my $l = $c->{label};
    ok($r->{injected} >= 1, "$l: the fault was injected") or diag($r->{log});
    if ($c->{tempfile}) {
        if ($c->{die}) {
            is($r->{err}, "handler died\n", "$l: the handler's die");
        } else {
            ok($r->{ok}, "$l: made") or diag($r->{err});
            like($r->{ret} // '', qr{\A\Q$c->{a}\E/t/}, "$l: in the directory it started in");
        }
        is(listing($c->{a}), 't/', "$l: nothing left in the starting directory");
        is(listing($c->{b}), 't/', "$l: nothing in the handler's directory");
        next;
    }
    my $name = $c->{name};
    my $target = "$c->{a}/$name";
    if (!$c->{die}) {
        ok($r->{ok}, "$l: written") or diag($r->{err});
        is(slurp($target), $c->{content} // $NEW, "$l: the target in the starting directory has the new content");
    } else {
        is($r->{err}, "handler died\n", "$l: the handler's die");
        my $want = $c->{after} ? $NEW : $c->{new} || $name =~ m{/} ? undef : $OLD;
        is(slurp($target), $want, "$l: the target " . ($c->{after} ? 'renamed before the die' : 'untouched'));
    }
    my $left = listing($c->{a});
    my $want_a = join ' ', sort +(-e $target ? $name : ()), @{ $c->{keep_a} || [] };
    is($left, $want_a, "$l: no temp left in the starting directory");
    is(listing($c->{b}), '', "$l: nothing in the handler's directory");
}

# The look at the old target (preserve: its mode; if_changed: its bytes)
# after a handler's chdir is in the directory the call started in too:
# file_copy's handler run in the read phase, file_set_contents' on the
# look's own lstat (its retry). The handler's directory has a "rel" of its
# own that would give another mode, or the new bytes (nothing written, 0).
for my $case (map { my $fn = $_; map { [ $fn, @$_ ] }
                        [ 'preserve', { preserve => 1 }, 0640, $OLD, 0604, 'other' ],
                        [ 'if_changed', { if_changed => 1 }, 0644, $OLD, 0644, $OSTYPE ],
                        [ 'preserve, an ACL', { preserve => 1 }, 0660, $OLD, 0604, 'other', 'acl' ] }
              qw(file_copy file_set_contents)) {
    my ($fn, $opt, $o, $mode_a, $in_a, $mode_b, $in_b, $with_acl) = @$case;
    my $copy = $fn eq 'file_copy';
    my $dir = "$ROOT/" . ++$SEQ;
    my ($a, $b) = ("$dir/a", "$dir/b");
    mkdir $_ or die "mkdir $_: $!" for $dir, $a, $b;
    spew("$a/rel", $in_a);
    spew("$b/rel", $in_b);
    chmod $mode_a, "$a/rel" or die;
    chmod $mode_b, "$b/rel" or die;
    # the ACL (read through /proc/self/fd/N/rel: no *at call reads an
    # xattr): owner rw, user 65534 rw, group nothing, mask rw, others nothing
    my $acl = pack('V', 2) . join '', map { pack 'vvV', @$_ }
        [0x01, 6, 0xffffffff], [0x02, 6, 65534], [0x04, 0, 0xffffffff], [0x10, 6, 0xffffffff], [0x20, 0, 0xffffffff];
    if ($with_acl && !($BUILD->{acl} && xattr_nr('set')
                       && syscall(xattr_nr('set'), "$a/rel", my $name = 'system.posix_acl_access', $acl, length $acl, 0) == 0)) {
        SKIP: { skip "$fn, $opt: no POSIX ACL here (the portable build, or the filesystem)", 7 }
        next;
    }
    my $r = strace_call(
        'my ($A, $B) = @ARGV; chdir $A or die "chdir $A: $!\n"; local $SIG{USR1} = sub { chdir $B or die "chdir $B: $!\n" };'
      . ' my $w = eval { ' . ($copy ? 'file_copy("/proc/sys/kernel/ostype", "rel", undef, $O)' : 'file_set_contents("rel", $D, $O)')
      . ' }; my $e = $@; chdir "/"; die $e if $e; $w',
        args => [ $a, $b ], opts => $o, data => $OSTYPE, attach => 1,
        ($copy ? (paths => ['/proc/sys/kernel/ostype'], inject => ['read:error=EINTR:signal=USR1:when=1'])
               : (inject => ['newfstatat:error=EINTR:signal=USR1:when=1'])),
        trace => 'injected', timeout => 120, strace => session());
    my $l = $copy ? "file_copy, $opt, chdir in the read phase" : "file_set_contents, $opt, chdir on the old target's lstat";
    ok($r->{injected} >= 1, "$l: the fault was injected") or diag($r->{log});
    is($r->{ret}, 1, "$l: written") or diag($r->{err});
    is(slurp("$a/rel"), $OSTYPE, "$l: the target in the starting directory has the new content");
    is(sprintf('%04o', (stat "$a/rel")[2] & 07777), sprintf('%04o', $mode_a), "$l: its mode");
    is(slurp("$b/rel"), $in_b, "$l: the handler's directory's file untouched");
    is(listing($a) . '|' . listing($b), 'rel|rel', "$l: no temp left");
    is(unpack('H*', acl_of("$a/rel") // ''), $with_acl ? unpack('H*', $acl) : '', "$l: its ACL, the old file's");
}

# No fd left for the hold (EMFILE: the temp took the last one): the call
# went on from the working directory, so the handler's chdir failed it
# ("replaced or removed") and left its temp in the starting directory. Now
# the call fails before its handlers run: EMFILE, the target untouched, no
# temp left (the handler runs once the call is done).
# (file_copy's read phase: the source's read of /proc, no temp yet)
for my $fn (qw(file_set_contents file_copy), 'file_copy, read phase') {
    my $dir = "$ROOT/" . ++$SEQ;
    my ($a, $b) = ("$dir/a", "$dir/b");
    mkdir $_ or die "mkdir $_: $!" for $dir, $a, $b;
    spew("$a/rel", $OLD);
    spew("$dir/src", $NEW);
    my $copy = $fn =~ /^file_copy/;
    my $read = $fn =~ /read phase/;
    my $call = $read ? 'file_copy("/proc/sys/kernel/ostype", "rel")'
             : $copy ? 'file_copy($S, "rel")' : 'file_set_contents("rel", "new\n")';
    my $inject = $read ? 'read' : $copy && $BUILD->{copy_file_range} ? 'copy_file_range' : 'write';
    my $r = strace_call(
        'my ($A, $B, $S, $FREE) = @ARGV; chdir $A or die "chdir $A: $!\n"; my $ran = 0;'
      . ' local $SIG{USR1} = sub { $ran++; chdir $B or die "chdir $B: $!\n" };'
      . ' my @held; while (open my $h, "<", "/dev/null") { push @held, $h } splice @held, 0, $FREE;'
      . " my \$r = eval { $call; 1 }; my \$e = \$\@; my \$errno = \$! + 0; \@held = (); chdir '/';"
      . ' die "handler ran $ran\n" unless $ran; $! = $errno; die $e unless $r; 1',
        args => [ $a, $b, "$dir/src", $copy && !$read ? 2 : 1 ], ulimit_n => 64,
        ($read ? (paths => ['/proc/sys/kernel/ostype']) : ()),   # (not perl's reads of its modules)
        inject => ["$inject:error=EINTR:signal=USR1:when=1"], trace => 'injected', timeout => 120);
    my $l = "$fn, no fd left to hold the directory";
    ok($r->{injected} >= 1, "$l: the fault was injected") or diag($r->{log});
    ok(!$r->{ok}, "$l: the call fails");
    like($r->{err} // '', qr/\Q'rel'\E.* - \Q@{[ FFTest::errno_text(24) ]}\E$/, "$l: with the name and EMFILE")
        or diag($r->{output});
    is($r->{errno}, 24, "$l: \$! EMFILE");
    is(slurp("$a/rel"), $OLD, "$l: the target untouched");
    is(listing($a), 'rel', "$l: no temp left in the starting directory");
    is(listing($b), '', "$l: nothing in the handler's directory");
}

# The same for tempfile_contents: its open went on in the handler's
# directory (a handle there); now EMFILE before the handlers run.
SKIP: {
    # strace's -P names the directory: O_TMPFILE opens it, the portable
    # build's named temp file ("tmp88/.tmpfile.N") is another path
    skip 'the portable build names its tempfile: no open of the directory itself to inject into', 5
        if $BUILD->{portable};
    my $dir = "$ROOT/" . ++$SEQ;
    my ($a, $b) = ("$dir/a", "$dir/b");
    mkdir $_ or die "mkdir $_: $!" for $dir, $a, $b, "$a/tmp88", "$b/tmp88";
    my $r = strace_call(
        'my ($A, $B) = @ARGV; my $ran = 0; local $SIG{USR1} = sub { $ran++; splice @held, 0, 1; chdir $B or die "chdir $B: $!\n" };'
      . ' my ($path, $fh) = eval { tempfile_contents("new\n", 0600, dir => "tmp88") }; my $e = $@; my $errno = $! + 0;'
      . ' my $l = $fh ? readlink($path) : ""; undef $fh; @held = (); chdir "/";'
      . ' die "handler ran $ran\n" unless $ran; $! = $errno; die $e unless $l; $l',
        setup => 'require IO::File; my ($A) = @ARGV; chdir $A or die "chdir $A: $!\n"; my @held;'
               . ' while (open my $h, "<", "/dev/null") { push @held, $h }',
        args => [ $a, $b ], ulimit_n => 64, paths => ['tmp88'],
        inject => ['openat:error=EINTR:signal=USR1:when=1'], trace => 'injected', timeout => 120);
    my $l = 'tempfile_contents, no fd left to hold the directory';
    ok($r->{injected} >= 1, "$l: the fault was injected") or diag($r->{log});
    is($r->{err}, "failed to create tempfile: " . FFTest::errno_text(24) . "\n", "$l: fails, EMFILE")
        or diag($r->{stderr});
    is($r->{errno}, 24, "$l: \$! EMFILE");
    is(listing($a), 'tmp88/', "$l: nothing left in the starting directory");
    is(listing($b), 'tmp88/', "$l: nothing in the handler's directory");
}

# preserve's ACL read after a handler's chdir where there is no /proc (a
# chroot, a container): the old file's ACL was read through
# /proc/self/fd/N/rel only, so the call failed ("unable to preserve owner
# and mode of 'rel' - No such file or directory"). It reads the file opened
# in the held directory there. /proc is unmounted in a mount namespace of
# the traced perl's own (root, unshare(1)); the handler runs on the
# source's open (file_copy's read phase, absolute source, relative target).
SKIP: {
    my $why = strace_why();
    skip "strace: $why", 4 if $why;
    skip 'unmounting /proc needs root', 4 if $>;
    skip 'ASan\'s runtime needs /proc', 4 if ($ENV{LD_PRELOAD} // '') =~ /asan/;
    skip 'no POSIX ACL in this build', 4 unless $BUILD->{acl} && xattr_nr('set');
    my ($st0, $out0) = run_cmd('unshare', '-m', '--propagation', 'private', 'true');
    skip "no mount namespace here (unshare -m: $out0)", 4 if $st0;
    my $dir = "$ROOT/" . ++$SEQ;
    my ($a, $b) = ("$dir/a", "$dir/b");
    mkdir $_ or die "mkdir $_: $!" for $dir, $a, $b;
    spew("$a/rel", $OLD);
    spew("$b/rel", 'other');
    spew("$a/src", $OSTYPE);
    chmod 0660, "$a/rel" or die;
    my $acl = pack('V', 2) . join '', map { pack 'vvV', @$_ }
        [0x01, 6, 0xffffffff], [0x02, 6, 65534], [0x04, 0, 0xffffffff], [0x10, 6, 0xffffffff], [0x20, 0, 0xffffffff];
    syscall(xattr_nr('set'), "$a/rel", my $name = 'system.posix_acl_access', $acl, length $acl, 0) == 0
        or skip "no POSIX ACL on this filesystem: $!", 4;
    my ($st, $out) = run_cmd('unshare', '-m', '--propagation', 'private', 'sh', '-c', 'umount -l /proc && exec "$@"', 'sh',
                             'strace', '-qq', '-f', '-o', '/dev/null', '-P', "$a/src", '-e', 'trace=openat',
                             '-e', 'inject=openat:error=EINTR:signal=USR1:when=1',
                             $^X, inc_args(), '-MFastFile=file_copy', '-e', <<'CODE', $a, $b);
my ($A, $B) = @ARGV;
chdir $A or die "chdir $A: $!\n";
print -e '/proc/self' ? "proc\n" : "no proc\n";
$SIG{USR1} = sub { chdir $B or die "chdir $B: $!\n" };
print eval { file_copy("$A/src", 'rel', undef, { preserve => 1 }) } // "died $@", "\n";
CODE
    is("$st|$out", "0|no proc\n1\n", 'no /proc, preserve with an ACL after a chdir in the read phase: written');
    is(slurp("$a/rel"), $OSTYPE, 'no /proc, preserve with an ACL: the target in the starting directory is new');
    is(unpack('H*', acl_of("$a/rel") // ''), unpack('H*', $acl), 'no /proc, preserve with an ACL: the old file\'s ACL');
    is(listing($a) . '|' . slurp("$b/rel"), 'rel src|other', 'no /proc: no temp left, the handler\'s directory untouched');
}

done_testing();
