#!perl
# User code that runs in the middle of a call: signal handlers (on EINTR,
# landed with strace -e inject=...:error=EINTR:signal=ALRM), $SIG{__WARN__}
# for the wide character, uninitialized and "Invalid \0" warnings,
# overloading and tie. Whatever such code does - free the data, change it,
# fork, die - the call leaves either the complete new content (and says so)
# or the old content and no temp file, and no fd behind.
#
# Part 1 runs in this process (warning handlers, overloading, tie); part 2
# in traced child perls (see t/lib/FFTest.pm), one per fault injected, each
# case in a child forked from it that counts its fds in /proc/self/fd
# before and after the call.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use lib 't/lib';
use FFTest qw(strace_why strace_call strace_calls temps_in slurp spew errno_text);
use Errno ();
use File::Temp ();
use POSIX ();

use FastFile qw(:all);

umask 022;
my $ROOT = File::Temp::tempdir('ff83-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $PID  = $FFTest::PID;
my $OLD  = "old contents\n";
my $SEQ  = 0;

sub fresh_dir { my $d = "$ROOT/" . ++$SEQ; mkdir $d or die "mkdir $d: $!"; return $d }

sub fds { opendir my $d, '/proc/self/fd' or return -1; return scalar grep { /^\d+$/ } readdir $d }

# The generic outcome: new content and success, or old content, a die, no
# temp. $after_rename: a die after the rename (the directory fsync) leaves
# the new content.
sub outcome_ok {
    my ($name, $dir, $target, $ok, $err, $new, $after_rename) = @_;
    my $got = slurp($target);
    my $short = defined $got ? length($got) . ' bytes starting ' . substr($got, 0, 16) : 'no file';
    if ($ok) {
        ok(defined $got && $got eq $new, "$name: succeeded with the complete new content")
            or diag("got $short");
    } else {
        ok(defined $got && ($got eq $OLD || ($after_rename && $got eq $new)),
           "$name: died ($err), " . ($after_rename ? 'old or (renamed) new' : 'old') . ' content')
            or diag("got $short");
    }
    is_deeply([ temps_in($dir) ], [], "$name: no temp file left");
}

# ------------------------------------------------------------ part 1: in process

my $WIDE = "\x{263a}" x 20000;
my $WIDE_BYTES = do { my $b = $WIDE; utf8::encode($b); $b };

# Item 2: a __WARN__ handler that frees the data after "Wide character".
for my $api (qw(file_set_contents print write)) {
    my $d = fresh_dir();
    my $f = "$d/f";
    spew($f, $OLD);
    my %h = (x => "\x{263a}");
    $h{x} x= 20000;     # a buffer of its own (not shared copy-on-write)
    my @w;
    local $SIG{__WARN__} = sub { push @w, $_[0]; delete $h{x}; my $junk = 'B' x 60000; };
    my $ok = eval {
        if ($api eq 'file_set_contents') {
            file_set_contents($f, $h{x});
        } else {
            my $w = FastFile::Writer->new($f);
            $w->$api($h{x});
            $w->commit;
        }
        1;
    };
    is($@, '', "$api: a warning handler that frees the data: no error");
    ok($ok && slurp($f) eq $WIDE_BYTES, "$api: the UTF-8 of the wide characters is written")
        or diag('got ' . length(slurp($f)) . ' bytes starting ' . substr(slurp($f), 0, 8));
    like($w[0] // '', qr/^Wide character in /, "$api: the warning ran");
    is_deeply([ temps_in($d) ], [], "$api: no temp file left");
}

# The generic check at each warning, overload and tie point, in this process.
# Actions: free the data, modify it, fork (the child exits, unwinding its copy
# of the call), die.
{
    my %ACT = (
        free   => sub { delete $_[0]{x}; my $junk = 'B' x 60000; return },
        modify => sub { $_[0]{x} = 'changed' },
        fork   => sub { my $p = fork // die "fork: $!"; if (!$p) { exit 0 } waitpid $p, 0 },
        die    => sub { die "handler dies\n" },
    );
    my %POINT = (
        # the data as stored, the new content, and how the user code is reached
        wide   => { data => sub { my $s = "\x{263a}"; $s x= 20000; $s }, new => $WIDE_BYTES,
                    setup => sub { my ($act, $h) = @_; $SIG{__WARN__} = sub { $act->($h) } } },
        uninit => { data => sub { undef }, new => '',
                    setup => sub { my ($act, $h) = @_; $SIG{__WARN__} = sub { $act->($h) } } },
        overload => { data => sub { UC::Str->new(sub { $_[0] }) }, new => 'stringified',
                      setup => sub { my ($act, $h) = @_; $UC::Str::HOOK = sub { $act->($h) } } },
        tie    => { data => undef, new => 'fetched',
                    setup => sub { my ($act, $h) = @_; $UC::Tied::HOOK = sub { $act->($h) } } },
    );
    for my $p (sort keys %POINT) {
        for my $a (sort keys %ACT) {
            for my $api (qw(file_set_contents print)) {
                my $name = "$api at $p, handler does $a";
                my $d = fresh_dir();
                my $f = "$d/f";
                spew($f, $OLD);
                my %h;
                if ($p eq 'tie') { tie $h{x}, 'UC::Tied' } else { $h{x} = $POINT{$p}{data}->() }
                $h{x} x= 1 if defined $h{x} && !ref $h{x};    # its own buffer, not a shared one
                local $SIG{__WARN__};
                local $UC::Str::HOOK;
                local $UC::Tied::HOOK;
                $POINT{$p}{setup}->($ACT{$a}, \%h);
                my $n0 = fds();
                my $ok = eval {
                    if ($api eq 'file_set_contents') {
                        file_set_contents($f, $h{x});
                    } else {
                        my $w = FastFile::Writer->new($f);
                        $w->print($h{x});
                        $w->commit;
                    }
                    1;
                };
                my $err = $@;
                my $n1 = fds();
                $SIG{__WARN__} = 'DEFAULT';
                $err =~ s/\n\z//;
                outcome_ok($name, $d, $f, $ok, $err, $POINT{$p}{new});
                is($n1, $n0, "$name: no fd leaked");
                ok($ok, "$name: succeeds") if $a eq 'free' || $a eq 'fork';
            }
        }
    }
}

# Item 7: a NUL in a path is ENOENT, whatever the warning's handler does to $!
# (the four entry points of the issue, and the batch one).
{
    my $d = fresh_dir();
    my $bad = "$d/a\0b";
    local $SIG{__WARN__} = sub { $! = Errno::EACCES() };
    my %call = (
        file_set_contents => sub { file_set_contents($bad, 'x') },
        file_set_contents_many => sub { FastFile::file_set_contents_many([ $bad => 'x' ]) },
        file_get_contents => sub { file_get_contents($bad) },
        file_read_firstline => sub { my $r = file_read_firstline($bad); die "undef\n" unless defined $r },
        'FastFile::Writer->new' => sub { FastFile::Writer->new($bad) },
    );
    for my $name (sort keys %call) {
        my $ok = eval { $call{$name}->(); 1 };
        my $errno = $! + 0;
        my $err = $@;
        ok(!$ok, "NUL path, $name: fails");
        is($errno, Errno::ENOENT(), "NUL path, $name: \$! is ENOENT after a handler set EACCES");
        like($err, qr/\Q${\ errno_text(Errno::ENOENT()) }\E\n\z|^undef\n\z/,
             "NUL path, $name: the message says ENOENT") or diag($err);
    }
    is_deeply([ temps_in($d) ], [], 'NUL path: nothing created');
}

# Item 10: mkdir + follow_symlinks with a link to "x/": fails before making x.
{
    my $d = fresh_dir();
    symlink 'x/', "$d/L" or die "symlink: $!";
    my $ok = eval { file_set_contents("$d/L", 'new', { mkdir => 1, follow_symlinks => 1 }); 1 };
    my $err = $@;
    ok(!$ok, 'link to x/ with mkdir: fails');
    like($err, qr/^unable to open file '\Q$d\E\/x\/\.tmp\.\d+' - \Q${\ errno_text(Errno::ENOENT()) }\E\n\z/,
         'link to x/ with mkdir: the error of the same call without mkdir');
    ok(!-e "$d/x", 'link to x/ with mkdir: no directory x made');
    is(readlink("$d/L"), 'x/', 'link to x/ with mkdir: the link is kept');
}

# Item 9: preserve as a non-root member of the file's group keeps the group.
SKIP: {
    skip 'needs root to become a group member', 3 if $> != 0;
    my $d = fresh_dir();
    my ($uid, $gid, $group) = (65534, 65534, 4242);
    chmod 0755, $ROOT or die "chmod: $!";
    chown $uid, $gid, $d or die "chown: $!";
    my $f = "$d/f";
    spew($f, $OLD, 0664);
    chown 0, $group, $f or die "chown: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my $ok = eval {
            $) = "$gid $gid $group";
            POSIX::setgid($gid) or die "setgid: $!\n";
            POSIX::setuid($uid) or die "setuid: $!\n";
            file_set_contents($f, "new\n", { preserve => 1 });
            1;
        };
        POSIX::_exit($ok ? 0 : 1);
    }
    waitpid $pid, 0;
    is($?, 0, 'preserve as a group member: the write succeeds');
    is(slurp($f), "new\n", 'preserve as a group member: new content');
    my @st = stat $f;
    is("$st[4]:$st[5]", "$uid:$group", 'the owner could not be kept, the group was');
}

