#!perl
# The short cuts taken for the usual call (issue 29's instruction floor)
# give what the general path gives: the options hash read in place (a
# restricted hash's deleted keys, a magical value met half-way, a hash the
# caller drops during the call), the writer's one-block layout (the
# buffer's first memory, the temp's name in the block, names near NAME_MAX,
# symlinks to longer names), print's copy without a scope ($\, states,
# encodings), new's class without a look-up, and file_read_firstline's
# stack block (lines on both sides of its 8 KiB, the SV handed back, the
# fd after a failing read).
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use B ();
use Hash::Util ();
use POSIX ();

use FastFile qw(file_set_contents file_read_firstline atomic_writer);
use FastFile::Writer;
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in warnings_of no_warnings strace_why run_perl);

POSIX::setlocale(POSIX::LC_ALL(), 'C');
umask 022;

sub mode_of { return (stat $_[0])[2] & 07777 }

sub open_fds {
    opendir my $d, "/proc/self/fd" or return undef;
    return scalar grep { /\A\d+\z/ } readdir $d;
}

my $dir = tempdir();

# ---------------------------------------------------------------- options
{
    package Counted;
    sub TIESCALAR { my ($c, $v) = @_; return bless { v => $v, n => 0 }, $c }
    sub FETCH     { $_[0]{n}++; return $_[0]{v} }
    sub STORE     { $_[0]{v} = $_[1] }
}
{
    package Named;      # a file name whose string form runs code
    use overload '""' => sub { $_[0]{code}->(); $_[0]{name} }, fallback => 1;
    sub new { my ($c, $name, $code) = @_; return bless { name => $name, code => $code }, $c }
}

{
    my $f = "$dir/restricted";
    my %o = (perm => 0600, bogus => 1);
    Hash::Util::lock_keys(%o);
    delete $o{bogus};           # a placeholder: the key is allowed, not there
    ok eval { file_set_contents($f, "x", \%o); 1 }, 'restricted hash: a deleted key is no option'
        or diag $@;
    is mode_of($f), 0600, 'restricted hash: its perm';
}
{
    my $f = "$dir/tied-value";
    my %o = (perm => 0600, noclobber => 0, mkdir => 0, preserve => 0);
    tie $o{fsync}, 'Counted', 1;
    ok eval { file_set_contents($f, "x", \%o); 1 }, 'a magical value among plain ones' or diag $@;
    is tied($o{fsync})->{n}, 1, 'its get-magic ran once';
    is mode_of($f), 0600, 'the plain values read before it count';
}
{
    my $f = "$dir/many";
    my %o = map { $_ => 0 } qw(fsync preserve if_changed mkdir follow_symlinks noclobber utf8);
    $o{perm} = 0640;
    $o{"filler$_"} = 1 for 1 .. 20;
    delete $o{"filler$_"} for 1 .. 20;     # a bigger table, empty buckets
    ok eval { file_set_contents($f, "x", \%o); 1 }, 'every option in a large table' or diag $@;
    is mode_of($f), 0640, 'its perm';
    ok !eval { file_set_contents($f, "x", { perm => 0600, nope => 1 }); 1 }, 'unknown key refused';
    is $@, "unknown option 'nope'\n", 'named in the message';
    ok !eval { file_set_contents($f, "x", { perm => 0600, fsync => [] }); 1 }, 'a reference value refused';
    is $@, "invalid value for option 'fsync'\n", 'named in the message';
}
{
    # the caller's only reference to the options goes while the call runs
    # (its file name's overloading): the hash is the call's until it ends
    my $f = "$dir/dropped";
    my $o = { perm => 0600, fsync => 0 };
    my $name = Named->new($f, sub { undef $o });
    ok eval { file_set_contents($name, "x", $o); 1 }, 'options dropped by user code' or diag $@;
    ok !defined $o, 'the caller dropped them';
    is mode_of($f), 0600, 'the options as passed';
}
{
    # a magical value's FETCH deletes buffer_size, read already (in place,
    # or by the iterator before it): its value is the writer's, not what
    # perl puts in the freed scalar's place next (new scalars made at once)
    package DeletesSize;
    sub TIESCALAR { my ($c, $h) = @_; return bless { h => $h }, $c }
    sub FETCH {
        my $h = $_[0]{h};
        if (exists $h->{buffer_size}) {
            delete $h->{buffer_size};
            our @reuse = map { "not a number $_" } 1 .. 50;
        }
        return 0;
    }
    sub STORE { }
    package main;
    my $f = "$dir/size-deleted";
    my @failed;
    for my $n (1 .. 64) {       # hashes of other sizes: other orders of keys
        my %o = (buffer_size => 3, map { ("filler$_" => 1) } 1 .. $n);
        delete $o{"filler$_"} for 1 .. $n;
        tie $o{$_}, 'DeletesSize', \%o for qw(mkdir noclobber preserve follow_symlinks);
        my $w = eval { atomic_writer($f, \%o) };
        push @failed, "$n: $@" unless $w;
        $w->print("abcdefgh") if $w;
        $w->commit if $w;
    }
    is "@failed", '', 'buffer_size deleted by a FETCH: never read from the freed scalar';
    is slurp($f), "abcdefgh", 'the bytes';
}

