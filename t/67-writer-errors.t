#!perl
# FastFile::Writer's errors: every way a writer can end without commit
# (abort, die, undef, return, process exit) leaves no temp and no fd, and --
# under strace, faults injected into its temp file only ($$ forged, see
# t/lib/FFTest.pm) -- the exact croak texts and $! of ENOSPC, EIO, EXDEV,
# EINTR and signal handlers that die or use the writer.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use Errno qw(ENOSPC EIO EXDEV);
use POSIX ();

use FastFile::Writer;
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in errno_text run_perl in_child no_warnings strace_why strace_call
              calls_named);

POSIX::setlocale(POSIX::LC_ALL(), 'C');

sub open_fds { opendir my $dh, '/proc/self/fd' or return -1; return scalar grep { /^\d+$/ } readdir $dh }

# $code in a child perl under strace, its write, close, rename and unlink on
# the writer's temp file traced, with faults injected
sub traced {
    my ($t, $inject, $code) = @_;
    my $r = strace_call($code, target => $t, pid => $FFTest::PID, paths => ['%TMP%'],
                        trace => [qw(write close rename unlink)], inject => $inject);
    $r->{writes} = [ calls_named($r, 'write') ];
    return $r;
}

# ------------------------------------------------------- ending without commit

{
    my $dir = tempdir();
    my $t = "$dir/target";
    spew($t, "old\n");
    my $tmp = "$t.tmp.$$";

    my $w = FastFile::Writer->new($t, { buffer_size => 16 });
    $w->print('x' x 100);               # flushed: the temp has data
    ok(-s $tmp, 'the temp holds flushed data');
    ok($w->abort, 'abort returns true');
    ok(!-e $tmp, '... the temp is removed');
    ok(!$w->abort, 'a second abort returns false');
    ok(!eval { $w->print('y'); 1 }, 'print after abort croaks');
    is($@, "FastFile::Writer: already aborted\n", '... already aborted');
    ok(!eval { $w->commit; 1 }, 'commit after abort croaks');
    is(slurp($t), "old\n", 'abort: target unchanged');

    ok(!eval { my $v = FastFile::Writer->new($t); $v->print("new\n"); die "oops\n" }, 'die in a block');
    is($@, "oops\n", '... $@ is the die');
    is_deeply([temps_in($dir)], [], '... no temp left');

    $w = FastFile::Writer->new($t);
    $w->print("new\n");
    ok(-e $tmp, 'undef $w: the temp exists before');
    undef $w;
    ok(!-e $tmp, '... and not after');

    my $early = sub { my $v = FastFile::Writer->new($t); $v->print("new\n"); return 1; $v->commit };
    ok($early->(), 'return before commit');
    is_deeply([temps_in($dir)], [], '... no temp left');

    my $fds = open_fds();
    for (1 .. 200) {
        my $v = FastFile::Writer->new($t, { buffer_size => 8 });
        $v->print("0123456789");
        $_ % 2 ? $v->abort : undef $v;
    }
    is(open_fds(), $fds, '200 writers aborted or dropped: no fd leaked');
    is_deeply([temps_in($dir)], [], '... no temp left');

    # process exit without commit: lexical, global, uncaught die
    # (each child checks that its temp exists before it ends: else exit 7)
    my $made = '$w->print("new\n"); -e "$ARGV[0].tmp.$$" or exit 7;';
    for my $case ([ 'a file lexical',  0,   'my $w = FastFile::Writer->new($ARGV[0]);' . $made . 'exit 0' ],
                  [ 'a global',        3,   'our $w = FastFile::Writer->new($ARGV[0]);' . $made . 'exit 3' ],
                  [ 'an uncaught die', 255, 'my $w = FastFile::Writer->new($ARGV[0]);' . $made . '$! = 0; die "bye\n"' ]) {
        my ($name, $exit, $code) = @$case;
        my ($status) = run_perl($code, switches => ['-MFastFile::Writer'], args => [$t]);
        is($status >> 8, $exit, "process exit with $name, uncommitted");
        is_deeply([temps_in($dir)], [], '... no temp left');
    }
    is(slurp($t), "old\n", 'after all that the target is unchanged');
    no_warnings('abort paths');
}

# --------------------------------------------- injected faults (strace)

