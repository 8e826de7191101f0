#!perl
# Concurrency: 8 writer processes replace the same file 500 times each (200
# in a plain run, 500 in full testing: RELEASE_TESTING or AUTHOR_TESTING) with
# distinct, self-identifying contents while 2 readers read it continuously
# (file_get_contents, and perl's own open/read). A reader must never see an
# empty or partial file, the end state must be some writer's last version,
# and no temp file may remain.
use strict;
use warnings;

use Test::More;
use lib 't/lib';
use FFTest qw(temps_in slurp full_testing);
use File::Temp ();
use POSIX ();
use Time::HiRes qw(time);

use FastFile qw(:all);
use FastFile::Writer;

my $WRITERS = $ENV{FASTFILE_CONC_WRITERS} || 8;
my $ROUNDS  = $ENV{FASTFILE_CONC_ROUNDS}  || (full_testing() ? 500 : 200);
my $READERS = 2;

my $dir = File::Temp::tempdir('ff85-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $target = "$dir/shared.conf";

# "W<id>S<seq>\n" repeated to a size that differs from version to version
sub content {
    my ($id, $seq) = @_;
    my $head = sprintf "W%dS%04d\n", $id, $seq;
    my $size = 1 + ($id * 7919 + $seq * 104729) % 40000;
    my $n = int($size / length $head) + 1;
    return $head x $n;
}

# '' if $c is a whole version, else what is wrong with it
sub check {
    my ($c) = @_;
    return 'undef' unless defined $c;
    return 'empty' if $c eq '';
    my ($id, $seq) = $c =~ /\AW(\d+)S(\d+)\n/ or return 'no header: ' . substr($c, 0, 20);
    return sprintf('partial or mixed W%dS%d (%d bytes)', $id, $seq, length $c)
        unless $c eq content($id, $seq);
    return '';
}

sub plain_read {
    my ($file) = @_;
    open my $fh, '<:raw', $file or return "open: $!";
    local $/;
    my $c = <$fh>;
    close $fh;
    return defined $c ? $c : '';
}

file_set_contents($target, content(0, 0));

my $t0 = time;
my (%writers, %readers);

for my $id (1 .. $WRITERS) {
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my $err = '';
        for my $seq (1 .. $ROUNDS) {
            # writer 8 uses FastFile::Writer for its even rounds
            my $ok = eval {
                if ($id == $WRITERS && $seq % 2 == 0) {
                    my $w = FastFile::Writer->new($target, { buffer_size => 4096 });
                    $w->print(content($id, $seq));
                    $w->commit;
                } else {
                    file_set_contents($target, content($id, $seq));
                }
                1;
            };
            if (!$ok) { $err = "writer $id round $seq: $@"; last }
        }
        open my $fh, '>', "$dir/writer.$id.result" or POSIX::_exit(3);
        print {$fh} $err;
        close $fh;
        POSIX::_exit($err ? 1 : 0);
    }
    $writers{$pid} = $id;
}

for my $r (1 .. $READERS) {
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my $stop = 0;
        $SIG{TERM} = sub { $stop = 1 };
        my ($reads, $bad, @bad) = (0, 0);
        while (!$stop) {
            my $c = $r == 1 ? eval { file_get_contents($target) } // "died: $@"
                            : plain_read($target);
            my $why = check($c);
            $reads++;
            if ($why) { $bad++; push @bad, $why if @bad < 5 }
        }
        open my $fh, '>', "$dir/reader.$r.result" or POSIX::_exit(3);
        print {$fh} join("\n", $reads, $bad, @bad);
        close $fh;
        POSIX::_exit(0);
    }
    $readers{$pid} = $r;
}

# a watchdog: a hung child must not hang the test suite
my $deadline = time + 120;
while (%writers) {
    my $pid = waitpid(-1, POSIX::WNOHANG());
    if ($pid > 0) {
        if (my $id = delete $writers{$pid}) {
            is $?, 0, "writer $id finished its $ROUNDS replacements"
                or diag slurp("$dir/writer.$id.result");
        }
        next;
    }
    if (time > $deadline) {
        kill 'KILL', keys %writers, keys %readers;
        fail('writers finished within 120 s');
        last;
    }
    select undef, undef, undef, 0.02;
}
kill 'TERM', keys %readers;
my $total_reads = 0;
for my $pid (keys %readers) {
    waitpid $pid, 0;
    my $r = $readers{$pid};
    my ($reads, $bad, @bad) = split /\n/, slurp("$dir/reader.$r.result") // "0\n-1";
    my $how = $r == 1 ? 'file_get_contents' : 'perl open/read';
    cmp_ok $reads, '>', 0, "reader $r ($how) read the file ($reads times)";
    is $bad, 0, "reader $r ($how) never saw an empty, partial or mixed file"
        or diag join "\n", @bad;
    $total_reads += $reads;
}
my $took = time - $t0;

my $end = file_get_contents($target);
is check($end), '', 'the end state is a whole version';
my ($id, $seq) = $end =~ /\AW(\d+)S(\d+)\n/;
is $seq + 0, $ROUNDS, "and it is a writer's last version (W${id}S$seq)";
is_deeply [ temps_in($dir) ], [], 'no temp file remains';
is sprintf('%04o', (stat $target)[2] & 07777), sprintf('%04o', 0644 & ~umask), 'mode';

# a FastFile::Writer shared with a forked child: the child's exit (global
# destruction runs DESTROY) must not remove the parent's temp, and the child
# cannot commit the parent's replacement
{
    my $t = "$dir/forked";
    file_set_contents($t, "before\n");
    my $w = FastFile::Writer->new($t);
    $w->print("from the parent\n");
    my @temps = temps_in($dir);
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my $ok = eval { $w->commit; 1 };
        exit($ok ? 1 : 0);    # a normal exit: END blocks, DESTROY of $w
    }
    waitpid $pid, 0;
    is $? >> 8, 0, 'the child could not commit the parent\'s writer';
    is_deeply [ temps_in($dir) ], \@temps, 'the child\'s exit left the parent\'s temp alone';
    ok $w->commit, 'the parent commits after the child exited';
    is slurp($t), "from the parent\n", 'with its content';
}

my $ops = $WRITERS * $ROUNDS;
note sprintf "concurrency: %d replacements by %d writers, %d reads by %d readers, %.1f s",
    $ops, $WRITERS, $total_reads, $READERS, $took;
done_testing;
