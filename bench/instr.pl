#!perl
# make bench-instr: instructions per call of every API, counted by
# valgrind's callgrind inside the XSUB (inclusive: everything it calls,
# perl's API and libc, not the kernel's side of a syscall). Each case runs
# twice, N and 3N calls in one process, and the difference is divided by 2N:
# what one call costs once the process is warm, without start-up and
# first-call costs (loading, the first getpid, lazy binding). The count does
# not depend on load or CPU speed: two runs agree to within a few
# instructions (hash seeds fixed, file names of fixed length), so a table
# compares commits.
#
#   perl -Mblib bench/instr.pl [--quick] [--no-write] [case-regexp]
#
# Prints the table; writes bench/instr.md and the section between the
# "instr" markers of bench/results.md (make bench keeps that section).
use strict;
use warnings;

use Config;
use FindBin;
use lib "$FindBin::Bin/lib";
use BenchOut;
use File::Temp ();
use Getopt::Long;
use POSIX ();

GetOptions('quick' => \my $quick, 'no-write' => \my $no_write) or die "usage: $0 [--quick] [--no-write] [regexp]\n";
my $only = shift;

system('valgrind --version >/dev/null 2>&1') == 0 or die "bench-instr needs valgrind (callgrind)\n";

my $base = -d '/dev/shm' && -w '/dev/shm' ? '/dev/shm' : File::Temp::tempdir(CLEANUP => 1);
# fixed-length names: the path is copied and scanned, its length counts
my $dir = File::Temp::tempdir('ff-instr-XXXXXXXX', DIR => $base, CLEANUP => 1);

my $KiB = 1024;
my $MiB = 1024 * 1024;

# name, the XSUB counted, setup code, code of one call (per call: $i), N, per
# (what one "call" is when it is not one XSUB call: "file" for the batch)
my @cases = (
    [ 'file_set_contents 1 KiB', 'file_set_contents', 'my $d = "x" x 1024;', 'file_set_contents($f, $d)' ],
    [ 'file_set_contents 4 KiB', 'file_set_contents', 'my $d = "x" x 4096;', 'file_set_contents($f, $d)' ],
    [ 'file_set_contents 1 MiB', 'file_set_contents', 'my $d = "x" x 1048576;', 'file_set_contents($f, $d)', 200 ],
    [ 'file_set_contents 1 KiB, perm 0600', 'file_set_contents', 'my $d = "x" x 1024;', 'file_set_contents($f, $d, 0600)' ],
    [ 'file_set_contents 1 KiB, force_utf8 (ASCII)', 'file_set_contents', 'my $d = "x" x 1024;', 'file_set_contents($f, $d, 0644, 1)' ],
    [ 'file_set_contents 1 KiB, $\\ set', 'file_set_contents', 'my $d = "x" x 1024; $\\ = "\n";', 'file_set_contents($f, $d)' ],
    (map { my $o = $_; [ "file_set_contents 1 KiB, { $o }", 'file_set_contents', qq{my \$d = "x" x 1024; my \$o = { $o };},
                         $o =~ /noclobber/ ? 'unlink $f; file_set_contents($f, $d, $o)' : 'file_set_contents($f, $d, $o)' ] }
        'perm => 0600', 'utf8 => 1', 'fsync => 1', 'preserve => 1', 'mkdir => 1', 'follow_symlinks => 1',
        'noclobber => 1'),
    [ 'file_set_contents 1 KiB, { if_changed => 1 }, unchanged', 'file_set_contents',
      'my $d = "x" x 1024; my $o = { if_changed => 1 };', 'file_set_contents($f, $d, $o)' ],
    [ 'file_set_contents 1 KiB, { if_changed => 1 }, changed', 'file_set_contents',
      'my @d = ("x" x 1024, "y" x 1024); my $o = { if_changed => 1 };', 'file_set_contents($f, $d[$i % 2], $o)' ],
    [ 'file_get_contents 1 KiB', 'file_get_contents', 'file_set_contents($f, "x" x 1024);', 'file_get_contents($f)' ],
    [ 'file_get_contents 1 MiB', 'file_get_contents', 'file_set_contents($f, "x" x 1048576);', 'file_get_contents($f, 2097152)', 200 ],
    [ 'file_read_firstline', 'file_read_firstline', 'file_set_contents($f, "first line\nsecond\n");', 'file_read_firstline($f)' ],
    [ 'writer print, 64 bytes', 'FastFile::Writer::print', 'my $d = "x" x 64; my $w = atomic_writer($f);',
      '$w->print($d)', undef, undef, '$w->commit;' ],
    [ 'writer new + commit, 1 KiB (per file)', 'FastFile::Writer::new',
      'my $d = "x" x 1024;', 'my $w = atomic_writer($f); $w->print($d); $w->commit', undef, undef, '',
      [qw(FastFile::Writer::new FastFile::Writer::print FastFile::Writer::commit)] ],
    [ 'file_set_contents_many 1 KiB, one directory (per file)', 'file_set_contents_many',
      'my $d = "x" x 1024;', undef, 64, 'file' ],
);

