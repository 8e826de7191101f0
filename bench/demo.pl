#!/usr/bin/perl
# A quick look at what FastFile does: one 1 MiB config written the way
# Perl's print does it and the way FastFile does it, with the syscalls each
# makes (strace) and the time per call. `make demo` runs it.
use strict;
use warnings;
use File::Temp qw(tempdir);
use Time::HiRes qw(time);
use FastFile qw(file_set_contents file_get_contents);

my $dir  = tempdir(CLEANUP => 1);
my $file = "$dir/demo.cfg";
my $data = join '', map { sprintf "line %06d: %s\n", $_, 'x' x 50 } 1 .. 16384;  # 1 MiB

# the print-era pure-Perl writer: 8 KiB PerlIO buffer, then rename
sub print_writer {
    my ($filename, $content) = @_;
    my $tmp = "$filename.tmp.$$";
    open(my $fh, '>', $tmp) or die "open $tmp: $!\n";
    print {$fh} $content or die "print: $!\n";
    close($fh) or die "close: $!\n";
    rename($tmp, $filename) or die "rename: $!\n";
}

my %writer = (
    'FastFile file_set_contents' => sub { file_set_contents($file, $data) },
    'pure-Perl print + rename'   => sub { print_writer($file, $data) },
);

# syscalls of one call, counted between two marker syscalls perl never makes
sub syscalls_of {
    my ($name) = @_;
    my $strace = `sh -c 'command -v strace' 2>/dev/null`;
    return 'strace not installed' unless $strace;
    chomp $strace;
    my $log = "$dir/trace";
    my $code = sprintf q{use FastFile qw(file_set_contents); my $d = 'x' x 1048576;
        sub pw { my ($f,$c)=@_; open(my $fh,'>',"$f.tmp.$$") or die; print {$fh} $c; close $fh; rename("$f.tmp.$$",$f) }
        chdir('/fastfile-demo-start'); %s; chdir('/fastfile-demo-end');},
        $name =~ /FastFile/ ? "file_set_contents('$file.trace', \$d)" : "pw('$file.trace', \$d)";
    system($strace, '-qq', '-o', $log, $^X, (map { "-I$_" } @INC), '-e', $code) == 0
        or return 'strace failed';
    open(my $fh, '<', $log) or return 'no trace';
    my ($in, @calls) = (0);
    while (<$fh>) {
        if (/fastfile-demo-start/) { $in = 1; next }
        last if /fastfile-demo-end/;
        next unless $in;
        next if /^(?:mmap|munmap|brk|mremap)\(/;   # malloc's, not I/O
        push @calls, /^(\w+)\(/;
    }
    my %n;
    $n{$_}++ for @calls;
    return scalar(@calls) . ' (' . join(', ', map { "$_ x$n{$_}" } sort keys %n) . ')';
}

printf "Writing a %d-byte file, %s\n\n", length $data, scalar localtime;
my %ms;
for my $name (sort keys %writer) {
    $writer{$name}->() for 1 .. 5;    # warm up
    my $n = 200;
    my $t0 = time;
    $writer{$name}->() for 1 .. $n;
    $ms{$name} = (time - $t0) * 1000 / $n;
}
die "content mismatch\n" unless file_get_contents($file) eq $data;
my $fast = $ms{'FastFile file_set_contents'};
for my $name (sort keys %writer) {
    printf "%-28s %7.3f ms/call  %4.2fx  syscalls: %s\n",
        $name, $ms{$name}, $ms{$name} / $fast, syscalls_of($name);
}
print "\nBoth wrote identical bytes. On a FUSE filesystem each write(2) above is at least\n",
      "one FUSE write request: run `make bench` for the full comparison.\n";
