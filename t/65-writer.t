#!perl
# FastFile::Writer, the streaming atomic writer, on real files: the bytes it
# writes (the file_set_contents table, chunk by chunk), print/printf/write
# and the tied handle, options, every way a writer can end without commit
# (abort, die, undef, return, process exit, fork, threads), and -- under
# strace -- how many write(2) calls a 1 MiB file costs and the exact errors
# of injected faults.
#
# The traced parts run a child perl that sets $$ to 4242, so its temp file
# is "<target>.tmp.4242" and strace can be limited to it (-P): nothing else
# the child does is traced or touched. They skip when strace cannot inject.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use Config;
use Cwd ();
use Data::Dumper ();
use Errno qw(ENOSPC EIO EXDEV EEXIST ENOENT EINTR);
use File::Spec ();
use File::Temp ();
use POSIX ();

use FastFile qw(file_set_contents atomic_writer);
use FastFile::Writer;
use lib 't/lib';
use FFTest qw(slurp spew);

POSIX::setlocale(POSIX::LC_ALL(), 'C');
umask 022;

my @WARNINGS;
$SIG{__WARN__} = sub { push @WARNINGS, $_[0] };
sub no_warnings {
    my ($what) = @_;
    is(scalar @WARNINGS, 0, "$what: no warning") or diag(@WARNINGS);
    @WARNINGS = ();
}