# the XSUB's symbol
sub symbol {
    my ($sub) = @_;
    $sub = "FastFile::$sub" unless $sub =~ /::/;
    my ($pkg, $fn) = $sub =~ /\A(.*)::(\w+)\z/;
    $pkg =~ s/::/__/g;              # as xsubpp names them
    return "XS_${pkg}_$fn";
}

# Total instructions inside the counted XSUBs for n calls.
sub count {
    my ($case, $n) = @_;
    my ($name, $sub, $setup, $call, undef, $per, $end, $subs) = @$case;
    my $f = "$dir/target-file";
    unlink $f;
    $setup .= ' symlink("target-real", $f);' if $name =~ /follow_symlinks/;
    my $loop = $per
        ? "my \@l = map { (\"$dir/b\" . sprintf('%05d', \$_), \$d) } 1 .. $n; file_set_contents_many(\\\@l);"
        : "for my \$i (1 .. $n) { $call }";
    my $code = "use FastFile qw(:all); my \$f = '$f'; $setup $loop " . ($end // '');
    my $out = "$dir/callgrind.out";
    my @toggle = map { '--toggle-collect=' . symbol($_) } @{ $subs || [$sub] };
    local $ENV{PERL_HASH_SEED} = 0;
    local $ENV{PERL_PERTURB_KEYS} = 0;
    my @cmd = ('valgrind', '--tool=callgrind', '-q', "--callgrind-out-file=$out", @toggle,
               $^X, (map { "-I$_" } grep { !ref } @INC), '-e', $code);
    my $pid = fork // die "fork: $!\n";
    if (!$pid) {
        open STDOUT, '>', "$dir/log" or die;
        open STDERR, '>&', \*STDOUT or die;
        exec { $cmd[0] } @cmd or POSIX::_exit(127);
    }
    waitpid $pid, 0;
    $? == 0 or die "$name: valgrind failed:\n" . `cat $dir/log`;
    open my $fh, '<', $out or die "$out: $!\n";
    my $total;
    while (<$fh>) { $total = $1 if /^(?:summary|totals):\s+(\d+)/ }
    close $fh;
    unlink $out, glob("$dir/b*"), glob("$dir/target*");
    defined $total or die "$name: no total in callgrind's output\n";
    return $total;
}

my @rows;
for my $case (@cases) {
    next if defined $only && $case->[0] !~ /$only/;
    my $n = $case->[4] // 1000;
    $n = int($n / 10) || 1 if $quick && !$case->[5];
    my ($one, $three) = (count($case, $n), count($case, 3 * $n));
    my $per = ($three - $one) / (2 * $n);
    push @rows, [ $case->[0], sprintf('%.0f', $per), $case->[5] ? 'file' : 'call' ];
    printf "%-60s %8.0f per %s\n", @{ $rows[-1] };
}

my $table = "| case | instructions | per |\n| :-- | --: | :-- |\n"
          . join('', map { "| $_->[0] | $_->[1] | $_->[2] |\n" } @rows);
# the date and the commit: a count belongs to the code it counted
my $commit = `git rev-parse --short HEAD 2>/dev/null` // '';
$commit =~ s/\s+\z//;
my $head = sprintf "perl %vd (%s), %s; callgrind (%s), XSUB inclusive, (3N - N calls) / 2N; files on %s; %s%s\n",
    $^V, $Config{archname}, (`uname -sr` =~ s/\s+\z//r), (`valgrind --version` =~ s/\s+\z//r), $base,
    POSIX::strftime('%Y-%m-%d', localtime), length $commit ? ", commit $commit" : '';
if (!$no_write && !defined $only && !$quick) {
    my $instr = BenchOut::path('instr.md');
    open my $o, '>', $instr or die "$instr: $!\n";
    print {$o} "# Instructions per call (make bench-instr)\n\n$head\n$table";
    close $o or die "$instr: $!\n";
    print BenchOut::wrote($instr), "\n";
    my $res = BenchOut::put_section('results.md', 'instr',
        "## Instructions per call\n\nFrom `make bench-instr` (bench/instr.pl): $head\n$table");
    print BenchOut::wrote($res), " (its instructions section)\n";
}