SKIP: {
    my $why = strace_why();
    skip "fault injection: $why", 29 if $why;
    my $dir = tempdir();
    my $t = "$dir/fault";
    my $tmp = "$t.tmp.$FFTest::PID";
    my $old = "old contents\n";
    spew($t, $old);

    # ENOSPC on the second flush, inside print
    my $r = traced($t, ['write:error=ENOSPC:when=2'], <<'PERL');
my $w = FastFile::Writer->new($T, { buffer_size => 4096 });
$w->print('x' x 4096);      # first flush: fine
$w->print('y' x 100);
$w->print('z' x 4000);      # second flush: no space
PERL
    is($r->{injected}, 1, 'ENOSPC injected into the second write');
    is($r->{err}, "unable to write '$tmp' - " . errno_text(ENOSPC) . "\n", '... print croaks with the write text');
    is($r->{errno}, ENOSPC, '... $! is ENOSPC');
    is_deeply([temps_in($dir)], [], '... no temp left');
    is(slurp($t), $old, '... target unchanged');

    # ENOSPC on the last write, in commit; then commit again
    $r = traced($t, ['write:error=ENOSPC'], <<'PERL');
my $w = FastFile::Writer->new($T);
$w->print("some data\n");
eval { $w->commit };
my $first = $@;
eval { $w->commit };
die $first . $@;
PERL
    is($r->{err}, "unable to write '$tmp' - " . errno_text(ENOSPC) . "\n"
                . "FastFile::Writer: already aborted\n", 'ENOSPC in commit, then commit again');
    is_deeply([temps_in($dir)], [], '... no temp left');
    is(slurp($t), $old, '... target unchanged');

    # a write that returns 0 counts as ENOSPC
    $r = traced($t, ['write:retval=0'], <<'PERL');
my $w = FastFile::Writer->new($T); $w->print("data"); $w->commit;
PERL
    is($r->{err}, "unable to write '$tmp' - " . errno_text(ENOSPC) . "\n", 'write returning 0: ENOSPC');
    is_deeply([temps_in($dir)], [], '... no temp left');

    # EIO from close at commit
    $r = traced($t, ['close:error=EIO'], <<'PERL');
my $w = FastFile::Writer->new($T); $w->print("data\n"); $w->commit;
PERL
    is($r->{injected}, 1, 'EIO injected into close');
    is($r->{err}, "closing file '$tmp' failed - " . errno_text(EIO) . "\n", '... commit croaks with the close text');
    is($r->{errno}, EIO, '... $! is EIO');
    is_deeply([temps_in($dir)], [], '... no temp left');
    is(slurp($t), $old, '... target unchanged');

    # EXDEV from rename at commit
    $r = traced($t, ['rename:error=EXDEV'], <<'PERL');
my $w = FastFile::Writer->new($T); $w->print("data\n"); $w->commit;
PERL
    is($r->{injected}, 1, 'EXDEV injected into rename');
    is($r->{err}, "close (rename) atomic file '$t' failed: " . errno_text(EXDEV) . "\n",
       '... commit croaks with the rename text');
    is($r->{errno}, EXDEV, '... $! is EXDEV');
    is_deeply([temps_in($dir)], [], '... no temp left');
    is(slurp($t), $old, '... target unchanged');

    # EINTR without a signal: retried
    $r = traced($t, ['write:error=EINTR:when=1'], <<'PERL');
my $w = FastFile::Writer->new($T); $w->print("data\n"); $w->commit;
PERL
    ok($r->{ok}, 'EINTR on write: retried') or diag($r->{err});
    is(scalar @{ $r->{writes} }, 2, '... a second write(2)');
    is(slurp($t), "data\n", '... the file is complete');
    spew($t, $old);

    # EINTR with SIGALRM pending: perl's handler runs; a handler that dies aborts
    $r = traced($t, ['write:error=EINTR:signal=SIGALRM:when=1'], <<'PERL');
local $SIG{ALRM} = sub { die "timeout\n" };
my $w = FastFile::Writer->new($T, { buffer_size => 4096 });
eval { $w->print('x' x 5000) };
my $first = $@;
my $left = -e "$T.tmp.$$" ? 'temp left' : 'no temp';
eval { $w->print('y') };
die "$first$left\n$@";
PERL
    is($r->{err}, "timeout\nno temp\nFastFile::Writer: already aborted\n",
       'a signal handler that dies during a flush aborts the writer');
    is(slurp($t), $old, '... target unchanged');

    # a handler that changes the string being printed while part of it still
    # waits to be copied: what is written is the value at the call (a
    # snapshot; it used to be reallocated under the pointer the writer held)
    $r = traced($t, ['write:error=EINTR:signal=SIGALRM:when=1'], <<'PERL');
my $w = FastFile::Writer->new($T, { buffer_size => 4096 });
my $data = 'x' x 5000;
local $SIG{ALRM} = sub { $data .= 'y' x 100000 };
$w->print('a' x 100);   # the buffer is not empty: $data is copied in two parts
$w->print($data);
$w->commit;
PERL
    is($r->{err}, '', 'a handler changing the string being flushed: no error');
    is_deeply([temps_in($dir)], [], '... no temp left');
    is(slurp($t), 'a' x 100 . 'x' x 5000, '... the value at the call is written');
    spew($t, $old);

    # a handler that uses the writer it interrupted
    $r = traced($t, ['write:error=EINTR:signal=SIGALRM:when=1'], <<'PERL');
my $w = FastFile::Writer->new($T);
local $SIG{ALRM} = sub { $w->print("from the handler") };
$w->print("data");
$w->commit;
PERL
    is($r->{err}, "FastFile::Writer: busy (called while it writes)\n", 'a handler using the busy writer croaks');
    is_deeply([temps_in($dir)], [], '... no temp left');
    is(slurp($t), $old, '... target unchanged');
    is_deeply($r->{warnings}, [], 'no warnings in the traced children');
}

