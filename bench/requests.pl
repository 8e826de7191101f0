#!perl
# READ requests per read of each reader on t/fusefs mounted as pmxcfs reads
# (direct_io: no page cache, 128 KiB requests), undisturbed, by size; and
# the requests when the file changes once during the read (another node's
# change after the read's first request).
#
#   perl -Mblib bench/requests.pl            # this build
#   perl -I<other>/blib/lib -I<other>/blib/arch bench/requests.pl   # another
#
# Prints a markdown table (bench/results.md keeps one before and after).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use FastFS;
use FFTest qw(tempdir);
use FastFile qw(file_set_contents file_get_contents file_read_firstline file_read_last_line
                safe_read_from file_copy);

my $why = FastFS::available();
die "fastfs: $why\n" if $why;
my $fs = FastFS->mount(direct_io => 1);
my $mnt = $fs->dir;
my $local = tempdir();

my %READER = (
    file_get_contents   => sub { file_get_contents($_[0]) },
    file_read_firstline => sub { file_read_firstline($_[0]) },
    file_read_last_line => sub { file_read_last_line($_[0]) },
    safe_read_from      => sub { open my $fh, '<', $_[0] or die; safe_read_from($fh, 0, 0, $_[0]) },
    file_copy           => sub { file_copy($_[0], "$local/copy") },
);
my @READERS = qw(file_get_contents safe_read_from file_copy file_read_firstline file_read_last_line);

sub config_of {
    my ($size, $v) = @_;
    my $s = '';
    $s .= sprintf "v%d key%07d: value\n", $v, length $s while length $s < $size;
    return substr($s, 0, $size - 1) . "\n";
}

print "| size | ", join(' | ', @READERS), " |\n|--:|", join('|', ('--:') x @READERS), "|\n";
for my $kib (1, 64, 127, 128, 200, 1024) {
    my @cells;
    for my $name (@READERS) {
        file_set_contents("$mnt/f", config_of($kib * 1024, 1));
        file_set_contents("$mnt/next", config_of($kib * 1024, 2));
        $fs->reset;
        $READER{$name}->("$mnt/f");
        my $plain = $fs->counters->{read_requests};
        $fs->reset;
        $fs->swap('/f', 1, '/next');
        eval { $READER{$name}->("$mnt/f") };
        my $changed = $fs->counters;
        $fs->unswap;
        push @cells, $changed->{swaps} ? "$plain ($changed->{read_requests})" : $plain;
    }
    print "| $kib KiB | ", join(' | ', @cells), " |\n";
}
$fs->unmount;