# ------------------------------------------------------------ part 2: traced children

SKIP: {
    my $why = strace_why();
    skip "strace: $why", 1 if $why;

    # Run in the child: $fds counts its fds; the result is "n0 n1 ok|died: text".
    # $parent: only the first process forks (strace's when= counts per process).
    my $FDS = q{our (%h, @a, $G); my $fds = sub { opendir my $d, '/proc/self/fd' or return -1; scalar grep { /^\d+$/ } readdir $d }; my $parent = $$; };
    my $call = sub {
        my ($code) = @_;
        return "my \$n0 = \$fds->(); my \$ok = eval { $code; 1 }; my \$e = \$@;"
            . q{ if ($$ != $parent) { open my $c, '>', "$T.child" or die; print $c "$e"; close $c; POSIX::_exit(0) } }
            . q{ my $n1 = $fds->(); $ok ? "$n0 $n1 ok" : "$n0 $n1 died: $e" };
    };
    my @cases;    # [name, spec, expect, check]

    # the data is made with x= so that its buffer is its own (a plain copy
    # would share it copy-on-write, and freeing the scalar would not free it)
    my $A64 = q{'A'; $h{x} x= 65536};
    my $FREE = q{ delete $h{x}; my $junk = 'B' x 65536; };
    # Item 1: a signal handler that frees the data scalar.
    for my $size (['64 KiB', 65536], ['4 MiB', 4 << 20]) {
        for my $how (['delete $h{x}', q{delete $h{x}}], ['@a = ()', q{@a = ()}],
                     ['undef *G', q{undef *G}]) {
            my ($hname, $free) = @$how;
            my $expr = $hname eq '@a = ()' ? '$a[0]' : $hname eq 'undef *G' ? '$G' : '$h{x}';
            push @cases, ["file_set_contents $size->[0], handler does $hname",
                { code => qq{require POSIX; \$h{x} = \$a[0] = \$G = 'A'; \$_ x= $size->[1] for \$h{x}, \$a[0], \$G; }
                        . qq{\$SIG{ALRM} = sub { $free; my \$junk = 'B' x $size->[1]; }; }
                        . $call->("file_set_contents(\$T, $expr)"),
                  inject => ['write:error=EINTR:signal=ALRM:when=1'], paths => ['%TMP'] },
                'new', 'A' x $size->[1]];
        }
    }
    push @cases, ['writer direct write 64 KiB, handler frees the data',
        { code => qq{require POSIX; \$h{x} = $A64; \$SIG{ALRM} = sub { $FREE }; }
                . $call->(q{my $w = FastFile::Writer->new($T, { buffer_size => 4096 }); $w->print($h{x}); $w->commit}),
          inject => ['write:error=EINTR:signal=ALRM:when=1'], paths => ['%TMP'] },
        'new', 'A' x 65536];

    # Item 3: the writer's $\ is replaced by a handler mid-write.
    push @cases, ['writer $\\ replaced by a handler mid-write',
        { code => q{require POSIX; $\ = 'R'; $\ x= 65536; $SIG{ALRM} = sub { $\ = 'z'; my $junk = 'B' x 65536; }; }
                . $call->(q{my $w = FastFile::Writer->new($T, { buffer_size => 4096 }); $w->print('x'); $w->commit}),
          inject => ['write:error=EINTR:signal=ALRM:when=1'], paths => ['%TMP'] },
        'new', 'x' . ('R' x 65536)];

    # Item 4: a handler forks; the child exits (unwinding its copy of the
    # call), or returns into the write (it must not go on with it).
    my $FORK_EXIT = q{ return if $$ != $parent; my $p = fork // die "fork: $!"; if (!$p) { exit 0 } waitpid $p, 0; };
    my $FORK_RET  = q{ return if $$ != $parent; my $p = fork // die "fork: $!"; waitpid $p, 0 if $p; };
    for my $f (['exits', $FORK_EXIT], ['returns', $FORK_RET]) {
        push @cases, ["file_set_contents, handler forks, the child $f->[0]",
            { code => qq{require POSIX; \$h{x} = $A64; \$SIG{ALRM} = sub { $f->[1] }; }
                    . $call->(q{file_set_contents($T, $h{x})}),
              inject => ['write:error=EINTR:signal=ALRM:when=1'], paths => ['%TMP'] },
            'new', 'A' x 65536, $f->[0]];
        push @cases, ["writer, handler forks, the child $f->[0]",
            { code => qq{require POSIX; \$h{x} = $A64; \$SIG{ALRM} = sub { $f->[1] }; }
                    . $call->(q{my $w = FastFile::Writer->new($T, { buffer_size => 4096 }); $w->print($h{x}); $w->commit}),
              inject => ['write:error=EINTR:signal=ALRM:when=1'], paths => ['%TMP'] },
            'new', 'A' x 65536, $f->[0]];
    }

    # Item 5: a dying handler leaks no fd (and no memory: the if_changed
    # buffer of 1 MiB is freed, RSS is compared over 20 calls).
    my $DIE = q{ die "timeout\n" };
    push @cases, ['fsync: directory fsync interrupted, handler dies',
        { code => qq{require POSIX; \$SIG{ALRM} = sub { $DIE }; } . $call->(q{file_set_contents($T, 'new', { fsync => 1 })}),
          inject => ['fsync:error=EINTR:signal=ALRM:when=1'], paths => ['%DIR'] },
        'dies-after-rename', 'new'];
    push @cases, ['if_changed: compare read interrupted, handler dies',
        { code => qq{require POSIX; \$SIG{ALRM} = sub { $DIE }; } . $call->(q{file_set_contents($T, "OLD CONTENTS\n", { if_changed => 1 })}),
          inject => ['read:error=EINTR:signal=ALRM:when=1'], paths => ['%T'] },
        'old'];
    push @cases, ['mkdir: nested mkdir interrupted, handler dies',
        { code => qq{require POSIX; \$SIG{ALRM} = sub { $DIE }; } . $call->(q{file_set_contents("$T.d/a/b/f", 'new', { mkdir => 1 })}),
          inject => ['mkdir:error=EINTR:signal=ALRM:when=2'], paths => ['%T.d/a/b', '%T.d/a', '%T.d'] },
        'old'];
    # VmData: the leaked buffers' pages are never touched (the read was
    # refused), so RSS would not show them
    my $VMDATA = q{my $vm = sub { open my $s, '<', '/proc/self/status' or die; my ($k) = map { /^VmData:\s+(\d+)/ ? $1 : () } <$s>; $k };};
    # (strace's log of these runs is not kept: thousands of lines, the
    # paths 3 KiB long. The handler counts its runs: one per call, each
    # interrupted, or the case fails; "$T.ran" says it ran.)
    my $RUNS = q{my $runs = 0; my $runs_are = sub { open my $m, '>', "$T.ran" if $runs; die "the handler ran $runs times for $_[0] calls\n" if $runs != $_[0] };};
    push @cases, ['if_changed: 20 dying compares free their 1 MiB buffers',
        { code => $RUNS . qq{require POSIX; \$SIG{ALRM} = sub { \$runs++; $DIE }; } . $VMDATA
                . q{my $big = 'M' x (1 << 20); { open my $o, '>', $T or die; print $o 'N' x (1 << 20); close $o }}
                . q{eval { file_set_contents($T, $big, { if_changed => 1 }) }; my $m0 = $vm->();}
                . q{eval { file_set_contents($T, $big, { if_changed => 1 }) } for 1 .. 20;}
                . $call->(q{$runs_are->(21); my $g = $vm->() - $m0; die "VmData grew $g KiB\n" if $g > 8192}),
          inject => ['read:error=EINTR:signal=ALRM'], paths => ['%T'], quiet => 1 },
        'memory'];
    push @cases, ['mkdir: 2000 dying calls free their directory strings',
        { code => $RUNS . qq{require POSIX; \$SIG{ALRM} = sub { \$runs++; $DIE }; } . $VMDATA
                . q{my $deep = join '/', "$T.d", ('d' x 200) x 15; }
                . q{eval { file_set_contents("$deep/f", 'x', { mkdir => 1 }) } for 1 .. 10; my $m0 = $vm->();}
                . q{eval { file_set_contents("$deep/f", 'x', { mkdir => 1 }) } for 1 .. 2000;}
                . $call->(q{$runs_are->(2010); my $g = $vm->() - $m0; die "VmData grew $g KiB\n" if $g > 2048}),
          inject => ['mkdir:error=EINTR:signal=ALRM'], paths => ['%T.d/' . join('/', ('d' x 200) x 15)], quiet => 1 },
        'memory'];

    # Item 6: noclobber's link fallback, unlink of the temp fails.
    push @cases, ['noclobber link fallback: unlink of the temp fails',
        { code => q{require POSIX; unlink $T;} . $call->(q{file_set_contents($T, 'new', { noclobber => 1 })}),
          inject => ['renameat2:error=EINVAL', 'unlinkat:error=EIO:when=1'], paths => ['%TMP'] },
        'noclobber'];

    # Item 8: a FIFO swapped in between if_changed's lstat and open.
    push @cases, ['if_changed: a FIFO swapped in before the compare open',
        { code => q{require POSIX; $SIG{USR1} = sub { unlink $T or die; POSIX::mkfifo($T, 0644) or die "mkfifo: $!" };}
                . q{$SIG{ALRM} = sub { die "hung in open\n" }; alarm 10;}
                . $call->(q{file_set_contents($T, "NEW CONTENTS\n", { if_changed => 1 }); alarm 0}),
          inject => ['openat:error=EINTR:signal=USR1:when=1'], paths => ['%T'] },
        'new', "NEW CONTENTS\n"];

    # The generic check at each signal point: a handler that frees the data,
    # modifies it, forks (child exits / returns) or dies.
    my %ACT = (
        free         => $FREE,
        modify       => q{ $h{x} = 'B' x 10; },
        'fork-exit'  => $FORK_EXIT,
        'fork-return'=> $FORK_RET,
        die          => $DIE,
    );
    my %POINT = (
        'write'            => ['file_set_contents($T, $h{x})', 'write', '%TMP'],
        'open'             => ['file_set_contents($T, $h{x})', 'openat', '%TMP'],
        'rename'           => ['file_set_contents($T, $h{x})', 'rename', '%TMP'],
        'fdatasync'        => ['file_set_contents($T, $h{x}, { fsync => 1 })', 'fdatasync', '%TMP'],
        'directory fsync'  => ['file_set_contents($T, $h{x}, { fsync => 1 })', 'fsync', '%DIR'],
        'if_changed read'  => ['file_set_contents($T, $h{x}, { if_changed => 1 })', 'read', '%T'],
        'preserve fchown'  => ['file_set_contents($T, $h{x}, { preserve => 1 })', 'fchown', '%TMP'],
        'writer write'     => ['my $w = FastFile::Writer->new($T, { buffer_size => 4096 }); $w->print($h{x}); $w->commit',
                               'write', '%TMP'],
        'writer rename'    => ['my $w = FastFile::Writer->new($T); $w->print($h{x}); $w->commit', 'rename', '%TMP'],
        # a signal delivered at close (which succeeds) is handled before the rename
        'before rename'    => ['file_set_contents($T, $h{x})', 'close:signal=ALRM:when=1', '%TMP'],
        'writer before rename' => ['my $w = FastFile::Writer->new($T); $w->print($h{x}); $w->commit',
                                   'close:signal=ALRM:when=1', '%TMP'],
    );
    for my $p (sort keys %POINT) {
        my ($code, $sc, $path) = @{ $POINT{$p} };
        for my $a (sort keys %ACT) {
            # if_changed compares only a file of the same size
            my $data = $p eq 'if_changed read' ? q{'N'; $h{x} x= } . length($OLD) : $A64;
            push @cases, ["generic: $p interrupted, handler does $a",
                { code => qq{require POSIX; \$h{x} = $data; \$SIG{ALRM} = sub { { open my \$m, '>', "\$T.ran" } $ACT{$a} }; }
                        . $call->($code),
                  inject => [$sc =~ /:/ ? $sc : "$sc:error=EINTR:signal=ALRM:when=1"], paths => [$path] },
                'generic', ($p eq 'if_changed read' ? 'N' x length($OLD) : 'A' x 65536), $a];
        }
    }

    # Run them: one traced perl for all the cases with the same faults, a
    # forked child of it per case (a perl start under strace costs ten
    # forks; strace's when= counts start afresh in each new process, and -P
    # names every case's paths, so each case gets its own fault and is
    # alone in its directory). The groups run two at a time.
    my (%group, @order);
    for my $i (0 .. $#cases) {
        my $c = $cases[$i];
        my $d = fresh_dir();
        my $t = "$d/f";
        spew($t, $OLD) unless $c->[2] eq 'noclobber';
        my $s = $c->[1];
        my @paths = map { my $x = $_; $x =~ s/%TMP/$t.tmp.$PID/; $x =~ s/%DIR/$d/; $x =~ s/%T/$t/; $x } @{ $s->{paths} };
        my $key = join "\0", ($s->{quiet} ? 'quiet' : ()), @{ $s->{inject} };
        push @order, $key unless $group{$key};
        my $g = $group{$key} //= { inject => $s->{inject}, quiet => $s->{quiet}, paths => [], cases => [], index => [] };
        push @{ $g->{paths} }, @paths;
        push @{ $g->{cases} }, { code => $FDS . $s->{code}, target => $t, result => "$d.result" };
        push @{ $g->{index} }, $i;
        $#$c = 4;
        push @$c, $d, $t;
    }
    # The result file: the child's real pid, then in hex whether the code
    # compiled and ran, what it returned (or why not) and its warnings (its
    # own handler collects them: the traced perl is strace_call's attach
    # worker, t/lib/FFTracee.pm, whose handler is not this package's).
    my $RUN_EACH = q{
        for my $c (@$D) {
            my $pid = fork // die "fork: $!";
            if (!$pid) {
                my $real = POSIX::getpid();
                $$ = $PID;
                $T = $c->{target};
                @__warnings = ();
                local $SIG{__WARN__} = sub { push @__warnings, $_[0] };
                my $ret = eval $c->{code};
                my $ran = defined $ret ? 1 : 0;
                $ret = "code died: $@" unless $ran;
                local ($\, $,);    # the code may have set them
                open my $fh, '>', $c->{result} or POSIX::_exit(2);
                print {$fh} join ' ', $real, $ran, map { unpack 'H*', $_ } $ret, @__warnings;
                close $fh or POSIX::_exit(2);
                POSIX::_exit(0);
            }
            waitpid $pid, 0;
        }
        scalar @$D;
    };
    my @specs = map {
        my $g = $group{$_};
        { code => $RUN_EACH, setup => "use POSIX (); our \@__warnings; my \$PID = $PID;", data => $g->{cases},
          inject => $g->{inject}, paths => $g->{paths}, trace => 'injected', timeout => 300, attach => 1,
          ($g->{quiet} ? (log => '/dev/null') : ()) }
    } @order;
    my $group_res = strace_calls(\@specs, jobs => 2);
    my @res;
    for my $k (0 .. $#order) {
        my ($g, $gr) = ($group{ $order[$k] }, $group_res->[$k]);
        ok($gr->{ok}, "traced perl " . ($k + 1) . " of " . @order . ": ran its " . @{ $g->{cases} } . " cases")
            or diag($gr->{err});
        my %injected;
        $injected{$_}++ for $gr->{log} =~ /^(\d+) .*\(INJECTED\)/mg;
        for my $j (0 .. $#{ $g->{cases} }) {
            my $text = slurp($g->{cases}[$j]{result});
            my %r = (ok => 0, err => "no result; the traced perl: " . ($gr->{err} // '') . ($gr->{output} // ''),
                     output => '', warnings => [], injected => 0, log => $gr->{log});
            if (defined $text) {
                my ($pid, $ran, $ret, @w) = split / /, $text, -1;
                $_ = pack 'H*', $_ for $ret, @w;
                %r = (%r, ok => $ran, err => $ret, ret => ($ran ? $ret : undef), warnings => \@w,
                      injected => $injected{$pid} // 0);
            }
            $res[ $g->{index}[$j] ] = \%r;
        }
    }

    for my $i (0 .. $#cases) {
        my ($name, $spec, $expect, $new, $extra, $d, $t) = @{ $cases[$i] };
        my $r = $res[$i];
        subtest $name => sub {
            ok($r->{ok}, 'child ran the code') or diag($r->{err} // $r->{output});
            # (a signal alone is logged "(INJECTED: signal)", which injected does not count)
            # (strace does not log a signal alone: the handler leaves "$t.ran")
            ok($r->{injected} >= 1 || -e "$t.ran", 'the fault was injected') or diag($r->{log});
            my ($n0, $n1, $how) = ($r->{ret} // '') =~ /\A(-?\d+) (-?\d+) (.*)\z/s
                or return fail("result: " . ($r->{ret} // $r->{output}));
            is($n1, $n0, 'no fd leaked');
            is_deeply($r->{warnings}, [], 'no warning in the child');
            my $ok = $how eq 'ok';
            (my $err = $how) =~ s/\Adied: //;
            $err =~ s/\n\z//;
            if ($expect eq 'new') {
                is($how, 'ok', 'succeeds');
                ok(!-p $t, 'not a FIFO') or return;
                my $got = slurp($t);
                ok(defined $got && $got eq $new, 'the complete new content')
                    or diag(defined $got ? 'got ' . length($got) . ' bytes, starting ' . substr($got, 0, 16)
                                         : 'no file');
                is_deeply([ temps_in($d) ], [], 'no temp file left');
                if (($extra // '') eq 'returns') {
                    like(slurp("$t.child") // '', qr/^FastFile: a process forked by a signal handler may not go on/,
                         "the forked child's write died");
                }
            } elsif ($expect eq 'old') {
                isnt($how, 'ok', 'dies');
                is(slurp($t), $OLD, 'old content kept');
                is_deeply([ temps_in($d) ], [], 'no temp file left');
            } elsif ($expect eq 'dies-after-rename') {
                is($err, 'timeout', 'dies');
                is(slurp($t), $new, 'the rename was done before');
                is_deeply([ temps_in($d) ], [], 'no temp file left');
            } elsif ($expect eq 'memory') {
                SKIP: {    # make asan: freed memory is quarantined, VmData grows anyway
                    skip 'AddressSanitizer keeps freed memory', 1 if $ENV{FASTFILE_SANITIZED};
                    is($how, 'ok', 'memory did not grow by leaked buffers') or diag($err);
                }
            } elsif ($expect eq 'noclobber') {
                is($err, "close (rename) atomic file '$t' failed: " . errno_text(Errno::EIO()), 'the unlink failure is reported');
                ok(!-e $t, 'no target: the link was undone');
                is_deeply([ temps_in($d) ], [], 'no temp file left');
            } elsif ($expect eq 'generic') {
                ok(-e "$t.ran", 'the handler ran');
                outcome_ok('outcome', $d, $t, $ok, $err, $new, $name =~ /directory fsync/);
                ok($ok, 'succeeds') if $extra =~ /^(?:free|fork-exit|fork-return)$/;
                if ($extra eq 'fork-return') {
                    like(slurp("$t.child") // '', qr/^FastFile: a process forked by a signal handler may not go on/,
                         "the forked child's write died");
                }
            }
        };
    }
}

# The readers: a handler forks during a read and the child returns into it.
# The fd's offset is shared with the parent: a child that went on reading
# would take the parent's data (the parent then returned a short or empty
# file). The child dies at once instead; the parent reads it all.
SKIP: {
    my $why = strace_why();
    skip $why, 1 if $why;
    my $d = fresh_dir();
    my $content = join '', map { "line $_\n" } 1 .. 8000;
    spew("$d/f", $content);
    my %reader = (file_get_contents   => 'my $r = file_get_contents($ARGV[0]); length $r',
                  file_read_firstline => 'local $/; my $r = file_read_firstline($ARGV[0]); length $r');
    for my $name (sort keys %reader) {
        unlink "$d/f.child";
        my $r = strace_call('my $parent = $$; local $SIG{ALRM} = sub { return if $$ != $parent; my $p = fork; waitpid $p, 0 if $p };'
                            . " my \$n = eval { $reader{$name} };"
                            . ' if ($$ != $parent) { open my $c, ">", "$ARGV[0].child" or die; print {$c} $@; close $c; POSIX::_exit(0) }'
                            . ' die $@ unless defined $n; $n',
                            attach => 1, setup => 'use POSIX ();', args => ["$d/f"], paths => ["$d/f"],
                            inject => ['read:error=EINTR:signal=ALRM:when=1']);
        is($r->{ret}, length $content, "$name, a handler forks and the child returns: the parent reads it all")
            or diag $r->{err};
        like(slurp("$d/f.child") // '', qr/\AFastFile: a process forked by a signal handler may not go on with the read of process \d+\n\z/,
             "$name: the child died before reading");
    }
}

done_testing;

# Overloaded data whose stringification runs a hook.
package UC::Str;
our $HOOK;
use overload '""' => sub { $HOOK->() if $HOOK; 'stringified' }, fallback => 1;
sub new { bless {}, $_[0] }

# A tied scalar whose FETCH runs a hook.
package UC::Tied;
our $HOOK;
sub TIESCALAR { bless {}, $_[0] }
sub FETCH { $HOOK->() if $HOOK; 'fetched' }
sub STORE { }
