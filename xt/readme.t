use strict;
use warnings;

# README.md (issue 37): it opens with the module and a synopsis that runs as
# written on any Linux machine; every figure that changes with the code
# (times, ratios, syscalls, instructions) is a copy of a tracked table that
# a make target regenerates (bench/results.md and bench/batch.md: make
# bench-update; bench/instr.md: make bench-instr), inside a region
#   <!-- figures from bench/results.md | ## Readers -->  ...  <!-- /figures -->
# holding what xt/tools/readme-figures.pl (make readme-figures) copies
# from that table; and no test count, which no tracked table holds.

use Test::More;
use lib 't/lib';
use FFTest qw(tempdir run_perl);

open my $fh, '<', 'README.md' or die "README.md: $!";
my $readme = do { local $/; <$fh> };
close $fh;

# --- the opening: the module, two sentences on what and when, the synopsis
my @headings = $readme =~ /^(##? .+)$/mg;
is_deeply [ @headings[0 .. 3] ], [ '# FastFile', '## Synopsis', '## Why', '## Install' ],
    'it opens with the module, its synopsis, why, then install';
my ($intro) = $readme =~ /\A# FastFile\n\n(.*?)\n\n/s;
is scalar(() = ($intro // '') =~ /\.(?:\s|\z)/g), 2, 'two sentences say what it is and when to use it';

my ($synopsis) = $readme =~ /^## Synopsis\n.*?^```perl\n(.*?)^```$/ms;
ok defined $synopsis, 'the synopsis is a perl block';
unlike $synopsis // '', qr{/etc/pve}, '... that needs no Proxmox VE node';
{
    my $tmp = tempdir();
    my ($st, $out) = run_perl($synopsis // 'die', env => { TMPDIR => $tmp });
    is $st, 0, '... and runs as written' or diag $out;
    like $out, qr/^unchanged: nothing written\nport: 8006; big\.log has \d+ bytes$/m, '... printing what it says';
    opendir my $dh, $tmp or die "$tmp: $!";
    is_deeply [ grep { !/^\.\.?\z/ } readdir $dh ], [], '... and leaves nothing';
}

# --- install: the shadowing warning beside the commands, the /etc/mtab fix
my ($install) = $readme =~ /^## Install\n(.*?)^## /ms;
like $install // '', qr/make install.*cpanm \..*dpkg -i.*shadows the package/s,
    'the shadowing warning beside the install commands';
like $install // '', qr{ln -s \.\./proc/self/mounts /etc/mtab}, 'the /etc/mtab fix';
like $install // '', qr/fusermount3.*fusermount/s, 'both fusermounts named';
like $install // '', qr/On Debian 13 \(PVE 9\).*fuse3/s, 'the FUSE packages on Debian 13 beside the install commands';
like $readme, qr/^### Debian 12 and 13\n/m, 'a Debian 12 and 13 section';

# --- figures: each region is what make readme-figures copies from its table
{
    require './xt/tools/readme-figures.pl';
    my $regions = () = $readme =~ /^<!-- figures from /mg;
    ok $regions >= 5, "figures come from tracked tables ($regions regions)";
    my (undef, $stale) = eval { refresh($readme) };
    is $@, '', 'every region names a table there is';
    is_deeply $stale, [], 'every figure is its tracked table\'s (make readme-figures)'
        or diag "stale: $_" for @{ $stale || [] };
}
my $outside = $readme =~ s/^<!-- figures from \S+ \| .+? -->\n.*?^<!-- \/figures -->$//msgr;
unlike $outside, qr/\b\d[\d,]* tests\b/, 'no test count (no tracked table holds one)';
unlike $outside, qr/\| (?:FastFile|file_set_contents)[^|\n]*\| \d{3,4} /, 'no instruction count outside the figures';

done_testing;