# ------------------------------- a relative name: the directory of new

# A relative name means the working directory of new: the writer holds it
# (O_PATH) and commits, aborts and cleans up there, whatever chdir comes
# between its calls or inside them (user code: a handler, an overload, a
# FETCH, a DESTROY). Before, commit renamed by the relative name in the new
# working directory (failing ESTALE: its temp was not there) and the
# cleanup removed nothing: the temp stayed.
{
    my $dir = tempdir();
    my ($made, $moved) = ("$dir/made", "$dir/moved");
    mkdir $_ or die "mkdir $_: $!" for $made, $moved;
    require Cwd;
    my $cwd = Cwd::getcwd();
    my $fds = open_fds();
    my $leftovers = sub { [ temps_in($made), temps_in($moved), glob("$moved/*") ] };

    # each case: made in $made, a chdir to $moved by $between (between the
    # calls, or inside one), then $end; returns what commit said
    my $case = sub {
        my ($name, $opts, $between, $end) = @_;
        unlink glob("$made/*");
        chdir $made or die "chdir: $!";
        my $w = FastFile::Writer->new($name, $opts);
        $w->print("first\n");
        $between->($w);
        my $ok = eval { $end->($w); 1 };
        my $err = $@;
        undef $w;
        chdir $cwd or die "chdir: $!";
        return $ok ? '' : $err;
    };
    my $commit = sub { $_[0]->commit };
    my $to_moved = sub { chdir $moved or die "chdir: $!" };

    is($case->('rel', undef, $to_moved, $commit), '', 'relative name, chdir before commit: committed');
    is(slurp("$made/rel"), "first\n", '... in the directory of new');
    is_deeply($leftovers->(), [], '... no temp left, nothing in the new working directory');

    is($case->('sub/rel', { mkdir => 1, fsync => 1 }, $to_moved, $commit), '',
       'a relative name with a directory (mkdir, fsync: its directories synced there)');
    is(slurp("$made/sub/rel"), "first\n", '... in the directory of new');
    is_deeply($leftovers->(), [], '... no temp left');

    is($case->('rel', { noclobber => 1 }, $to_moved, $commit), '', 'noclobber: committed');
    is(slurp("$made/rel"), "first\n", '... in the directory of new');
    spew("$moved/rel", "other\n");      # the same name in the new directory
    is($case->('rel', undef, $to_moved, sub { $_[0]->print("second\n"); $_[0]->commit }), '',
       'the same name in the new working directory: committed');
    is(slurp("$made/rel"), "first\nsecond\n", '... in the directory of new');
    is(slurp("$moved/rel"), "other\n", '... the file in the new working directory untouched');
    unlink "$moved/rel";

    for my $end ([ 'abort', sub { $_[0]->abort or die "abort: false\n" } ],
                 [ 'undef', sub { my $w = \$_[0]; undef $$w } ],
                 [ 'DESTROY by hand', sub { $_[0]->DESTROY } ],
                 [ 'a die', sub { die "out\n" } ]) {
        my $got = $case->('rel', undef, $to_moved, $end->[1]);
        is($got, $end->[0] eq 'a die' ? "out\n" : '', "chdir, then $end->[0]");
        is_deeply($leftovers->(), [], '... the temp removed (in the directory of new)');
        ok(!-e "$made/rel", '... no target');
    }

    # user code that a call runs chdirs
    {
        package FFTest::ChdirOnString;
        use overload '""' => sub { chdir $_[0]{to} or die "chdir: $!"; "overloaded\n" }, fallback => 1;
        package FFTest::ChdirOnDestroy;
        sub DESTROY { chdir $_[0]{to} or die "chdir: $!" }
        package FFTest::DropOnString;       # its string form frees a ChdirOnDestroy
        use overload '""' => sub { %{ $_[0] } = (); "dropped\n" }, fallback => 1;
        package FFTest::ChdirOnFetch;
        sub TIESCALAR { bless { to => $_[1] }, $_[0] }
        sub FETCH { chdir $_[0]{to} or die "chdir: $!"; "tied\n" }
    }
    is($case->('rel', undef, sub { $_[0]->print(bless { to => $moved }, 'FFTest::ChdirOnString') }, $commit),
       '', "an overloaded argument of print chdirs: committed");
    is(slurp("$made/rel"), "first\noverloaded\n", '... in the directory of new');
    is($case->('rel', undef, sub {
                   $_[0]->print(bless { guard => bless({ to => $moved }, 'FFTest::ChdirOnDestroy') },
                                'FFTest::DropOnString') }, $commit),
       '', 'a DESTROY that print runs (an overload frees its object) chdirs: committed');
    is(slurp("$made/rel"), "first\ndropped\n", '... in the directory of new');
    is($case->('rel', undef, sub { tie my $v, 'FFTest::ChdirOnFetch', $moved; $_[0]->print($v, "x\n") }, $commit),
       '', "a tied argument's FETCH chdirs: committed");
    is(slurp("$made/rel"), "first\ntied\nx\n", '... in the directory of new');
    is_deeply($leftovers->(), [], '... no temp left');
    unlink glob("$made/*");

    # global destruction, after a chdir
    # (the child chdirs itself: inc_args makes @INC's relative entries
    # absolute from the working directory)
    my ($status) = run_perl('chdir $ARGV[0] or exit 6; our $w = FastFile::Writer->new("rel"); $w->print("x");'
                            . '-e "rel.tmp.$$" or exit 7; chdir $ARGV[1] or exit 8; exit 3',
                            switches => ['-MFastFile::Writer'], args => [$made, $moved]);
    is($status >> 8, 3, 'a global writer, chdir, exit');
    is_deeply($leftovers->(), [], '... the temp removed in global destruction');

    is(open_fds(), $fds, 'no fd left (the directories held are closed)');
}

