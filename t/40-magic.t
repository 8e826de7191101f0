use strict;
use warnings;

use Test::More;
use Scalar::Util qw(weaken);
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in warnings_of);
use Counted;    # Counted (tie), Str and Num (overloaded)
use FastFile;

my $dir = tempdir();
my $file = "$dir/target";

# tied arguments: each FETCH exactly once
{
    my $old = umask 022;
    tie my $name, 'Counted', "$dir/tied-name";
    tie my $data, 'Counted', "caf\x{e9}";
    tie my $perm, 'Counted', 0600;
    tie my $force, 'Counted', 1;
    ok(file_set_contents($name, $data, $perm, $force), 'all four tied: succeeds');
    is((tied $name)->{n}, 1, 'tied filename: FETCH once');
    is((tied $data)->{n}, 1, 'tied data: FETCH once');
    is((tied $perm)->{n}, 1, 'tied perm: FETCH once');
    is((tied $force)->{n}, 1, 'tied force_utf8: FETCH once');
    ok(!(tied $_)->{stores}, 'no STORE on a tied argument') for $name, $data, $perm, $force;
    is(slurp("$dir/tied-name"), "caf\xc3\xa9", 'tied: data encoded as force_utf8 said');
    is(sprintf('%04o', (stat "$dir/tied-name")[2] & 07777), '0600', 'tied: perm used');
    umask $old;

    # and when the call fails
    tie my $bad_name, 'Counted', "$dir/missing/x";
    tie my $data2, 'Counted', 'data';
    tie my $perm2, 'Counted', 0600;
    tie my $force2, 'Counted', 0;
    ok(!eval { file_set_contents($bad_name, $data2, $perm2, $force2); 1 }, 'tied, open fails: croaks');
    is((tied $_)->{n}, 1, 'tied, open fails: FETCH once') for $bad_name, $data2, $perm2, $force2;

    tie my $undef_name, 'Counted', undef;
    tie my $data3, 'Counted', 'data';
    ok(!eval { file_set_contents($undef_name, $data3); 1 }, 'tied filename FETCHing undef: croaks');
    is($@, "file name is undefined or empty\n", '... file name message');
    is((tied $undef_name)->{n}, 1, '... filename FETCH once');

    tie my $wide, 'Counted', "\x{263a}";
    my @w = warnings_of { file_set_contents($file, $wide) };
    is((tied $wide)->{n}, 1, 'tied wide data: FETCH once');
    is(scalar @w, 1, 'tied wide data: warned once');

    tie my $undef_data, 'Counted', undef;
    @w = warnings_of { file_set_contents($file, $undef_data) };
    is((tied $undef_data)->{n}, 1, 'tied undef data: FETCH once');
    is(scalar @w, 1, 'tied undef data: warned once');
    is(-s $file, 0, 'tied undef data: empty file');
}

# overloaded objects: stringified once
for my $force (0, 1) {
    my $obj = Str->new(s => "obj \x{e9}");
    file_set_contents($file, $obj, undef, $force);
    is($obj->{n}, 1, "overloaded data, force_utf8=$force: \"\" once");
    is(slurp($file), $force ? "obj \xc3\xa9" : "obj \xe9", "overloaded data, force_utf8=$force: bytes");

    my $wobj = Str->new(s => "obj \x{263a}");
    my @w = warnings_of { file_set_contents($file, $wobj, undef, $force) };
    is($wobj->{n}, 1, "overloaded wide data, force_utf8=$force: \"\" once");
    is(slurp($file), "obj \xe2\x98\xba", "overloaded wide data, force_utf8=$force: UTF-8 bytes");
    is(scalar @w, $force ? 0 : 1, "overloaded wide data, force_utf8=$force: warnings");
}
{
    my $name = Str->new(s => "$dir/overloaded-name");
    file_set_contents($name, 'x');
    is($name->{n}, 1, 'overloaded filename: "" once');
    ok(-f "$dir/overloaded-name", 'overloaded filename: file created under the string');

    my $perm = Num->new(0640);
    my $old = umask 0;
    file_set_contents($file, 'x', $perm);
    umask $old;
    is($Num::num + $Num::n, 1, 'overloaded perm: converted once');
    is(sprintf('%04o', (stat $file)[2] & 07777), '0640', 'overloaded perm: used');
}

