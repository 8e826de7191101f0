#!perl
# FastFile::Writer and user code: tied and overloaded items (read once), an
# item whose overloading ends the writer, objects that only look like a
# writer (forged, a class name) and a subclass.
use strict;
use warnings;

use Test::More;

use FastFile::Writer;
use lib 't/lib';
use FFTest qw(tempdir slurp temps_in no_warnings);
use Counted;    # Counted (tie), Str (overloaded)

# a tied scalar is FETCHed once, an overloaded object stringified once
{
    my $dir = tempdir();
    tie my $tied, 'Counted', 'tied';
    my $obj = Str->new(s => 'obj');
    my $w = FastFile::Writer->new("$dir/magic");
    $w->print($tied, ' ', $obj);
    $w->write($tied);
    $w->commit;
    is(slurp("$dir/magic"), 'tied objtied', 'tied and overloaded items');
    is((tied $tied)->{n}, 2, 'FETCH once per item');
    is($obj->{n}, 1, 'overloading called once');
}

# user code run for an item (overloading) that ends the writer
{
    package Ender;
    use overload '""' => sub { $_[0]{w}->abort; 'x' }, fallback => 1;
}
{
    my $dir = tempdir();
    my $w = FastFile::Writer->new("$dir/ender");
    ok(!eval { $w->print('a', bless({ w => $w }, 'Ender')); 1 }, 'an item that aborts the writer');
    is($@, "FastFile::Writer: already aborted\n", '... makes print croak');
    is_deeply([temps_in($dir)], [], '... and the temp is gone');
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
    my $dir = tempdir();
    my $w = My::Writer->new("$dir/sub");
    $w->print('from a subclass');
    ok($w->commit, 'a subclass of the writer works');
    is(slurp("$dir/sub"), 'from a subclass', '... content');
}

no_warnings('the whole test');
done_testing;