# A relative name in a directory the writer may search and write but not
# read (0311): a build without O_PATH (FF_PORTABLE) cannot open it to hold
# it, and held nothing: a chdir made commit fail ESTALE and left the temp.
# It now keeps the directory's name (getcwd) instead. As "nobody" when root
# (root reads any directory).
SKIP: {
    my @user = $> == 0 ? (getpwnam('nobody'))[2, 3] : ();
    skip 'running as root and there is no user "nobody"', 3 if $> == 0 && !@user;
    my $dir = tempdir();
    my ($unreadable, $moved) = ("$dir/unreadable", "$dir/moved");
    mkdir $_ or die "mkdir $_: $!" for $unreadable, $moved;
    chown @user, $dir, $unreadable, $moved or die "chown: $!" if @user;
    chmod 0311, $unreadable or die "chmod: $!";
    my $out = in_child(sub {
        chdir $unreadable or die "chdir: $!\n";
        my $w = FastFile::Writer->new('x');
        $w->print("new\n");
        chdir $moved or die "chdir: $!\n";
        $w->commit;
        'committed';
    }, @user);
    chmod 0755, $unreadable;
    is($out, 'ok committed', 'a relative name in an unreadable directory, chdir: committed');
    is(slurp("$unreadable/x"), "new\n", '... in the directory of new');
    is_deeply([ temps_in($unreadable), glob("$moved/*") ], [], '... no temp left');
}