# user code that dies while the arguments are read: nothing happens on disk
{
    spew($file, 'old');
    my $obj = Str->new(s => 'never', die => "stringify died\n");
    ok(!eval { file_set_contents($file, $obj); 1 }, 'data stringification dies: croaks');
    is($@, "stringify died\n", '... with that error');
    is(slurp($file), 'old', '... target unchanged');
    is_deeply([ temps_in($dir) ], [], '... no temp (arguments are read before the first syscall)');

    tie my $force, 'Counted', 1;
    (tied $force)->{die} = "force FETCH died\n";
    ok(!eval { file_set_contents($file, 'new', 0644, $force); 1 }, 'force_utf8 FETCH dies: croaks');
    is($@, "force FETCH died\n", '... with that error');
    is(slurp($file), 'old', '... target unchanged');
    is_deeply([ temps_in($dir) ], [], '... no temp');

    tie my $perm, 'Counted', 0644;
    (tied $perm)->{die} = "perm FETCH died\n";
    ok(!eval { file_set_contents($file, 'new', $perm); 1 }, 'perm FETCH dies: croaks');
    is($@, "perm FETCH died\n", '... with that error');
    is(slurp($file), 'old', '... target unchanged');
    is_deeply([ temps_in($dir) ], [], '... no temp');
}

# refcounts do not change, on success or croak
{
    my $data = "some data \x{e9}";
    my $name = "$dir/refcnt";
    my $rc = Internals::SvREFCNT($data);
    my $nrc = Internals::SvREFCNT($name);
    file_set_contents($name, $data) for 1 .. 10;
    is(Internals::SvREFCNT($data), $rc, 'data refcount unchanged after success');
    is(Internals::SvREFCNT($name), $nrc, 'filename refcount unchanged after success');
    my $bad = "$dir/missing/x";
    my $brc = Internals::SvREFCNT($bad);
    eval { file_set_contents($bad, $data) } for 1 .. 10;
    is(Internals::SvREFCNT($data), $rc, 'data refcount unchanged after a croak');
    is(Internals::SvREFCNT($bad), $brc, 'filename refcount unchanged after a croak');

    my $obj = Str->new(s => 'obj');
    my $orc = Internals::SvREFCNT(%$obj);
    file_set_contents($file, $obj) for 1 .. 5;
    is(Internals::SvREFCNT(%$obj), $orc, 'overloaded object refcount unchanged');
}

# a magic argument is held (hold_args) from its FETCH until the call ends:
# every hold given back however the call ends - written, unchanged
# (if_changed), croaked - so the caller's variables are freed with their
# scope (a hold dropped without being run leaks the variable and its tie)
{
    package Counted::Destroyed;
    our @ISA = ('Counted');
    our $destroyed = 0;
    sub DESTROY { $destroyed++ }
}
for my $end (qw(written unchanged croaked)) {
    for my $pos (0 .. 3) {
        my $label = "tied argument $pos, $end";
        my $target = $end eq 'croaked' ? "$dir/missing/x" : "$dir/held";
        spew($target, "same") if $end eq 'unchanged';
        my ($weak_arg, $weak_opts);
        $Counted::Destroyed::destroyed = 0;
        {
            my @args = ($target, 'same', 0644, 0);
            @args = ($target, 'same', { if_changed => 1 }) if $end eq 'unchanged';
            if ($pos < @args) {
                tie $args[$pos], 'Counted::Destroyed', $args[$pos];
                $weak_arg = \$args[$pos];
                weaken($weak_arg);   # (magic on the tied one only: the rest stay plain)
            }
            if (ref $args[2]) { $weak_opts = $args[2]; weaken($weak_opts) }
            my @rc = map { Internals::SvREFCNT($_) } @args;
            my $ok = eval { file_set_contents(@args); 1 };
            is(!$ok, $end eq 'croaked', "$label: croaks only where it should") or diag($@);
            is(join(' ', map { Internals::SvREFCNT($_) } @args), "@rc", "$label: refcounts as before");
        }
        is($Counted::Destroyed::destroyed, 1, "$label: tie freed with its scope") if $pos < ($end eq 'unchanged' ? 3 : 4);
        ok(!defined $weak_arg, "$label: tied argument freed with its scope");
        ok(!defined $weak_opts, "$label: options hash freed with its scope");
    }
}

