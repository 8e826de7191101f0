#!perl
# Names near NAME_MAX: when "$file.tmp.$$" exists (a leftover, or another
# writer's), FastFile never touches it and takes another name. For a file
# name of 230 bytes or more, "<file>.tmp.<pid>.<16 hex>" passes NAME_MAX
# (255): the call failed with "File name too long" where the reference
# (which removes the leftover) writes. The random part now replaces the end
# of the plain name instead, so the fallback fits wherever the plain name
# does - for file_set_contents, the writer and the batch alike.
use strict;
use warnings;

use Test::More;
use FastFile qw(:all);
use FastFile::Writer;
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in);

my $dir = tempdir();
my $max_leaf = 255 - length(".tmp.$$");       # the longest name whose plain temp fits

my %api = (
    file_set_contents => sub { file_set_contents($_[0], $_[1]) },
    writer            => sub { my $w = atomic_writer($_[0]); $w->print($_[1]); $w->commit },
    batch             => sub { file_set_contents_many([ $_[0], $_[1], "$_[0]-2", "two" ]) },
);
for my $name (sort keys %api) {
    my $d = "$dir/$name";
    mkdir $d or die "mkdir $d: $!";
    my @bad;
    for my $len (220 .. $max_leaf) {
        my $file = "$d/" . ('n' x ($len - 1)) . 'e';
        next if $name eq 'batch' && $len > $max_leaf - 2;    # its "-2" must fit too
        my $leftover = "$file.tmp.$$";
        spew($leftover, 'leftover');
        my $ok = eval { $api{$name}->($file, "data $len"); 1 };
        my @temps = temps_in($d);
        my $why = !$ok ? "died: $@" : slurp($file) ne "data $len" ? 'wrong content'
                : slurp($leftover) ne 'leftover' ? 'the leftover was changed'
                : "@temps" ne substr($leftover, length("$d/")) ? "temps: @temps" : '';
        push @bad, "$len: $why" if $why;
        unlink $leftover, $file, "$file-2";
    }
    is_deeply(\@bad, [], "$name: names of 220 to $max_leaf bytes, their plain temp taken: written, the other file untouched, no temp left");
}

# A name whose fallback fits with the random part appended keeps the
# appended form (the common case, unchanged).
{
    my $file = "$dir/short";
    spew("$file.tmp.$$", 'leftover');
    file_set_contents($file, 'x');
    is(slurp($file), 'x', 'a short name with its plain temp taken: written');
    is(slurp("$file.tmp.$$"), 'leftover', '... the other file untouched');
    unlink "$file.tmp.$$";
}
is_deeply([ map { temps_in("$dir/$_") } sort keys %api ], [], 'no temp left anywhere');

done_testing();
