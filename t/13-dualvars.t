#!perl
# Dualvars: every argument of every API read as perl reads it where the
# reference uses it - a number where a number is wanted (sysopen's perm,
# file_get_contents' max, buffer_size, printf's %d), a string where a string
# is (names, data, print, %s), a truth by perl's rules (force_utf8, the flag
# options) - with values whose two parts disagree (Scalar::Util::dualvar,
# $!), and the caller's scalars left with the flags they had (no new form
# cached in them). Before 0.04 the snapshot kept only the string part:
# dualvar(0600, "0644") made mode 01204, dualvar(10, "1000") a max of 1000.
use strict;
use warnings;

use B ();
use Test::More;
use Scalar::Util qw(dualvar);
use FastFile qw(:all);
use FastFile::Writer;
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in);
use Reference qw(ref_file_set_contents ref_get_contents ref_bytes);

umask 022;
my $dir = tempdir();
my $n = 0;
sub fresh { my $d = "$dir/" . ++$n; mkdir $d or die "mkdir $d: $!"; return $d }
sub mode_of { my @st = stat $_[0]; return @st ? sprintf('%04o', $st[2] & 07777) : 'none' }

my $TYPE_FLAGS = B::SVf_IOK | B::SVf_NOK | B::SVf_POK | B::SVp_IOK | B::SVp_NOK | B::SVp_POK;
sub flags { return B::svref_2object(\$_[0])->FLAGS & $TYPE_FLAGS }

# $code->($value) with $value an alias of the caller's scalar: its flags
# are the same afterwards. Returns the call's result, or 'died: $@'.
sub call_keeping {
    my ($name, $value, $code) = @_;
    my $before = flags($value);
    my $r = eval { $code->($value) } // "died: $@";
    is(flags($value), $before, "$name: the caller's scalar keeps its flags");
    return $r;
}

# ---------------------------------------------------------- file_set_contents
{
    my $d = fresh();
    call_keeping('fsc filename', dualvar(7, "$d/by-string"), sub { file_set_contents($_[0], 'x') });
    ok(-e "$d/by-string" && !-e "$d/7" && !-e '7', 'file_set_contents filename: the string part names the file');

    call_keeping('fsc data', dualvar(42, 'text'), sub { file_set_contents("$d/data", $_[0]) });
    ref_file_set_contents("$d/data.ref", dualvar(42, 'text'));
    is(slurp("$d/data"), slurp("$d/data.ref"), 'file_set_contents data: the string part, as the reference writes it');

    for my $case ([dualvar(0600, '0644'), '0600'], [dualvar(0640, 'rw-r-----'), '0640'],
                  [dualvar(0600, '384.0'), '0600'], [do { my $v = 0.5 + 383.5; my $s = "$v"; $v }, '0600']) {
        my ($perm, $want) = @$case;
        my $shown = "$perm";
        unlink "$d/perm", "$d/perm.ref";
        call_keeping("fsc perm '$shown'", $perm, sub { file_set_contents("$d/perm", 'x', $_[0]) });
        ref_file_set_contents("$d/perm.ref", 'x', $perm);
        is(mode_of("$d/perm"), $want, "file_set_contents perm dualvar '$shown': its number, mode $want");
        is(mode_of("$d/perm"), mode_of("$d/perm.ref"), '... as the reference (sysopen)');
    }
    {
        unlink "$d/errno";
        local $! = 0640;        # a dualvar: 416 and its message
        call_keeping('fsc perm $!', $!, sub { file_set_contents("$d/errno", 'x', $_[0]) });
        is(mode_of("$d/errno"), '0640', 'file_set_contents perm $!: its number');
    }
    # force_utf8: perl's truth, which is the string part's
    for my $case ([dualvar(1, ''), 0], [dualvar(0, '1'), 1], [dualvar(1, '0'), 0]) {
        my ($force, $true) = @$case;
        my $data = "caf\xe9";
        call_keeping("fsc force_utf8 '$force'", $force, sub { file_set_contents("$d/utf8", $data, 0644, $_[0]) });
        is(slurp("$d/utf8"), ref_bytes($data, $force), "file_set_contents force_utf8 dualvar '$force': "
           . ($true ? 'true' : 'false') . ' as perl reads it');
    }
}