# the data SV is not modified: no UTF8 flag change, no content change
{
    my @cases = (
        [ 'bytes with force_utf8', "caf\xe9 \xff", 1 ],
        [ 'upgraded Latin-1, downgraded copy', do { my $x = "caf\xe9"; utf8::upgrade($x); $x }, 0 ],
        [ 'upgraded Latin-1 with force_utf8', do { my $x = "caf\xe9"; utf8::upgrade($x); $x }, 1 ],
        [ 'wide with force_utf8', "\x{263a}\x{e9}", 1 ],
    );
    for my $c (@cases) {
        my ($label, $data, $force) = @$c;
        my $copy = $data;
        my $flag = utf8::is_utf8($data) ? 1 : 0;
        my $len = length $data;
        file_set_contents($file, $data, undef, $force);
        is(utf8::is_utf8($data) ? 1 : 0, $flag, "$label: UTF8 flag unchanged");
        is(length $data, $len, "$label: length unchanged");
        ok($data eq $copy, "$label: contents unchanged");
        ok(!Internals::SvREADONLY($data), "$label: not left read-only");
    }
    # constants (read-only SVs) are fine as data, in all conversions
    ok(eval { file_set_contents($file, "caf\xe9", undef, 1); 1 }, 'read-only constant with force_utf8') or diag($@);
    ok(eval { file_set_contents($file, "\x{e9}\x{100}" =~ s/\x{100}//r, undef, 0); 1 }, 'temporary upgraded Latin-1')
        or diag($@);
    is(slurp($file), "\xe9", '... written downgraded');
}

# a glob as a name: perl's string form ("*main::G"), which a glob does not
# keep in itself, is the name, as the reference's open uses it (it was
# whatever bytes the glob's body held: file_set_contents(*G) wrote a file
# named by heap bytes)
{
    our ($G, $D);
    require Cwd;
    require FastFile::Writer;    # (blib/lib is relative: loaded before the chdir)
    require IO::File;
    my $cwd = Cwd::getcwd();
    chdir $dir or die "chdir $dir: $!";
    my $names = sub { opendir my $dh, '.' or die; [ sort grep { !/^\.\.?$/ } readdir $dh ] };
    my $before = $names->();
    my @w = warnings_of {
        ok(file_set_contents(*G, 'set'), 'glob name: file_set_contents');
        is(slurp('*main::G'), 'set', '... writes "*main::G"');
        is(FastFile::file_get_contents(*G), 'set', 'glob name: file_get_contents reads it');
        is(FastFile::file_read_firstline(*G), 'set', 'glob name: file_read_firstline');
        is(FastFile::file_read_last_line(*G), 'set', 'glob name: file_read_last_line');
        ok(FastFile::file_copy(*G, 'copy'), 'glob name: file_copy from it');
        is(slurp('copy'), 'set', '... the bytes copied');
        ok(FastFile::file_copy('copy', *D), 'glob name: file_copy to it');
        is(slurp('*main::D'), 'set', '... writes "*main::D"');
        unlink '*main::D';
        my $w = FastFile::atomic_writer(*D);
        $w->print('writer');
        $w->commit;
        is(slurp('*main::D'), 'writer', 'glob name: atomic_writer writes "*main::D"');
        unlink '*main::D', '*main::G';
        my $fh = FastFile::create_owned_file_fh(*G, $<);
        ok($fh && -f '*main::G', 'glob name: create_owned_file_fh makes "*main::G"');
        close $fh if $fh;
        mkdir '*main::D';
        $fh = eval { FastFile::tempfile(undef, dir => *D) };
        ok($fh, "glob dir: tempfile in \"*main::D\"") or diag($@);
        close $fh if $fh;
    };
    is_deeply(\@w, [], 'glob names: no warning');
    unlink '*main::G', 'copy';
    rmdir '*main::D';
    is_deeply($names->(), $before, 'glob names: no file under another name');
    chdir $cwd or die "chdir $cwd: $!";
}

is_deeply([ temps_in($dir) ], [], 'no temp files left');

done_testing;
