use strict;
use warnings;

# 4 threads x 200 writes, each to its own file and to one shared file. The
# threads share $$, so their temp names for the shared file collide: the
# EEXIST path (another name, never touching the other writer's temp) runs
# for real here.

use Config;
use Test::More;

BEGIN {
    plan skip_all => 'perl built without ithreads' unless $Config{useithreads};
}
use threads;
use lib 't/lib';
use FFTest qw(tempdir slurp temps_in);
use FastFile;
use FastFile::Writer;

my $THREADS = 4;
my $WRITES = 200;
my $dir = tempdir();
my $shared = "$dir/shared";

local $SIG{ALRM} = sub { diag('watchdog: threads did not finish in 60s'); POSIX::_exit(1) };
require POSIX;
alarm 60;

sub content { my ($t, $i) = @_; return "thread $t write $i\n" . ("$t" x (1000 + 97 * $t)) . "\x{e9}" }

my @thr = map {
    my $t = $_;
    threads->create(sub {
        my @errors;
        local $SIG{__WARN__} = sub { push @errors, "warning: $_[0]" };
        for my $i (1 .. $WRITES) {
            my $c = content($t, $i);
            eval { file_set_contents("$dir/own-$t", $c); 1 } or push @errors, "own $i: $@";
            eval { file_set_contents($shared, $c, 0640); 1 } or push @errors, "shared $i: $@";
            # a batch too: its own files, and a shared one (colliding temps)
            eval { FastFile::file_set_contents_many(["$dir/batch-$t" => $c, "$shared-batch" => $c]); 1 }
                or push @errors, "batch $i: $@";
            if ($i % 50 == 0) {    # own file is exactly what this thread wrote last
                open my $fh, '<:raw', "$dir/own-$t" or push @errors, "read own: $!";
                local $/;
                my $got = <$fh>;
                push @errors, "own $i: content differs" unless defined $got && $got eq $c;
            }
        }
        return join '', @errors;
    });
} 1 .. $THREADS;

my @errors = map { $_->join } @thr;
alarm 0;

for my $t (1 .. $THREADS) {
    is($errors[ $t - 1 ], '', "thread $t: no error");
    ok(slurp("$dir/own-$t") eq content($t, $WRITES), "thread $t: own file has its last write");
    ok(slurp("$dir/batch-$t") eq content($t, $WRITES), "thread $t: its batch's file has its last write");
}
my $s = slurp($shared);
my ($t) = $s =~ /^thread (\d) write \Q$WRITES\E\n/;
ok(defined $t, 'shared file holds some thread\'s last write') or diag(substr($s, 0, 40));
ok(defined $t && $s eq content($t, $WRITES), 'shared file is complete');
my $sb = slurp("$shared-batch");
ok(scalar(grep { $sb eq content($_, $WRITES) } 1 .. $THREADS), 'the shared file of the batches is complete');
is_deeply([ temps_in($dir) ], [], 'no temps left');

# A writer's copy in a new thread (CLONE_SKIP): an unblessed reference to
# undef, as the POD says; the writer itself still works in its own thread.
{
    my $w = FastFile::Writer->new("$dir/w");
    my $seen = threads->create(sub {
        return join ',', ref($w), (defined $$w ? 'defined' : 'undef'),
            (eval { $w->abort; 1 } ? 'abort ran' : 'abort died');
    })->join;
    is($seen, 'SCALAR,undef,abort died', "a thread's copy of a writer is an unblessed ref to undef");
    # the loaded module's POD: the suite also runs against an installed copy (debian/tests)
    open my $pod, '<', $INC{'FastFile/Writer.pm'} or die "$INC{'FastFile/Writer.pm'}: $!";
    my ($item) = do { local $/; <$pod> } =~ /^=item threads\n(.*?)^=item /ms;
    like($item // '', qr/unblessed reference to\s+C<undef>/, 'the POD says what the copy is');
    $w->print("ok\n");
    $w->commit;
    is(slurp("$dir/w"), "ok\n", 'the writer works in its own thread');
}

done_testing;