# Out of fds (EMFILE): atomic_writer loads FastFile/Writer.pm when first
# called, and with no fd left that said "Can't locate FastFile/Writer.pm"
# (and $w->fh, Symbol.pm): now it fails as the writer's new fails, naming
# the temp, with $! EMFILE, and works where fds allow (one for a temp; two
# for a relative name's, which holds its directory). One child perl under
# ulimit -n 32 opens /dev/null until EMFILE, then writes "abs$free" and
# "rel$free" with 0, 1 and 2 of them closed.
{
    my $dir = tempdir();
    my $code = <<'PERL';
use Errno ();
use FastFile ();
my ($dir) = @ARGV;
chdir $dir or die "chdir: $!\n";
my @held;
while (open my $h, '<', '/dev/null') { push @held, $h }
$!{EMFILE} or die "open: $!\n";
print "pid $$\n";
for my $free (0, 1, 2) {
    splice @held, 0, 1 if $free;
    for my $name ("$dir/abs$free", "rel$free") {
        my $w = eval { FastFile::atomic_writer($name) };
        my $errno = $! + 0;
        if (!$w) {
            print "$name: errno $errno: $@";
            next;
        }
        my $fh = eval { $w->fh } or print "$name: fh: $@";
        print {$fh} "new\n" if $fh;
        $w->commit;
        print "$name: written\n";
    }
}
# the handle's own errors with no fd left: they load nothing (Carp was
# loaded on demand: "Can't locate Carp.pm")
my $w = FastFile::atomic_writer("$dir/handle");
my $fh = $w->fh;
while (open my $h, '<', '/dev/null') { push @held, $h }
for my $call ([ binmode => sub { binmode $fh, ':utf8' } ], [ seek => sub { seek $fh, 0, 0 } ]) {
    my $line = __LINE__ - 1;
    eval { $call->[1]->() };
    print "$call->[0]: ", $@ =~ s/ at -e line \Q$line\E\.\n\z/ at the caller's line.\n/r;
}
$w->abort;
PERL
    my $emfile = sub { "$_[0]: errno 24: unable to open file '$_[0].tmp.PID' - " . errno_text(24) . "\n" };
    my %written = map { ($_ => 1) } qw(abs1 abs2 rel2);
    spew("$dir/$_", "old\n") for map { ("abs$_", "rel$_") } 0 .. 2;
    my ($status, $out) = run_perl($code, args => [$dir], ulimit_n => 32);
    my ($pid) = $out =~ /^pid (\d+)$/m;
    $out =~ s/^pid \d+\n//m;
    $out =~ s/\Q$dir\E\///g;
    $out =~ s/\.tmp\.\Q$pid\E/.tmp.PID/g if $pid;
    is($status, 0, 'fds exhausted: atomic_writer') or diag $out;
    my @lines = split /^/, $out;
    for my $name (map { ("abs$_", "rel$_") } 0 .. 2) {
        my $free = substr $name, -1;
        my $want = $written{$name} ? "$name: written\n" : $emfile->($name);
        is(shift(@lines), $want, "... $free fds free, " . ($name =~ /^rel/ ? 'relative' : 'absolute') . ' name: '
                                 . ($written{$name} ? 'written' : 'the temp\'s open fails, EMFILE'));
        is(slurp("$dir/$name"), $written{$name} ? "new\n" : "old\n", '... ' . ($written{$name} ? 'new' : 'old') . ' contents');
    }
    is(join('', splice @lines, 0, 4),
       "binmode: FastFile::Writer: layer ':utf8' is not supported: use the utf8 option\n at the caller's line.\n"
       . "seek: FastFile::Writer: seek is not supported on a writer handle\n at the caller's line.\n",
       '... no fd left: the handle\'s binmode and seek croak with their own texts, at the caller\'s line');
    is_deeply(\@lines, [], '... nothing more said');
    is_deeply([temps_in($dir)], [], '... no temp left');
}

# a signal handler that chdirs while the writer waits in write(2), in print
# (a flush) and in commit: the rename is in the directory of new
SKIP: {
    my $why = strace_why();
    skip "fault injection: $why", 8 if $why;
    my $dir = tempdir();
    for my $in ([ 'print', 'my $w = FastFile::Writer->new("rel", { buffer_size => 8 }); $w->print("0123456789");' ],
                [ 'commit', 'my $w = FastFile::Writer->new("rel"); $w->print("0123456789");' ]) {
        my ($made, $moved) = ("$dir/made-$in->[0]", "$dir/moved-$in->[0]");
        mkdir $_ or die "mkdir $_: $!" for $made, $moved;
        # (the temp's write is traced by its fd: by the file's full name)
        my $r = traced("$made/rel", ['write:error=EINTR:signal=SIGALRM:when=1'],
                       "chdir '$made' or die; local \$SIG{ALRM} = sub { chdir '$moved' or die };\n"
                       . "$in->[1]\n\$w->commit;");
        is($r->{err}, '', "a handler chdirs inside $in->[0]: committed") or diag explain $r->{calls};
        ok((grep { $_->{name} eq 'signal' } @{ $r->{calls} }), '... the handler ran in the write');
        is(slurp("$made/rel"), '0123456789', '... in the directory of new');
        is_deeply([ temps_in($made), glob("$moved/*") ], [], '... no temp left');
    }
}

no_warnings('the whole test');
done_testing;
