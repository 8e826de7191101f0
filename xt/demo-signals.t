use strict;
use warnings;

# `make demo` leaves nothing however it ends: cut short by `| head`
# (SIGPIPE), killed (SIGTERM), or a Ctrl-C to its process group (SIGINT,
# the FUSE daemon and strace get it too). Before, each left t/fusefs' mount
# directory and log in the temp dir or its 1 MiB file in /dev/shm.

use Test::More;
use lib 't/lib';
use FFTest qw(tempdir);
use FastFS ();
use POSIX ();

plan skip_all => 'run from a build (blib missing)' unless -d 'blib';

# the fastfile-demo-* directories in /dev/shm now
sub shm_dirs { return sort glob '/dev/shm/fastfile-demo-*' }

# Runs the demo with its own TMPDIR and process group, reads $lines lines of
# its output, then ends it with $how; returns what is left.
sub cut_short {
    my ($how, $lines) = @_;
    my $tmp = tempdir();
    my %shm_before = map { $_ => 1 } shm_dirs();
    my $pid = open(my $out, '-|') // die "fork: $!";
    if (!$pid) {
        POSIX::setpgid(0, 0);
        $ENV{TMPDIR} = $tmp;
        open STDERR, '>', '/dev/null';
        exec $^X, '-Mblib', 'bench/demo.pl' or POSIX::_exit(127);
    }
    my $got = 0;
    while ($got < $lines && defined(my $line = <$out>)) { $got++ }
    if ($how eq 'PIPE') {
        close $out;    # its next print: SIGPIPE
    } else {
        kill $how eq 'INT' ? ('INT', -$pid) : ('TERM', $pid);
        1 while <$out>;
        close $out;
    }
    waitpid $pid, 0;
    opendir my $dh, $tmp or die "$tmp: $!";
    return { lines => $got, tmp => [ grep { !/^\.\.?\z/ } readdir $dh ],
             shm => [ grep { !$shm_before{$_} } shm_dirs() ], mounts => [ FastFS::mounts_under($tmp) ] };
}

# FUSE is missing); 12: the tmpfs part, its directory made
for my $case ([ PIPE => 3 ], [ TERM => 3 ], [ INT => 16 ], [ PIPE => 33 ], [ TERM => 33 ], [ INT => 33 ]) {
    my ($how, $lines) = @$case;
    my $left = cut_short($how, $lines);
    my $what = "SIG$how after $left->{lines} lines";
    is_deeply $left->{mounts}, [], "$what: nothing mounted";
    is_deeply $left->{tmp}, [], "$what: nothing in its TMPDIR";
    is_deeply $left->{shm}, [], "$what: nothing in /dev/shm";
}

done_testing;
