use strict;
use warnings;

# file_read_last_line against the reference model (t/lib/Reference.pm: 4 KiB
# blocks read backwards), case by case: the result or the die text (less its
# " at FILE line N."), for the contract's cases, lines around the block sizes
# of both (4 KiB, 64 KiB), random contents, directories, /proc and sysfs.

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }
use POSIX qw(setlocale LC_ALL);
BEGIN { setlocale(LC_ALL, 'C') }

use Test::More;
use lib 't/lib';
use FFTest qw(tempdir spew slurp warnings_of in_child full_testing run_perl strace_why strace_call);
use Errno ();
use Reference qw(ref_read_last_line);
use FastFile qw(file_read_last_line);

my $dir = tempdir();
my $n = 0;

# { ok, value } or { ok => 0, err } with the location cut
sub outcome {
    my ($code) = @_;
    my $v;
    my $ok = eval { $v = $code->(); 1 };
    my $err = $@;
    $err =~ s/ at \S+ line \d+\.\n\z/ at LOCATION/ if !$ok;
    return { ok => $ok ? 1 : 0, value => $v, err => $ok ? undef : $err };
}

sub show { my ($v) = @_; return 'undef' if !defined $v; return length($v) > 40 ? length($v) . ' bytes' : "'$v'" }

# FastFile and the model on $path: the same result; $want when given
sub same {
    my ($label, $path, $want) = @_;
    my $got = outcome(sub { file_read_last_line($path) });
    my $ref = outcome(sub { ref_read_last_line($path) });
    if ($ref->{ok}) {
        ok($got->{ok}, "$label: returns") or return diag($got->{err});
        ok(defined $got->{value} == defined $ref->{value} && (!defined $ref->{value} || $got->{value} eq $ref->{value}),
           "$label: same as the reference") or diag('got ' . show($got->{value}) . ', want ' . show($ref->{value}));
    } else {
        is($got->{err}, $ref->{err}, "$label: dies as the reference");
    }
    # the string ends with its NUL, as C code that takes it (open, chdir)
    # reads it: the reads filled the buffer beyond an empty or short line.
    # (The result itself: a copy would be terminated by perl.)
    if (defined $got->{value} && $got->{value} !~ /\0/) {
        no warnings 'pack';     # a pointer to the call's own (temporary) result
        is(unpack('p', pack('p', file_read_last_line($path))), $got->{value},
           "$label: the result's C string is the result");
    }
    is($got->{value}, $want, "$label: " . show($want)) if @_ > 2;
    return $got;
}

sub file_with {
    my ($content) = @_;
    my $file = "$dir/f" . ++$n;
    spew($file, $content);
    return $file;
}

# the contract's cases
same('one\ntwo\n', file_with("one\ntwo\n"), 'two');
same('abc', file_with('abc'), 'abc');
same('\n', file_with("\n"), '');
same('a\n\n', file_with("a\n\n"), '');
same('CRLF', file_with("x\r\ny\r\n"), "y\r");
same('empty', file_with(''), '');
same('5000-byte last line', file_with("first\n" . ('z' x 5000) . "\n"), 'z' x 5000);
same('no file', "$dir/none", undef);
same('\n\n\n', file_with("\n\n\n"), '');
same('line without newline after lines', file_with("a\nb\nlast"), 'last');
same('only the last newline ignored', file_with("a\nb\n\n"), '');

# last lines around both block sizes, with and without a newline at the end
for my $len (4094 .. 4098, 65534 .. 65538, 131071 .. 131073, 300_000) {
    for my $end ("\n", '') {
        for my $before ('', "head\n") {
            my $last = 'L' x $len;
            same(sprintf('%s%d-byte last line%s', $before ? 'after a line, ' : '', $len, $end ? ' + \n' : ''),
                 file_with("$before$last$end"), $last);
        }
    }
}
# the newline that ends the line before the last one at every place around
# the first block's start
for my $size (65534 .. 65538, 4095 .. 4097) {
    for my $at (1 .. 3) {
        my $content = ('p' x ($size - $at)) . "\n" . ('q' x ($at - 1)) . "\n";
        same("$size bytes, newline $at from the end", file_with($content), 'q' x ($at - 1));
    }
}