# ---------------------------------------------------------------- writer
{
    # new's class is found before its user code runs: a file name's
    # overloading that deletes the package (its last holder) leaves the
    # object blessed into a live stash, not into freed memory
    { no strict 'refs'; @{"T37Gone::Writer::ISA"} = ('FastFile::Writer') }
    my $f = "$dir/w-class-gone";
    my $name = Named->new($f, sub {
        delete $T37Gone::{"Writer::"};
        our @reuse = map { { n => $_ } } 1 .. 100;      # new hashes in its place
    });
    my $w = eval { T37Gone::Writer->new($name) };
    is ref($w), 'T37Gone::Writer', 'class deleted by the name\'s overloading: its object' or diag $@;
    ok eval { $w->print("x"); $w->commit; 1 }, 'its methods' or diag $@;
    is slurp($f), "x", 'its bytes';
}
{
    my $f = "$dir/w-ors";
    my $w = atomic_writer($f);
    { local $\ = "!\n"; $w->print("a") }
    $w->print("b");
    { local $, = "-"; $w->print("c", "d") }
    $w->commit;
    is slurp($f), "a!\nbc-d", 'print: $\ and $, as print has them';
    ok !eval { $w->print("x"); 1 }, 'print after commit croaks';
    like $@, qr/already committed/, 'with its reason';
    $w = atomic_writer($f);
    $w->abort;
    ok !eval { $w->print("x"); 1 }, 'print after abort croaks';
    like $@, qr/already aborted/, 'with its reason';
}
{
    my $f = "$dir/w-enc";
    my $w = atomic_writer($f, { utf8 => 1 });
    $w->print("caf\xe9");
    $w->commit;
    is slurp($f), "caf\xc3\xa9", 'print with utf8: Latin-1 encoded, not copied as it is';
    $w = atomic_writer($f);
    my @w = warnings_of { $w->print("\x{263a}") };
    $w->commit;
    is slurp($f), "\xe2\x98\xba", 'print of wide characters: UTF-8';
    is scalar(@w), 1, 'with one warning';
    tie my $t, 'Counted', "tied";
    $w = atomic_writer($f);
    $w->print($t);
    $w->commit;
    is slurp($f), "tied", 'print of a tied scalar';
    is tied($t)->{n}, 1, 'its FETCH once';
}
{
    # the first 8 KiB in the writer's own block, then the heap
    my $f = "$dir/w-grow";
    my $want = '';
    my $w = atomic_writer($f, { buffer_size => 20000 });
    for my $i (1 .. 19) { my $s = chr(64 + $i) x 1000; $w->print($s); $want .= $s }
    $w->commit;
    is slurp($f), $want, '19,000 bytes in a 20,000-byte buffer: moved from the first memory';
    $want = '';
    $w = atomic_writer($f);
    for my $i (1 .. 300) { my $s = "line $i " . ("y" x ($i % 97)) . "\n"; $w->print($s); $want .= $s }
    $w->print("z" x 70000);
    $want .= "z" x 70000;
    $w->commit;
    is slurp($f), $want, 'lines, then a chunk past the first memory';
    for my $size (1, 7, 16, 8191, 8192, 8193) {
        $w = atomic_writer($f, { buffer_size => $size });
        $want = '';
        for my $i (1 .. 40) { my $s = "$i:" . ("q" x ($i * 37 % 300)); $w->print($s); $want .= $s }
        $w->commit;
        is slurp($f), $want, "buffer_size $size";
    }
    is_deeply [ temps_in($dir) ], [], 'no temp left';
}
{
    # names near NAME_MAX (the temp's room in the block), a taken plain
    # temp name (the random name in the same room), a symlink to a name
    # longer than the one given (the temp's name then allocated)
    for my $len (200, 230, 240) {   # (246 on: "<leaf>.tmp.<pid>" is too long, as the reference's)
        my $f = "$dir/" . ("n" x $len);
        my $w = eval { atomic_writer($f) };
        if (!$w) { fail "new, leaf of $len bytes: $@"; next }
        $w->print("long $len");
        $w->commit;
        is slurp($f), "long $len", "leaf of $len bytes";
        unlink $f;
    }
    my $f = "$dir/taken";
    spew("$f.tmp.$$", "someone's");
    my $w = atomic_writer($f);
    $w->print("mine");
    $w->commit;
    is slurp($f), "mine", 'plain temp name taken: written';
    is slurp("$f.tmp.$$"), "someone's", 'the taken file left alone';
    unlink "$f.tmp.$$";
    my $real = "$dir/" . ("r" x 240);
    symlink $real, "$dir/l" or die "symlink: $!";
    $w = atomic_writer("$dir/l", { follow_symlinks => 1 });
    $w->print("through");
    $w->commit;
    is slurp($real), "through", 'follow_symlinks to a longer name';
    ok -l "$dir/l", 'the link stays';
    $w = atomic_writer("$dir/l", { follow_symlinks => 1 });
    $w->print("dropped");
    undef $w;
    is slurp($real), "through", 'an uncommitted writer replaces nothing';
    is_deeply [ temps_in($dir) ], [], 'no temp left';
    unlink "$dir/l", $real;
}
{
    # the class: the module's own name, a subclass, an alias of the
    # package, an object, a number (no string form left in it), tied
    my $f = "$dir/class";
    is ref(FastFile::Writer->new($f)), 'FastFile::Writer', 'own class';
    @My::Writer::ISA = ('FastFile::Writer');
    is ref(My::Writer->new($f)), 'My::Writer', 'a subclass';
    { no strict 'refs'; *{"Alias::Of::Writer::"} = \%{"FastFile::Writer::"}; }
    is ref(Alias::Of::Writer->new($f)), 'FastFile::Writer', 'an alias of the package: its stash';
    my $w = My::Writer->new($f);
    is ref($w->new($f)), 'My::Writer', 'an object: its class';
    my $utf8 = "FastFile::Writer";
    utf8::upgrade($utf8);
    is ref(FastFile::Writer::new($utf8, $f)), 'FastFile::Writer', 'the name with the UTF-8 flag';
    my $k = 42;
    is ref(FastFile::Writer::new($k, $f)), '42', 'a number: its string names the class';
    ok !(B::svref_2object(\$k)->FLAGS & B::SVf_POK), 'no string form cached in it';
    tie my $t, 'Counted', 'My::Writer';
    is ref(FastFile::Writer::new($t, $f)), 'My::Writer', 'a tied name';
    is tied($t)->{n}, 1, 'its FETCH once';
    undef $w;
    is_deeply [ temps_in($dir) ], [], 'no temp left';
}

