#!/usr/bin/perl
# xt/tools/kwalitee.pl TARBALL - the CPANTS kwalitee of a `make dist` tarball,
# as cpants_lint reports it: every core and extra indicator (the ones that
# need the CPANTS database cannot run here). Prints the score and each
# failing indicator with why; exits 1 unless all pass. Run by
# xt/tools/distcheck.sh (make tarball-check); needs Module::CPANTS::Analyse
# (Debian: libmodule-cpants-analyse-perl).
use strict;
use warnings;

my $tarball = shift // die "usage: $0 TARBALL\n";
-f $tarball or die "kwalitee: no $tarball\n";
eval { require Module::CPANTS::Analyse; Module::CPANTS::Analyse->import; 1 }
    or die "kwalitee: Module::CPANTS::Analyse is not installed (apt-get install libmodule-cpants-analyse-perl)\n";

my $mca = Module::CPANTS::Analyse->new({ dist => $tarball });
my $d = $mca->run;
my (@core, @extra, @failed);
for my $i ($mca->mck->get_indicators) {
    next if $i->{needs_db} || $i->{is_experimental};
    my $ok = $d->{kwalitee}{ $i->{name} };
    push @{ $i->{is_extra} ? \@extra : \@core }, $ok;
    next if $ok;
    my $why = $d->{error}{ $i->{name} } // $i->{error};
    $why = join ', ', map { ref $_ ? join(' ', @$_) : $_ } @$why if ref $why eq 'ARRAY';
    push @failed, sprintf "  %s%s: %s\n", $i->{name}, ($i->{is_extra} ? ' (extra)' : ''), $why;
}
my $passed = grep { $_ } @core, @extra;
my $all = @core + @extra;
printf "kwalitee: %d of %d indicators (%d core, %d extra): %.0f%%\n",
    $passed, $all, scalar @core, scalar @extra, 100 * $passed / $all;
print @failed;
exit(@failed ? 1 : 0);
