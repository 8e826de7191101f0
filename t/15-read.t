use strict;
use warnings;

# The readers: file_get_contents and file_read_firstline. Their results are
# compared with a pure-Perl reference (an 8 KiB sysread loop, and <$fh> +
# chomp for the first line) for content, error texts and $!; strace shows the
# syscalls they make and injects the faults a local disk will not give.

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }
use POSIX qw(setlocale LC_ALL);
BEGIN { setlocale(LC_ALL, 'C') }

use Test::More;
use Errno qw(ENOENT EISDIR EACCES EIO);
use lib 't/lib';
use FFTest qw(tempdir slurp spew warnings_of strace_why strace_call errno_text in_child io_calls);
use Reference qw(ref_get_contents ref_read_firstline);    # the 8 KiB sysread loop, <$fh> + chomp
use Counted;    # a tied scalar that counts FETCH
use FastFile qw(:all);

my $MIB = 1 << 20;
my $dir = tempdir();
my $n = 0;

# ---------------------------------------------------------------- helpers

# [returns => $value] or [dies => $@], and $! right after
sub outcome {
    my ($code) = @_;
    my $v;
    $! = EIO;     # a caller's earlier $!: what is left after the call is the call's
    my $ok = eval { $v = $code->(); 1 };
    my $errno = $! + 0;
    return { ok => $ok ? 1 : 0, value => $v, err => $ok ? undef : $@, errno => $errno };
}

# byte strings compared without dumping megabytes on failure
sub bytes_is {
    my ($got, $want, $label) = @_;
    return pass($label) if defined $got && defined $want && $got eq $want;
    return pass($label) if !defined $got && !defined $want;
    fail($label);
    if (!defined $got || !defined $want) {
        diag('got ' . (defined $got ? length($got) . ' bytes' : 'undef') . ', want '
             . (defined $want ? length($want) . ' bytes' : 'undef'));
        return;
    }
    my $i = 0;
    my $min = length $got < length $want ? length $got : length $want;
    $i++ while $i < $min && substr($got, $i, 1) eq substr($want, $i, 1);
    diag(sprintf 'got %d bytes, want %d; first difference at offset %d', length $got, length $want, $i);
    return;
}

# the same outcome as the reference, and as expected: $want is the content,
# or { err => text } for a croak
sub same_as_ref {
    my ($label, $got, $ref, $want) = @_;
    if (ref $want) {
        ok(!$got->{ok}, "$label: croaks");
        is($got->{err}, $want->{err}, "$label: message");
        is($got->{errno}, $want->{errno}, "$label: \$! is " . errno_text($want->{errno})) if defined $want->{errno};
        ok(!$ref->{ok}, "$label: the reference croaks too");
        is($got->{err}, $ref->{err}, "$label: same message as the reference");
        is($got->{errno}, $ref->{errno}, "$label: \$! as the reference leaves it");
    } else {
        ok($got->{ok}, "$label: returns") or diag($got->{err});
        bytes_is($got->{value}, $want, "$label: content");
        ok($ref->{ok}, "$label: the reference returns") or diag($ref->{err});
        bytes_is($got->{value}, $ref->{value}, "$label: same bytes as the reference");
        ok(!utf8::is_utf8($got->{value}), "$label: not UTF8-flagged") if defined $got->{value};
    }
}

sub compare_get {
    my ($label, $path, $max, $want) = @_;
    my @max = defined $max ? ($max) : ();
    my $got = outcome(sub { file_get_contents($path, @max) });
    my $ref = outcome(sub { ref_get_contents($path, @max) });
    same_as_ref($label, $got, $ref, $want);
    return $got;
}

# a byte string of $len bytes in which every 4-byte word is different
# (within each MiB), so a misplaced block shows
my $BLOCK = join '', map { pack 'N', $_ } 0 .. ($MIB / 4 - 1);
# (built in place: one buffer, as touching memory is most of the 64 MiB
# cases' cost)
sub pattern {
    my ($len) = @_;
    my $mibs = int(($len + $MIB - 1) / $MIB);
    my $s = $BLOCK x $mibs;
    substr($s, $_ * $MIB, 4) = pack('N', 0xff000000 | $_) for 0 .. $mibs - 1;
    substr($s, $len) = '';
    return $s;
}

sub too_long { return { err => "file '$_[0]' too long - aborting\n" } }

# a child that opens the FIFO and writes $data in pieces of $piece bytes,
# pausing $pause seconds between them
sub feed_fifo {
    my ($fifo, $data, $piece, $pause) = @_;
    my $pid = fork;
    die "fork: $!\n" unless defined $pid;
    if (!$pid) {
        local $SIG{PIPE} = 'IGNORE';
        open my $fh, '>', $fifo or POSIX::_exit(1);
        for (my $off = 0; $off < length $data; $off += $piece) {
            defined syswrite($fh, $data, $piece, $off) or POSIX::_exit(0);  # EPIPE: the reader gave up
            select undef, undef, undef, $pause if $pause;
        }
        close $fh;
        POSIX::_exit(0);
    }
    return $pid;
}

