#!perl
# Reads that another cluster node's change cannot tear (issue 41). pmxcfs
# answers each FUSE READ request by path from one version of the file, and
# applies another node's change to its database between two requests of a
# read in progress. t/fusefs does the same with "swap" (no kernel request
# involved): after the n-th READ request on the file, it holds the next
# version. Every reader, at every request boundary, 1 KiB to 1 MiB, the new
# version of the same size, half or twice it: the result is all of one
# version (what the reader gives for it on a local file), never a mix, never
# another length. And the requests one undisturbed read costs: one up to
# 127 KiB (a page-aligned buffer, no read of 0 after a short read at
# fstat's size). The mount uses direct_io: pmxcfs has no page cache.
use strict;
use warnings;
use Test::More;
use POSIX ();
use lib 't/lib';
use FFTest qw(slurp spew tempdir);
use FastFS;
use FastFile qw(file_set_contents file_get_contents file_read_firstline file_read_last_line
                safe_read_from file_copy);

local $SIG{ALRM} = sub { die "t/78-fuse-torn-reads.t: watchdog: took more than 60 s\n" };
alarm 60;

my $why = FastFS::available();
plan skip_all => "fastfs: $why" if $why;
plan skip_all => 'the portable build cannot tell FUSE (no fstatfs f_type)'
    if FastFile::_build_info()->{portable};

my $KIB = 1024;
my $fs = FastFS->mount(direct_io => 1);
my $mnt = $fs->dir;
my $local = tempdir();

# config-like bytes, every line saying which version it is of
sub version_of {
    my ($size, $v) = @_;
    my $s = '';
    $s .= sprintf "v%d key%07d: value\n", $v, length $s while length $s < $size;
    return substr($s, 0, $size - 1) . "\n";
}

# Each reader: what it returns for the file at $path (a string; the
# error's text when it died).
my %READER = (
    file_get_contents   => sub { file_get_contents($_[0]) },
    file_read_firstline => sub { file_read_firstline($_[0]) },
    file_read_last_line => sub { file_read_last_line($_[0]) },
    safe_read_from      => sub {
        open my $fh, '<', $_[0] or die "open $_[0]: $!\n";
        return safe_read_from($fh, 0, 0, $_[0]);
    },
    file_copy           => sub {
        file_copy($_[0], "$local/copy");
        return slurp("$local/copy");
    },
);
my @READERS = sort keys %READER;

sub run_reader {
    my ($name, $path) = @_;
    my $got = eval { $READER{$name}->($path) };
    return defined $got ? $got : "died: $@";
}

# What the reader gives for these bytes on a local file.
sub local_result {
    my ($name, $bytes) = @_;
    spew("$local/f", $bytes);
    return run_reader($name, "$local/f");
}

# READ requests of one undisturbed read of $bytes on the mount.
sub requests_of {
    my ($name, $bytes) = @_;
    file_set_contents("$mnt/f", $bytes);
    $fs->reset;
    my $got = run_reader($name, "$mnt/f");
    die "$name: wrong result undisturbed\n" unless $got eq local_result($name, $bytes);
    return $fs->counters->{read_requests};
}

