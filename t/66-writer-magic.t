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

# an overloaded "" that gives no string of its own (returns the object, or
# has only other operators): perl's plain form, "Class=HASH(0x...)", with a
# UTF-8 class name kept UTF-8; one that returns another object: its "" in turn
{
    package Returns::Self { use overload '""' => sub { $_[0] }, fallback => 1; }
    package Only::Plus { use overload '+' => sub { 1 }, fallback => 1; }
    package Returns::Inner { use overload '""' => sub { Str->new(s => 'inner') }; }
    my $dir = tempdir();
    my $utf8_class = "Caf\x{e9}::\x{263a}";
    {
        no strict 'refs';
        @{"${utf8_class}::ISA"} = ('Returns::Self');
    }
    for my $obj (bless({}, 'Returns::Self'), bless([], 'Only::Plus'), bless({}, $utf8_class),
                 bless({}, 'Returns::Inner')) {
        my $w = FastFile::Writer->new("$dir/plain", { utf8 => 1 });
        $w->print($obj);
        $w->commit;
        my $want = "$obj";
        utf8::encode($want);
        my $label = ref $obj;
        utf8::encode($label);
        is(slurp("$dir/plain"), $want, "an object overloaded to no string of its own: $label");
    }
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

# The cleanup hangs on the object, not on the DESTROY method: a writer in a
# class whose DESTROY does not call FastFile::Writer's, or in a class that
# is no writer class at all, still has its temp removed and its memory freed
# (make leakcheck checks the memory).
{
    package Writer::OwnDestroy;
    our @ISA = ('FastFile::Writer');
    our $destroyed = 0;
    sub DESTROY { $destroyed++ }
    package Not::A::Writer;
}
{
    my $dir = tempdir();
    {
        my $w = Writer::OwnDestroy->new("$dir/own");
        $w->print('never committed');
        is_deeply([ temps_in($dir) ], [ 'own.tmp.' . $$ ], 'a subclass writer has its temp');
    }
    is($Writer::OwnDestroy::destroyed, 1, "the subclass's own DESTROY ran");
    is_deeply([ temps_in($dir) ], [], '... and the temp is gone all the same');
    {
        my $w = FastFile::Writer::new('Not::A::Writer', "$dir/other");
        is(ref $w, 'Not::A::Writer', 'new blesses into the class it is given');
        FastFile::Writer::print($w, 'data');
        is_deeply([ temps_in($dir) ], [ 'other.tmp.' . $$ ], '... a temp');
    }
    is_deeply([ temps_in($dir) ], [], '... gone when the object goes');
    ok(!-e "$dir/other" && !-e "$dir/own", 'no target was made');
    {
        my $w = FastFile::Writer->new("$dir/explicit");
        $w->DESTROY;
        is_deeply([ temps_in($dir) ], [], 'an explicit DESTROY removes the temp at once');
        ok(!eval { $w->print('x'); 1 }, '... and the object is no writer any more');
        like($@, qr/not a writer object/, '... it says so');
    }
}

# A writer reblessed: a subclass's constructor that blesses what
# FastFile::Writer->new made (this died "Modification of a read-only value
# attempted"), or into a class that is no writer class. It goes on working,
# its cleanup goes with the object, and the object's own value is nothing the
# writer depends on (assigning to it changes nothing).
{
    package My::Reblessing;
    our @ISA = ('FastFile::Writer');
    sub new { my ($class, @args) = @_; my $self = FastFile::Writer->new(@args); return bless $self, $class }
}
{
    my $dir = tempdir();
    my $w = eval { My::Reblessing->new("$dir/rebless") };
    is(ref $w, 'My::Reblessing', 'a writer reblessed by a subclass constructor') or diag($@);
    if ($w) {
        $w->print('reblessed');
        ${$w} = 0;
        ok(eval { $w->commit }, '... works, after an assignment to its value too') or diag($@);
        is(slurp("$dir/rebless"), 'reblessed', '... content');
    }
    {
        my $o = FastFile::Writer->new("$dir/other");
        ok(eval { bless $o, 'Not::A::Writer'; 1 }, 'a writer reblessed into another class') or diag($@);
        FastFile::Writer::print($o, 'x');
        is_deeply([ temps_in($dir) ], [ 'other.tmp.' . $$ ], '... keeps its temp');
    }
    is_deeply([ temps_in($dir) ], [], '... gone when the object goes');
    ok(!-e "$dir/other", '... no target made');
}

no_warnings('the whole test');
done_testing;
