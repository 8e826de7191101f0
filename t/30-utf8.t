use strict;
use warnings;

use Test::More;
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in warnings_of run_perl);
use FastFile;

my $dir = tempdir();
my $file = "$dir/target";
my $wide = "smile \x{263a}";
my $line;

# Wide character: category utf8
{
    my @w = warnings_of { $line = __LINE__; file_set_contents($file, $wide) };
    is_deeply(\@w, ["Wide character in file_set_contents at $0 line $line.\n"],
              'wide characters: "Wide character in file_set_contents" pointing at the caller');
    is(slurp($file), "smile \xe2\x98\xba", '... written as UTF-8');

    @w = warnings_of { no warnings 'utf8'; file_set_contents($file, $wide) };
    is_deeply(\@w, [], 'no warning under no warnings "utf8"');

    @w = warnings_of { no warnings; file_set_contents($file, $wide) };
    is_deeply(\@w, [], 'no warning under no warnings');

    @w = warnings_of { file_set_contents($file, $wide, undef, 1) };
    is_deeply(\@w, [], 'no warning with force_utf8');
    is(slurp($file), "smile \xe2\x98\xba", '... same bytes');

    @w = warnings_of { no warnings 'uninitialized'; $line = __LINE__; file_set_contents($file, $wide) };
    is_deeply(\@w, ["Wide character in file_set_contents at $0 line $line.\n"],
              'no warnings "uninitialized" does not silence it');

    my $latin1 = "caf\x{e9}";
    utf8::upgrade($latin1);
    @w = warnings_of { file_set_contents($file, $latin1) };
    is_deeply(\@w, [], 'no warning for an upgraded Latin-1 string');
}

# item 4: FATAL never aborts the write (the reference warns from its own
# scope): the warning is given, not raised, and the file is written
{
    spew($file, 'old');
    my @w;
    my $ok = eval {
        use warnings FATAL => 'all';
        @w = warnings_of { $line = __LINE__; file_set_contents($file, $wide) };
        1;
    };
    ok($ok, 'FATAL all: wide characters do not die') or diag($@);
    is_deeply(\@w, ["Wide character in file_set_contents at $0 line $line.\n"], 'FATAL all: the warning is given');
    is(slurp($file), "smile \xe2\x98\xba", 'FATAL all: written');
    is_deeply([ temps_in($dir) ], [], 'FATAL all: no temp');

    $ok = eval { use warnings FATAL => 'utf8'; @w = warnings_of { file_set_contents($file, "$wide!") }; 1 };
    ok($ok && slurp($file) eq "smile \xe2\x98\xba!", 'FATAL utf8: written') or diag($@);
    is(scalar @w, 1, 'FATAL utf8: one warning');

    @w = warnings_of { use warnings FATAL => 'all'; no warnings 'utf8'; file_set_contents($file, $wide) };
    is_deeply(\@w, [], 'FATAL all, then no warnings "utf8": silent');

    # the writer's print, too
    require FastFile::Writer;
    $ok = eval {
        use warnings FATAL => 'all';
        @w = warnings_of { my $wr = FastFile::Writer->new($file); $wr->print($wide); $wr->commit };
        1;
    };
    ok($ok && slurp($file) eq "smile \xe2\x98\xba", 'FATAL all: the writer\'s print writes') or diag($@);
    is(scalar @w, 1, 'FATAL all: the writer\'s print warns once');
}

# undef data: category uninitialized
{
    my @w = warnings_of { $line = __LINE__; file_set_contents($file, undef) };
    is_deeply(\@w, ["Use of uninitialized value in file_set_contents at $0 line $line.\n"],
              'undef data: "Use of uninitialized value in file_set_contents" pointing at the caller');
    like($w[0] // '', qr/ at \Q$0\E line \d+\.\n\z/, '... ends with " at <file> line <n>.\n"');
    is(-s $file, 0, '... empty file');

    @w = warnings_of { no warnings 'uninitialized'; file_set_contents($file, undef) };
    is_deeply(\@w, [], 'no warning under no warnings "uninitialized"');

    @w = warnings_of { no warnings 'utf8'; $line = __LINE__; file_set_contents($file, undef) };
    is_deeply(\@w, ["Use of uninitialized value in file_set_contents at $0 line $line.\n"],
              'no warnings "utf8" does not silence it');

    @w = warnings_of { $line = __LINE__; file_set_contents($file, undef, 0644, 1) };
    is_deeply(\@w, ["Use of uninitialized value in file_set_contents at $0 line $line.\n"],
              'undef data with force_utf8: same warning');

    my $u;
    @w = warnings_of { $line = __LINE__; file_set_contents($file, $u) };
    is(scalar @w, 1, 'undef variable: one warning');
    like($w[0] // '', qr/^Use of uninitialized value (?:\$u )?in file_set_contents at \Q$0\E line $line\.\n\z/,
         'undef variable: uninitialized warning (the variable name may be given)');

    # item 4: never fatal
    spew($file, 'old');
    my $ok = eval {
        use warnings FATAL => 'all';
        @w = warnings_of { $line = __LINE__; file_set_contents($file, undef) };
        1;
    };
    ok($ok, 'FATAL all: undef data does not die') or diag($@);
    is_deeply(\@w, ["Use of uninitialized value in file_set_contents at $0 line $line.\n"],
              'FATAL all: the uninitialized warning is given');
    is(slurp($file), '', 'FATAL all: the empty file is written');
    is_deeply([ temps_in($dir) ], [], 'FATAL all: no temp');
}

# Without any warnings pragma the warnings behave like print's: Wide
# character is a default warning, uninitialized is not (unless -w).
{
    my $run = sub {
        my (@switches) = @_;
        my $code = 'file_set_contents($ARGV[0], "\x{263a}"); file_set_contents($ARGV[0], undef);'
                 . ' open my $fh, ">", "/dev/null" or die; print $fh "\x{263a}"; print $fh undef; close $fh;';
        my (undef, $out) = run_perl($code, switches => [@switches, '-MFastFile'], args => [$file]);
        return $out;
    };
    my $out = $run->();
    is($out, "Wide character in file_set_contents at -e line 1.\nWide character in print at -e line 1.\n",
       'no pragma: Wide character warns by default (like print), uninitialized does not');
    $out = $run->('-w');
    is($out, "Wide character in file_set_contents at -e line 1.\n"
           . "Use of uninitialized value in file_set_contents at -e line 1.\n"
           . "Wide character in print at -e line 1.\n"
           . "Use of uninitialized value in print at -e line 1.\n",
       '-w: both warn, like print');
    $out = $run->('-X');
    is($out, '', '-X: no warnings at all');
}

is_deeply([ temps_in($dir) ], [], 'no temp files left');

done_testing;
