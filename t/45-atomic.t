use strict;
use warnings;

# A reader polls the target (open + read it all) as fast as it can while the
# parent replaces it 1000 times with two contents of different sizes: the
# reader must only ever see one of the two complete versions, and the file
# must exist at every instant.

use Test::More;
use POSIX ();
use lib 't/lib';
use FFTest qw(tempdir slurp temps_in);
use FastFile;

my $dir = tempdir();
my $target = "$dir/target";
my $A = 'a' x (100 * 1024);
my $B = 'b' x (60 * 1024);
my $ROUNDS = 1000;

file_set_contents($target, $A);

pipe my $stop_r, my $stop_w or die "pipe: $!";
pipe my $res_r, my $res_w or die "pipe: $!";
my $pid = fork;
die "fork: $!" unless defined $pid;
if (!$pid) {
    close $stop_w;
    close $res_r;
    my %n = (reads => 0, a => 0, b => 0, bad => 0, open_failed => 0, bad_len => -1);
    my $rin = '';
    vec($rin, fileno($stop_r), 1) = 1;
    syswrite $res_w, "R";    # ready
    while (1) {
        if (open my $fh, '<:raw', $target) {
            local $/;
            my $c = <$fh>;
            close $fh;
            $c = '' unless defined $c;
            $n{reads}++;
            if    ($c eq $A) { $n{a}++ }
            elsif ($c eq $B) { $n{b}++ }
            else             { $n{bad}++; $n{bad_len} = length $c if $n{bad_len} < 0 }
        } else {
            $n{open_failed}++;
        }
        last if select(my $rout = $rin, undef, undef, 0);    # parent closed the pipe: done
    }
    syswrite $res_w, join(' ', map { "$_=$n{$_}" } sort keys %n) . "\n";
    POSIX::_exit(0);
}
close $stop_r;
close $res_w;

local $SIG{ALRM} = sub { kill 'KILL', $pid; die "atomic test timed out\n" };
alarm 60;

sysread $res_r, my $ready, 1;
is($ready, 'R', 'reader started');

my $errors = 0;
for my $i (1 .. $ROUNDS) {
    eval { file_set_contents($target, $i % 2 ? $B : $A); 1 } or $errors++;
}
is($errors, 0, "$ROUNDS replacements, no error");
close $stop_w;

my $line = <$res_r>;
waitpid $pid, 0;
alarm 0;
is($?, 0, 'reader exited normally');
my %n = ($line // '') =~ /(\w+)=(-?\d+)/g;
note("reader: $line");
ok($n{reads} > 0, "reader read the file ($n{reads} reads: $n{a} of A, $n{b} of B)");
is($n{open_failed}, 0, 'the target existed at every read');
is($n{bad}, 0, 'every read saw a complete version') or diag("first bad read had length $n{bad_len}");
is($n{a} + $n{b}, $n{reads}, 'reads are all A or B');
ok($n{a} > 0 && $n{b} > 0, 'both versions were seen (the reader raced the writer)');

is(slurp($target), $ROUNDS % 2 ? $B : $A, 'last version in place');
is_deeply([ temps_in($dir) ], [], 'no temp left');

done_testing;
