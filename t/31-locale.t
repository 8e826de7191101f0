#!perl
# Numbers are written as the reference writes them when the caller has
# `use locale` with a comma radix: its print formats them in its own scope,
# which has no `use locale`, so 1.5 is "1.5" - for the data, a numeric file
# name and a numeric $\, through file_set_contents, the batch and the
# writer's print and write. The caller's own stringification says "1,5" (the
# locale is really in effect) and its number is left a number.
#
# Needs a locale with a comma radix: an installed one, or de_DE (Latin-1) built
# with localedef into a temporary LOCPATH (no root needed); skipped when
# neither is possible.
use strict;
use warnings;

use Test::More;
use lib 't/lib';
use FFTest qw(tempdir run_perl which);

my $dir = tempdir();
my %env;
my $probe = q{use POSIX qw(setlocale LC_ALL localeconv);
              for (@ARGV) { next unless setlocale(LC_ALL, $_); print("$_\n"), exit if localeconv()->{decimal_point} eq ',' }};
my @names = qw(de_DE.UTF-8 de_DE.utf8 fr_FR.UTF-8 fr_FR.utf8 de_DE de_DE@euro);
my (undef, $locale) = run_perl($probe, args => \@names);
chomp $locale;
if ($locale !~ /^\S+$/ && which('localedef') && -e '/usr/share/i18n/locales/de_DE') {
    # de_DE in its own charset, Latin-1 (the probe's "de_DE"): the comma is
    # the same, and its tables take a quarter of the CPU UTF-8's take
    # localedef exits 1 for warnings (e.g. a charmap it finds odd) yet builds it
    system('localedef', '-i', 'de_DE', '-f', 'ISO-8859-1', "$dir/de_DE") if !-d "$dir/de_DE";
    %env = (LOCPATH => $dir);
    (undef, $locale) = run_perl($probe, args => ['de_DE'], env => \%env);
    chomp $locale;
}
plan skip_all => 'no locale with a comma radix: '
    . (which('localedef') && -e '/usr/share/i18n/locales/de_DE'
       ? 'none installed, and localedef could not build de_DE'
       : 'none installed, and no localedef with the de_DE source to build one (apt-get install locales)')
    unless $locale =~ /^\S+$/;

