#!perl
# Readers against a writer that replaces the file (temp + rename, as
# file_set_contents does): a file of that name exists at every moment, so no
# read may fail and none may return a mix of two versions. On pmxcfs the
# open, or a read of the open file, fails with ENOENT in the race; on
# t/fusefs' default mount (hard_remove) with ESTALE: the readers retry those,
# bounded, and start over with the new file. A missing file still fails at
# once: one open, one lookup (statx), the reference's text and $!.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }
use POSIX qw(setlocale LC_ALL);
BEGIN { setlocale(LC_ALL, 'C') }

use Errno qw(ENOENT ESTALE EIO);
use File::Temp ();
use Test::More;
use Time::HiRes ();
use lib 't/lib';
use FFTest qw(tempdir full_testing strace_why strace_call io_calls);
use FastFS;
use ReplaceRace;
use FastFile qw(file_set_contents file_get_contents file_read_firstline
                file_read_last_line file_copy);

local $SIG{ALRM} = sub { die "t/79-read-while-replaced.t: watchdog: took more than 120 s\n" };
alarm 120;

my $local = tempdir();          # ext4 here (the root fs), where copies go

# name => sub (file): what it read, or dies; undef for "no such file"
my %READ = (
    file_get_contents   => sub { file_get_contents($_[0]) },
    file_read_firstline => sub { file_read_firstline($_[0]) },
    file_read_last_line => sub { file_read_last_line($_[0]) },
    file_copy           => sub { file_copy($_[0], "$local/copy") && FFTest::slurp("$local/copy") },
);
my @READERS = sort keys %READ;
# what each returns of "hello\nworld\n"
my %EXPECT = (file_get_contents => "hello\nworld\n", file_read_firstline => 'hello',
              file_read_last_line => 'world', file_copy => "hello\nworld\n");

# --- a missing file fails at once, as the reference's does
{
    my $missing = "$local/no-such-file";
    for my $name (@READERS) {
        my $t0 = Time::HiRes::time();
        my $got = eval { $READ{$name}->($missing) };
        my ($err, $errno) = ($@, $! + 0);
        my $ms = 1000 * (Time::HiRes::time() - $t0);
        if ($name =~ /first|last/) {
            ok(!defined $got && !$err, "missing file: $name returns undef");
        } else {
            is($err, "can't open '$missing' - No such file or directory\n", "missing file: ${name}'s text");
        }
        is($errno, ENOENT, "missing file: $name leaves \$! ENOENT");
        cmp_ok($ms, '<', 50, "missing file: $name fails at once (${\ sprintf '%.1f', $ms} ms)");
    }
}

SKIP: {
    my $why = strace_why();
    skip "strace: $why", 2 * @READERS if $why;
    my $missing = "$local/no-such-file";
    for my $name (@READERS) {
        my $call = $name eq 'file_copy' ? "file_copy(\$T, '$local/copy')" : "$name(\$T)";
        my $r = strace_call("eval { $call }; die \$@ if \$@ && \$@ !~ /No such file/", attach => 1,
                            target => $missing);
        ok($r->{traced}, "missing file, traced: $name") or diag($r->{err}, $r->{stderr});
        my @names = map { $_->{name} } io_calls($r);
        like("@names", qr/\A(?:getpid )?openat (?:statx|newfstatat)\z/,
             "missing file: $name makes one open and one lookup, no pause")
            or diag(join '', map { "  $_->{line}\n" } @{ $r->{calls} });
    }
}