# random contents of a, \r and \n, some of them long
{
    srand(27);
    my $cases = full_testing() ? 400 : 100;
    my $bad = 0;
    for my $i (1 .. $cases) {
        my $len = int rand($i % 5 ? 200 : 140_000);
        my $nl = rand() < 0.5 ? 0.3 : 0.0002;
        my $content = join '', map { my $r = rand; $r < $nl ? "\n" : $r < $nl + 0.05 ? "\r" : 'a' } 1 .. $len;
        my $file = file_with($content);
        my $got = file_read_last_line($file);
        my $ref = ref_read_last_line($file);
        $bad++, diag("random $i: " . show($got) . ' vs ' . show($ref)) if $got ne $ref;
        unlink $file;
    }
    is($bad, 0, "$cases random contents: the same as the reference");
}

# a directory: the reference's sysseek or sysread error, whichever this
# filesystem gives
same('a directory', $dir);

# a missing name, undef and '' (no file: undef, as the reference's open)
same("''", '', undef);
{
    my $w = warnings_of(sub { is(file_read_last_line(undef), undef, 'undef: undef') });
}
# the undef is the caller's to modify, as the reference's return undef
# (not perl's read-only undef): an alias to it can be assigned
for my $name ("$dir/none", '') {
    ok(eval { $_ //= '' for file_read_last_line($name), ref_read_last_line($name); 1 },
       "no file ('$name'): the undef returned can be assigned through an alias") or diag($@);
}

# another open failure: the reference's text and $!
SKIP: {
    my $file = file_with("secret\n");
    chmod 0000, $file;
    my $res = in_child(sub {
        my $got = outcome(sub { file_read_last_line($file) });
        my $ref = outcome(sub { ref_read_last_line($file) });
        return join '|', $got->{err} // 'ok', $ref->{err} // 'ok';
    }, $> == 0 ? (65534, 65534) : ());
    skip "cannot run as nobody: $res", 2 if $res =~ /^died/;
    my ($got, $ref) = $res =~ /^ok (.*)\|(.*)\z/s;
    is($got, "file '$file' exists but open for reading failed - Permission denied\n",
       'unreadable file: the reference text');
    is($got, $ref, 'unreadable file: same as the reference');
}

# /proc: the reference's sysseek fails (EINVAL) on generated files; files
# that seek and say 0 bytes give ''
same('/proc/self/status', '/proc/self/status');
same('/proc/sys/kernel/hostname', '/proc/sys/kernel/hostname') if -r '/proc/sys/kernel/hostname';

# sysfs: 4096 bytes said, fewer held. The reference returns '' (its bug);
# FastFile the last line (an intended difference, POD CAVEATS)
SKIP: {
    my ($sys) = grep { -f $_ && -r _ && (stat _)[7] == 4096 }
        '/sys/kernel/mm/transparent_hugepage/enabled', '/sys/class/net/lo/mtu',
        '/sys/kernel/kexec_loaded', '/sys/kernel/profiling', '/sys/devices/system/cpu/online';
    skip 'no sysfs file that reports 4096 bytes', 3 unless $sys;
    open my $fh, '<', $sys or skip "$sys: $!", 3;
    my $content = do { local $/; <$fh> };
    (my $want = $content) =~ s/\n\z//;
    $want =~ s/\A.*\n//s;
    is(ref_read_last_line($sys), '', "sysfs $sys: the reference returns '' (its bug)");
    is(file_read_last_line($sys), $want, "sysfs $sys: FastFile returns its last line");
    ok(length $want, "sysfs $sys: ... which is not empty");
}

# the caller's variable is read once and left as it was
{
    my $file = file_with("x\ny\n");
    my $name = $file;
    my $copy = $name;
    is(file_read_last_line($name), 'y', 'a plain name');
    ok($name eq $copy && !utf8::is_utf8($name), 'the name is left as it was');
    require Counted;
    tie my $tied, 'Counted', $file;
    is(file_read_last_line($tied), 'y', 'a tied name');
    is(tied($tied)->{n}, 1, 'a tied name: one FETCH');
}

# the result: bytes, not UTF8-flagged, a new scalar each time
{
    my $file = file_with("a\n\xc3\xa9\xe2\x98\xba\n");
    my $got = file_read_last_line($file);
    is($got, "\xc3\xa9\xe2\x98\xba", 'the bytes of the file');
    ok(!utf8::is_utf8($got), 'not UTF8-flagged');
}

# $! after success, preset to another value: what the reference leaves
# (its sysread's 0; ENOTTY, its IO::File open's isatty, where the size is 0
# and nothing is read; ENOENT for a missing file)
{
    my @cases = ([ 'lines', file_with("one\ntwo\n") ], [ 'no newline', file_with('abc') ],
                 [ 'a long last line', file_with("a\n" . 'b' x 70000) ], [ 'empty', file_with('') ],
                 [ '/dev/null', '/dev/null' ], [ 'missing', "$dir/missing" ]);
    push @cases, [ 'sysfs directory', '/sys/kernel' ] if -d '/sys/kernel';
    for my $case (@cases) {
        my ($label, $path) = @$case;
        my @errno = map {
            my $f = $_;
            $! = Errno::EINVAL();
            $f->($path);
            $! + 0;
        } \&file_read_last_line, \&ref_read_last_line;
        is($errno[0], $errno[1], "$label: \$! after the call as the reference leaves it ($errno[1])");
    }
}

# argument counts: the reference's signature ($file) refuses others, with
# perl's text at the caller's line (naming FastFile's sub)
{
    my $file = file_with("x\n");
    for my $args ([], [ $file, 1 ], [ $file, undef, undef ]) {
        my $n = @$args;
        my $got = outcome(sub { file_read_last_line(@$args) });
        my $ref = outcome(sub { ref_read_last_line(@$args) });
        (my $want = $ref->{err} // 'returns') =~ s/'PVE::File::/'FastFile::/;
        is($got->{err} // 'returns', $want, "$n arguments: refused as by the reference's signature ($want)");
    }
    eval { file_read_last_line() };
    my $line = __LINE__ - 1;
    is($@, "Too few arguments for subroutine 'FastFile::file_read_last_line' (got 0; expected 1) at $0 line $line.\n",
       "no argument: perl's text, at the caller's line");
  SKIP: {
        skip 'perl before 5.36: no signatures as the reference has them', 3 if $] < 5.036;
        # the model's text is perl's own: a sub with the reference's signature
        eval q{package PVE::File; use feature 'signatures'; no warnings;
               sub file_read_last_line ($file) { 1 } 1} or die $@;
        for my $args ([], [ $file, 1 ], [ $file, 2, 3 ]) {
            my $real = outcome(sub { PVE::File::file_read_last_line(@$args) });
            my $ref = outcome(sub { ref_read_last_line(@$args) });
            is($ref->{err}, $real->{err}, scalar(@$args) . " arguments: the model's text is perl's ($real->{err})");
        }
    }
}

# -T: what was read is tainted, as sysread's bytes; the '' of a file whose
# size reads 0 was never read: untainted, as the reference's literal
{
    my @files = (file_with("one\ntwo\n"), file_with("a\n\n"), file_with(''));
    my $code = 'use FastFile qw(file_read_last_line); use Reference qw(ref_read_last_line); use Scalar::Util qw(tainted); '
             . 'print join(" ", map { my $f = $_; map { tainted($_->($f)) ? 1 : 0 } \&file_read_last_line, \&ref_read_last_line } @ARGV), "\n"';
    my ($status, $out) = run_perl($code, switches => ['-T'], args => \@files);
    is($out, "1 1 1 1 0 0\n", '-T: the result tainted where the reference\'s is (two lines, "a\n\n", empty file)');
}

# a file cut while its last line is read backwards (a log rotated by
# copytruncate): the handler of a signal strace sends at the Nth pread(2)
# cuts it, and runs at the poll after that block. The result is the new
# file's last line, or '' for an empty one: never bytes read before the cut
# (the bug: 64 KiB, or 128 KiB over three blocks, of the old file).
SKIP: {
    my $why = strace_why();
    skip "strace: $why", 18 if $why;
    my @cases = (
        [ 'cut to 0 after the first block',  'a' x (200 << 10), 1, 0, '', '' ],
        [ 'cut to 0 after the second block', 'a' x (300 << 10), 2, 0, '', '' ],
        [ 'cut to its first lines',          "first\nsecond\n" . 'y' x (200 << 10), 1, 13, '', 'second' ],
        [ 'cut, then a new line written',    'x' x (200 << 10), 1, 0, "new one\nnew last\n", 'new last' ],
        [ 'cut inside the first block read, then written', "one\n" . 'z' x (100 << 10), 1, 0,
          "new\n" . 'n' x (40 << 10) . "\nlast\n", 'last' ],
        [ 'cut inside the first block read, then a long line written', "one\n" . 'z' x (100 << 10), 1, 0,
          "new\n" . 'n' x (50 << 10), 'n' x (50 << 10) ],
    );
    for my $c (@cases) {
        my ($label, $content, $when, $cut, $append, $want) = @$c;
        my $file = file_with($content);
        my $r = strace_call('my $l = file_read_last_line($ARGV[0]); "$cuts|$l"', attach => 1, args => [$file, $cut, $append],
                            paths => [$file], trace => ['pread64'],
                            setup => 'our $cuts = 0; $SIG{USR1} = sub { truncate $ARGV[0], $ARGV[1] or die "truncate: $!";'
                                   . ' if (length $ARGV[2]) { open my $fh, ">>", $ARGV[0] or die; print {$fh} $ARGV[2]; close $fh or die } $cuts++ }',
                            inject => ["pread64:signal=SIGUSR1:when=$when"]);
        ok($r->{ok}, "cut mid-read, $label: returns") or diag($r->{err}, $r->{stderr});
        my ($cuts, $got) = ($r->{ret} // '') =~ /\A(\d+)\|(.*)\z/s;
        is($cuts, 1, "cut mid-read, $label: the file was cut once, during the read");
        ok(defined $got && $got eq $want, "cut mid-read, $label: " . show($want))
            or diag('got ' . show($got));
    }
}
# A big file (sparse: 1 GiB of no newline) cut to 0 at its first block:
# the reads start again from its new end, not one empty 64 KiB block a step
# back to 0 (16384 reads, none of them letting a handler run: an alarm
# waited for the whole walk; 1 TiB took minutes).
SKIP: {
    my $why = strace_why();
    skip "strace: $why", 2 if $why;
    my $file = file_with('');
    truncate $file, 1 << 30 or die "truncate: $!";
    my $r = strace_call('my $l = file_read_last_line($ARGV[0]); "$cuts|$l"', attach => 1, args => [$file],
                        paths => [$file], trace => ['pread64'],
                        setup => 'our $cuts = 0; $SIG{USR1} = sub { truncate $ARGV[0], 0 or die "truncate: $!"; $cuts++ }',
                        inject => ['pread64:signal=SIGUSR1:when=1']);
    is($r->{ret}, '1|', 'a 1 GiB file cut to 0 at its first block read: the empty file\'s ""')
        or diag($r->{err}, $r->{stderr});
    my $reads = grep { $_->{name} eq 'pread64' } @{ $r->{calls} || [] };
    cmp_ok($reads, '<=', 2, 'a 1 GiB file cut to 0 at its first block read: no walk back over empty blocks');
    unlink $file;
}
# The side the end check does not see (POD): rewritten whole to its old
# size between two blocks, the file is no shorter than the bytes read, and
# the line joins 136 KiB of the new bytes to 64 KiB of the old.
SKIP: {
    my $why = strace_why();
    skip "strace: $why", 1 if $why;
    my $file = file_with('a' x (200 << 10));
    my $r = strace_call('file_read_last_line($ARGV[0])', attach => 1, args => [$file],
                        paths => [$file], trace => ['pread64'],
                        setup => '$SIG{USR1} = sub { open my $fh, ">", $ARGV[0] or die; print {$fh} "b" x (200 << 10); close $fh or die }',
                        inject => ['pread64:signal=SIGUSR1:when=1']);
    is($r->{ret}, 'b' x (136 << 10) . 'a' x (64 << 10),
       'rewritten to its old size between two blocks: not seen (new bytes, then old: POD)') or diag($r->{err});
}

done_testing();