# ---------------------------------------------------------------- firstline
{
    my $f = "$dir/lines";
    for my $n (0, 1, 8190, 8191, 8192, 8193, 16384, 20000) {
        spew($f, ("y" x $n) . "\nrest\n");
        is file_read_firstline($f), "y" x $n, "line of $n bytes";
        spew($f, "y" x $n);
        my $l = file_read_firstline($f);
        is $l, ($n ? "y" x $n : undef), "$n bytes, no newline";
    }
    spew($f, "short\nrest\n");
    my $l = file_read_firstline($f);
    cmp_ok B::svref_2object(\$l)->LEN, '<', 64, 'a short line comes in a buffer of its size';
    my $fds = open_fds();
    {
        local $/ = "e";
        is file_read_firstline($f), "short\nr", 'another $/';
    }
    is file_read_firstline("$dir/none"), undef, 'no file: undef';
    is file_read_firstline($dir), undef, 'a directory: undef';
    is open_fds(), $fds, 'no fd left open';
  SKIP: {
        skip 'strace: ' . strace_why(), 3 if strace_why();
        skip 'no /proc/self/fd', 3 unless defined $fds;
        my $code = 'use FastFile qw(file_read_firstline); opendir my $d, "/proc/self/fd"; '
                 . 'my $n = grep /\A\d+\z/, readdir $d; closedir $d; '
                 . 'my $ok = eval { file_read_firstline($ARGV[0]); 1 }; print $@; '
                 . 'opendir $d, "/proc/self/fd"; my $m = grep /\A\d+\z/, readdir $d; print "fds ", $m - $n, "\n"';
        my $eio = sub { [ '-e', 'trace=read', '-e', "inject=read:error=EIO:when=$_[0]", '-P', $f ] };
        my (undef, $out) = run_perl($code, args => [$f], strace => $eio->(1));
        like $out, qr/\Aunable to read file '\Q$f\E' - Input\/output error/, 'read EIO: croaks';
        like $out, qr/^fds 0$/m, 'read EIO: its fd closed';
        (undef, $out) = run_perl($code, args => [$f], strace => $eio->(2));
        unlike $out, qr/unable to read/, 'one read for a short line';
    }
}

done_testing;