my $ROOT = File::Temp::tempdir('ff65-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $FAKE_PID = 4242;

# ---------------------------------------------------------------- helpers

my $n_dir = 0;
sub newdir {
    my $d = "$ROOT/d" . ++$n_dir;
    mkdir $d or die "mkdir $d: $!";
    return $d;
}

sub temps_in {
    my ($dir) = @_;
    opendir my $dh, $dir or die "opendir $dir: $!";
    return sort grep { /\.tmp\.\d+(?:\.[0-9a-f]+)?\z/ } readdir $dh;
}

sub errstr { local $! = $_[0]; return "$!" }

sub mode_of { return (stat $_[0])[2] & 07777 }

sub open_fds { opendir my $dh, '/proc/self/fd' or return -1; return scalar grep { /^\d+$/ } readdir $dh }

# The 1 MiB test file: 16,000 lines, 8,576 of 66 bytes and 7,424 of 65
# bytes (8576 * 66 + 7424 * 65 = 1,048,576), each ending in "\n".
my $LINES_CODE = <<'PERL';
sub mib_lines {
    return map { sprintf('%06d ', $_) . ('x' x ($_ < 8576 ? 58 : 57)) . "\n" } 0 .. 15999;
}
PERL
eval $LINES_CODE; die $@ if $@;
my @LINES = mib_lines();
my $MIB = join '', @LINES;

# -I options that let a child perl find the FastFile this test loaded.
my @INC_ARGS = map { '-I' . File::Spec->rel2abs($_) } grep { !ref && -d } @INC;

# '' when strace can trace a child perl and inject faults, else why not.
my $STRACE_WHY = do {
    my $why = '';
    my $ver = `strace -V 2>/dev/null` // '';
    if ($ver !~ /version (\d+)\.(\d+)/) { $why = 'strace is not installed' }
    elsif ($1 < 4 || ($1 == 4 && $2 < 16)) { $why = "strace $1.$2 cannot inject faults" }
    else {
        system('strace', '-qq', '-o', '/dev/null', '-e', 'inject=getppid:retval=4242',
               $^X, '-e', 'exit(getppid() == 4242 ? 0 : 3)');
        $why = "strace cannot trace or inject here (status $?)" if $?;
    }
    $why;
};

# Run $code in a child perl under strace, traced only on the writer's temp
# file "$target.tmp.4242". $code runs in an eval with $T = $target; the
# child reports ok, err, errno, warnings and what $code returned (res).
my $CHILD = <<'CHILD';
use strict; use warnings;
use FastFile qw(file_set_contents atomic_writer);
use FastFile::Writer;
our ($T, $code) = @ARGV;
my @warnings;
$SIG{__WARN__} = sub { push @warnings, $_[0] };
$$ = 4242;
my $res = eval "#line 1 child\n$code";
my ($err, $errno) = ($@, $! + 0);
require Data::Dumper;
local $Data::Dumper::Useqq = 1; local $Data::Dumper::Terse = 1; local $Data::Dumper::Indent = 0;
print Data::Dumper::Dumper({ ok => $err eq '' ? 1 : 0, err => $err, errno => $errno,
                             res => $res, warnings => \@warnings }), "\n";
CHILD

my $n_log = 0;
sub traced {
    my (%a) = @_;
    my $log = "$ROOT/strace." . ++$n_log;
    my @cmd = ('strace', '-qq', '-o', $log, '-e', 'signal=none',
               '-e', 'trace=' . ($a{trace} || 'write,close,rename,unlink'),
               '-P', "$a{target}.tmp.$FAKE_PID",
               (map { ('-e', "inject=$_") } @{ $a{inject} || [] }),
               '--', $^X, @INC_ARGS, '-e', $CHILD, $a{target}, $a{code});
    my $pid = open(my $ph, '-|') // die "fork: $!";
    if (!$pid) {
        open STDERR, '>&', \*STDOUT;
        exec { $cmd[0] } @cmd or POSIX::_exit(127);
    }
    my $out = do { local $/; <$ph> } // '';
    close $ph;
    my ($line) = $out =~ /^(\{.*\})$/m;
    my $r = defined $line ? eval $line : undef;
    $r = { ok => 0, err => "no result from the child: $out", errno => -1, warnings => [] }
        unless ref $r eq 'HASH';
    $r->{log} = slurp($log) // '';
    $r->{writes} = [ $r->{log} =~ /^write\(\d+, .*= (-?\d+|-1 \w+.*)$/mg ];
    $r->{injected} = () = $r->{log} =~ /\(INJECTED\)/g;
    return $r;
}

# Run perl code in a fresh perl (FastFile loaded), return its exit status.
sub run_perl {
    my ($code, @args) = @_;
    system $^X, @INC_ARGS, '-MFastFile::Writer', '-e', $code, @args;
    return $?;
}

# ------------------------------------------------------------ basic life

{
    my $dir = newdir();
    my $t = "$dir/basic";
    spew($t, "old\n");
    my $w = FastFile::Writer->new($t);
    isa_ok($w, 'FastFile::Writer');
    is_deeply([temps_in($dir)], ["basic.tmp.$$"], 'new creates "<target>.tmp.$$"');
    ok($w->print("line 1\n"), 'print returns true');
    ok($w->write("line 2\n"), 'write returns true');
    ok($w->printf("%s %d\n", 'line', 3), 'printf returns true');
    is(slurp($t), "old\n", 'before commit the target is untouched');
    is(-s "$dir/basic.tmp.$$", 0, 'small output stays in the buffer');
    ok($w->commit, 'commit returns true');
    is(slurp($t), "line 1\nline 2\nline 3\n", 'commit publishes the bytes');
    is(mode_of($t), 0644, 'default mode 0644 (umask 022)');
    is_deeply([temps_in($dir)], [], 'no temp after commit');

    ok(!eval { $w->commit; 1 }, 'a second commit croaks');
    is($@, "FastFile::Writer: already committed\n", '... with its text');
    ok(!eval { $w->print("more"); 1 }, 'print after commit croaks');
    is($@, "FastFile::Writer: already committed\n", '... with the same text');
    ok(!$w->abort, 'abort after commit is a harmless no-op (false)');
    is(slurp($t), "line 1\nline 2\nline 3\n", '... and leaves the file alone');

    my $w2 = atomic_writer("$dir/exported", { perm => 0600 });
    isa_ok($w2, 'FastFile::Writer', 'atomic_writer (exported on request)');
    $w2->commit;
    is(slurp("$dir/exported"), '', 'an empty writer commits an empty file');
    is(mode_of("$dir/exported"), 0600, 'perm option');
    ok(FastFile::atomic_writer("$dir/qualified")->commit, 'FastFile::atomic_writer');
    no_warnings('basic');
}

# ------------------------------------------------- print, $, and $\ , printf

{
    my $dir = newdir();
    my $w = FastFile::Writer->new("$dir/sep");
    {
        local $, = '-';
        local $\ = "!\n";
        $w->print('a', 'b', 'c');
        $w->print();                    # print with no items: just $\
        $w->write("w\n");               # write ignores both
        $w->printf("%s,%s\n", 'x', 'y');    # and so does printf
    }
    $w->print(1.5, ' ', 10 / 4, "\n");  # numbers stringified like print
    $w->printf('%%%03d|%-3s|%x' . "\n", 7, 'ab', 255);
    $w->commit;
    is(slurp("$dir/sep"), "a-b-c!\n!\nw\nx,y\n1.5 2.5\n%007|ab |ff\n",
       'print joins with $, and ends with $\\; printf and write do not');
    no_warnings('print');
}

# a tied scalar is FETCHed once, an overloaded object stringified once
{
    package Counted;
    our ($fetch, $string) = (0, 0);
    sub TIESCALAR { my $v = $_[1]; bless \$v }
    sub FETCH { $fetch++; ${ $_[0] } }
    use overload '""' => sub { $string++; 'obj' }, fallback => 1;
}
{
    my $dir = newdir();
    tie my $tied, 'Counted', 'tied';
    my $obj = bless {}, 'Counted';
    my $w = FastFile::Writer->new("$dir/magic");
    $w->print($tied, ' ', $obj);
    $w->write($tied);
    $w->commit;
    is(slurp("$dir/magic"), 'tied objtied', 'tied and overloaded items');
    is($Counted::fetch, 2, 'FETCH once per item');
    is($Counted::string, 1, 'overloading called once');
}

# user code run for an item (overloading) that ends the writer
{
    package Ender;
    use overload '""' => sub { $_[0]{w}->abort; 'x' }, fallback => 1;
}
{
    my $dir = newdir();
    my $w = FastFile::Writer->new("$dir/ender");
    ok(!eval { $w->print('a', bless({ w => $w }, 'Ender')); 1 }, 'an item that aborts the writer');
    is($@, "FastFile::Writer: already aborted\n", '... makes print croak');
    is_deeply([temps_in($dir)], [], '... and the temp is gone');
}

# ------------------------------------------------------------- tied handle

{
    use feature 'say';
    my $dir = newdir();
    my $t = "$dir/fh";
    spew($t, "old\n");
    my $w = FastFile::Writer->new($t);
    my $fh = $w->fh;
    ok(print({$fh} 'a', 'b'), 'print {$fh} returns true');
    printf {$fh} "[%d]", 42;
    say {$fh} 'said';
    is(syswrite($fh, "0123456789", 3, 2), 3, 'syswrite with length and offset returns the length');
    is(syswrite($fh, "-end\n"), 5, 'syswrite of a whole string');
    print {$w->fh} "direct\n";
    ok(binmode($fh), 'binmode without a layer');
    ok(binmode($fh, ':raw'), 'binmode :raw');
    ok(!eval { binmode($fh, ':utf8'); 1 }, 'binmode :utf8 croaks');
    like($@, qr/^FastFile::Writer: layer ':utf8' is not supported: use the utf8 option/, '... saying why');
    is(fileno($fh), undef, 'fileno is undef');
    ok(!eval { my $l = <$fh>; 1 }, 'reading croaks');
    like($@, qr/^FastFile::Writer: readline is not supported on a writer handle/, '... saying so');
    is(slurp($t), "old\n", 'not yet committed');
    ok(close($fh), 'close returns true');
    is(slurp($t), "ab[42]said\n234-end\ndirect\n", 'close commits');
    ok(!eval { print {$fh} 'late'; 1 }, 'print to the handle after close croaks');
    is($@, "FastFile::Writer: already committed\n", '... already committed');

    my $w2 = FastFile::Writer->new("$dir/fh2");
    {
        my $fh2 = $w2->fh;
        print {$fh2} "dropped handle\n";
    }
    undef $w2;
    is_deeply([temps_in($dir)], [], 'a handle dropped without close does not commit');
    ok(!-e "$dir/fh2", '... and the writer aborts when its last reference goes');

    tie *TIED, 'FastFile::Writer', "$dir/fh3", { perm => 0600 };
    print TIED "tied by name\n";
    close TIED;
    is(slurp("$dir/fh3"), "tied by name\n", 'tie *FH, FastFile::Writer, $file, \%opts');
    is(mode_of("$dir/fh3"), 0600, '... with options');
    no_warnings('tied handle');
}

# ------------------------------------------------------------------ options

{
    my $dir = newdir();
    for my $bad (0, -1, 1.5, 'abc', '', [], \1) {
        my $shown = ref $bad ? ref $bad : "'$bad'";
        ok(!eval { FastFile::Writer->new("$dir/bs", { buffer_size => $bad }); 1 },
           "buffer_size $shown croaks");
        is($@, "invalid value for option 'buffer_size'\n", '... invalid value');
    }
    for my $good (1, '4096', 2.0, 1e6) {
        my $w = eval { FastFile::Writer->new("$dir/bs", { buffer_size => $good }) };
        ok($w, "buffer_size '$good' accepted") or diag($@);
        $w->abort if $w;
    }
    ok(FastFile::Writer->new("$dir/bs", { buffer_size => undef })->abort, 'buffer_size undef: the default');

    for my $v (1, 0) {
        ok(!eval { FastFile::Writer->new("$dir/ic", { if_changed => $v }); 1 }, "if_changed => $v croaks");
        is($@, "FastFile::Writer: option 'if_changed' is not supported by the writer\n", '... not supported');
    }
    ok(!eval { FastFile::Writer->new("$dir/x", { bogus => 1 }); 1 }, 'an unknown option croaks');
    is($@, "unknown option 'bogus'\n", '... as file_set_contents does');
    ok(!eval { FastFile::Writer->new("$dir/x", [1]); 1 }, 'options that are not a hash');
    is($@, "FastFile::Writer: options must be a hash reference\n", '... croak');
    for my $name (undef, '') {
        ok(!eval { FastFile::Writer->new($name); 1 }, 'no file name croaks');
        is($@, "file name is undefined or empty\n", '... with the file_set_contents text');
    }
    is_deeply([temps_in($dir)], [], 'option errors create nothing');

    # open errors surface in new, with the contract's text
    my $t = "$dir/missing/sub/file";
    ok(!eval { FastFile::Writer->new($t); 1 }, 'a missing directory: new croaks');
    is($@, "unable to open file '$t.tmp.$$' - " . errstr(ENOENT) . "\n", '... unable to open file');
    is($! + 0, ENOENT, '... $! is ENOENT');
    ok(!eval { FastFile::Writer->new("$dir/nul\0byte"); 1 }, 'a NUL in the path croaks');
    is($! + 0, ENOENT, '... ENOENT, as open does');
    @WARNINGS = grep { !/^Invalid \\0 character in pathname/ } @WARNINGS;

    my $w = FastFile::Writer->new($t, { mkdir => 1 });
    $w->print("deep\n");
    $w->commit;
    is(slurp($t), "deep\n", 'mkdir option');

    spew("$dir/exists", "keep\n");
    $w = FastFile::Writer->new("$dir/exists", { noclobber => 1 });
    $w->print("lost\n");
    ok(!eval { $w->commit; 1 }, 'noclobber: commit over an existing file croaks');
    is($@, "close (rename) atomic file '$dir/exists' failed: " . errstr(EEXIST) . "\n",
       '... with the rename text');
    is($! + 0, EEXIST, '... $! is EEXIST');
    is(slurp("$dir/exists"), "keep\n", '... the file is kept');
    is_deeply([temps_in($dir)], [], '... no temp left');
    ok(!eval { $w->commit; 1 }, 'commit after a failed commit croaks');
    is($@, "FastFile::Writer: already aborted\n", '... already aborted');

    spew("$dir/kept-mode", "old\n");
    chmod 0640, "$dir/kept-mode";
    $w = FastFile::Writer->new("$dir/kept-mode", { preserve => 1 });
    $w->commit;
    is(mode_of("$dir/kept-mode"), 0640, 'preserve option');

    symlink 'real', "$dir/link" or die "symlink: $!";
    $w = FastFile::Writer->new("$dir/link", { follow_symlinks => 1, fsync => 1 });
    $w->print("through\n");
    $w->commit;
    ok(-l "$dir/link", 'follow_symlinks: the link stays');
    is(slurp("$dir/real"), "through\n", '... the file it names is written (with fsync)');
    no_warnings('options');
}

# -------------------------------------------------------------- bytes table

{
    my $dir = newdir();
    my $latin = "caf\xe9 \xff";                  # bytes, no UTF8 flag
    my $upgraded = $latin;
    utf8::upgrade($upgraded);                    # same characters, UTF8 flag
    my $wide = "smile \x{263a} \x{10ffff}";

    # item, utf8 option, expected bytes, warns
    my @cases = (
        [ 'bytes',             $latin,    0, "caf\xe9 \xff",                     0 ],
        [ 'bytes, utf8',       $latin,    1, "caf\xc3\xa9 \xc3\xbf",             0 ],
        [ 'upgraded',          $upgraded, 0, "caf\xe9 \xff",                     0 ],
        [ 'upgraded, utf8',    $upgraded, 1, "caf\xc3\xa9 \xc3\xbf",             0 ],
        [ 'wide',              $wide,     0, "smile \xe2\x98\xba \xf4\x8f\xbf\xbf", 1 ],
        [ 'wide, utf8',        $wide,     1, "smile \xe2\x98\xba \xf4\x8f\xbf\xbf", 0 ],
    );
    for my $c (@cases) {
        my ($name, $item, $utf8, $bytes, $warns) = @$c;
        for my $method (qw(print write printf)) {
            my $t = "$dir/$method";
            my $w = FastFile::Writer->new($t, { utf8 => $utf8 });
            $method eq 'printf' ? $w->printf('%s', $item) : $w->$method($item);
            $w->commit;
            is(slurp($t), $bytes, "$name: $method writes the table's bytes");
            if ($warns) {
                is(scalar @WARNINGS, 1, "$name: $method warns once");
                like($WARNINGS[0] // '', qr/^Wide character in \S+ at /, '... Wide character');
                like($WARNINGS[0] // '', qr/^Wide character in FastFile::Writer::\Q$method\E at /,
                     '... naming the method');
                @WARNINGS = ();
                {
                    no warnings 'utf8';
                    my $q = FastFile::Writer->new($t);
                    $q->$method($method eq 'printf' ? ('%s', $item) : $item);
                    $q->commit;
                }
                no_warnings("$name: $method under no warnings 'utf8'");
            }
            else {
                no_warnings("$name: $method");
            }
        }
        file_set_contents("$dir/ref", $item, { utf8 => $utf8 });
        @WARNINGS = ();
        is(slurp("$dir/ref"), $bytes, "$name: file_set_contents agrees");
    }

    # each item of a print is its own chunk, as with print
    my $w = FastFile::Writer->new("$dir/mixed");
    { no warnings 'utf8'; $w->print($latin, '|', $wide, '|', $upgraded) }
    $w->commit;
    is(slurp("$dir/mixed"), "caf\xe9 \xff|smile \xe2\x98\xba \xf4\x8f\xbf\xbf|caf\xe9 \xff",
       'one print: Latin-1 items stay bytes next to a wide one');

    # undef: nothing written, an 'uninitialized' warning
    $w = FastFile::Writer->new("$dir/undef");
    $w->print('a', undef, 'b');
    $w->commit;
    is(slurp("$dir/undef"), 'ab', 'undef adds nothing');
    is(scalar @WARNINGS, 1, '... and warns once');
    like($WARNINGS[0] // '', qr/^Use of uninitialized value in \S+ at /, '... uninitialized');
    @WARNINGS = ();
    {
        no warnings 'uninitialized';
        $w = FastFile::Writer->new("$dir/undef");
        $w->print(undef);
        $w->commit;
    }
    no_warnings("undef under no warnings 'uninitialized'");
}

# ---------------------------------------------- 1 MiB from 16,000 prints

{
    my $dir = newdir();
    my $w = FastFile::Writer->new("$dir/mib");
    $w->print($_) for @LINES;
    $w->commit;
    file_set_contents("$dir/ref", $MIB);
    is(length $MIB, 1048576, 'the test data is exactly 1 MiB in 16,000 lines');
    ok(slurp("$dir/mib") eq slurp("$dir/ref"), '16,000 prints give the bytes file_set_contents writes');

    $w = FastFile::Writer->new("$dir/mib64", { buffer_size => 65536 });
    my $fh = $w->fh;
    print {$fh} $_ for @LINES;
    close $fh;
    ok(slurp("$dir/mib64") eq $MIB, 'the same through the tied handle with a 64 KiB buffer');
}

SKIP: {
    skip "write(2) counts: $STRACE_WHY", 9 if $STRACE_WHY;
    my $dir = newdir();
    my $t = "$dir/traced";
    my $r = traced(target => $t, trace => 'write', code => $LINES_CODE . <<'PERL');
my $w = FastFile::Writer->new($T);
$w->print($_) for mib_lines();
$w->commit;
PERL
    ok($r->{ok}, '1 MiB from 16,000 prints under strace') or diag($r->{err});
    is_deeply($r->{writes}, [1048576], '... exactly one write(2) of 1 MiB');
    ok(slurp($t) eq $MIB, '... the right bytes');

    $r = traced(target => $t, trace => 'write', code => $LINES_CODE . <<'PERL');
my $w = FastFile::Writer->new($T, { buffer_size => 64 * 1024 });
$w->print($_) for mib_lines();
$w->commit;
PERL
    ok($r->{ok}, 'buffer_size 64 KiB') or diag($r->{err});
    is_deeply($r->{writes}, [ (65536) x 16 ], '... exactly 16 writes of 64 KiB');
    ok(slurp($t) eq $MIB, '... the right bytes');

    # fill, flush, then a rest of a whole buffer or more straight from the string
    $r = traced(target => $t, trace => 'write', code => <<'PERL');
my $w = FastFile::Writer->new($T, { buffer_size => 4096 });
$w->print('a' x 100);
$w->print('b' x 10000);     # 3996 fill the buffer, 6004 go straight out
$w->print('c' x 10);
$w->write('d' x 5000);      # 4086 fill it, 914 stay
$w->commit;
PERL
    ok($r->{ok}, 'large chunks') or diag($r->{err});
    is_deeply($r->{writes}, [4096, 6004, 4096, 914], '... fill + flush, then no-copy writes, then the rest');
    is(slurp($t), ('a' x 100) . ('b' x 10000) . ('c' x 10) . ('d' x 5000), '... in order');
}

# ------------------------------------------------------- ending without commit

{
    my $dir = newdir();
    my $t = "$dir/target";
    spew($t, "old\n");
    my $tmp = "$t.tmp.$$";

    my $w = FastFile::Writer->new($t, { buffer_size => 16 });
    $w->print('x' x 100);               # flushed: the temp has data
    ok(-s $tmp, 'the temp holds flushed data');
    ok($w->abort, 'abort returns true');
    ok(!-e $tmp, '... the temp is removed');
    ok(!$w->abort, 'a second abort returns false');
    ok(!eval { $w->print('y'); 1 }, 'print after abort croaks');
    is($@, "FastFile::Writer: already aborted\n", '... already aborted');
    ok(!eval { $w->commit; 1 }, 'commit after abort croaks');
    is(slurp($t), "old\n", 'abort: target unchanged');

    ok(!eval { my $v = FastFile::Writer->new($t); $v->print("new\n"); die "oops\n" }, 'die in a block');
    is($@, "oops\n", '... $@ is the die');
    is_deeply([temps_in($dir)], [], '... no temp left');

    $w = FastFile::Writer->new($t);
    $w->print("new\n");
    ok(-e $tmp, 'undef $w: the temp exists before');
    undef $w;
    ok(!-e $tmp, '... and not after');

    my $early = sub { my $v = FastFile::Writer->new($t); $v->print("new\n"); return 1; $v->commit };
    ok($early->(), 'return before commit');
    is_deeply([temps_in($dir)], [], '... no temp left');

    my $fds = open_fds();
    for (1 .. 200) {
        my $v = FastFile::Writer->new($t, { buffer_size => 8 });
        $v->print("0123456789");
        $_ % 2 ? $v->abort : undef $v;
    }
    is(open_fds(), $fds, '200 writers aborted or dropped: no fd leaked');
    is_deeply([temps_in($dir)], [], '... no temp left');

    # process exit without commit: lexical, global, uncaught die
    # (each child checks that its temp exists before it ends: else exit 7)
    my $made = '$w->print("new\n"); -e "$ARGV[0].tmp.$$" or exit 7;';
    for my $case ([ 'a file lexical',  0,   'my $w = FastFile::Writer->new($ARGV[0]);' . $made . 'exit 0' ],
                  [ 'a global',        3,   'our $w = FastFile::Writer->new($ARGV[0]);' . $made . 'exit 3' ],
                  [ 'an uncaught die', 255, 'my $w = FastFile::Writer->new($ARGV[0]);' . $made . '$! = 0; die "bye\n"' ]) {
        my ($name, $exit, $code) = @$case;
        my $status = run_perl("open STDERR, q{>}, q{/dev/null}; $code", $t);
        is($status >> 8, $exit, "process exit with $name, uncommitted");
        is_deeply([temps_in($dir)], [], '... no temp left');
    }
    is(slurp($t), "old\n", 'after all that the target is unchanged');
    no_warnings('abort paths');
}

# ------------------------------------------------------------------- fork

{
    my $dir = newdir();
    my $t = "$dir/forked";
    spew($t, "old\n");
    my $tmp = "$t.tmp.$$";
    my $w = FastFile::Writer->new($t, { buffer_size => 64 });
    $w->print("before fork\n");        # buffered: must be written once, by the parent

    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my $ok = 1;
        $ok &&= !eval { $w->commit; 1 } && $@ eq "FastFile::Writer: the writer belongs to process "
                                                . getppid() . "\n";
        $ok &&= !eval { $w->print('z' x 100); 1 } && $@ =~ /belongs to process/;
        my $copy = $w;
        undef $w;
        undef $copy;                    # the child's copy goes away
        POSIX::_exit($ok ? 0 : 1);
    }
    waitpid $pid, 0;
    is($?, 0, 'child: commit and a flushing print croak "belongs to process"');
    ok(-e $tmp, "the child's destruction left the parent's temp alone");

    $pid = fork // die "fork: $!";
    if (!$pid) {
        $w->abort;                      # abort in the child: its copy only
        exit 0;                         # and global destruction
    }
    waitpid $pid, 0;
    ok(-e $tmp, "... so did the child's abort and exit");

    $w->print("after fork\n");
    ok($w->commit, "the parent's commit works");
    is(slurp($t), "before fork\nafter fork\n", '... with its data, written once');
    is_deeply([temps_in($dir)], [], '... no temp left');
    no_warnings('fork');
}

# ---------------------------------------------------------------- threads

SKIP: {
    skip 'perl without ithreads', 2 unless $Config{useithreads};
    my $dir = newdir();
    my $status = run_perl(<<'PERL', "$dir/threaded");
use threads;
local $SIG{ALRM} = sub { exit 9 }; alarm 30;
my $w = FastFile::Writer->new($ARGV[0]);
$w->print("parent\n");
my $fh = $w->fh;
# the clone is a reference to an unblessed undef: no method, nothing to free
my $inert = threads->create(sub {
    ref $w eq 'SCALAR' && !defined $$w && !eval { $w->print("from the thread\n"); 1 } ? 1 : 0
})->join;
exit 2 unless $inert;
$w->print("still mine\n");
print {$fh} "via fh\n";
$w->commit or exit 3;
exit 0;
PERL
    is($status, 0, 'threads: the clone is inert, the parent commits');
    is(slurp("$dir/threaded"), "parent\nstill mine\nvia fh\n", '... with its data');
}

# --------------------------------------------- injected faults (strace)

SKIP: {
    skip "fault injection: $STRACE_WHY", 29 if $STRACE_WHY;
    my $dir = newdir();
    my $t = "$dir/fault";
    my $tmp = "$t.tmp.$FAKE_PID";
    my $old = "old contents\n";
    spew($t, $old);

    # ENOSPC on the second flush, inside print
    my $r = traced(target => $t, inject => ['write:error=ENOSPC:when=2'], code => <<'PERL');
my $w = FastFile::Writer->new($T, { buffer_size => 4096 });
$w->print('x' x 4096);      # first flush: fine
$w->print('y' x 100);
$w->print('z' x 4000);      # second flush: no space
PERL
    is($r->{injected}, 1, 'ENOSPC injected into the second write');
    is($r->{err}, "unable to write '$tmp' - " . errstr(ENOSPC) . "\n", '... print croaks with the write text');
    is($r->{errno}, ENOSPC, '... $! is ENOSPC');
    is_deeply([temps_in($dir)], [], '... no temp left');
    is(slurp($t), $old, '... target unchanged');

    # ENOSPC on the last write, in commit; then commit again
    $r = traced(target => $t, inject => ['write:error=ENOSPC'], code => <<'PERL');
my $w = FastFile::Writer->new($T);
$w->print("some data\n");
eval { $w->commit };
my $first = $@;
eval { $w->commit };
die $first . $@;
PERL
    is($r->{err}, "unable to write '$tmp' - " . errstr(ENOSPC) . "\n"
                . "FastFile::Writer: already aborted\n", 'ENOSPC in commit, then commit again');
    is_deeply([temps_in($dir)], [], '... no temp left');
    is(slurp($t), $old, '... target unchanged');

    # a write that returns 0 counts as ENOSPC
    $r = traced(target => $t, inject => ['write:retval=0'], code => <<'PERL');
my $w = FastFile::Writer->new($T); $w->print("data"); $w->commit;
PERL
    is($r->{err}, "unable to write '$tmp' - " . errstr(ENOSPC) . "\n", 'write returning 0: ENOSPC');
    is_deeply([temps_in($dir)], [], '... no temp left');

    # EIO from close at commit
    $r = traced(target => $t, inject => ['close:error=EIO'], code => <<'PERL');
my $w = FastFile::Writer->new($T); $w->print("data\n"); $w->commit;
PERL
    is($r->{injected}, 1, 'EIO injected into close');
    is($r->{err}, "closing file '$tmp' failed - " . errstr(EIO) . "\n", '... commit croaks with the close text');
    is($r->{errno}, EIO, '... $! is EIO');
    is_deeply([temps_in($dir)], [], '... no temp left');
    is(slurp($t), $old, '... target unchanged');

    # EXDEV from rename at commit
    $r = traced(target => $t, inject => ['rename:error=EXDEV'], code => <<'PERL');
my $w = FastFile::Writer->new($T); $w->print("data\n"); $w->commit;
PERL
    is($r->{injected}, 1, 'EXDEV injected into rename');
    is($r->{err}, "close (rename) atomic file '$t' failed: " . errstr(EXDEV) . "\n",
       '... commit croaks with the rename text');
    is($r->{errno}, EXDEV, '... $! is EXDEV');
    is_deeply([temps_in($dir)], [], '... no temp left');
    is(slurp($t), $old, '... target unchanged');

    # EINTR without a signal: retried
    $r = traced(target => $t, inject => ['write:error=EINTR:when=1'], code => <<'PERL');
my $w = FastFile::Writer->new($T); $w->print("data\n"); $w->commit;
PERL
    ok($r->{ok}, 'EINTR on write: retried') or diag($r->{err});
    is(scalar @{ $r->{writes} }, 2, '... a second write(2)');
    is(slurp($t), "data\n", '... the file is complete');
    spew($t, $old);

    # EINTR with SIGALRM pending: perl's handler runs; a handler that dies aborts
    $r = traced(target => $t, inject => ['write:error=EINTR:signal=SIGALRM:when=1'], code => <<'PERL');
local $SIG{ALRM} = sub { die "timeout\n" };
my $w = FastFile::Writer->new($T, { buffer_size => 4096 });
eval { $w->print('x' x 5000) };
my $first = $@;
my $left = -e "$T.tmp.$$" ? 'temp left' : 'no temp';
eval { $w->print('y') };
die "$first$left\n$@";
PERL
    is($r->{err}, "timeout\nno temp\nFastFile::Writer: already aborted\n",
       'a signal handler that dies during a flush aborts the writer');
    is(slurp($t), $old, '... target unchanged');

    # a handler that changes the string being printed while part of it still
    # waits to be copied: the string is read-only meanwhile (it used to be
    # reallocated under the pointer the writer still held)
    $r = traced(target => $t, inject => ['write:error=EINTR:signal=SIGALRM:when=1'], code => <<'PERL');
my $w = FastFile::Writer->new($T, { buffer_size => 4096 });
my $data = 'x' x 5000;
local $SIG{ALRM} = sub { $data .= 'y' x 100000 };
$w->print('a' x 100);   # the buffer is not empty: $data is copied in two parts
$w->print($data);
$w->commit;
PERL
    like($r->{err}, qr/^Modification of a read-only value attempted/,
         'a handler changing the string being flushed dies');
    is_deeply([temps_in($dir)], [], '... no temp left');
    is(slurp($t), $old, '... target unchanged');

    # a handler that uses the writer it interrupted
    $r = traced(target => $t, inject => ['write:error=EINTR:signal=SIGALRM:when=1'], code => <<'PERL');
my $w = FastFile::Writer->new($T);
local $SIG{ALRM} = sub { $w->print("from the handler") };
$w->print("data");
$w->commit;
PERL
    is($r->{err}, "FastFile::Writer: busy (called while it writes)\n", 'a handler using the busy writer croaks');
    is_deeply([temps_in($dir)], [], '... no temp left');
    is(slurp($t), $old, '... target unchanged');
    is_deeply($r->{warnings}, [], 'no warnings in the traced children');
}

# ------------------------------------------------------- only real writers
{
    # a forged object in the class (an IV that is no writer's address) is
    # refused, and its destruction touches nothing
    my $fake = bless \(my $addr = 12345), 'FastFile::Writer';
    ok(!eval { $fake->print('x'); 1 }, 'a forged writer object is refused');
    is($@, "FastFile::Writer: not a writer object\n", '... with its text');
    ok(!eval { $fake->commit; 1 }, '... commit too');
    undef $fake;    # DESTROY must not take 12345 for a pointer
    pass('... and destroying it is harmless');
    ok(!eval { FastFile::Writer::print('FastFile::Writer', 'y'); 1 }, 'a class name is refused');

    { package My::Writer; our @ISA = ('FastFile::Writer'); }
    my $dir = newdir();
    my $w = My::Writer->new("$dir/sub");
    $w->print('from a subclass');
    ok($w->commit, 'a subclass of the writer works');
    is(slurp("$dir/sub"), 'from a subclass', '... content');
}

is_deeply(\@WARNINGS, [], 'no unexpected warnings') or diag(@WARNINGS);
done_testing;
