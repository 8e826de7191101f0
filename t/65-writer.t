#!perl
# FastFile::Writer, the streaming atomic writer, on real files: its life
# (new, print/printf/write, commit), print's $, and $\, the tied handle,
# options, the bytes it writes (the file_set_contents table, chunk by chunk)
# and -- under strace -- how many write(2) calls a 1 MiB file costs. Its
# magic is t/66-writer-magic.t, its errors and faults t/67-writer-errors.t,
# fork and threads t/68-writer-fork-threads.t, taint t/60-taint.t.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use Errno qw(ENOENT EEXIST);
use POSIX ();

use FastFile qw(file_set_contents atomic_writer);
use FastFile::Writer;
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in errno_text warnings_of no_warnings strace_why strace_call
              calls_named);

POSIX::setlocale(POSIX::LC_ALL(), 'C');
umask 022;

sub mode_of { return (stat $_[0])[2] & 07777 }

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

# $code in a child perl under strace, only its write(2) calls on the
# writer's temp file ($$ forged, see FFTest); writes: what each returned
sub traced {
    my ($t, $code) = @_;
    my $r = strace_call($code, target => $t, pid => $FFTest::PID, paths => ['%TMP%'], trace => ['write']);
    $r->{writes} = [ map { $_->{ret} } calls_named($r, 'write') ];
    return $r;
}

# ------------------------------------------------------------ basic life

{
    my $dir = tempdir();
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
    my $dir = tempdir();
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

# ------------------------------------------------------------- tied handle

{
    use feature 'say';
    my $dir = tempdir();
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
    my $dir = tempdir();
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
    is($@, "unable to open file '$t.tmp.$$' - " . errno_text(ENOENT) . "\n", '... unable to open file');
    is($! + 0, ENOENT, '... $! is ENOENT');
    my $made;
    my @w = warnings_of { $made = eval { FastFile::Writer->new("$dir/nul\0byte"); 1 } };
    ok(!$made, 'a NUL in the path croaks');
    is($! + 0, ENOENT, '... ENOENT, as open does');
    warn $_ for grep { !/^Invalid \\0 character in pathname/ } @w;    # any other: unexpected

    my $w = FastFile::Writer->new($t, { mkdir => 1 });
    $w->print("deep\n");
    $w->commit;
    is(slurp($t), "deep\n", 'mkdir option');

    spew("$dir/exists", "keep\n");
    $w = FastFile::Writer->new("$dir/exists", { noclobber => 1 });
    $w->print("lost\n");
    ok(!eval { $w->commit; 1 }, 'noclobber: commit over an existing file croaks');
    is($@, "close (rename) atomic file '$dir/exists' failed: " . errno_text(EEXIST) . "\n",
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
    my $dir = tempdir();
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
            my @w = warnings_of {
                my $w = FastFile::Writer->new($t, { utf8 => $utf8 });
                $method eq 'printf' ? $w->printf('%s', $item) : $w->$method($item);
                $w->commit;
            };
            is(slurp($t), $bytes, "$name: $method writes the table's bytes");
            if ($warns) {
                is(scalar @w, 1, "$name: $method warns once");
                like($w[0] // '', qr/^Wide character in \S+ at /, '... Wide character');
                like($w[0] // '', qr/^Wide character in FastFile::Writer::\Q$method\E at /,
                     '... naming the method');
                {
                    no warnings 'utf8';
                    my $q = FastFile::Writer->new($t);
                    $q->$method($method eq 'printf' ? ('%s', $item) : $item);
                    $q->commit;
                }
                no_warnings("$name: $method under no warnings 'utf8'");
            }
            else {
                is(scalar @w, 0, "$name: $method: no warning");
            }
        }
        warnings_of { file_set_contents("$dir/ref", $item, { utf8 => $utf8 }) };
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
    my @w = warnings_of { $w->print('a', undef, 'b') };
    $w->commit;
    is(slurp("$dir/undef"), 'ab', 'undef adds nothing');
    is(scalar @w, 1, '... and warns once');
    like($w[0] // '', qr/^Use of uninitialized value in \S+ at /, '... uninitialized');
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
    my $dir = tempdir();
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
    my $why = strace_why();
    skip "write(2) counts: $why", 9 if $why;
    my $dir = tempdir();
    my $t = "$dir/traced";
    my $r = traced($t, $LINES_CODE . <<'PERL');
my $w = FastFile::Writer->new($T);
$w->print($_) for mib_lines();
$w->commit;
PERL
    ok($r->{ok}, '1 MiB from 16,000 prints under strace') or diag($r->{err});
    is_deeply($r->{writes}, [1048576], '... exactly one write(2) of 1 MiB');
    ok(slurp($t) eq $MIB, '... the right bytes');

    $r = traced($t, $LINES_CODE . <<'PERL');
my $w = FastFile::Writer->new($T, { buffer_size => 64 * 1024 });
$w->print($_) for mib_lines();
$w->commit;
PERL
    ok($r->{ok}, 'buffer_size 64 KiB') or diag($r->{err});
    is_deeply($r->{writes}, [ (65536) x 16 ], '... exactly 16 writes of 64 KiB');
    ok(slurp($t) eq $MIB, '... the right bytes');

    # fill, flush, then a rest of a whole buffer or more straight from the string
    $r = traced($t, <<'PERL');
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

no_warnings('the whole test');
done_testing;