# requests per read, at each size (1 for 127 KiB: the README's table)
my %want_one = map { $_ => 1 } 1, 8, 64, 127;
for my $kib (1, 8, 64, 127, 128, 200, 1024) {
    my $bytes = version_of($kib * $KIB, 1);
    my @n = map { requests_of($_, $bytes) } @READERS;
    note(sprintf "%5d KiB: %s", $kib, join ', ', map { "$READERS[$_] $n[$_]" } 0 .. $#READERS);
    if ($want_one{$kib}) {
        is("@n", join(' ', (1) x @READERS), "$kib KiB: one READ request for every reader");
    }
}
is(requests_of('file_get_contents', version_of(1024 * $KIB, 1)), 18,
   '1 MiB, file_get_contents: 9 requests (8 of 128 KiB, one at the end), checked by 9 more (124 KiB pieces)');

# Every reader, every request boundary: after the n-th request of its read
# the file holds the new version. n runs until a swap no longer happens
# (the read made fewer requests than n).
my ($cases, $swapped) = (0, 0);
for my $kib (1, 100, 127, 128, 200, 1024) {
    my $old = version_of($kib * $KIB, 1);
    for my $new_kib ($kib, int($kib / 2) || 1, $kib * 2 > 1024 ? 512 : $kib * 2) {
        my $new = version_of($new_kib * $KIB, 2);
        # both versions on the mount once: each case starts from /old,
        # put in place by the filesystem itself (a swap at once)
        file_set_contents("$mnt/$_->[0]", $_->[1]) for [ old => $old ], [ next => $new ], [ f => $old ];
        for my $name (@READERS) {
            my %whole = map { local_result($name, $_) => 1 } $old, $new;
            my @bad;
            for (my $n = 1; ; $n++) {
                $fs->swap('/f', 0, '/old');
                $fs->swap('/f', $n, '/next');
                my $got = run_reader($name, "$mnt/f");
                my $c = $fs->counters;
                $fs->unswap;
                $cases++;
                push @bad, "after request $n: " . (length $got) . " bytes"
                    . ($got =~ /\Adied/ ? " ($got)" : '') unless $whole{$got};
                last if $c->{swap_pending};     # the read ended before request $n
                $swapped++;
                last if $n > 64;    # (a read that never ends: reported below)
            }
            ok(!@bad, "$kib KiB -> $new_kib KiB, $name: all of one version at every request boundary")
                or diag(join "\n", @bad);
        }
    }
}
note("$cases reads, $swapped with a swap during the read");

# file_read_firstline of a first line longer than its 8 KiB block: reads
# of 8, 16, 32 KiB ... at every request boundary, one version's line
for my $kib (20, 200, 1024) {
    my ($old, $new) = map { (version_of($kib * $KIB, $_) =~ tr/\n/ /r) . "\nrest\n" } 1, 2;
    file_set_contents("$mnt/$_->[0]", $_->[1]) for [ old => $old ], [ next => $new ], [ f => $old ];
    my %whole = map { local_result('file_read_firstline', $_) => 1 } $old, $new;
    my @bad;
    for (my $n = 1; $n <= 64; $n++) {
        $fs->swap('/f', 0, '/old');
        $fs->swap('/f', $n, '/next');
        my $got = run_reader('file_read_firstline', "$mnt/f");
        my $c = $fs->counters;
        $fs->unswap;
        push @bad, "after request $n: " . length($got) . " bytes" unless $whole{$got};
        last if $c->{swap_pending};
    }
    ok(!@bad, "$kib KiB first line, file_read_firstline: one version's line at every request boundary")
        or diag(join "\n", @bad);
}

# file_read_firstline with another $/ (slurp mode, a separator of its
# own): the record of more than one read is checked the same way
for my $rs (undef, "END\n") {
    my ($old, $new) = map { my $v = version_of(200 * $KIB, $_); substr($v, 150 * $KIB, 0, "END\n"); $v } 1, 2;
    file_set_contents("$mnt/$_->[0]", $_->[1]) for [ old => $old ], [ next => $new ], [ f => $old ];
    my %whole = map { my $b = $_; my $r = do { local $/ = $rs; spew("$local/f", $b); file_read_firstline("$local/f") };
                      $r => 1 } $old, $new;
    my @bad;
    for (my $n = 1; $n <= 8; $n++) {
        $fs->swap('/f', 0, '/old');
        $fs->swap('/f', $n, '/next');
        my $got = do { local $/ = $rs; eval { file_read_firstline("$mnt/f") } // "died: $@" };
        my $c = $fs->counters;
        $fs->unswap;
        push @bad, "after request $n: " . length($got) . " bytes" unless $whole{$got};
        last if $c->{swap_pending};
    }
    ok(!@bad, 'file_read_firstline, $/ ' . (defined $rs ? '"END\\n"' : 'undef')
       . ': one version\'s record at every request boundary') or diag(join "\n", @bad);
}

# if_changed's comparison of the target: a torn read that happens to equal
# the data must not leave the file as it is when it holds something else.
# The new version differs from the old in its first line and its last: a
# read torn anywhere between (whatever the buffer's offset in its page)
# gives the old first line and the new last one, which is the data.
for my $kib (200, 1024) {
    my $old = version_of($kib * $KIB, 1);
    my $new = $old;
    substr($new, 0, 2, 'V2');
    substr($new, -9, 2, 'V2');
    my $torn = $old;
    substr($torn, -9, 2, 'V2');
    file_set_contents("$mnt/old", $old);
    file_set_contents("$mnt/next", $new);
    file_set_contents("$mnt/f", $old);
    for (my $k = 1; $k * 128 < $kib; $k++) {
        $fs->swap('/f', 0, '/old');
        $fs->swap('/f', $k, '/next');
        my $wrote = file_set_contents("$mnt/f", $torn, { if_changed => 1 });
        $fs->unswap;
        ok(slurp("$mnt/f") eq $torn,
           "$kib KiB, if_changed, new version after request $k: the file holds the data"
           . " (wrote: $wrote)");
    }
}

# if_changed on an unchanged file of 127 KiB: one READ request
{
    my $bytes = version_of(127 * $KIB, 1);
    file_set_contents("$mnt/f", $bytes);
    $fs->reset;
    is(file_set_contents("$mnt/f", $bytes, { if_changed => 1 }), 0, 'if_changed, 127 KiB: unchanged');
    is($fs->counters->{read_requests}, 1, 'if_changed, 127 KiB: one READ request');
}

# A file that changes during every read (a new version after every 5th
# request: each read of 9 sees two): FF_TORN_TRIES reads (whole reads and
# the checks of them), then an error that says so, never a torn result
{
    my $old = version_of(1024 * $KIB, 1);
    my $new = version_of(1024 * $KIB, 2);
    file_set_contents("$mnt/f", $old);
    file_set_contents("$mnt/next", $new);
    $fs->reset;
    $fs->flip('/f', 5, '/next');
    my $got = eval { file_get_contents("$mnt/f") };
    my ($err, $errno) = ($@, $! + 0);
    my $c = $fs->counters;
    $fs->unswap;
    ok(!defined $got, 'changing during every read: no result');
    like($err, qr/\Aunable to read file '\Q$mnt\E\/f' - changed while read, 8 reads: /,
         'changing during every read: an error that says so');
    is($errno, POSIX::EAGAIN(), 'changing during every read: $! EAGAIN');
    # 4 whole reads of 9 requests, and 4 checks in 124 KiB pieces, each
    # stopping at its first piece that differs (with a new version every
    # 5 requests: deterministic)
    is($c->{read_requests}, 40, 'changing during every read: 4 reads of 9 requests, 4 checks cut short');
}

# the same for file_read_firstline of a long first line (more than one
# read): four reads and their checks, then the error
{
    my ($old, $new) = map { (version_of(1024 * $KIB, $_) =~ tr/\n/ /r) . "\n" } 1, 2;
    file_set_contents("$mnt/f", $old);
    file_set_contents("$mnt/next", $new);
    $fs->flip('/f', 5, '/next');
    my $got = eval { file_read_firstline("$mnt/f") };
    my ($err, $errno) = ($@, $! + 0);
    $fs->unswap;
    ok(!defined $got, 'file_read_firstline, changing during every read: no result');
    like($err, qr/\Aunable to read file '\Q$mnt\E\/f' - changed while read, 8 reads: /,
         'file_read_firstline, changing during every read: an error that says so');
    is($errno, POSIX::EAGAIN(), 'file_read_firstline, changing during every read: $! EAGAIN');
}

# A 124-128 KiB read on FUSE returns a string that starts on a page
# inside its buffer (OOK): the bytes before its start, which perl keeps
# and shows (Devel::Peek, a core dump), are none of a freed string's
{
    require Devel::Peek;
    file_set_contents("$mnt/f", version_of(126 * $KIB, 1));
    my $dump = '';
    for (1 .. 3) {
        for (1 .. 3) { my $s = 'SECRET' x 22_500; undef $s; }
        open my $saved, '>&', \*STDERR or die "dup STDERR: $!\n";
        open STDERR, '>', "$local/dump" or die "$local/dump: $!\n";
        Devel::Peek::Dump(file_get_contents("$mnt/f"));
        open STDERR, '>&', $saved or die "restore STDERR: $!\n";
        $dump .= slurp("$local/dump");
    }
    like($dump, qr/OFFSET = \d+/, '126 KiB on FUSE: an OOK string (start moved to a page)');
    ok($dump !~ /SECRET/, '126 KiB on FUSE: no bytes of a freed string before its start');
}

# A FIFO on FUSE is read once, as anywhere: what came in more than one
# read has one version (no second read to check it with: pread is ESPIPE)
{
    my $fifo = "$mnt/fifo";
    POSIX::mkfifo($fifo, 0600) or die "mkfifo $fifo: $!\n";
    for my $name (qw(file_get_contents file_read_firstline file_copy)) {
        my $pid = fork // die "fork: $!\n";
        if (!$pid) {
            open my $w, '>', $fifo or POSIX::_exit(1);
            syswrite $w, 'a' x 100;
            select undef, undef, undef, 0.05;       # two reads for the reader
            syswrite $w, ('b' x 100) . "\n";
            POSIX::_exit(0);
        }
        my $got = run_reader($name, $fifo);
        waitpid $pid, 0;
        is($got, local_result($name, ('a' x 100) . ('b' x 100) . "\n"),
           "$name of a FIFO on FUSE written in two pieces: what was written");
    }
    unlink $fifo;
}

# A version shorter than the size fstat gave (the kernel's cached
# attributes, as pmxcfs' 1 s cache keeps them), then another after the
# first READ request: the read comes back short of that size, and a read
# after it (not the end fstat gave) is answered by the next version. Every
# reader: one version whole, never the short one's start with the next
# one's rest. if_changed: the mix equal to the data must not pass for
# "unchanged".
{
    my $cfs = FastFS->mount(direct_io => 1, cache => 1);
    my $cmnt = $cfs->dir;
    # one line each: the last line of a mix is no version's last line.
    # Also a version longer than fstat's size, then a shorter one: the
    # read of fstat's size and a byte is full, and the read after it, which
    # finds the end, is the shorter one's (a prefix of the longer one)
    my $line = sub { ($_[0] x ($_[1] - 1)) . "\n" };
    # (file_read_last_line takes the end lseek gives, the kernel's cached
    # size, as the reference's sysseek does: of a longer version it reads
    # the bytes before that end)
    my $old;
    for my $case ([ 'shorter than' => 1000, $line->(b => 500), $line->(c => 800) ],
                  [ 'longer than' => 100_000, $line->(d => 120_000), $line->(e => 50_000) ]) {
        my ($what, $size, $first, $next) = @$case;
        $old = $line->(a => $size);
        file_set_contents("$cmnt/$_->[0]", $_->[1]) for [ first => $first ], [ next => $next ];
        for my $name (@READERS) {
            next if $what eq 'longer than' && $name eq 'file_read_last_line';
            my %whole = map { local_result($name, $_) => 1 } $old, $first, $next;
            file_set_contents("$cmnt/f", $old);
            -s "$cmnt/f";                           # cached: $size for the reader's fstat
            $cfs->swap('/f', 0, '/first');
            $cfs->swap('/f', 1, '/next');
            my $got = run_reader($name, "$cmnt/f");
            $cfs->unswap;
            ok($whole{$got}, "$name: $what fstat's $size bytes, then another version:"
               . ' one version whole') or diag(length($got) . " bytes: $got");
        }
    }
    my $short = $line->(b => 500);
    file_set_contents("$cmnt/short", $short);
    my $next_same_size = version_of(1000, 3);
    my $mix = substr($short, 0, 500) . substr($next_same_size, 500);
    file_set_contents("$cmnt/next", $next_same_size);
    file_set_contents("$cmnt/f", $old);
    -s "$cmnt/f";
    $cfs->swap('/f', 0, '/short');
    $cfs->swap('/f', 1, '/next');
    my $wrote = file_set_contents("$cmnt/f", $mix, { if_changed => 1 });
    $cfs->unswap;
    ok(slurp("$cmnt/f") eq $mix, "if_changed, a short version then another: the file holds the data"
       . " (wrote: $wrote)");
    ok($cfs->unmount, 'unmounted the mount with cached attributes');
}

ok($fs->unmount, 'unmounted');
done_testing;