# --- on FUSE: the failures a replace causes, made by fastfs' rules, retried
my $fuse_why = FastFS::available();
# the lookup that tells a missing name from a replaced file after an open's
# ENOENT: statx from the kernel's cache, or (builds without it) fstatat
my $STATX = FastFile::_build_info()->{statx};
my $LOOKUP = $STATX ? 'statx' : 'newfstatat';
SKIP: {
    skip "fastfs: $fuse_why", 1 if $fuse_why;
    # pmxcfs' mode: every open direct_io, so a READ's error reaches the reader
    # (through the page cache the kernel retries a failed READ itself)
    my $fs = FastFS->mount(pmxcfs => 1);
    my $f = $fs->dir . '/f';
    file_set_contents($f, "hello\nworld\n");
    my @cases = (
        # rule, errno to fail with ('' = the read succeeds), what the case is
        [ 'failn 1 open 2 /f',   '', 'an OPEN answered ENOENT (pmxcfs in the race)' ],
        [ 'failn 2 open 116 /f', '', 'two OPENs answered ESTALE (the kernel retries the first)' ],
        [ 'failn 1 read 2 /f',   '', 'a READ answered ENOENT' ],
        [ 'failn 1 read 116 /f', '', 'a READ answered ESTALE' ],
        [ 'fail open 2 /f',      ENOENT, 'every OPEN ENOENT: bounded' ],
        [ 'fail open 116 /f',    ESTALE, 'every OPEN ESTALE: bounded' ],
        [ 'fail read 2 /f',      ENOENT, 'every READ ENOENT: bounded' ],
        [ 'failn 1 read 5 /f',   EIO,    'EIO: not retried' ],
    );
    for my $case (@cases) {
        my ($rule, $fails, $what) = @$case;
        for my $name (@READERS) {
            $fs->clear;
            $fs->reset;
            $fs->control($rule);
            my $t0 = Time::HiRes::time();
            my $got = eval { $READ{$name}->($f) };
            my ($err, $errno) = ($@, $! + 0);
            my $ms = 1000 * (Time::HiRes::time() - $t0);
            my $c = $fs->counters;
            $fs->clear;
            if (!$fails) {
                is($got, $EXPECT{$name}, "$what: $name reads the file") or diag($err);
                next;
            }
            ok(!defined $got, "$what: $name fails");
            if ($err) {
                like($err, qr/ - \Q${\ FFTest::errno_text($fails)}\E/, "$what: $name says why");
            } else {
                is($errno, $fails, "$what: $name: undef, \$! says why");
            }
            if ($fails == EIO) {
                is($c->{open_requests}, 1, "$what: $name opened once");
            } else {
                # 1 + 10 retries (the kernel itself sends an ESTALE'd OPEN twice)
                my $opens = $fails == ESTALE ? 22 : 11;
                is($c->{open_requests}, $opens, "$what: $name tried 1 + 10 times");
                cmp_ok($ms, '<', 1000, "$what: $name gave up soon (${\ sprintf '%.1f', $ms} ms)");
            }
        }
    }
    # A source of 124 KiB or more on FUSE, and any with if_changed or utf8,
    # is read whole into a string (read_to_end): a READ that a replace
    # failed is retried there too, as the other readers retry it
    {
        my $big = ("0123456789abcde\n" x (200 * 64));
        file_set_contents($f, $big);
        for my $rule ('failn 1 read 2 /f', 'failn 1 read 116 /f') {
            for my $opts (undef, { if_changed => 1 }, { utf8 => 1 }) {
                for my $src ([ '200 KiB' => $big ], [ '12 bytes' => "hello\nworld\n" ]) {
                    next if !$opts && $src->[0] ne '200 KiB';   # (a small one streams: above)
                    file_set_contents($f, $src->[1]);
                    unlink "$local/copy";
                    $fs->clear;
                    $fs->control($rule);
                    my $ok = eval { file_copy($f, "$local/copy", 1 << 20, $opts); 1 };
                    my $err = $@;
                    $fs->clear;
                    my $what = "$src->[0], $rule, file_copy" . ($opts ? ' ' . join(',', keys %$opts) : '');
                    ok($ok && FFTest::slurp("$local/copy") eq $src->[1], "$what: retried, copied")
                        or diag($err);
                }
            }
        }
        file_set_contents($f, "hello\nworld\n");
    }

    # A signal that comes during a retried request (a FUSE request is not
    # interrupted: the handler waits): its handler runs in the call, and a
    # die of it is the caller's eval's, as where the reference's sysread
    # returns. Left pending until the retries gave up, it ran after the
    # croak, and its die escaped the eval around the reader.
    SKIP: {
        my $why = strace_why();
        skip "strace: $why", scalar @READERS if $why;
        $fs->clear;
        $fs->control('fail open 2 /f');
        for my $name (@READERS) {
            my $call = $name eq 'file_copy' ? "file_copy(\$T, '$local/copy')" : "$name(\$T)";
            my $r = strace_call("local \$SIG{ALRM} = sub { die qq(alarm\\n) };"
                                . " my \$in = eval { $call; 'returned' }; \$in // \$@",
                                attach => 1, target => $f, paths => [$f], trace => [$LOOKUP],
                                inject => ["$LOOKUP:signal=ALRM:when=1"]);
            is($r->{ok} && $r->{ret}, "alarm\n",
               "a signal during a retried OPEN: its handler's die is the eval's around $name")
                or diag($r->{err}, $r->{stderr});
        }
        $fs->clear;

        # An EINTR with a signal on every pause (strace injects them): a
        # signal ends a pause, its handler runs, the retries go on and end
        # (the pause waited for the time left: forever)
        $fs->control('fail open 2 /f');
        my $r = eval {
            strace_call("my \$n = 0; local \$SIG{USR1} = sub { \$n++ };"
                        . " eval { file_get_contents(\$T) }; \$@ =~ /No such file/ ? \$n : \$@",
                        target => $f, trace => ['nanosleep', 'clock_nanosleep'], timeout => 10,
                        inject => ['nanosleep,clock_nanosleep:error=EINTR:signal=USR1'])
        };
        is($r && $r->{ok} && $r->{ret}, 9,
           'EINTR and a signal on every pause: its handler ran once a pause, the retries ended')
            or diag($@, $r && ($r->{err}, $r->{stderr}));
        $fs->clear;

        # A relative name, and a handler that chdirs while the OPEN is
        # retried (two OPENs fail: it runs before the second retry): the
        # retries end (the reference's one open fails so),
        # never a file of the same name in the other directory
        my $other = File::Temp::tempdir('ff79-XXXXXX', TMPDIR => 1, CLEANUP => 1);
        FFTest::spew("$other/f", "the other directory's\n");
        $fs->control('failn 2 open 2 /f');
        for my $name (@READERS) {
            my $call = $name eq 'file_copy'
                       ? "file_copy('f', '$local/copy') && do { open my \$h, '<', '$local/copy'; local \$/; <\$h> }"
                       : "$name('f')";
            my $dir = $fs->dir;
            my $r = strace_call("chdir '$dir' or die; local \$SIG{USR1} = sub { chdir '$other' };"
                                . " my \$got = eval { $call }; my \$e = \$@; chdir '/';"
                                . " \$e ? \$e : \$got // 'undef'", attach => 1, trace => ['statx'],
                                inject => ['statx:signal=USR1:when=1']);
            unlike($r->{ok} ? $r->{ret} : $r->{err}, qr/other directory/,
                   "a handler that chdirs while $name retries a relative name: not the other directory's file")
                or diag($r->{stderr});
            $fs->clear;
            $fs->control('failn 2 open 2 /f');
        }
        $fs->clear;
    }
    $fs->unmount;
}

