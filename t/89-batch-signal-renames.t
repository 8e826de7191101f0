#!perl
# file_set_contents_many's renames are all or nothing against signals too:
# a signal that comes between two renames (strace delivers it as the third
# renameat(2) returns) must not leave some targets new and the others old.
# Its handler runs once every target is renamed, however it ends: by
# returning, by a die (thrown after the renames), by exit (the batch's
# loops poll perl's pending handlers, and an exit unwinds past any eval:
# the batch was left half renamed); nor does a signal whose default action
# ends the process (SIGTERM, no handler) end it half renamed. The signal
# mask after the call is the one before, and no signal is lost.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in strace_why inc_args run_cmd syscall_set);

if (my $why = strace_why()) { plan skip_all => $why }

my $N = 6;
my $root = tempdir();

# The child: old targets written the plain way, then the batch. It prints
# "call <ok or its error>" and the signal mask before and after; END prints
# the handlers run.
my $CHILD = <<'CODE';
use strict;
use warnings;
use FastFile qw(file_set_contents_many);
my ($d, $n, $how) = @ARGV;
for (1 .. $n) { open my $fh, '>', "$d/f$_" or die; print {$fh} "old$_\n"; close $fh }
my $ran = 0;
sub mask { open my $s, '<', '/proc/self/status' or die; /^SigBlk:\s*(\S+)/ and return $1 for <$s>; '' }
$SIG{USR1} = $how eq 'exit' ? sub { $ran++; exit 7 }
           : $how eq 'die'  ? sub { $ran++; die "handler\n" }
           :                  sub { $ran++ };
END { print "ran $ran\n" }
$| = 1;
my $before = mask();
my $ok = eval { file_set_contents_many([ map { ("$d/f$_", "new$_\n") } 1 .. $n ]); 1 };
my $x = 0;
$x += $_ for 1 .. 3;    # (ops: where perl runs a pending handler itself)
print 'call ', ($ok ? 'ok' : "died $@"), "\n";
print 'mask ', (mask() eq $before ? 'same' : 'changed: ' . $before . ' -> ' . mask()), "\n";
CODE

# how, the signal, what the child prints, its exit status
my @cases = (
    [ 'exit', 'USR1', qr/\Aran 1\n\z/,                                        7 << 8 ],
    [ 'die',  'USR1', qr/\Acall died handler\n\nmask same\nran 1\n\z/,          0 ],
    [ 'runs', 'USR1', qr/\Acall ok\nmask same\nran 1\n\z/,                    0 ],
    [ 'runs', 'TERM', qr/\A\z/,                                               15 ],
);
for my $c (@cases) {
    my ($how, $sig, $out_re, $status) = @$c;
    my $label = "a SIG$sig " . ($sig eq 'TERM' ? 'with no handler' : "whose handler ${how}s")
              . ' after the third rename';
    my $d = tempdir();
    my ($st, $out) = run_cmd('strace', '-qq', '-f', '-o', '/dev/null', '-e', 'trace=' . syscall_set('renameat'),
                             '-e', 'inject=' . syscall_set('renameat') . ":signal=$sig:when=3",
                             $^X, inc_args(), '-e', $CHILD, $d, $N, $how);
    is($st, $status, "$label: the exit status") or diag $out;
    like($out, $out_re, "$label: what it printed");
    is_deeply([ map { slurp("$d/f$_") } 1 .. $N ], [ map { "new$_\n" } 1 .. $N ],
              "$label: every target new (none left old)");
    is_deeply([ temps_in($d) ], [], "$label: no temp");
}

done_testing();