my $code = <<'PERL';
use strict; use warnings;
use POSIX qw(setlocale LC_ALL);
use FastFile qw(:all);
use FastFile::Writer;
use lib 't/lib';
use Reference qw(ref_file_set_contents);
my ($locale, $dir) = @ARGV;
setlocale(LC_ALL, $locale) or die "setlocale $locale: $!";
sub got { my ($f) = @_; my $r = file_get_contents($f); unlink $f; return $r }
use locale;
my @out;
my $h = 1.5;
push @out, "caller $h";
my $x = 2.25;
file_set_contents("$dir/a", $x);              push @out, "data " . got("$dir/a");
push @out, "still a number " . (($x ^ $x) eq '0' ? 'yes' : 'no');
ref_file_set_contents("$dir/a", $x);          push @out, "reference " . got("$dir/a");
file_set_contents("$dir/a", 1e-5);            push @out, "exponent " . got("$dir/a");
{ local $\ = 0.5; file_set_contents("$dir/a", 'x') } push @out, "ors " . got("$dir/a");
chdir $dir or die "chdir $dir: $!";
my $n = 7.5;
file_set_contents($n, 'n');                   push @out, 'name ' . join ',', glob "7*";
unlink glob "7*";
file_set_contents_many(["$dir/a", 3.5]);      push @out, "batch " . got("$dir/a");
my $w = FastFile::Writer->new("$dir/a"); $w->print(4.5, 'x'); $w->write(5.5); $w->commit;
push @out, "writer " . got("$dir/a");
{ package NumStr; use overload '""' => sub { ${ $_[0] } }; }
my $num_obj = bless \(my $nv = 6.5), 'NumStr';
file_set_contents("$dir/a", $num_obj);         push @out, "overloaded " . got("$dir/a");
ref_file_set_contents("$dir/a", $num_obj);     push @out, "reference_overloaded " . got("$dir/a");
file_set_contents_many(["$dir/a", $num_obj]);  push @out, "batch_overloaded " . got("$dir/a");
$w = FastFile::Writer->new("$dir/a"); $w->print($num_obj, $num_obj); $w->commit;
push @out, "print_overloaded " . got("$dir/a");
file_set_contents($num_obj, 'n');              push @out, 'name_overloaded ' . join ',', glob "6*";
unlink glob "6*";
my @fmt = ('%.2f|%s|%g|%d', 6.25, 7.5, 0.125, 8);
$w = FastFile::Writer->new("$dir/a"); $w->printf(@fmt); $w->commit;
push @out, "printf " . got("$dir/a");
push @out, "sprintf " . sprintf($fmt[0], @fmt[1 .. $#fmt]);
print map { "$_\n" } @out;
PERL
my ($status, $out) = run_perl($code, args => [$locale, $dir], env => \%env);
is($status, 0, 'the child ran') or diag($out);
my %got = map { /^(\w+(?: \w+)*?) (\S+)$/ ? ($1 => $2) : () } split /\n/, $out;
is($got{caller}, '1,5', "the caller's locale ($locale) is in effect: it formats 1,5");
is($got{reference}, '2.25', 'the reference writes 2.25');
is($got{data}, '2.25', 'data: 2.25');
is($got{'still a number'}, 'yes', "the caller's number is left a number");
is($got{exponent}, '1e-05', 'data: 1e-05');
is($got{ors}, 'x0.5', '$\\: 0.5');
is($got{name}, '7.5', 'file name: 7.5');
is($got{batch}, '3.5', 'file_set_contents_many: 3.5');
is($got{writer}, '4.5x5.5', "the writer's print and write: 4.5, 5.5");
# an overloaded "" that returns a number: formatted in the reference's scope too
is($got{reference_overloaded}, '6.5', 'the reference writes an overloaded 6.5 as 6.5');
is($got{overloaded}, '6.5', 'data overloaded to a number: 6.5');
is($got{batch_overloaded}, '6.5', '... file_set_contents_many: 6.5');
is($got{print_overloaded}, '6.56.5', "... the writer's print: 6.5");
is($got{name_overloaded}, '6.5', '... a file name: 6.5');
# printf formats as the caller's sprintf does (a file handle's printf too)
is($got{sprintf}, '6,25|7,5|0,125|8', "the caller's sprintf uses the comma");
is($got{printf}, $got{sprintf}, "the writer's printf: as the caller's sprintf");

# Error texts: the reference's code has no `use locale`, so its "$!" in
# them is perl's text outside it (English from perl 5.22 on) whatever the
# caller's locale. All nine of PVE::File's helpers alike, each compared
# with its model (t/lib/Reference.pm, which has no `use locale` either),
# under the caller's `use locale` in the same locale, whose own "$!" is
# not English.
my $errors = <<'PERL';
use strict; use warnings;
use POSIX qw(setlocale LC_ALL);
use FastFile qw(:pve);
use lib 't/lib';
use Reference qw(ref_file_set_contents ref_get_contents ref_read_firstline ref_read_last_line ref_file_copy
                 ref_safe_read_from ref_tempfile ref_tempfile_contents ref_create_owned_file_fh);
my ($locale, $dir) = @ARGV;
setlocale(LC_ALL, $locale) or die "setlocale $locale: $!";
use locale;
open my $fh, '>', "$dir/file" or die "$dir/file: $!";
close $fh;
my $dh = sub { open my $h, '<', $dir or die "$dir: $!"; $h };
my @cases = (
    [ file_set_contents => sub { file_set_contents("$dir/none/x", 'a') },
                           sub { ref_file_set_contents("$dir/none/x", 'a') } ],
    [ file_get_contents => sub { file_get_contents("$dir/none") }, sub { ref_get_contents("$dir/none") } ],
    [ file_read_first_line => sub { file_read_first_line("$dir/file/x") }, sub { ref_read_firstline("$dir/file/x") } ],
    [ file_read_last_line => sub { file_read_last_line("$dir/file/x") }, sub { ref_read_last_line("$dir/file/x") } ],
    [ file_copy => sub { file_copy("$dir/none", "$dir/dst") }, sub { ref_file_copy("$dir/none", "$dir/dst") } ],
    [ safe_read_from => sub { safe_read_from($dh->()) }, sub { ref_safe_read_from($dh->()) } ],
    [ tempfile => sub { tempfile(undef, dir => "$dir/none") }, sub { ref_tempfile(undef, dir => "$dir/none") } ],
    [ tempfile_contents => sub { tempfile_contents('x', undef, dir => "$dir/none") },
                           sub { ref_tempfile_contents('x', undef, dir => "$dir/none") } ],
    [ create_owned_file_fh => sub { create_owned_file_fh("$dir/file", $<) },
                              sub { ref_create_owned_file_fh("$dir/file", $<) } ],
);
$! = 2;
print "caller\t", unpack('H*', "$!"), "\n";
for (@cases) {
    my ($name, $ff, $rf) = @$_;
    my @err = map { eval { $_->(); 1 } ? 'returned' : $@ =~ s/ at \S+ line \d+\.\n\z//r } $ff, $rf;
    print join("\t", $name, map { unpack 'H*', $_ } @err), "\n";
}
PERL
($status, $out) = run_perl($errors, args => [$locale, $dir], env => \%env);
is($status, 0, 'errors: the child ran') or diag($out);
my %err = map { my ($k, @v) = split /\t/; $k => [ map { pack 'H*', $_ } @v ] } grep { /\t/ } split /\n/, $out;
SKIP: {
    skip "errors: $locale has no translated error messages here (apt-get install locales)", 18
        if !$err{caller} || $err{caller}[0] eq 'No such file or directory';
    for my $name (qw(file_set_contents file_get_contents file_read_first_line file_read_last_line file_copy
                     safe_read_from tempfile tempfile_contents create_owned_file_fh)) {
        my ($got, $want) = @{ $err{$name} || [ 'missing', '' ] };
        is($got, $want, "$name: the error text of the reference (" . ($want =~ s/\n\z//r) . "), not the caller's locale's");
        if ($] >= 5.022) {
            like($got, qr/(?:No such file or directory|Not a directory|Is a directory|File exists)\n?\z/,
                 "$name: its \$! part in English");
        } else {
            pass("$name: perl before 5.22 has no English \$! outside `use locale`");
        }
    }
}

done_testing();