# --- a writer replacing the file in a loop against every reader
my $secs = full_testing() ? 3 : 0.3;
my @places;
# (without statx the lookup asks the server, which answers ENOENT in the
# race too: pmxcfs' ENOENT from open is not retried there, as the POD says)
push @places, [ 'fastfs in pmxcfs mode (ENOENT)', pmxcfs => 1 ] unless $fuse_why || !$STATX;
push @places, [ 'fastfs (ESTALE)' ] unless $fuse_why;
my $shm = -d '/dev/shm' && -w _ ? File::Temp::tempdir('fftest-XXXXXX', DIR => '/dev/shm', CLEANUP => 1)
                                : undef;
push @places, [ 'tmpfs', dir => $shm ] if $shm && `stat -f -c %T $shm 2>/dev/null` =~ /tmpfs/;
push @places, [ 'the root fs', dir => $local ];
for my $place (@places) {
    my ($where, %o) = @$place;
    my $fs = $o{dir} ? undef : FastFS->mount(%o);
    my $dir = $o{dir} // $fs->dir;
    # the long run also shows the race is there: the reference's readers
    # alone against the writer fail on FUSE (in pmxcfs mode 1-3% of reads)
    if (full_testing() && $fs) {
        my @ref = qw(ref_get_contents ref_last_line);
        my $r = ReplaceRace::run(file => "$dir/race", copy_dir => $local, seconds => 1, readers => \@ref);
        my ($failed, $reads) = (0, 0);
        $failed += $r->{$_}{failed} for @ref;
        $reads += $r->{$_}{reads} for @ref;
        cmp_ok($failed, '>', 0, "$where: the reference's readers failed $failed of $reads times");
    }
    my $r = ReplaceRace::run(file => "$dir/race", copy_dir => $local, seconds => $secs,
                             readers => [ ReplaceRace::readers() ]);
    cmp_ok($r->{writes}, '>', 0, "$where: the writer replaced the file ($r->{writes} times)");
    for my $name (ReplaceRace::readers()) {
        my $x = $r->{$name};
        cmp_ok($x->{reads}, '>', 0, "$where: $name read ($x->{reads} times)");
        is($x->{failed}, 0, "$where: $name never failed")
            or diag(join "\n", map { "  $_: $x->{errors}{$_}" } sort keys %{ $x->{errors} });
        is($x->{torn}, 0, "$where: $name always got one whole version");
    }
    unlink "$dir/race";
    $fs->unmount if $fs;
}

alarm 0;
done_testing;