# ---------------------------------------------------------- the options hash
{
    my $d = fresh();
    my %o = (perm => dualvar(0600, '0644'));
    my $before = flags($o{perm});
    file_set_contents("$d/perm", 'x', \%o);
    is(mode_of("$d/perm"), '0600', 'option perm dualvar(0600, "0644"): its number');
    is(flags($o{perm}), $before, "... the hash value keeps its flags");
    file_set_contents("$d/perm2", 'x', { perm => dualvar(0640, 'rw-r-----') });
    is(mode_of("$d/perm2"), '0640', 'option perm dualvar(0640, "rw-r-----"): a number, not refused');

    file_set_contents("$d/u", "caf\xe9", { utf8 => dualvar(0, '1') });
    is(slurp("$d/u"), "caf\xc3\xa9", "option utf8 dualvar(0, '1'): true");
    ok(!eval { file_set_contents("$d/no/such/f", 'x', { mkdir => dualvar(1, '') }); 1 },
       "option mkdir dualvar(1, ''): false, nothing made");
    file_set_contents("$d/yes/f", 'x', { mkdir => dualvar(0, 'yes') });
    ok(-e "$d/yes/f", "option mkdir dualvar(0, 'yes'): true");
    spew("$d/nc", 'old');
    ok(!eval { file_set_contents("$d/nc", 'new', { noclobber => dualvar(0, '1') }); 1 }
       && slurp("$d/nc") eq 'old', "option noclobber dualvar(0, '1'): true, the file kept");
    symlink 'real', "$d/link" or die "symlink: $!";
    file_set_contents("$d/link", 'x', { follow_symlinks => dualvar(0, '1') });
    ok(-l "$d/link" && slurp("$d/real") eq 'x', "option follow_symlinks dualvar(0, '1'): true");
    spew("$d/pr", 'old');
    chmod 0600, "$d/pr";
    file_set_contents("$d/pr", 'new', { preserve => dualvar(0, '1') });
    is(mode_of("$d/pr"), '0600', "option preserve dualvar(0, '1'): true");
    spew("$d/same", 'same');
    is(file_set_contents("$d/same", 'same', { if_changed => dualvar(0, '1') }), 0,
       "option if_changed dualvar(0, '1'): true, nothing written");
    is(file_set_contents("$d/same", 'same', { fsync => dualvar(1, '') }), 1, "option fsync dualvar(1, ''): accepted");
}

# ---------------------------------------------------------- file_set_contents_many
{
    my $d = fresh();
    my @list = (dualvar(1, "$d/a"), dualvar(2, 'a data'), dualvar(3, "$d/b"), dualvar(4, 'b data'));
    my @before = map { flags($_) } @list;
    my %o = (perm => dualvar(0600, '0644'));
    is(file_set_contents_many(\@list, \%o), 2, 'file_set_contents_many of dualvars: 2 written');
    is(join('|', slurp("$d/a"), slurp("$d/b")), 'a data|b data', '... names and data by their strings');
    is(join(' ', mode_of("$d/a"), mode_of("$d/b")), '0600 0600', '... option perm by its number');
    is_deeply([ map { flags($_) } @list ], \@before, "... the list's scalars keep their flags");
    ok(!-e '1' && !-e '3', '... no file named by a number');
}

# ---------------------------------------------------------- the writer
{
    my $d = fresh();
    my $name = dualvar(5, "$d/w");
    my %o = (perm => dualvar(0600, '0644'), buffer_size => dualvar(4096, 'big'));
    my @before = (flags($name), flags($o{perm}), flags($o{buffer_size}));
    my $w = eval { atomic_writer($name, \%o) };
    ok($w, 'atomic_writer with a dualvar name, perm and buffer_size') or diag($@);
    SKIP: {
        skip 'no writer', 4 unless $w;
        my ($p, $wr, $fmt, $num) = (dualvar(1, 'printed '), dualvar(2, 'written '), dualvar(3, '%d|%s'), dualvar(6, 'seven'));
        my @b = map { flags($_) } $p, $wr, $fmt, $num;
        $w->print($p);
        $w->write($wr);
        $w->printf($fmt, $num, $num);
        $w->commit;
        is(slurp("$d/w"), 'printed written 6|seven', 'print and write: strings; printf: the format by its string, %d a number, %s a string');
        is(mode_of("$d/w"), '0600', '... perm by its number');
        is_deeply([ map { flags($_) } $p, $wr, $fmt, $num ], \@b, "... the methods' arguments keep their flags");
        is_deeply([ flags($name), flags($o{perm}), flags($o{buffer_size}) ], \@before, "... new's arguments keep their flags");
    }
    ok(!-e "5", 'no file named by the number');
    is_deeply([ temps_in($d) ], [], 'no temp left');
}

# ---------------------------------------------------------- the readers
{
    my $d = fresh();
    spew("$d/f", 'y' x 100);
    my $r = call_keeping('fgc max', dualvar(10, '1000'), sub { file_get_contents("$d/f", $_[0]) });
    like($r, qr/^died: file '.*' too long/, 'file_get_contents max dualvar(10, "1000"): its number, 10');
    like(eval { ref_get_contents("$d/f", dualvar(10, '1000')) } // $@, qr/too long/, '... as the reference');
    $r = call_keeping('fgc max (reverse)', dualvar(1000, '10'), sub { file_get_contents("$d/f", $_[0]) });
    is(length $r, 100, 'file_get_contents max dualvar(1000, "10"): its number, the file read');
    $r = call_keeping('fgc filename', dualvar(3, "$d/f"), sub { file_get_contents($_[0]) });
    is(length $r, 100, 'file_get_contents filename: the string part');
    spew("$d/lines", "first\nsecond\n");
    $r = call_keeping('frf filename', dualvar(3, "$d/lines"), sub { file_read_firstline($_[0]) });
    is($r, 'first', 'file_read_firstline filename: the string part');
}

done_testing();
