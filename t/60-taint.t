#!perl -T
# Taint mode: a tainted file name croaks as open would (file_set_contents,
# file_set_contents_many, FastFile::Writer->new), before anything is written;
# tainted data; a tainted perm, positional or in an options hash, croaks as
# sysopen's does; the readers accept a tainted name and return tainted
# data, as perl's own reads do.
use strict;
use warnings;

use Test::More;
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in);
use FastFile qw(:all);
use FastFile::Writer;

ok(${^TAINT}, 'running under -T') or BAIL_OUT('not in taint mode');

my $dir = tempdir();
($dir) = $dir =~ /\A(.*)\z/s;    # our own temp dir: trusted
my $taint = substr($ENV{PATH} // '', 0, 0) . substr($0, 0, 0);    # empty and tainted

sub is_tainted { my $v = shift; return !eval { eval '#' . substr($v, 0, 0); 1 } }

# a tainted positional perm ($what) dies as the reference's sysopen does:
# the target keeps $old, no temp, and sysopen refuses it in the same words
sub tainted_perm_refused {
    my ($what, $target, $old, $perm) = @_;
    my $line;
    my $ok = eval { $line = __LINE__; file_set_contents($target, 'p', $perm); 1 };
    ok(!$ok, "$what: croaks");
    is($@, "Insecure dependency in file_set_contents while running with -T switch at $0 line $line.\n",
       "$what: Insecure dependency message");
    is(slurp($target), $old, "$what: target unchanged");
    is_deeply([ temps_in($dir) ], [], "$what: no temp");
    ok(!eval { sysopen my $fh, "$target.x", 0101, $perm; 1 }, "$what: sysopen croaks on it too");
    like($@, qr/^Insecure dependency in sysopen while running with -T switch/, '... in the same words');
}
ok(is_tainted($taint), 'the taint source is tainted');

my $file = "$dir/target";

# a tainted file name croaks like open would
{
    my $tainted_name = $file . $taint;
    ok(is_tainted($tainted_name), 'file name is tainted');
    my $line;
    my $ok = eval { $line = __LINE__; file_set_contents($tainted_name, 'data'); 1 };
    ok(!$ok, 'tainted file name: croaks');
    is($@, "Insecure dependency in file_set_contents while running with -T switch at $0 line $line.\n",
       'tainted file name: Insecure dependency message');
    ok(!-e $file, 'tainted file name: nothing written');
    is_deeply([ temps_in($dir) ], [], 'tainted file name: no temp');

    # what open says, for comparison
    ok(!eval { open my $fh, '>', $tainted_name; 1 }, 'open croaks on it too');
    like($@, qr/^Insecure dependency in open while running with -T switch/, '... in the same words');
}

# a file name whose overloaded "" (or its fallback) returns a tainted string:
# the reference's sysopen croaks on the string, so do the writers (they
# checked only the object, and wrote)
{
    package TaintedName;
    use overload '""' => sub { $_[0]{name} }, fallback => 1;
}
{
    my $obj = bless { name => $file . $taint }, 'TaintedName';
    for my $call ([ file_set_contents => sub { file_set_contents($obj, 'data') } ],
                  [ file_set_contents_many => sub { file_set_contents_many([ $obj, 'data' ]) } ],
                  [ 'FastFile::Writer->new' => sub { FastFile::Writer->new($obj)->commit } ]) {
        my ($name, $code) = @$call;
        ok(!eval { $code->(); 1 }, "$name: an overloaded name that gives a tainted string croaks");
        like($@, qr/^Insecure dependency in \Q$name\E while running with -T switch/, '... Insecure dependency');
        ok(!-e $file, '... nothing written');
    }
    is_deeply([ temps_in($dir) ], [], '... no temp');
}

# untainted works, tainted data is fine
{
    ok(file_set_contents($file, 'clean'), 'untainted file name: works');
    is(slurp($file), 'clean', '... content');

    my $data = "tainted data $taint\x{e9}";
    ok(is_tainted($data), 'data is tainted');
    ok(file_set_contents($file, $data), 'tainted data: works');
    is(slurp($file), "tainted data \xe9", '... content');

    # item 10: a tainted perm dies, as the reference's sysopen does
    my $perm = 0600 . $taint;
    ok(is_tainted($perm), 'perm is tainted');
    tainted_perm_refused('tainted perm', $file, "tainted data \xe9", $perm);
    ok(!-e "$file.x", '... and sysopen made no file');

    my ($clean_perm) = $perm =~ /\A(\d+)\z/;
    ok(file_set_contents($file, 'p', $clean_perm), 'untainted perm: works');
    ok(file_set_contents($file, $data, { perm => 0600 }), 'tainted data with an options hash: works');

    my $name = $file;
    ok(!is_tainted($name), 'an untainted copy stays untainted after a call');
    file_set_contents($name, $data);
    ok(!is_tainted($name), '... file name not tainted by the call');
    ok(!is_tainted($file), '... nor the original');
}

# the other writers: a tainted name croaks before anything is written
{
    my $tainted_name = "$dir/many" . $taint;
    my $line;
    ok(!eval { $line = __LINE__; file_set_contents_many([$tainted_name => 1]); 1 },
       'file_set_contents_many: a tainted file name croaks');
    is($@, "Insecure dependency in file_set_contents_many while running with -T switch at $0 line $line.\n",
       '... Insecure dependency message');
    ok(!-e "$dir/many", '... and nothing is written');

    $tainted_name = "$dir/writer" . $taint;
    ok(!eval { $line = __LINE__; FastFile::Writer->new($tainted_name); 1 },
       'FastFile::Writer->new: a tainted file name croaks');
    is($@, "Insecure dependency in FastFile::Writer->new while running with -T switch at $0 line $line.\n",
       '... Insecure dependency message');
    ok(!-e "$dir/writer", '... and nothing is written');
    my $w = FastFile::Writer->new("$dir/writer");
    $w->print($taint, "tainted data\n");
    ok($w->commit, 'FastFile::Writer: an untainted name and tainted data work');
    is(slurp("$dir/writer"), "tainted data\n", '... content');
}

# a tainted perm in an options hash dies as the positional one does, for
# every writer, before anything is written
{
    my $perm = 0600 . $taint;
    my $target = "$dir/opt-perm";
    spew($target, "old\n");
    my @cases = (
        [ 'file_set_contents', sub { file_set_contents($target, 'p', { perm => $perm }) } ],
        [ 'file_set_contents', sub { file_set_contents($target, 'p', { preserve => 1, perm => $perm }) } ],
        [ 'file_set_contents_many', sub { file_set_contents_many([ $target => 'p' ], { perm => $perm }) } ],
        [ 'FastFile::Writer->new', sub { FastFile::Writer->new($target, { perm => $perm }) } ],
    );
    for my $c (@cases) {
        my ($op, $code) = @$c;
        my $ok = eval { $code->(); 1 };
        ok(!$ok, "$op: a tainted perm in the options hash croaks");
        like($@, qr/^Insecure dependency in \Q$op\E while running with -T switch at /,
             '... Insecure dependency message');
        is(slurp($target), "old\n", '... target unchanged');
        is_deeply([ temps_in($dir) ], [], '... no temp');
    }
    my ($clean) = $perm =~ /\A(\d+)\z/;
    ok(file_set_contents_many([ $target => 'm' ], { perm => $clean }), 'file_set_contents_many: an untainted perm works');
    my $w = FastFile::Writer->new($target, { perm => $clean });
    $w->print('w');
    ok($w->commit, 'FastFile::Writer: an untainted perm works');
    is(slurp($target), 'w', '... content');
}

# a positional perm that is an object: its overloaded number is the value
# sysopen gets, so a tainted one croaks as sysopen's does (and a tied one);
# an untainted object, or tainted data beside a clean perm, still writes
{
    package TaintTest::Perm;
    use overload '0+' => sub { $_[0]{v} }, '""' => sub { $_[0]{v} }, fallback => 1;
    sub new { return bless { v => $_[1] }, $_[0] }
    package TaintTest::Tied;
    sub TIESCALAR { return bless [ $_[1] ], $_[0] }
    sub FETCH { return $_[0][0] }
    package main;

    my $target = "$dir/perm-object";
    spew($target, "old\n");
    my $tainted = TaintTest::Perm->new(0600 . $taint);
    tie my $tied, 'TaintTest::Tied', 0600 . $taint;
    for my $c ([ 'an object whose number is tainted', $tainted ], [ 'a tied scalar fetching a tainted value', $tied ]) {
        my ($what, $perm) = @$c;
        tainted_perm_refused("positional perm, $what", $target, "old\n", $perm);
    }
    ok(file_set_contents($target, "data $taint", TaintTest::Perm->new(0600)),
       'positional perm, an untainted object, tainted data: works');
    is(slurp($target), 'data ', '... content');
    is((stat $target)[2] & 07777, 0600 & ~umask, '... the object\'s mode');
}

# the readers: a tainted name may be read; what they return is tainted
{
    my $read = "$dir/read";
    spew($read, "tainted\nlines\n");
    for my $name ($read . $taint, $read) {
        my $which = is_tainted($name) ? 'a tainted name' : 'an untainted name';
        my $c = eval { file_get_contents($name) };
        is($c, "tainted\nlines\n", "file_get_contents, $which: content") or diag($@);
        ok(is_tainted($c), "file_get_contents, $which: the content is tainted");
        my $l = eval { file_read_firstline($name) };
        is($l, 'tainted', "file_read_firstline, $which: the first line") or diag($@);
        ok(is_tainted($l), "file_read_firstline, $which: the line is tainted");
    }
}

is_deeply([ temps_in($dir) ], [], 'no temp files left');

done_testing;
