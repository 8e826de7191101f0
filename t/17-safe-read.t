use strict;
use warnings;

# safe_read_from against its model (t/lib/Reference.pm: the reference's
# 8 KiB sysreads), case by case, for every kind of handle: the result, the
# croak text, $!, the warnings, and what the handle has consumed afterwards
# (its offset, or what is left in a pipe or socket). strace shows where
# FastFile reads with large reads (a regular file read to its end) and
# where with the reference's own 8 KiB reads.

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }
use POSIX qw(setlocale LC_ALL);
BEGIN { setlocale(LC_ALL, 'C') }

use Test::More;
use Errno qw(EIO);
use Socket qw(AF_UNIX SOCK_STREAM PF_UNSPEC);
use lib 't/lib';
use FFTest qw(tempdir slurp spew strace_why strace_call errno_text calls_named run_perl);
use Reference qw(ref_safe_read_from);
use FastFile qw(safe_read_from);

my $MIB = 1 << 20;
my $dir = tempdir();
my $n = 0;

my $PATTERN = pack 'N*', 0 .. 3 * $MIB / 4;
sub pattern {
    my ($len) = @_;
    die "pattern: $len bytes is more than it holds\n" if $len > length $PATTERN;
    return substr($PATTERN, 0, $len);
}

# The outcome of reading the handle $open->() gives with $reader: result or
# croak, $!, warnings, and what is left to read ($rest->($fh)).
sub outcome {
    my ($reader, $open, $args, $rest) = @_;
    my $fh = $open->();
    my @w;
    local $SIG{__WARN__} = sub { push @w, $_[0] };
    $! = EIO;
    my $v;
    my $ok = eval { $v = $reader->($fh, @$args); 1 };
    # texts without where perl's own come from (FastFile.pm, Reference.pm;
    # the reference's PVE/File.pm): only the location differs
    my $where = sub { $_[0] =~ s/ at \S+ line \d+\.?\n\z/\n/r };
    my %r = (ok => $ok ? 1 : 0, value => $v, err => $ok ? '' : $where->($@), errno => $! + 0);
    $r{warnings} = join '|', map { $where->($_) } @w;
    $r{rest} = $rest ? $rest->($fh) : '';
    return \%r;
}