# run $code (reading the FIFO) while a child feeds it; with a timeout
sub read_fifo {
    my ($fifo, $data, $piece, $pause, $code) = @_;
    my $pid = feed_fifo($fifo, $data, $piece, $pause);
    my $r = do {
        local $SIG{ALRM} = sub { die "timeout reading the FIFO\n" };
        alarm 20;
        my $o = outcome($code);
        alarm 0;
        $o;
    };
    waitpid $pid, 0;
    return $r;
}

# ------------------------------------------- content, against the reference

{
    my %files;
    my @cases = (
        [ 'empty',          '' ],
        [ '1 byte',         'x' ],
        [ 'exactly 8192',   pattern(8192) ],
        [ '1 MiB - 1',      pattern($MIB - 1) ],
        [ 'exactly 1 MiB',  pattern($MIB) ],
        [ '1 MiB + 1',      pattern($MIB + 1), 'too long' ],
        [ 'binary: NULs and all 256 byte values',
          join('', map { chr } 0 .. 255) . ("\0" x 1000) . join('', reverse map { chr } 0 .. 255) . "\0" ],
    );
    for my $case (@cases) {
        my ($label, $data, $long) = @$case;
        my $file = "$dir/content-" . ++$n;
        spew($file, $data);
        $files{$label} = $file;
        compare_get($label, $file, undef, $long ? too_long($file) : $data);
    }

    # false max means the default (1 MiB)
    for my $max (0, undef, '', '0') {
        my $shown = defined $max ? "'$max'" : 'undef';
        my $got = outcome(sub { file_get_contents($files{'exactly 1 MiB'}, $max) });
        ok($got->{ok} && length $got->{value} == $MIB, "max $shown: 1 MiB file read (the default max)")
            or diag($got->{err});
        $got = outcome(sub { file_get_contents($files{'1 MiB + 1'}, $max) });
        is($got->{err}, too_long($files{'1 MiB + 1'})->{err}, "max $shown: 1 MiB + 1 is too long");
    }

    # a small explicit max, on both sides of the limit
    {
        my $file = "$dir/ten";
        spew($file, '0123456789');
        compare_get('max 10, 10 bytes', $file, 10, '0123456789');
        compare_get('max 9, 10 bytes', $file, 9, too_long($file));
        compare_get('max 2 MiB, 1 MiB + 1', $files{'1 MiB + 1'}, 2 * $MIB, pattern($MIB + 1));
    }

    # a huge max (~0, 2**63, 1e30: "no limit") is no limit at all for the
    # reference; it must not wrap round to a negative, that is 0, limit
    compare_get("max $_->[0]", "$dir/ten", $_->[1], '0123456789') for [ '~0', ~0 ], [ '2**63', 2**63 ], [ '1e30', 1e30 ];

    # item 6: a max that is no finite number: NaN is no limit for the
    # reference ("$total > 'nan'" is never true)
    compare_get("max '$_'", $files{'1 MiB + 1'}, $_, pattern($MIB + 1)) for 'nan', 'NaN', 9**9**9 / 9**9**9;
    compare_get("max 'inf'", $files{'1 MiB + 1'}, 'inf', pattern($MIB + 1));
}

# item 6: "too long" is decided on the bytes read, not on fstat's size:
# sysfs files report 4096 (a page) whatever they hold
SKIP: {
    my ($sys) = grep { -f $_ && -r _ && (stat _)[7] == 4096 }
        '/sys/kernel/mm/transparent_hugepage/enabled', '/sys/class/net/lo/mtu',
        '/sys/kernel/kexec_loaded', '/sys/kernel/profiling', '/sys/devices/system/cpu/online';
    skip 'no sysfs file that reports 4096 bytes', 3 unless $sys;
    my $ref = outcome(sub { ref_get_contents($sys, 100) });
    ok($ref->{ok} && length $ref->{value} < 100, "sysfs $sys: the reference reads it with max 100")
        or diag($ref->{err});
    compare_get("sysfs $sys, max 100", $sys, 100, $ref->{value});
}

# 64 MiB with a 64 MiB max, and one byte more
{
    my $file = "$dir/big";
    my $data = pattern(64 * $MIB);
    spew($file, $data);
    compare_get('64 MiB, max 64 MiB', $file, 64 * $MIB, $data);
    compare_get('64 MiB, default max', $file, undef, too_long($file));
    open my $fh, '>>:raw', $file or die "append: $!";
    print {$fh} 'z';
    close $fh or die "append: $!";
    compare_get('64 MiB + 1, max 64 MiB', $file, 64 * $MIB, too_long($file));
    unlink $file;
}

# /proc: fstat says 0 bytes; the content changes from read to read
for my $reader ([ 'file_get_contents', \&file_get_contents ], [ 'reference', \&ref_get_contents ]) {
    my ($name, $code) = @$reader;
    my $s = $code->('/proc/self/status');
    ok(length $s > 0, "/proc/self/status ($name): not empty");
    like($s, qr/\AName:\t/, "/proc/self/status ($name): starts with Name:");
    like($s, qr/\nPid:\t$$\n/, "/proc/self/status ($name): has our pid");
    like($s, qr/\n\z/, "/proc/self/status ($name): ends with a newline");
    ok(!utf8::is_utf8($s), "/proc/self/status ($name): not UTF8-flagged");
}

