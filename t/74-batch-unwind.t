#!perl
# file_set_contents_many's cleanup and signals: a signal storm during the
# renames never fails the batch; a child forked by a signal handler leaves
# the parent's directories and temps alone at every step; when fds run out,
# the temps of directories that left the cache are still removed.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use lib 't/lib';
use FFTest qw(strace_why strace_call temps_in slurp spew tempdir);

use FastFile qw(:all);

my $why = strace_why();
plan skip_all => $why if $why;

my $dir = tempdir();

# three files holding "old\n" in a new directory $name of $dir
sub three_old {
    my ($name) = @_;
    my $d = "$dir/$name";
    mkdir $d or die "mkdir $d: $!";
    my @t = map { "$d/f$_" } 1 .. 3;
    spew($_, "old\n") for @t;
    return ($d, @t);
}

# a batch writing "new\n" to @t whose renameat calls number $when fail with
# EINTR and SIGALRM; the handler counts in $n, then runs $handler. Returns
# strace_call's result (ret: "written handler-runs").
sub renames_interrupted {
    my ($handler, $when, @t) = @_;
    return strace_call("our \$n = 0; local \$SIG{ALRM} = sub { \$n++; $handler };"
                       . ' my $w = file_set_contents_many([ map { ($_ => "new\n") } @ARGV ]); "$w $n"',
                       attach => 1, args => \@t, trace => ['renameat'],
                       inject => ["renameat:error=EINTR:signal=SIGALRM:when=$when"], timeout => 60);
}

# ---- a storm during the renames: every renameat interrupted by SIGALRM.
# More than one file: signals are blocked meanwhile (no handler between two
# renames), each SIGALRM waits in the kernel, one of a kind: the handler
# runs once, after the renames. One file: a handler runs at each EINTR.
{
    my ($d, @t) = three_old('storm');
    my $r = renames_interrupted('', '1..150', @t);
    ok($r->{ok}, 'batch: 150 EINTRs in its renames, each with a signal: it succeeds') or diag $r->{err};
    is($r->{ret}, '3 1', '... 3 files written, the handler ran once, after them (the signals waited blocked)');
    is(join('', map { slurp($_) } @t), "new\n" x 3, '... every target new');
    is_deeply([ temps_in($d) ], [], '... no temp left');
    ($d, @t) = three_old('storm1');
    $r = renames_interrupted('', '1..150', $t[0]);
    ok($r->{ok}, 'batch of one: 150 EINTRs in its rename, each with a signal: it succeeds') or diag $r->{err};
    is($r->{ret}, '1 150', '... the file written, the handler ran once for each signal');
    is(slurp($t[0]), "new\n", '... the target new');
    is_deeply([ temps_in($d) ], [], '... no temp left');
}

# ---- a handler that dies during the renames: its die is held until every
# rename is done (the batch is never left half renamed), then thrown
{
    my ($d, @t) = three_old('dies');
    my $r = renames_interrupted('die "timeout\n"', 2, @t);
    is($r->{injected}, 1, 'dying handler: the second rename interrupted');
    ok(!$r->{ok}, 'dying handler: the call dies');
    is($r->{err}, "timeout\n", "... with the handler's die");
    is(join('', map { slurp($_) } @t), "new\n" x 3, '... after every rename was done');
    is_deeply([ temps_in($d) ], [], '... no temp left');
}

# ---- the held die runs $SIG{__DIE__} as often as perl's own signal
# handling runs it for a handler's die (in the handler, and again as perl
# throws it on), not once more when the batch throws it
{
    my ($d, @t) = three_old('diehook');
    my $r = strace_call('our $hooks = 0; local $SIG{__DIE__} = sub { $hooks++ };'
                        . ' local $SIG{ALRM} = sub { die "timeout\n" };'
                        . ' eval { kill ALRM => $$; 1 }; my $perl = $hooks; $hooks = 0;'
                        . ' eval { file_set_contents_many([ map { ($_ => "new\n") } @ARGV ]) };'
                        . ' "$perl $hooks $@"',
                        attach => 1, args => \@t, trace => ['renameat'],
                        inject => ['renameat:error=EINTR:signal=SIGALRM:when=2']);
    ok($r->{ok}, 'held die: the script runs') or diag $r->{err};
    my ($perl, $batch, $err) = split / /, $r->{ret} // '', 3;
    is($batch, $perl, "held die: \$SIG{__DIE__} runs as often as for a handler's die in plain perl ($perl)");
    is($err, "timeout\n", '... the handler\'s die is what the caller gets');
    is(join('', map { slurp($_) } @t), "new\n" x 3, '... after every rename');
}