# what sysread still finds on the handle
sub rest_sysread {
    my ($fh) = @_;
    my $buf = '';
    1 while sysread($fh, $buf, 65536, length $buf);
    return $buf;
}
# where the fd's offset is
sub offset { my ($fh) = @_; return sysseek($fh, 0, 1) // 'undef' }

sub compare {
    my ($label, $open, $args, $rest) = @_;
    my $got = outcome(\&safe_read_from, $open, $args, $rest);
    my $ref = outcome(\&ref_safe_read_from, $open, $args, $rest);
    is($got->{ok}, $ref->{ok}, "$label: " . ($ref->{ok} ? 'returns' : 'croaks') . ' as the model')
        or diag("got: $got->{err}");
    ok(defined $got->{value} == defined $ref->{value}
       && (!defined $ref->{value} || $got->{value} eq $ref->{value}), "$label: same result")
        or diag('got ' . (defined $got->{value} ? length($got->{value}) . ' bytes' : 'undef')
              . ', want ' . (defined $ref->{value} ? length($ref->{value}) . ' bytes' : 'undef'));
    is($got->{err}, $ref->{err}, "$label: same message");
    is($got->{errno}, $ref->{errno}, "$label: \$! is " . errno_text($ref->{errno}));
    is($got->{warnings}, $ref->{warnings}, "$label: same warnings");
    ok($got->{rest} eq $ref->{rest}, "$label: the handle consumed as far")
        or diag('left: got ' . length($got->{rest}) . ', want ' . length($ref->{rest}));
    return ($got, $ref);
}

# ------------------------------------------------------ regular files

for my $case ([ 'empty', 0 ], [ '1 byte', 1 ], [ '8192', 8192 ], [ '8193', 8193 ], [ '100000', 100_000 ],
              [ '1 MiB', $MIB ], [ '1 MiB + 1', $MIB + 1 ], [ '3 MiB, max 4 MiB', 3 * $MIB, 4 * $MIB ],
              [ '12000, max 10000', 12000, 10000 ], [ '20000, max 10000', 20000, 10000 ],
              [ '16385, max 16384', 16385, 16384 ], [ '16384, max 16384', 16384, 16384 ],
              [ '100000, max nan', 100_000, 'nan' ]) {
    my ($label, $size, $max) = @$case;
    my $file = "$dir/f" . ++$n;
    spew($file, pattern($size));
    my $open = sub { open my $fh, '<', $file or die; $fh };
    for my $name ($file, undef) {
        my $l = "$label" . (defined $name ? '' : ', no name');
        compare($l, $open, [ $max, 0, $name ], \&offset);
        compare("$l, oneline", $open, [ $max, 1, $name ], \&offset);
    }
}

# lines, from the start and from mid-file
{
    my $file = "$dir/lines";
    spew($file, "first\nsecond\n" . ('x' x 20000) . "\nlast");
    compare('oneline: the first line', sub { open my $fh, '<', $file or die; $fh }, [ 0, 1, 'l' ], \&offset);
    compare('mid-file (sysseek 6)', sub { open my $fh, '<', $file or die; sysseek $fh, 6, 0; $fh },
            [ 0, 0, 'l' ], \&offset);
    compare('oneline mid-file, a long line', sub { open my $fh, '<', $file or die; sysseek $fh, 13, 0; $fh },
            [ 0, 1, 'l' ], \&offset);
    compare('no newline at all, oneline', sub { open my $fh, '<', \"abc" or die; $fh }, [ 0, 1, 'l' ]);
    # a PerlIO buffer: sysread reads from the fd, past what <$fh> buffered
    compare('after readline (PerlIO buffered)',
            sub { open my $fh, '<', $file or die; my $l = <$fh>; $fh }, [ 0, 0, 'l' ], \&offset);
    compare('read-write handle', sub { open my $fh, '+<', $file or die; $fh }, [ 0, 0, 'l' ], \&offset);
    compare('dup\'d handle', sub { open my $fh, '<', $file or die; open my $d, '<&', $fh or die; $d },
            [ 0, 0, 'l' ], \&offset);
    compare('bareword glob', sub { no strict 'refs'; open(FFGLOB, '<', $file) or die; \*FFGLOB },
            [ 0, 0, 'l' ], \&offset);
    compare('*GLOB itself', sub { open(FFGLOB2, '<', $file) or die; *FFGLOB2 }, [ 0, 0, 'l' ], \&offset);
    compare('IO::File object', sub { require IO::File; IO::File->new($file, '<') or die }, [ 0, 0, 'l' ],
            \&offset);
    compare('sysopen\'ed', sub { require Fcntl; sysopen(my $fh, $file, Fcntl::O_RDONLY()) or die; $fh },
            [ 0, 0, 'l' ], \&offset);
    compare('non-blocking', sub { require Fcntl; sysopen(my $fh, $file, Fcntl::O_RDONLY() | Fcntl::O_NONBLOCK())
                                      or die; $fh }, [ 0, 0, 'l' ], \&offset);
    compare('write-only handle', sub { open my $fh, '>>', $file or die; $fh }, [ 0, 0, 'l' ]);
    compare('closed handle', sub { open my $fh, '<', $file or die; close $fh; $fh }, [ 0, 0, 'l' ]);
    compare('never opened glob', sub { no warnings 'once'; \*NEVER_OPENED }, [ 0, 0, 'l' ]);
    compare('in-memory handle', sub { open my $fh, '<', \"in\nmemory" or die; $fh }, [ 0, 0, 'l' ]);
    compare('directory', sub { open my $fh, '<', $dir or die; $fh }, [ 0, 0, 'l' ]);
    compare('/proc file', sub { open my $fh, '<', '/proc/sys/kernel/ostype' or die; $fh }, [ 0, 0, 'l' ]);
    compare('/proc file, max 3', sub { open my $fh, '<', '/proc/sys/kernel/ostype' or die; $fh }, [ 3, 0, 'l' ]);
    # :utf8: sysread dies there from perl 5.30 on, reads characters before
    compare(':utf8 layer', sub { open my $fh, '<:utf8', $file or die; $fh }, [ 0, 0, 'l' ]);
    compare(':encoding(UTF-8) layer', sub { open my $fh, '<:encoding(UTF-8)', $file or die; $fh },
            [ 0, 0, 'l' ]);
    compare(':crlf layer', sub { my $f = "$dir/crlf"; spew($f, "a\r\nb\r\n"); open my $fh, '<:crlf', $f or die; $fh },
            [ 0, 0, 'l' ], \&offset);
}

# a tied handle: its READ is called, as sysread calls it
{
    package Reads;
    sub TIEHANDLE { my ($c, $data) = @_; return bless { data => $data, reads => 0 }, $c }
    sub READ {
        my ($self, undef, $len, $off) = @_;
        $self->{reads}++;
        my $chunk = substr($self->{data}, 0, $len, '');
        substr($_[1], $off // 0) = $chunk;
        return length $chunk;
    }
}
{
    my @reads;
    for my $reader (\&safe_read_from, \&ref_safe_read_from) {
        local *TIED;
        my $obj = tie *TIED, 'Reads', 'y' x 20000;
        my $v = $reader->(\*TIED, 0, 0, 't');
        push @reads, [ $v, $obj->{reads} ];
    }
    is($reads[0][0], $reads[1][0], 'tied handle: same result');
    is($reads[0][1], $reads[1][1], "tied handle: READ called as often ($reads[1][1])");
}

# pipes and sockets: what a caller could see consumed
sub pipe_with {
    my ($data) = @_;
    pipe(my $r, my $w) or die "pipe: $!\n";
    syswrite $w, $data;
    close $w;
    return $r;
}
sub socket_with {
    my ($data) = @_;
    socketpair(my $a, my $b, AF_UNIX, SOCK_STREAM, PF_UNSPEC) or die "socketpair: $!\n";
    syswrite $b, $data;
    shutdown $b, 1;
    return $a;
}
compare('pipe', sub { pipe_with("line1\nline2\nrest") }, [ 0, 0, 'p' ], \&rest_sysread);
compare('pipe, oneline: the rest is gone', sub { pipe_with("line1\nline2\nrest") }, [ 0, 1, 'p' ], \&rest_sysread);
compare('pipe, oneline, 20000 bytes', sub { pipe_with(('z' x 10000) . "\n" . ('w' x 9999)) }, [ 0, 1, 'p' ],
        \&rest_sysread);
compare('pipe past max', sub { pipe_with('q' x 30000) }, [ 10000, 0, 'p' ], \&rest_sysread);
compare('socket', sub { socket_with("a\nb\nc") }, [ 0, 0, 's' ], \&rest_sysread);
compare('socket, oneline', sub { socket_with("a\nb\nc") }, [ 0, 1, 's' ], \&rest_sysread);
compare('socket past max, no name', sub { socket_with('s' x 30000) }, [ 20000, 0, undef ], \&rest_sysread);

# the result under -T is tainted, as sysread's
{
    my $file = "$dir/taint";
    spew($file, 'abc');
    my (undef, $out) = run_perl('use FastFile "safe_read_from"; use Scalar::Util "tainted"; '
                                . 'open my $fh, "<", $ARGV[0] or die; print tainted(safe_read_from($fh)) ? 1 : 0',
                                switches => ['-T'], args => [$file]);
    is($out, '1', 'taint mode: the result is tainted, as sysread\'s');
}

# -------------------------------------------------------------- strace

SKIP: {
    my $why = strace_why();
    skip $why, 1 if $why;
    my $file = "$dir/one-mib";
    spew($file, pattern($MIB));
    # (perl's open makes an fstat: opened before the markers)
    my $r = strace_call('my $v = safe_read_from($fh, 0, 0, "x"); length $v',
                        attach => 1, setup => 'open our $fh, "<", $ARGV[0] or die',
                        args => [$file], trace => [qw(read pread64 fstat)], paths => [$file]);
    ok($r->{ok}, '1 MiB: read') or diag($r->{err});
    is($r->{ret}, $MIB, '1 MiB: all of it');
    my @reads = calls_named($r, 'read');
    is(join(',', map { $_->{args} =~ /(\d+)\z/ } @reads), '1048577',
       '1 MiB regular file: one read of fstat\'s size and a byte, short at that size: the end')
        or diag(map { "$_->{line}\n" } @{ $r->{calls} });
    is(join(' ', map { $_->{name} } @{ $r->{calls} }), 'fstat read',
       '1 MiB regular file: 2 syscalls (fstat, one read)')
        or diag(map { "$_->{line}\n" } @{ $r->{calls} });

    # a short file: fstat and one read, as many syscalls as the reference's
    # two 8 KiB reads, and none that reads at the end (on pmxcfs one more
    # request, answered by whatever version is there then)
    my $small = "$dir/one-kib";
    spew($small, pattern(1024));
    $r = strace_call('length safe_read_from($fh, 0, 0, "x")', attach => 1, setup => 'open our $fh, "<", $ARGV[0] or die',
                     args => [$small], trace => [qw(read pread64 fstat)], paths => [$small]);
    is($r->{ret}, 1024, '1 KiB: all of it');
    is(join(' ', map { $_->{name} . ((($_->{args} // '') =~ /, (\d+)\z/)[0] // '') } @{ $r->{calls} }),
       'fstat read1025',
       '1 KiB regular file: fstat, one read of its size and a byte')
        or diag(map { "$_->{line}\n" } @{ $r->{calls} });

    # not at the start: the same read, short of fstat's size, then the end
    $r = strace_call('length safe_read_from($fh, 0, 0, "x")', attach => 1,
                     setup => 'open our $fh, "<", $ARGV[0] or die; sysread $fh, my $skip, 24',
                     args => [$small], trace => [qw(read)], paths => [$small]);
    is($r->{ret}, 1000, '1 KiB from byte 24: the rest');
    is(join(' ', map { $_->{ret} } calls_named($r, 'read')), '1000 0',
       '1 KiB from byte 24: short of fstat\'s size, so read on to the end');

    $r = strace_call('open my $fh, "<", $ARGV[0] or die; my $v = safe_read_from($fh, 0, 1, "x"); length $v',
                     attach => 1, args => [$file], trace => ['read'], paths => [$file]);
    @reads = calls_named($r, 'read');
    ok(@reads && !grep({ $_->{args} !~ /, 8192\z/ } @reads), 'oneline: the reference\'s 8 KiB reads')
        or diag(map { "$_->{line}\n" } @reads);

    # EINTR: the signal handler runs, the read goes on; a handler that
    # closes the handle, or reopens its fd number on another file, ends the
    # read with EBADF (as the reference's next sysread would fail), never
    # reading the other file
    my $other = "$dir/other";
    spew($other, 'SECRET' x 10);
    for my $case ([ 'counts', '$hits++', undef ],
                  [ 'closes the handle', 'close $fh', "unable to read file 'x' - Bad file descriptor\n" ],
                  [ 'reopens its fd on another file', 'close $fh; open our $o, "<", $ARGV[1] or die',
                    "unable to read file 'x' - Bad file descriptor\n" ]) {
        my ($label, $handler, $err) = @$case;
        $r = strace_call('my $v = safe_read_from($fh, 0, 0, "x"); length($v) . ($v =~ /SECRET/ ? "S" : "")',
                         setup => 'our $hits = 0; open our $fh, "<", $ARGV[0] or die; '
                                . "\$SIG{ALRM} = sub { $handler }",
                         attach => 1, args => [ $file, $other ], trace => 1, paths => [$file],
                         inject => ['read:error=EINTR:signal=SIGALRM:when=1']);
        if (defined $err) {
            is($r->{err}, $err, "EINTR, a handler that $label: EBADF");
        } else {
            ok($r->{ok}, "EINTR, a handler that $label: read") or diag($r->{err});
            is($r->{ret}, $MIB, "EINTR, a handler that $label: all of it");
        }
    }

    $r = strace_call('pipe(my $r, my $w) or die; syswrite $w, "x" x 30000; close $w; length safe_read_from($r)',
                     attach => 1, trace => ['read']);
    @reads = calls_named($r, 'read');
    is($r->{ret}, 30000, 'pipe: all of it');
    is(join(',', map { $_->{args} =~ /(\d+)\z/ } @reads), '8192,8192,8192,8192,8192',
       'pipe: the reference\'s 8 KiB reads, to its end');
}

done_testing;