# FIFOs: the data arrives in pieces, the size is unknown
SKIP: {
    my $fifo = "$dir/fifo";
    POSIX::mkfifo($fifo, 0600) or skip("mkfifo: $!", 19);

    my $data = pattern(300 * 1024);
    my $got = read_fifo($fifo, $data, 7001, 0.001, sub { file_get_contents($fifo) });
    my $ref = read_fifo($fifo, $data, 7001, 0.001, sub { ref_get_contents($fifo) });
    same_as_ref('FIFO, 300 KiB in 7001-byte pieces', $got, $ref, $data);

    $data = pattern($MIB);
    $got = read_fifo($fifo, $data, 50001, 0, sub { file_get_contents($fifo) });
    $ref = read_fifo($fifo, $data, 50001, 0, sub { ref_get_contents($fifo) });
    same_as_ref('FIFO, exactly 1 MiB', $got, $ref, $data);

    $data = pattern($MIB + 1);
    $got = read_fifo($fifo, $data, 50001, 0, sub { file_get_contents($fifo) });
    $ref = read_fifo($fifo, $data, 50001, 0, sub { ref_get_contents($fifo) });
    same_as_ref('FIFO, 1 MiB + 1', $got, $ref, too_long($fifo));

    $data = pattern(100_001);
    $got = read_fifo($fifo, $data, 4096, 0, sub { file_get_contents($fifo, 100_000) });
    $ref = read_fifo($fifo, $data, 4096, 0, sub { ref_get_contents($fifo, 100_000) });
    same_as_ref('FIFO, 100001 bytes, max 100000', $got, $ref, too_long($fifo));

    # the first line arrives in pieces
    $got = read_fifo($fifo, "abc" . "def\nrest\n", 3, 0.01, sub { file_read_firstline($fifo) });
    is($got->{value}, 'abcdef', 'FIFO: file_read_firstline joins a line that arrives in pieces');
}

# a non-ASCII file name: its bytes as perl's open sees them
for my $name ([ 'wide chars', "\x{263a}-name" ],
              [ 'upgraded Latin-1', do { my $x = "caf\x{e9}"; utf8::upgrade($x); $x } ],
              [ 'Latin-1 bytes', "caf\xe9-bytes" ]) {
    my ($label, $base) = @$name;
    my $path = "$dir/$base";
    open my $fh, '>:raw', $path or die "create '$label': $!";
    print {$fh} "line one\nline two\n";
    close $fh;
    compare_get("$label file name", $path, undef, "line one\nline two\n");
    is(file_read_firstline($path), 'line one', "$label file name: file_read_firstline");
    compare_get("$label file name, missing", "$path-missing", undef,
                { err => "can't open '$path-missing' - " . errno_text(ENOENT) . "\n", errno => ENOENT });
    unlink $path;
}

# ------------------------------------------------------------------ errors

sub same_error {
    my ($label, $path, $text, $errno) = @_;
    compare_get($label, $path, undef, { err => $text, errno => $errno });
}

{
    my $missing = "$dir/missing";
    same_error('missing file', $missing, "can't open '$missing' - No such file or directory\n", ENOENT);
    same_error('missing directory', "$dir/nope/f", "can't open '$dir/nope/f' - " . errno_text(ENOENT) . "\n", ENOENT);

    my $d = "$dir/a-directory";
    mkdir $d or die "mkdir: $!";
    same_error('a directory', $d, "unable to read file '$d' - Is a directory\n", EISDIR);

    for my $name (undef, '') {
        my $label = defined $name ? "'' file name" : 'undef file name';
        my $r = outcome(sub { file_get_contents($name) });
        is($r->{err}, "file name is undefined or empty\n", "file_get_contents, $label: croaks");
        # item 9: the reference's open of no name fails: undef, and for
        # undef perl's "uninitialized" warning
        my $line;
        my @w = warnings_of { $line = __LINE__; $r = outcome(sub { file_read_firstline($name) }) };
        ok($r->{ok} && !defined $r->{value}, "file_read_firstline, $label: undef, as the reference");
        is($r->{errno}, ENOENT, "file_read_firstline, $label: \$! is ENOENT");
        is_deeply(\@w, defined $name ? []
                  : ["Use of uninitialized value in file_read_firstline at $0 line $line.\n"],
                  "file_read_firstline, $label: " . (defined $name ? 'no warning' : 'the uninitialized warning'));
        my @rw = warnings_of { $r = outcome(sub { ref_read_firstline($name) }) };
        ok($r->{ok} && !defined $r->{value}, "file_read_firstline, $label: the reference returns undef too");
        is(scalar @rw, defined $name ? 0 : 1, "file_read_firstline, $label: ... warning alike");
        @w = warnings_of { no warnings 'uninitialized'; eval { file_read_firstline($name) } };
        is_deeply(\@w, [], "file_read_firstline, $label: silent under no warnings 'uninitialized'");
    }

    # file_read_firstline
    my $r = outcome(sub { file_read_firstline($missing) });
    ok($r->{ok} && !defined $r->{value}, 'file_read_firstline, missing file: undef');
    is($r->{errno}, ENOENT, 'file_read_firstline, missing file: $! is ENOENT');
    ok(!defined ref_read_firstline($missing), '... as the reference');
    # item 9: the reference opens a directory and reads nothing
    $r = outcome(sub { file_read_firstline($d) });
    ok($r->{ok} && !defined $r->{value}, 'file_read_firstline, a directory: undef') or diag($r->{err});
    is($r->{errno}, EISDIR, 'file_read_firstline, a directory: $! is EISDIR');
    $r = outcome(sub { ref_read_firstline($d) });
    ok($r->{ok} && !defined $r->{value}, 'file_read_firstline, a directory: the reference returns undef too');
    is($r->{errno}, EISDIR, '... and leaves $! EISDIR too');
    {
        local $/ = '';
        $r = outcome(sub { file_read_firstline($d) });
        ok($r->{ok} && !defined $r->{value}, 'file_read_firstline, a directory, $/ = "": undef');
    }
}