# ---- a child forked by a handler, at each step of a batch with mkdir:
# it unwinds its copy of the batch (dies in the handler) and must leave
# the parent's new directories and temps alone; the parent goes on.
for my $c (
    # the step, the syscall interrupted (the when-th of it, on these paths)
    [ 'between the two mkdirs',             'mkdir:when=3',    'new/sub', 'new' ],
    [ 'after mkdir, before the first temp', 'openat:when=3',   'new/sub' ],
    [ 'while the first temp is written',    'write:when=1',    'new/sub/a.tmp.%PID%' ],
    [ 'at the first rename',                'renameat:when=1', 'new/sub' ],
) {
    my ($step, $inject, @paths) = @$c;
    my ($name, $when) = $inject =~ /^(\w+):(.*)/;
    my $d = "$dir/fork-$name";
    mkdir $d or die;
    my @t = ("$d/new/sub/a", "$d/new/sub/b");
    my $code = 'my $parent = $$; local $SIG{ALRM} = sub { my $p = fork // die;'
        . ' if (!$p) { die "child\n" } waitpid $p, 0; };'
        . ' my $w = eval { file_set_contents_many([ map { ($_ => "new $_\n") } @ARGV ], { mkdir => 1 }) };'
        . ' POSIX::_exit(0) if $$ != $parent; die $@ if !defined $w; $w';
    my $r = strace_call($code, attach => 1, setup => 'use POSIX ()', args => \@t, pid => $FFTest::PID, target => $t[0],
                        paths => [ map { "$d/$_" } @paths ],
                        inject => ["$name:error=EINTR:signal=SIGALRM:$when"]);
    ok($r->{injected} >= 1, "fork $step: injected") or diag $r->{log};
    ok($r->{ok}, "fork $step: the parent's batch succeeds") or diag "$r->{err}\n$r->{log}";
    is(join('', map { slurp($_) // 'missing' } @t), join('', map { "new $_\n" } @t), "fork $step: both files written");
    is_deeply([ temps_in($d) ], [], "fork $step: no temp left");
}

# ---- out of fds (EMFILE from every open, strace) after the writes, or
# after 100 of 300 temps: directories that left the cache cannot be
# reopened, and their temps are still removed (by full name, once that
# leads to the same directory)
{
    my $base = "$dir/fds";
    mkdir $base or die;
    my @t = map { "$base/d$_/f" } 1 .. 300;
    for (1 .. 300) { mkdir "$base/d$_" or die }
    my $code = 'file_set_contents_many([ map { ($_ => "new\n") } @ARGV ])';
    # where the temps are opened, among all openat calls of the child
    my $dry = strace_call($code, args => \@t, trace => ['openat'], ulimit_n => 64);
    ok($dry->{ok}, 'fds: the batch alone succeeds under ulimit -n 64') or diag $dry->{err};
    my @opens = $dry->{log} =~ /^\d+\s+(openat\(.*)$/mg;
    my @creat = grep { $opens[$_ - 1] =~ /O_CREAT/ } 1 .. @opens;
    is(scalar @creat, 300, 'fds: 300 temps opened');
    unlink @t;
    for my $c ([ 'after the writes', $creat[-1] + 1 ], [ 'after 100 temps', $creat[99] + 1 ]) {
        my ($when, $k) = @$c;
        my $r = strace_call($code, args => \@t, trace => ['openat'], ulimit_n => 64,
                            inject => ["openat:error=EMFILE:when=$k+"]);
        ok(!$r->{ok}, "fds $when: the batch fails");
        like($r->{err}, qr/Too many open files/, "fds $when: ... out of fds");
        is_deeply([ temps_in($base) ], [], "fds $when: no temp left");
        unlink grep { -e } @t;
    }
}

# ---- user code that changes the working directory during a batch of
# relative names: what the batch reopens or removes by name afterwards is
# taken from the working directory it had before that code first ran.
# Over more directories than its cache holds (ulimit -n 20, 60
# directories), those that left the cache are reopened, and their temps
# removed, from there (from the new one they were not found: the batch
# failed, 24 temps left).
{
    my $base = "$dir/chdir";
    mkdir $base or die;
    for (1 .. 60) { mkdir "$base/d$_" or die }
    my $r = strace_call('chdir $ARGV[0] or die; local $SIG{ALRM} = sub { chdir "/" or die };'
                        . ' file_set_contents_many([ map { ("d$_/f" => "new\n") } 1 .. 60 ])',
                        args => [$base], trace => ['write'], ulimit_n => 20,
                        inject => ['write:error=EINTR:signal=SIGALRM:when=30']);
    is($r->{injected}, 1, 'chdir in a handler: the 30th write interrupted');
    ok($r->{ok}, '... the batch succeeds') or diag $r->{err};
    is(scalar(grep { (slurp("$base/d$_/f") // '') eq "new\n" } 1 .. 60), 60, '... every file written where it was named');
    is_deeply([ temps_in($base) ], [], '... no temp left');
}

# The directories mkdir made are removed from there too, by a handler that
# dies or by a failure whose $SIG{__DIE__} hook changes directory: from the
# new one, the batch removed another directory's empty new/sub and new,
# and left its own.
{
    my $base = "$dir/chdir-mkdir";
    for my $c ([ 'a handler that dies', 'local $SIG{ALRM} = sub { chdir $ARGV[1] or die; die "handler\n" };',
                 [ 'new/sub/f' => "x\n", 'new/sub/g' => "y\n" ], qr/^handler$/ ],
               [ 'a $SIG{__DIE__} hook', 'local $SIG{__DIE__} = sub { chdir $ARGV[1] or die };',
                 [ 'new/sub' => "x\n", 'new/sub/f' => "y\n" ], qr/Is a directory/ ]) {
        my ($who, $setup, $pairs, $err) = @$c;
        mkdir $base or die;
        mkdir "$base/$_" or die for qw(a b b/new b/new/sub);
        my $r = strace_call('chdir $ARGV[0] or die; ' . $setup
                            . ' file_set_contents_many([ ' . join(', ', map { "'$_'" } @$pairs) . ' ], { mkdir => 1 })',
                            args => [ "$base/a", "$base/b" ], trace => ['write'],
                            inject => [ $setup =~ /ALRM/ ? 'write:error=EINTR:signal=SIGALRM:when=1' : () ]);
        ok(!$r->{ok}, "chdir in $who, mkdir: the batch fails");
        like($r->{err}, $err, '... with its error');
        ok(-d "$base/b/new/sub", "... the other directory's new/sub left alone");
        ok(!-e "$base/a/new", '... the directories it made removed');
        system('rm', '-rf', $base);
    }
}

# ---- mkdir: a directory found missing (made later) takes no place in the
# cache. It did: with two missing directories the cache (two places) was
# full of failed opens, each made directory pushed the other out, and one
# moved while its temps were written (a handler renames its parent) could
# not be found again: the batch failed, its two temps left behind. As with
# directories that existed, it is written and renamed into where it is now.
{
    my $base = "$dir/mkdir-moved";
    mkdir $base or die;
    my @t = map { my $k = $_; map { "$base/d$k/s/f$_" } 1, 2 } 1, 2;
    my $r = strace_call('local $SIG{ALRM} = sub { rename "$ARGV[0]/d1", "$ARGV[0]/d1.moved" or die "rename: $!" };'
                        . ' file_set_contents_many([ map { ($_ => "new\n") } @ARGV[1 .. 4] ], { mkdir => 1 })',
                        attach => 1, args => [ $base, @t ], trace => ['write'],
                        inject => ['write:error=EINTR:signal=SIGALRM:when=1']);
    is($r->{injected}, 1, 'mkdir, a new directory moved while written: injected');
    ok($r->{ok}, '... the batch succeeds') or diag $r->{err};
    is(join('', map { slurp($_) // 'missing' } map { s{/d1/}{/d1.moved/}r } @t), "new\n" x 4,
       '... every file written, those of the moved directory where it is now');
    is_deeply([ temps_in($base) ], [], '... no temp left');
}

done_testing();