# NUL in the path: fails like open (ENOENT), with perl's syscalls warning
{
    spew("$dir/nul", 'the file before the NUL');
    my $path = "$dir/nul\0byte";
    (my $shown = $path) =~ s/\0/\\0/g;
    my ($r, $line);
    my @w = warnings_of { $line = __LINE__; $r = outcome(sub { file_get_contents($path) }) };
    ok(!$r->{ok}, 'NUL in path: croaks');
    is($r->{err}, "can't open '$path' - " . errno_text(ENOENT) . "\n", "NUL in path: can't open message");
    is($r->{errno}, ENOENT, 'NUL in path: $! is ENOENT');
    is(scalar @w, 1, 'NUL in path: one warning');
    (my $w = $w[0] // '') =~ s/\0/\\0/g;
    is($w, "Invalid \\0 character in pathname for file_get_contents: $shown at $0 line $line.\n",
       'NUL in path: the syscalls warning');
    my $ref;
    my @rw = warnings_of { $ref = outcome(sub { ref_get_contents($path) }) };
    is($r->{err}, $ref->{err}, 'NUL in path: same message as the reference');
    like($rw[0] // '', qr/^Invalid \\0 character in pathname for open: /, '... whose open warns the same way');

    @w = warnings_of { $line = __LINE__; $r = outcome(sub { file_read_firstline($path) }) };
    ok($r->{ok} && !defined $r->{value}, 'NUL in path, file_read_firstline: undef');
    is($r->{errno}, ENOENT, 'NUL in path, file_read_firstline: $! is ENOENT');
    ($w = $w[0] // '') =~ s/\0/\\0/g;
    is($w, "Invalid \\0 character in pathname for file_read_firstline: $shown at $0 line $line.\n",
       'NUL in path, file_read_firstline: the syscalls warning');

    @w = warnings_of {
        no warnings 'syscalls';
        $r = outcome(sub { file_get_contents($path) });
        outcome(sub { file_read_firstline($path) });
    };
    is(scalar @w, 0, 'NUL in path: no warning under no warnings "syscalls"');
    is($r->{errno}, ENOENT, '... still ENOENT');
}

# EACCES, for real: a 0600 file of root's read by "nobody", or, when we are
# not root, a file of our own with mode 0 (its owner needs a read bit too)
SKIP: {
    my $file = "$dir/secret";
    spew($file, "secret\n", $> == 0 ? 0600 : 0);
    my $run = sub {
        my @r;
        for my $code (sub { file_get_contents($file) }, sub { ref_get_contents($file) },
                      sub { file_read_firstline($file) }, sub { ref_read_firstline($file) }) {
            my $o = outcome($code);
            push @r, $o->{ok}, $o->{errno}, unpack('H*', $o->{err} // ''), unpack('H*', $o->{value} // '');
        }
        return @r;
    };
    my @res;
    if ($> != 0) {
        @res = $run->();
    } else {
        my @nobody = getpwnam('nobody');
        skip 'running as root and there is no user "nobody"', 8 unless @nobody;
        chmod 0711, $dir or die "chmod: $!";
        my $out = in_child(sub { join ' ', $run->() }, @nobody[2, 3]);
        skip "could not drop to nobody: $out", 8 unless $out =~ s/\Aok //;
        @res = split / /, $out, -1;
        chmod 0700, $dir;
    }
    my @o = map { { ok => $res[4 * $_], errno => $res[4 * $_ + 1], err => pack('H*', $res[4 * $_ + 2]) } } 0 .. 3;
    skip "the file can be read anyway: user $> has CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH", 8 if $o[0]{ok};
    is($o[0]{err}, "can't open '$file' - " . errno_text(EACCES) . "\n", 'EACCES: file_get_contents message');
    is($o[0]{errno}, EACCES, 'EACCES: file_get_contents $! is EACCES');
    is($o[0]{err}, $o[1]{err}, 'EACCES: same message as the reference');
    is($o[1]{errno}, EACCES, '... whose $! is EACCES too');
    is($o[2]{err}, "file '$file' exists but open for reading failed - " . errno_text(EACCES) . "\n",
       'EACCES: file_read_firstline message');
    is($o[2]{errno}, EACCES, 'EACCES: file_read_firstline $! is EACCES');
    is($o[2]{err}, $o[3]{err}, 'EACCES: file_read_firstline: same message as the reference');
    ok(!$o[2]{ok}, 'EACCES: file_read_firstline croaks');
}

# ------------------------------------------------------------ first line

{
    my @cases = (
        [ 'two lines',                "a\nb\n",          'a' ],
        [ 'CRLF: only the LF goes',   "a\r\nb",          "a\r" ],
        [ 'no newline',               'abc',             'abc' ],
        [ 'a lone newline',           "\n",              '' ],
        [ 'empty file',               '',                undef ],
        [ '"0" line',                 "0\nx",            '0' ],
        [ 'empty first line',         "\nsecond\n",      '' ],
        [ 'NULs and high bytes',      "\0\xff\x80\n\0",  "\0\xff\x80" ],
        [ '8191 bytes + newline',     ('m' x 8191) . "\nz", 'm' x 8191 ],
        [ '8192 bytes + newline',     ('e' x 8192) . "\nz", 'e' x 8192 ],
        [ '8192 bytes, no newline',   'n' x 8192,        'n' x 8192 ],
        [ '20000-byte first line',    ('L' x 20000) . "\nrest", 'L' x 20000 ],
        [ '100000 bytes, no newline', 'w' x 100000,      'w' x 100000 ],
    );
    for my $case (@cases) {
        my ($label, $data, $want) = @$case;
        my $file = "$dir/firstline-" . ++$n;
        spew($file, $data);
        my $got = outcome(sub { file_read_firstline($file) });
        ok($got->{ok}, "firstline, $label: returns") or diag($got->{err});
        bytes_is($got->{value}, $want, "firstline, $label: value");
        bytes_is($got->{value}, ref_read_firstline($file), "firstline, $label: same as the reference");
        ok(!utf8::is_utf8($got->{value}), "firstline, $label: not UTF8-flagged") if defined $got->{value};
    }
}

# item 8: $/ as <$fh> + chomp see it: undef (the whole file), '' (paragraph
# mode), \N (N bytes), any other string as the line end
{
    my $latin1 = "\xe9";
    utf8::upgrade($latin1);
    my @seps = ([ 'undef', undef ], [ "''", '' ], [ '\\3', \3 ], [ '\\9000', \9000 ], [ '"\\r\\n"', "\r\n" ],
                [ '"ab"', 'ab' ], [ '"\\n\\n"', "\n\n" ], [ '"x" x 3', 'xxx' ], [ 'upgraded "\\xe9"', $latin1 ],
                [ '"\\n" x 3', "\n\n\n" ], [ '"0"', '0' ]);
    my @files = (
        [ 'empty',                    '' ],
        [ 'lines',                    "one\ntwo\n" ],
        [ 'no separator',             'plain' ],
        [ 'CRLF lines',               "one\r\ntwo\r\n" ],
        [ 'CRLF, trailing',           "one\r\n" ],
        [ 'paragraphs',               "\n\n\npara one\nline\n\n\n\npara two\n" ],
        [ 'one paragraph, trailing',  "alone\n\n\n" ],
        [ 'newlines only',            "\n\n\n" ],
        [ 'ab-separated',             "xxabyyabzz" ],
        [ 'separator first',          "abrest" ],
        [ 'separator only',           "ab" ],
        [ 'x runs',                   "1xx2xxxx3xxx" ],
        [ 'separator across blocks',  ('q' x 8191) . "ab\r\n\n\nxxx0\xe9tail" ],
        [ 'long, no separator',       'L' x 20000 ],
        [ 'Latin-1 byte',             "caf\xe9 au lait" ],
        [ 'zero',                     "10203" ],
    );
    for my $f (@files) {
        my ($flabel, $data) = @$f;
        my $file = "$dir/rs-" . ++$n;
        spew($file, $data);
        for my $s (@seps) {
            my ($slabel, $rs) = @$s;
            local $/ = $rs;
            my $got = outcome(sub { file_read_firstline($file) });
            my $ref = outcome(sub { ref_read_firstline($file) });
            ok($got->{ok}, "\$/ = $slabel, $flabel: returns") or diag($got->{err});
            bytes_is($got->{value}, $ref->{value}, "\$/ = $slabel, $flabel: same as <\$fh> + chomp");
        }
    }
    # the default stays "\n" (the C fast path); a wide $/ is refused like
    # readline does on a byte handle
    my $file = "$dir/rs-" . ++$n;
    spew($file, "a\xe2\x98\xbab\nc");
    local $/ = "\x{263a}";
    my $r = outcome(sub { file_read_firstline($file) });
    my $ref = outcome(sub { ref_read_firstline($file) });
    like($r->{err} // '', qr/^Wide character in \$\//, '$/ wide: croaks "Wide character in $/"');
    like($ref->{err} // '', qr/^Wide character in \$\//, '... as readline does');
}

# ------------------------------------------------------------- round trip

{
    my $file = "$dir/round-trip";
    my @corpus = (
        [ 'empty',            '',                                  '' ],
        [ 'ASCII',            "hello\nworld\n",                    "hello\nworld\n" ],
        [ 'all bytes',        join('', map { chr } 0 .. 255),      join('', map { chr } 0 .. 255) ],
        [ 'upgraded Latin-1', do { my $x = "caf\xe9 \xff"; utf8::upgrade($x); $x }, "caf\xe9 \xff" ],
        [ 'wide chars',       "\x{263a} caf\x{e9} \x{1f600}",      "\xe2\x98\xba caf\xc3\xa9 \xf0\x9f\x98\x80" ],
        [ '1 MiB',            pattern($MIB),                       pattern($MIB) ],
    );
    for my $c (@corpus) {
        my ($label, $data, $bytes) = @$c;
        { no warnings 'utf8'; file_set_contents($file, $data); }
        my $got = file_get_contents($file);
        bytes_is($got, $bytes, "round trip, $label: same bytes");
        ok(!utf8::is_utf8($got), "round trip, $label: not UTF8-flagged");
    }
}

# ------------------------------------------------------------------ magic

{
    my $file = "$dir/magic";
    spew($file, "first\nsecond\n");

    tie my $name, 'Counted', $file;
    is(file_get_contents($name), "first\nsecond\n", 'tied file name: file_get_contents reads');
    is((tied $name)->{n}, 1, 'tied file name: file_get_contents FETCHes once');

    tie $name, 'Counted', $file;
    tie my $max, 'Counted', 100;
    is(file_get_contents($name, $max), "first\nsecond\n", 'tied file name and max: reads');
    is((tied $name)->{n}, 1, 'tied file name and max: name FETCHed once');
    is((tied $max)->{n}, 1, 'tied file name and max: max FETCHed once');

    tie $max, 'Counted', 5;
    ok(!eval { file_get_contents($file, $max); 1 }, 'tied max 5: too long');
    is((tied $max)->{n}, 1, 'tied max 5: FETCHed once');

    tie $max, 'Counted', 0;
    is(file_get_contents($file, $max), "first\nsecond\n", 'tied false max: the default');
    is((tied $max)->{n}, 1, 'tied false max: FETCHed once');

    tie $name, 'Counted', "$dir/magic-missing";
    ok(!eval { file_get_contents($name); 1 }, 'tied missing file name: croaks');
    is((tied $name)->{n}, 1, 'tied missing file name: FETCHed once');

    tie $name, 'Counted', $file;
    is(file_read_firstline($name), 'first', 'tied file name: file_read_firstline reads');
    is((tied $name)->{n}, 1, 'tied file name: file_read_firstline FETCHes once');

    tie $name, 'Counted', "$dir/magic-missing";
    ok(!defined file_read_firstline($name), 'tied missing file name: file_read_firstline undef');
    is((tied $name)->{n}, 1, 'tied missing file name: file_read_firstline FETCHes once');

    tie $name, 'Counted', undef;
    my @w = warnings_of { ok(!defined file_read_firstline($name), 'tied undef file name: undef') };
    is(scalar @w, 1, 'tied undef file name: one uninitialized warning');
    is((tied $name)->{n}, 1, 'tied undef file name: FETCHed once');

    ok(!(tied $name)->{stores} && !(tied $max)->{stores}, 'no STORE on a tied argument');
}

# --------------------------------------------------------------- syscalls

SKIP: {
    my $why = strace_why();
    skip $why, 1 if $why;

    my $calls = \&io_calls;
    my $names = sub {
        return join ' ', map { $_->{name} } $calls->($_[0]);
    };
    my $show = sub { return join '', map { "  $_->{line}\n" } @{ $_[0]{calls} } };
    my $len = sub { return ($_[0]{args} =~ /,\s*(\d+)\z/)[0] // -1 };

    # a 1 MiB regular file: open, fstat, one read of it all (+1) that comes
    # back short at fstat's size (the end: no read of 0 after it), the
    # fstatfs that asks whether it is on FUSE (a read of more than one FUSE
    # request: a second read there, t/78), close
    my $file = "$dir/traced-1mib";
    spew($file, pattern($MIB));
    my $r = strace_call('my $c = FastFile::file_get_contents($ARGV[0]); die "wrong length\n" unless length $c == 1048576;',
                        attach => 1, args => [$file]);
    ok($r->{traced} && $r->{ok}, '1 MiB: traced call succeeded') or diag($r->{err}, $r->{stderr});
    my @c = $calls->($r);
    # (the portable build cannot tell FUSE: no fstatfs)
    my $fuse_probe = FastFile::_build_info()->{portable} ? '' : ' fstatfs';
    is($names->($r), "openat fstat read$fuse_probe close", "1 MiB: exactly openat, fstat, read,$fuse_probe close")
        or diag($show->($r));
    is($c[0] && $c[0]{args}, qq{AT_FDCWD, "$file", O_RDONLY|O_CLOEXEC}, '1 MiB: openat O_RDONLY|O_CLOEXEC');
    like($c[1] ? $c[1]{line} : '', qr/st_size=1048576\b/, '1 MiB: fstat sees the size');
    is($c[2] && $len->($c[2]), $MIB + 1, '1 MiB: one read of 1048577 bytes');
    is($c[2] && $c[2]{ret}, $MIB, '1 MiB: ... which returned 1048576');
    is($c[-1] && $c[-1]{ret}, 0, '1 MiB: close returned 0');

    # up to 124 KiB (a read that is one FUSE request wherever the buffer
    # starts): no fstatfs, four syscalls
    for my $size (1024, 124 * 1024) {
        my $f = "$dir/traced-$size";
        spew($f, pattern($size));
        $r = strace_call("die qq{wrong length\n} unless length FastFile::file_get_contents(\$ARGV[0]) == $size;",
                         attach => 1, args => [$f]);
        is($names->($r), 'openat fstat read close', "$size bytes: exactly openat, fstat, read, close")
            or diag($r->{err}, $show->($r));
        unlink $f;
    }

    # the reference, for contrast
    $r = strace_call('my $c = ref_get_contents($ARGV[0]); die "wrong length\n" unless length $c == 1048576;',
                     setup => 'use Reference qw(ref_get_contents);', attach => 1, args => [$file]);
    ok($r->{traced} && $r->{ok}, 'reference, 1 MiB: traced call succeeded') or diag($r->{err}, $r->{stderr});
    my $reads = grep { $_->{name} eq 'read' } @{ $r->{calls} };
    cmp_ok($reads, '>', 128, "reference, 1 MiB: $reads reads of 8 KiB (FastFile: 1)");

    # a file bigger than max: decided on the bytes read (fstat's size is a
    # hint), and no more than max + 1 of them are read
    $r = strace_call('FastFile::file_get_contents($ARGV[0], 1000)', attach => 1, args => [$file]);
    is($r->{err}, "file '$file' too long - aborting\n", 'over max: croaks');
    is($names->($r), 'openat fstat read close', 'over max: openat, fstat, one read, close')
        or diag($show->($r));
    @c = $calls->($r);
    is($c[2] && $len->($c[2]), 1001, 'over max: the read asks for max + 1 bytes');

    # file_read_firstline on a short file: one read of 8 KiB
    my $short = "$dir/traced-short";
    spew($short, "first line\nsecond line\n" . ('x' x 100000));
    $r = strace_call('die "wrong line\n" unless FastFile::file_read_firstline($ARGV[0]) eq "first line";', attach => 1, args => [$short]);
    ok($r->{traced} && $r->{ok}, 'firstline, short line: traced call succeeded') or diag($r->{err}, $r->{stderr});
    @c = $calls->($r);
    is($names->($r), 'openat read close', 'firstline, short line: exactly openat, read, close') or diag($show->($r));
    is($c[0] && $c[0]{args}, qq{AT_FDCWD, "$short", O_RDONLY|O_CLOEXEC}, 'firstline: openat O_RDONLY|O_CLOEXEC');
    is($c[1] && $len->($c[1]), 8192, 'firstline, short line: one read of 8192 bytes');

    # a file of one line without "\n", shorter than the block: its first
    # read is short at fstat's size, the end (no read of 0)
    my $noeol = "$dir/traced-noeol";
    spew($noeol, "only line");
    $r = strace_call('die "wrong line\n" unless FastFile::file_read_firstline($ARGV[0]) eq "only line"; die "errno $!\n" if $!+0;',
                     attach => 1, args => [$noeol]);
    ok($r->{traced} && $r->{ok}, 'firstline, no newline: traced call succeeded, $! 0') or diag($r->{err}, $r->{stderr});
    is($names->($r), 'openat read fstat close', 'firstline, no newline: openat, read, fstat, close (no read of 0)')
        or diag($show->($r));

    # a first line longer than one block: more reads, big ones, not the whole file
    my $long = "$dir/traced-long";
    spew($long, ('L' x 20000) . "\n" . ('t' x $MIB));
    $r = strace_call('die "wrong line\n" unless FastFile::file_read_firstline($ARGV[0]) eq "L" x 20000;', attach => 1, args => [$long]);
    ok($r->{traced} && $r->{ok}, 'firstline, 20000-byte line: the whole line') or diag($r->{err}, $r->{stderr});
    my @reads = grep { $_->{name} eq 'read' } @{ $r->{calls} };
    cmp_ok(scalar @reads, '>', 1, 'firstline, 20000-byte line: more than one read');
    ok(!(grep { $len->($_) < 8192 } @reads), 'firstline, 20000-byte line: every read asks for 8 KiB or more')
        or diag($show->($r));
    my $bytes = 0;
    $bytes += $_->{ret} for @reads;
    cmp_ok($bytes, '<', 100000, "firstline, 20000-byte line: read $bytes bytes, not the whole file");
    # more than one read: the fstatfs that asks whether it is on FUSE (where
    # the line read is checked by a second read of it, t/78)
    my $probe = FastFile::_build_info()->{portable} ? () : 'fstatfs';
    is($names->($r), join(' ', 'openat', ('read') x @reads, $probe // (), 'close'),
       'firstline, 20000-byte line: only openat, reads, fstatfs, close');

    # faults on read: EIO croaks (and the fd is closed), EINTR is retried
    my $ten = "$dir/traced-ten";
    spew($ten, "0123456789\n");
    for my $reader ('file_get_contents', 'file_read_firstline') {
        $r = strace_call("FastFile::$reader(\$ARGV[0])", attach => 1, args => [$ten], paths => [$ten],
                         inject => ['read:error=EIO'], env => { LC_ALL => 'C' });
        ok($r->{traced} && !$r->{ok}, "$reader, EIO on read: croaks");
        is($r->{err}, "unable to read file '$ten' - Input/output error\n", "$reader, EIO on read: message");
        is($r->{errno}, EIO, "$reader, EIO on read: \$! is EIO");
        is(scalar(grep { $_->{name} eq 'read' } @{ $r->{calls} }), 1, "$reader, EIO on read: not retried");
        ok((grep { $_->{name} eq 'close' } @{ $r->{calls} }), "$reader, EIO on read: the fd is closed")
            or diag($show->($r));

        $r = strace_call("my \$c = FastFile::$reader(\$ARGV[0]); print \"GOT<\$c>\";", attach => 1, args => [$ten], paths => [$ten],
                         inject => ['read:error=EINTR:when=1']);
        ok($r->{ok}, "$reader, EINTR on the first read: succeeds") or diag($r->{err});
        my $want = $reader eq 'file_get_contents' ? "0123456789\n" : '0123456789';
        like($r->{stdout}, qr/GOT<\Q$want\E>/, "$reader, EINTR on the first read: right content");
        my @rd = grep { $_->{name} eq 'read' } @{ $r->{calls} };
        is($rd[0] && $rd[0]{errno}, 'EINTR', "$reader, EINTR on the first read: it got EINTR and was retried")
            or diag($show->($r));
    }

    # The file grows between fstat and read. Real growth, made deterministic:
    # strace holds the first read (delay_enter) before it runs; a helper
    # process waits until /proc shows the reader stopped in that read on
    # this file, then appends. fstat said N bytes, the file now holds more:
    # the reader must notice (the +1 byte) and read on.
    my $sys_read = eval { require 'syscall.ph'; SYS_read() };
    skip "no syscall.ph for the number of read(2) (Debian: the libperl5.* package of this perl; elsewhere: h2ph): $@", 12 unless defined $sys_read;
    my $grow_code = <<'END';
my ($file, $max, $sys_read) = @ARGV;
my $reader = readlink '/proc/self';    # the real pid ($$ is forged)
my $pid = fork // die "fork: $!\n";
if (!$pid) {
    # wait (at most 3 s) until the reader is in read(2) on an fd open on $file
    for (1 .. 3000) {
        open my $s, '<', "/proc/$reader/syscall" or last;
        my $l = <$s> // '';
        if ($l =~ /^(\d+) 0x([0-9a-f]+) / && $1 == $sys_read
            && (readlink("/proc/$reader/fd/" . hex $2) // '') eq $file) {
            last;
        }
        select undef, undef, undef, 0.001;
    }
    open my $fh, '>>', $file or die;
    syswrite $fh, 'b' x 5000;
    close $fh;
    require POSIX;
    POSIX::_exit(0);
}
my $c = eval { FastFile::file_get_contents($file, $max) };
my $e = $@;
waitpid $pid, 0;
die $e if $e;
print "GOT<$c>";
END
    for my $case ([ 'grows under max', 0, ('a' x 1000) . ('b' x 5000) ],
                  [ 'grows past max', 2000, undef ]) {
        my ($label, $max, $want) = @$case;
        my $f = "$dir/grows-" . ++$n;
        spew($f, 'a' x 1000);
        $r = strace_call($grow_code, attach => 1, args => [$f, $max, $sys_read], paths => [$f],
                         inject => ['read:delay_enter=300000:when=1']);
        ok($r->{traced}, "$label: traced") or diag($r->{stderr});
        # the first fstat is the reader's (the helper waits for the read)
        my ($fstat) = grep { $_->{name} =~ /fstat/ } @{ $r->{calls} };
        like($fstat ? $fstat->{line} : '', qr/st_size=1000\b/, "$label: fstat saw 1000 bytes") or diag($show->($r));
        # the delayed read shows as "read(3, <unfinished ...>" + "<... read resumed>..."
        my ($first) = grep { $_->{line} =~ /\bread\b.*\(DELAYED\)/ } @{ $r->{calls} };
        like($first ? $first->{line} : '', qr/, 1001\) = 1001 \(DELAYED\)/,
             "$label: the first read asked for 1001 and got them all (the file had grown)") or diag($show->($r));
        if (defined $want) {
            ok($r->{ok}, "$label: succeeds") or diag($r->{err});
            my ($c) = $r->{stdout} =~ /GOT<(.*)>/s;
            bytes_is($c, $want, "$label: the grown content, all of it");
            is(slurp($f), $want, "$label: (which is what the file holds)");
        } else {
            ok(!$r->{ok}, "$label: croaks");
            is($r->{err}, "file '$f' too long - aborting\n", "$label: too long");
            is(-s $f, 6000, "$label: (the file has 6000 bytes now)");
        }
    }
}

done_testing;
