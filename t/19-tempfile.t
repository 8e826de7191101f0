use strict;
use warnings;

# tempfile, tempfile_contents and create_owned_file_fh against the
# reference models (t/lib/Reference.pm), case by case: the bytes other
# programs read through the returned /proc path, the handle (class, what
# print, seek, read, fileno, close do), modes, options, warnings, die texts.
# Their syscalls are in t/28-helpers-syscalls.t, injected faults in
# t/86-helpers-faults.t.

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }
use POSIX qw(setlocale LC_ALL);
BEGIN { setlocale(LC_ALL, 'C') }

use Test::More;
use Fcntl qw(O_RDWR O_WRONLY O_APPEND SEEK_SET);
use lib 't/lib';
use FFTest qw(tempdir slurp spew warnings_of in_child run_perl tempfile_kind);
use Reference qw(ref_tempfile ref_tempfile_contents ref_create_owned_file_fh);
use Counted;
use Cwd ();
use Errno ();
use File::Find ();
use Scalar::Util ();
use FastFile qw(tempfile tempfile_contents create_owned_file_fh);

my $dir = tempdir();
my $GID = (split ' ', $()[0];
my $n = 0;

sub entries { my ($d) = @_; opendir my $dh, $d or die "$d: $!"; return sort grep { !/\A\.\.?\z/ } readdir $dh }

# what a call gives: its values, die text (location cut), warnings (their
# category's first words, texts differ: the reference's says "print")
sub outcome {
    my ($code) = @_;
    my (@v, @w);
    my $ok = do {
        local $SIG{__WARN__} = sub { push @w, $_[0] };
        eval { @v = $code->(); 1 };
    };
    my $err = $@;
    $err =~ s/ at \S+ line \d+(?:, <\w+> \w+ \d+)?\.\n\z/ at LOCATION/ if !$ok;
    s/ in (?:print|tempfile_contents) at .*\z//s for @w;
    s/ \$data\z// for @w;     # the reference's names its variable
    return { ok => $ok ? 1 : 0, v => \@v, err => $ok ? undef : $err, warnings => \@w };
}

sub mode_of { return sprintf '%04o', (stat $_[0])[2] & 07777 }

# ------------------------------------------------------ tempfile_contents

my @data = (
    [ 'empty',            '' ],
    [ 'a line',           "key: value\n" ],
    [ '1 KiB',            'k' x 1024 ],
    [ '8191 bytes',       'b' x 8191 ],
    [ '8192 bytes',       'b' x 8192 ],
    [ '64 KiB',           join('', map { chr($_ % 256) } 0 .. 65535) ],
    [ '1 MiB',            'm' x (1 << 20) ],
    [ 'Latin-1',          "caf\xe9\n" ],
    [ 'upgraded Latin-1', do { my $s = "caf\xe9\n"; utf8::upgrade($s); $s } ],
    [ 'wide characters',  "smile \x{263a} caf\x{e9}\n" ],
    [ 'a number',         42.5 ],
    [ 'undef',            undef ],
);
for my $case (@data) {
    my ($label, $data) = @$case;
    my $got = outcome(sub { tempfile_contents($data) });
    my $ref = outcome(sub { ref_tempfile_contents($data) });
    ok($got->{ok} && $ref->{ok}, "$label: both return") or diag($got->{err}, $ref->{err});
    my ($path, $fh) = @{ $got->{v} };
    my ($rpath, $rfh) = @{ $ref->{v} };
    is(ref $fh, 'IO::File', "$label: an IO::File");
    is($path, "/proc/$$/fd/" . fileno($fh), "$label: /proc/<pid>/fd/<fileno>");
    is(slurp($path), slurp($rpath), "$label: the same bytes through the path as the reference");
    is_deeply($got->{warnings}, $ref->{warnings}, "$label: the same warnings (@{ $ref->{warnings} })");
    is(mode_of($fh), mode_of($rfh), "$label: the same mode");
    is(tell($fh), tell($rfh), "$label: the handle is at the end of the data");
    ok(print({$fh} 'more') && $fh->flush, "$label: print and flush");
    print {$rfh} 'more';
    $rfh->flush;
    seek($fh, 0, SEEK_SET);
    seek($rfh, 0, SEEK_SET);
    my ($a, $b) = do { local $/; (scalar <$fh>, scalar <$rfh>) };
    is($a, $b, "$label: seek and read give the data, then what was printed");
    ok(close($fh), "$label: close");
    ok(!-e $path, "$label: the path is gone once closed");
}

# $\ (perl -l): print appends it
{
    local $\ = "\n";
    my ($path, $fh) = tempfile_contents('abc');
    my ($rpath, $rfh) = ref_tempfile_contents('abc');
    is(slurp($path), slurp($rpath), '$\\: appended as print appends it');
    is(slurp($path), "abc\n", '$\\: abc\n');
}
{
    my ($status, $out) = run_perl('use FastFile qw(tempfile_contents); my ($p, $fh) = tempfile_contents("x"); '
                                  . 'open my $f, "<", $p or die; local $/; print <$f>', switches => ['-l']);
    is($out, "x\n\n", 'perl -l: the separator written after the data (then print\'s own)');
}

# FATAL warnings in the caller do not abort (the reference's come from its scope)
{
    use warnings FATAL => 'all';
    my $got = outcome(sub { tempfile_contents("\x{263a}") });
    ok($got->{ok}, 'FATAL warnings: wide characters written, not died') or diag($got->{err});
    is_deeply($got->{warnings}, ['Wide character'], 'FATAL warnings: ... and warned');
}
{
    no warnings;
    my $got = outcome(sub { tempfile_contents("\x{263a}") });
    my $ref = outcome(sub { ref_tempfile_contents("\x{263a}") });
    is_deeply($got->{warnings}, ['Wide character'], "no warnings in the caller: warned, from the module's scope");
    is_deeply($got->{warnings}, $ref->{warnings}, '... as the reference warns from its own');
}

# magic data: read once
{
    tie my $t, 'Counted', "tied\n";
    my ($path, $fh) = tempfile_contents($t);
    is(slurp($path), "tied\n", 'tied data: written');
    is(tied($t)->{n}, 1, 'tied data: one FETCH');
    my $o = Str->new(s => "overloaded\n");
    ($path, $fh) = tempfile_contents($o);
    is(slurp($path), "overloaded\n", 'overloaded data: written');
    is($o->{n}, 1, 'overloaded data: stringified once');
    my $d = Str->new(s => 'x', die => "no string\n");
    my $fds = () = entries("/proc/$$/fd");
    my $got = outcome(sub { tempfile_contents($d) });
    is($got->{err}, "no string\n", 'data whose stringification dies: that die');
    is(scalar(() = entries("/proc/$$/fd")), $fds, '... and no fd left open');
    my $w = 0;
    local $SIG{__WARN__} = sub { $w++; die "handler died\n" };
    $got = eval { tempfile_contents("\x{263a}"); 1 } ? 'returned' : $@;
    is($got, "handler died\n", 'a __WARN__ handler that dies: its die');
    is(scalar(() = entries("/proc/$$/fd")), $fds, '... and no fd left open');
}

# a tied data's FETCH comes first, as in the reference's my (...) = @_:
# one that changes the caller's $perm is seen (it was taken before the
# FETCH: mode 0600)
{
    package ChangesArgs;
    our ($perm, $where);
    sub TIESCALAR { my ($class, $to) = @_; return bless { to => $to, n => 0 }, $class }
    sub FETCH { my ($self) = @_; $self->{n}++; $perm = 0640; $where = $self->{to}; return "data" }
    package main;
    mkdir "$dir/fetch-$_" for qw(old new);
    my %mode;
    for my $f ([ ff => \&tempfile_contents ], [ ref => \&ref_tempfile_contents ]) {
        ($ChangesArgs::perm, $ChangesArgs::where) = (0600, "$dir/fetch-old");
        tie my $data, 'ChangesArgs', "$dir/fetch-new";
        my $old = umask 022;
        my ($path, $fh) = $f->[1]->($data, $ChangesArgs::perm, dir => $ChangesArgs::where);
        umask $old;
        $mode{ $f->[0] } = sprintf '%04o', (stat $fh)[2] & 07777;
        is(tied($data)->{n}, 1, "$f->[0]: a FETCH that changes the other arguments: one FETCH");
    }
    is($mode{ff}, $mode{ref}, "tempfile_contents: the perm as the tied data's FETCH left it ($mode{ref})");
    rmdir "$dir/fetch-$_" for qw(old new);
}

# ---------------------------------------------------------------- tempfile

{
    my $fh = tempfile();
    my $rfh = ref_tempfile();
    is(ref $fh, 'IO::File', 'tempfile: an IO::File');
    is(mode_of($fh), mode_of($rfh), 'tempfile: default mode as the reference (0600 less the umask)');
    if (FastFile::_build_info()->{portable}) {
        is(tempfile_kind($fh), 'named', 'tempfile: the named file in the portable build');
    } else {
        is(tempfile_kind($fh), 'O_TMPFILE', 'tempfile: O_TMPFILE where the directory supports it');
    }
    ok($fh->print("abc") && $fh->flush, 'tempfile: IO::File methods');
    is(-s $fh, 3, 'tempfile: written');
    ok($fh->seek(0, 0), 'tempfile: seek');
    is($fh->getline, 'abc', 'tempfile: getline');
    ok($fh->opened && $fh->fileno > 2, 'tempfile: opened, fileno');
    ok($fh->close, 'tempfile: close');
}
for my $case ([ 'perm 0644', [0644] ], [ 'perm 0', [0] ], [ 'dir', [undef, dir => $dir] ],
              [ 'dir, allow_links', [undef, dir => $dir, allow_links => 1] ],
              [ 'O_WRONLY', [undef, dir => $dir, mode => O_WRONLY] ],
              [ 'O_RDWR|O_APPEND', [undef, dir => $dir, mode => O_RDWR | O_APPEND] ],
              [ 'O_WRONLY|O_APPEND', [undef, dir => $dir, mode => O_WRONLY | O_APPEND] ]) {
    my ($label, $args) = @$case;
    my $got = outcome(sub { tempfile(@$args) });
    my $ref = outcome(sub { ref_tempfile(@$args) });
    ok($got->{ok} && $ref->{ok}, "$label: both return") or next;
    my ($fh, $rfh) = ($got->{v}[0], $ref->{v}[0]);
    is(mode_of($fh), mode_of($rfh), "$label: the same mode");
    is(join(',', entries($dir)), '', "$label: nothing in the directory");
    ok(print({$fh} 'data') && $fh->flush, "$label: print");
    print {$rfh} 'data';
    $rfh->flush;
    # a read warns as on the reference's (the handle's type, as sysopen
    # sets it from the access mode: "opened only for output")
    my @said = map {
        my ($h, @w) = ($_);
        local $SIG{__WARN__} = sub { push @w, $_[0] =~ /(opened only for \w+)/ ? $1 : $_[0] };
        seek($h, 0, 0);
        my $line = readline($h);
        join(',', @w) || 'nothing';
    } $fh, $rfh;
    is($said[0], $said[1], "$label: a read warns as on the reference's ($said[1])");
    no warnings 'io';    # reading a write-only handle
    my ($r1, $r2) = map { seek($_, 0, 0); my $b; my $r = read($_, $b, 10); defined $r ? $b : 'failed' } $fh, $rfh;
    is($r1, $r2, "$label: reading back as the reference ($r2)");
    print {$fh} 'x';
    print {$rfh} 'x';
    $fh->flush;
    $rfh->flush;
    is(-s $fh, -s $rfh, "$label: print after seek lands where the reference's does");
}
for my $case ([ 'missing dir', "$dir/none" ], [ 'a file as dir', do { spew("$dir/file", ''); "$dir/file" } ]) {
    my ($label, $d) = @$case;
    my $got = outcome(sub { tempfile(undef, dir => $d) });
    my $ref = outcome(sub { ref_tempfile(undef, dir => $d) });
    ok(!$got->{ok}, "$label: dies");
    is($got->{err}, $ref->{err}, "$label: as the reference ($ref->{err})");
}
unlink "$dir/file";

# ---------------------------------------------------- create_owned_file_fh

{
    my $file = "$dir/a/b/c/owned";
    my $got = outcome(sub { create_owned_file_fh($file, $<, $GID) });
    ok($got->{ok}, 'create_owned_file_fh: returns') or diag($got->{err});
    my $fh = $got->{v}[0];
    is(ref $fh, 'IO::File', 'an IO::File, as IO::File->new makes it');
    ok(-f $file, 'the file, and its parents, made');
    my $rfile = "$dir/r/b/c/owned";
    my $rfh = ref_create_owned_file_fh($rfile, $<, $GID);
    is(mode_of($file), mode_of($rfile), 'mode as the reference (0640 less the umask)');
    is(mode_of("$dir/a/b"), mode_of("$dir/r/b"), 'parents mode as the reference');
    # perl's messages name the handle as the reference's sysopen(my $fh) names it
    my @said = map {
        my ($h, @w) = ($_);
        local $SIG{__WARN__} = sub { push @w, $_[0] =~ s/ at .*//sr };
        my $line = readline($h);
        IO::Handle::clearerr($h);      # the failed read's error: print works again
        @w;
    } $fh, $rfh;
    s/GEN\d+/GEN/ for @said;     # Symbol::gensym's count: the next one
    is($said[0], 'Filehandle GEN opened only for output', 'a read warns naming the handle as IO::File->new names it');
    is($said[0], $said[1], 'a read warns as on the reference\'s');
    ok(print({$fh} "log\n") && close($fh), 'print and close');
    is(slurp($file), "log\n", 'written through the handle');
    my $again = outcome(sub { create_owned_file_fh($file, $<) });
    my $ragain = outcome(sub { ref_create_owned_file_fh($rfile, $<) });
    (my $rerr = $ragain->{err} // '') =~ s/\Q$rfile\E/$file/;
    is($again->{err}, "unable to create file '$file' - File exists\n", 'exists: the reference text');
    is($again->{err}, $rerr, 'exists: same as the reference');
    $got = outcome(sub { create_owned_file_fh("$dir/p", $<, -1, 0600) });
    is(mode_of("$dir/p"), '0600', 'perm');
    $got = outcome(sub { create_owned_file_fh("$file/x/y", $<) });
    my $ref = outcome(sub { ref_create_owned_file_fh("$file/x/y", $<) });
    is($got->{err}, "mkdir $file: File exists at LOCATION", 'parent under a file: make_path\'s text');
    is($got->{err}, $ref->{err}, 'parent under a file: same as the reference');
    $got = outcome(sub { create_owned_file_fh("$file/y", $<) });
    $ref = outcome(sub { ref_create_owned_file_fh("$file/y", $<) });
    is($got->{err}, "mkdir $file: File exists at LOCATION", 'parent is a file: make_path\'s text');
    is($got->{err}, $ref->{err}, 'parent is a file: same as the reference');
    symlink("$dir/nowhere", "$dir/dangling") or die "symlink: $!";
    $got = outcome(sub { create_owned_file_fh("$dir/dangling/x", $<) });
    $ref = outcome(sub { ref_create_owned_file_fh("$dir/dangling/x", $<) });
    is($got->{err}, "mkdir $dir/dangling: File exists at LOCATION", 'parent a dangling symlink: make_path\'s text');
    is($got->{err}, $ref->{err}, 'parent a dangling symlink: same as the reference');
    ok(!-e "$dir/nowhere", 'parent a dangling symlink: nothing made where it points');
    unlink "$dir/dangling";
    $got = outcome(sub { create_owned_file_fh('', $<) });
    $ref = outcome(sub { ref_create_owned_file_fh('', $<) });
    is($got->{err}, "unable to create file '' - No such file or directory\n", 'empty name: sysopen\'s ENOENT');
    is($got->{err}, $ref->{err}, 'empty name: same as the reference');
    $got = outcome(sub { create_owned_file_fh("/proc/none/x/y", $<) });
    $ref = outcome(sub { ref_create_owned_file_fh("/proc/none/x/y", $<) });
    is($got->{err}, $ref->{err}, "parent that cannot be made: same as the reference ($ref->{err})");
}

# a failed fchown: the reference leaves the file (and warns); FastFile removes it
SKIP: {
    mkdir "$dir/pub";
    chmod 01777, "$dir/pub";
    chmod 0711, $dir;
    my $file = "$dir/pub/chown-fails";
    my $res = in_child(sub {
        my $got = outcome(sub { create_owned_file_fh($file, 0, 0) });
        my $left = -e $file ? 'left' : 'gone';
        my $ref = outcome(sub { ref_create_owned_file_fh("$file.ref", 0, 0) });
        my $rleft = -e "$file.ref" ? 'left' : 'gone';
        return join '|', $got->{err} // 'ok', $left, scalar @{ $got->{warnings} },
                         $ref->{err} // 'ok', $rleft, scalar @{ $ref->{warnings} };
    }, $> == 0 ? (65534, 65534) : ());
    skip "cannot run as nobody: $res", 6 if $res =~ /^died/;
    my ($err, $left, $w, $rerr, $rleft, $rw) = $res =~ /^ok (.*)\z/s ? split /\|/, $1 : ();
    is($err, "failed to change owner of '$file' to 0:0 - Operation not permitted at LOCATION",
       'fchown fails: the reference text');
    (my $want = $rerr // '') =~ s/\.ref//;
    is($err, $want, 'fchown fails: same text as the reference');
    is($left, 'gone', 'fchown fails: the file removed');
    is($w, 0, 'fchown fails: no warning');
    is($rleft, 'left', 'the reference leaves its file (its bug)');
    is($rw, 1, 'the reference warns that it could not unlink');
}

# tempfile and tempfile_contents with a false dir ('' or '0'), undef or
# none: the reference's `if (!$dir)` takes its default directory (not
# './0', and '' is no error)
{
    my $cwd = Cwd::getcwd();
    chdir $dir or die "chdir $dir: $!";
    mkdir '0' or die "mkdir 0: $!";
    # the directory the file was made in, from /proc/self/fd
    my $portable = FastFile::_build_info()->{portable};
    my $where = sub { (readlink('/proc/self/fd/' . fileno($_[0])) // "readlink: $!") =~ s{/[^/]*\z}{}r };
    for my $case ([ "''", [ dir => '' ] ], [ "'0'", [ dir => '0' ] ], [ 'undef', [ dir => undef ] ], [ 'missing', [] ]) {
        my ($label, $opts) = @$case;
        for my $f ([ tempfile => sub { tempfile(undef, @_) }, sub { ref_tempfile(undef, @_) } ],
                   [ tempfile_contents => sub { (tempfile_contents('x', undef, @_))[1] },
                     sub { (ref_tempfile_contents('x', undef, @_))[1] } ]) {
            my ($name, $ff, $rf) = @$f;
            my $got = outcome(sub { $ff->(@$opts) });
            my $ref = outcome(sub { $rf->(@$opts) });
            ok($got->{ok}, "$name, dir $label: returns, as the reference") or diag($got->{err});
            ok($ref->{ok}, "$name, dir $label: the reference returns") or diag($ref->{err});
            # (the portable build always names a file, in /tmp without a dir:
            # where the reference falls back to when O_TMPFILE fails)
            is($got->{ok} && $where->($got->{v}[0]), $portable ? '/tmp' : $ref->{ok} && $where->($ref->{v}[0]),
               "$name, dir $label: made where the reference makes it");
        }
    }
    chdir $cwd or die "chdir $cwd: $!";
    rmdir "$dir/0";
}

# $! after success, preset to another value: what the reference leaves
for my $case ([ 'tempfile', sub { tempfile(@_) }, sub { ref_tempfile(@_) } ],
              [ 'tempfile_contents', sub { tempfile_contents('x', @_) }, sub { ref_tempfile_contents('x', @_) } ],
              [ 'tempfile_contents of nothing', sub { tempfile_contents('', @_) }, sub { ref_tempfile_contents('', @_) } ]) {
    my ($label, $ff, $rf) = @$case;
    for my $opts ([], [ undef, dir => $dir ]) {
        my @errno = map { $! = Errno::EINVAL(); my @h = $_->(@$opts); $! + 0 } $ff, $rf;
        is($errno[0], $errno[1], "$label" . (@$opts ? ' in a dir' : '') . ": \$! after success as the reference leaves it ($errno[1])");
    }
}

# create_owned_file_fh as the reference's: the handle's class and string,
# undef and missing $perm under two umasks, $! after success, trailing
# slashes, argument counts. FastFile's files under f/, the model's under r/.
{
    my $base = "$dir/co";
    my $fh = create_owned_file_fh("$base/f/class", $<);
    my $rfh = ref_create_owned_file_fh("$base/r/class", $<);
    is(ref $fh, ref $rfh, 'create_owned_file_fh: the class of the reference\'s handle (' . ref($rfh) . ')');
    ok($fh->isa('IO::Handle'), '... an IO::Handle');
    is(Scalar::Util::blessed($fh), Scalar::Util::blessed($rfh), '... blessed as the reference\'s');
    my ($str, $rstr) = map { "$_" =~ s/\(0x[0-9a-f]+\)\z/(ADDR)/r } $fh, $rfh;
    is($str, $rstr, "... stringifies as the reference's ($rstr)");
    close $fh;
    close $rfh;

    for my $umask (022, 002) {
        my $old = umask $umask;
        for my $case ([ 'undef', [ -1, undef ] ], [ 'missing', [ -1 ] ], [ 'missing with gid', [] ]) {
            my ($label, $rest) = @$case;
            my $name = sprintf 'perm-%03o-%s', $umask, $label =~ s/ /-/gr;
            my $got = outcome(sub { create_owned_file_fh("$base/f/$name", $<, @$rest) });
            my $ref = outcome(sub { ref_create_owned_file_fh("$base/r/$name", $<, @$rest) });
            ok($got->{ok}, "perm $label, umask $umask: returns") or diag($got->{err});
            is(mode_of("$base/f/$name"), mode_of("$base/r/$name"),
               sprintf('perm %s, umask %03o: the mode the reference makes (%s)', $label, $umask, mode_of("$base/r/$name")));
            is_deeply($got->{warnings}, $ref->{warnings}, "perm $label, umask $umask: the same warnings (none)");
        }
        umask $old;
    }

    for my $case ([ 'default gid', [] ], [ 'gid given', [ $GID ] ], [ 'gid and perm given', [ $GID, 0600 ] ]) {
        my ($label, $rest) = @$case;
        my $name = 'errno-' . $label =~ s/ /-/gr;
        my @errno = map {
            my ($f, $path) = @$_;
            $! = Errno::EINVAL();
            $f->($path, $<, @$rest);
            $! + 0;
        } [ \&create_owned_file_fh, "$base/f/$name" ], [ \&ref_create_owned_file_fh, "$base/r/$name" ];
        is($errno[0], $errno[1], "$label: \$! after success as the reference leaves it ($errno[1])");
    }

    # File::Find's list of what is under a directory, relative
    my $tree = sub {
        my ($top) = @_;
        my @found;
        File::Find::find({ no_chdir => 1, wanted => sub { push @found, substr($_, length $top) } }, $top) if -d $top;
        return join ' ', sort @found;
    };
    for my $tail ('a/b/', 'a2//b//', 'c/', 'd/e///') {
        my $got = outcome(sub { create_owned_file_fh("$base/f/t/$tail", $<) });
        my $ref = outcome(sub { ref_create_owned_file_fh("$base/r/t/$tail", $<) });
        (my $want = $ref->{err} // 'returns') =~ s{/r/t/}{/f/t/};
        is($got->{err} // 'returns', $want, "trailing slash '$tail': as the reference ($want)");
        is($tree->("$base/f/t"), $tree->("$base/r/t"), "trailing slash '$tail': the directories the reference makes");
    }

    for my $args ([], [ "$base/f/n1" ], [ "$base/f/n5", $<, -1, 0640, 'more' ]) {
        my $n = @$args;
        my $got = outcome(sub { create_owned_file_fh(@$args) });
        my $ref = outcome(sub { ref_create_owned_file_fh(map { s{/f/}{/r/}r } @$args) });
        (my $want = $ref->{err} // 'returns') =~ s/'PVE::File::/'FastFile::/;
        is($got->{err} // 'returns', $want, "$n arguments: refused as by the reference's signature ($want)");
        ok(!-e "$base/f/n$n", "$n arguments: nothing made");
    }
    eval { create_owned_file_fh("$base/f/n5", $<, -1, 0640, 1) };
    my $line = __LINE__ - 1;
    is($@, "Too many arguments for subroutine 'FastFile::create_owned_file_fh' (got 5; expected at most 4) "
           . "at $0 line $line.\n", "5 arguments: perl's text, at the caller's line");
  SKIP: {
        skip 'perl before 5.36: no signatures as the reference has them', 3 if $] < 5.036;
        # the model's text is perl's own: a sub with the reference's signature
        eval q{package PVE::File; use feature 'signatures'; no warnings;
               sub create_owned_file_fh ($file, $uid, $gid = -1, $perm = 0640) { 1 } 1} or die $@;
        for my $args ([], [ 'x' ], [ 'x', 1, 2, 3, 4 ]) {
            my $real = outcome(sub { PVE::File::create_owned_file_fh(@$args) });
            my $ref = outcome(sub { ref_create_owned_file_fh(@$args) });
            is($ref->{err}, $real->{err}, scalar(@$args) . " arguments: the model's text is perl's ($real->{err})");
        }
    }
}

# a path longer than PATH_MAX whose directory is not: the reference's open
# of the whole path fails ENAMETOOLONG (made in its directory held open, the
# file was made, and no one could open it by its name)
{
    my $name = 'n' x 250;           # (a level is at most 255 bytes)
    my $d = "$dir/long/" . join '/', ('x' x 200) x 18;
    $d .= '/' . 'y' x (4100 - length("$d//$name"));
    my $got = outcome(sub { create_owned_file_fh("$d/$name", $<) });
    my $ref = outcome(sub { ref_create_owned_file_fh("$d/$name", $<) });
    is($got->{err}, $ref->{err}, 'a path past PATH_MAX: the reference\'s error');
    like($got->{err}, qr/File name too long/, '... ENAMETOOLONG');
    opendir my $dh, $d or die "$d: $!";
    is_deeply([ grep { !/\A\.\.?\z/ } readdir $dh ], [], '... no file made');
    require File::Path;
    File::Path::remove_tree("$dir/long");
}

# the handle's fd is the one the reference's open gets, the lowest free
# (its directory, held while the file is made, took that one first: 4 for
# 3; with STDIN closed, 3 and close-on-exec for 0, which the reference's
# handle leaves inherited, as $^F says)
{
    my $code = 'use FastFile qw(create_owned_file_fh); use Reference (); use Fcntl qw(F_GETFD); my $i = 0; '
             . 'for my $close (0, 1) { close STDIN if $close; '
             . '  for my $f (\\&create_owned_file_fh, \\&Reference::ref_create_owned_file_fh) { '
             . '    my $fh = $f->("$ARGV[0]/fd" . $i++, $<); print fileno($fh), ":", fcntl($fh, F_GETFD, 0) + 0, " "; close $fh } }';
    my ($status, $out) = run_perl($code, args => [$dir]);
    my ($ff, $ref, $ff0, $ref0) = split ' ', $out;
    is($ff, $ref, "create_owned_file_fh: the reference's fd and close-on-exec flag ($ref)") or diag($out);
    is($ff0, $ref0, "create_owned_file_fh, STDIN closed: the reference's fd and flag ($ref0)");
    is($ref0, '0:0', '... fd 0, inherited across exec');
    unlink map { "$dir/fd$_" } 0 .. 3;
    # tempfile's too: fd 0 inherited on every perl (5.20's PerlIO_fdopen
    # left the O_CLOEXEC of our open)
    ($status, $out) = run_perl('use FastFile qw(tempfile); use Reference (); use Fcntl qw(F_GETFD); close STDIN; '
                               . 'for my $f (\\&tempfile, \\&Reference::ref_tempfile) { my $fh = $f->(undef, dir => $ARGV[0]); '
                               . 'print fileno($fh), ":", fcntl($fh, F_GETFD, 0) + 0, " "; close $fh }', args => [$dir]);
    is($out, '0:0 0:0 ', 'tempfile, STDIN closed: fd 0, inherited, as the reference\'s');
}

# Symbol::gensym, anyone's code, called as IO::File->new calls it (before
# the open): a value that is no unopened glob gives a handle all the same
# (it was taken for a glob: SIGSEGV), and its die leaves no file (it ran
# after the create: the file stayed)
{
    my $code = 'use FastFile qw(create_owned_file_fh); require IO::File; no warnings "redefine"; my $i = 0; '
             . 'for my $g (sub { 42 }, sub { return }, sub { [] }, sub { \\*STDERR }, sub { die "gensym died\n" }) { '
             . '  local *Symbol::gensym = $g; my $f = "$ARGV[0]/gs" . $i++; '
             . '  my $fh = eval { create_owned_file_fh($f, $<) }; '
             . '  print $fh ? (ref $fh, " ", (print {$fh} "ab") && close($fh) ? -s $f : "?") : $@ =~ s/\n//r, '
             . '    " ", -e $f ? "file" : "none", "\n" }';
    my ($status, $out) = run_perl($code, args => [$dir]);
    is($status, 0, 'Symbol::gensym replaced: no crash') or diag($out);
    is($out, "IO::File 2 file\n" x 4 . "gensym died none\n",
       'Symbol::gensym replaced: a handle that writes; its die: no file made');
    unlink map { "$dir/gs$_" } 0 .. 4;
}

# -T: a tainted directory, perm, mode or file name is refused, as the
# reference's sysopen refuses it (the text names FastFile's function)
{
    my $code = 'use FastFile qw(:all); use Reference qw(ref_tempfile ref_create_owned_file_fh); '
             . 'my $t = substr($ENV{PATH}, 0, 0); my ($d) = $ARGV[0] =~ /(.*)/s; '
             . 'for my $c (sub { tempfile(undef, dir => "$t$d") }, sub { ref_tempfile(undef, dir => "$t$d") }, '
             . 'sub { tempfile("${t}0600", dir => $d) }, sub { tempfile(undef, dir => $d, mode => "${t}2") }, '
             . 'sub { tempfile_contents("x", undef, dir => "$t$d") }, '
             . 'sub { create_owned_file_fh("$t$d/tainted", $<) }, sub { ref_create_owned_file_fh("$t$d/tainted", $<) }, '
             . 'sub { create_owned_file_fh("$d/t-uid", "$t$<") }, sub { create_owned_file_fh("$d/t-gid", $<, "$t-1") }, '
             . 'sub { create_owned_file_fh("$d/t-perm", $<, -1, "${t}0600") }, '
             . 'sub { tempfile_contents("$t data", undef, dir => $d) }) '
             . '{ print eval { $c->(); 1 } ? "ok\n" : $@ =~ /^(Insecure dependency in \w+)/ ? "$1\n" : "other: $@" }';
    my ($status, $out) = run_perl($code, switches => ["-T"], args => [$dir]);
    diag($out) if $ENV{TEST_VERBOSE};
    is($out, join('', map { "Insecure dependency in $_\n" } qw(tempfile sysopen tempfile tempfile tempfile
                                                                create_owned_file_fh sysopen),
                                                             ('create_owned_file_fh') x 3) . "ok\n",
       '-T: tainted arguments refused as the reference refuses them; tainted data written');
    ok(!-e "$dir/tainted", '-T: nothing created');
    ok(!-e "$dir/t-$_", "-T: a tainted $_: nothing created") for qw(uid gid perm);
}

# Out of fds (EMFILE): tempfile and tempfile_contents loaded IO::File (the
# handle's class) first, and with no fd left said "Can't locate IO/File.pm":
# now the op's own error, $! EMFILE, and a handle where one fd is free
# (IO::File then loaded if it can be, else at the first method call). One
# child perl under ulimit -n 32 opens /dev/null until EMFILE, then calls
# each with 0 and 1 of them closed.
{
    my $code = <<'PERL';
use Errno ();
use FastFile qw(tempfile tempfile_contents);
my ($dir) = @ARGV;
my @held;
while (open my $h, '<', '/dev/null') { push @held, $h }
$!{EMFILE} or die "open: $!\n";
for my $free (0, 1) {
    splice @held, 0, 1 if $free;
    for my $call ([ tempfile => sub { tempfile(0600, dir => $dir) } ],
                  [ tempfile_contents => sub { (tempfile_contents("x\n", 0600, dir => $dir))[1] } ]) {
        my $fh = eval { $call->[1]->() };
        my $errno = $! + 0;
        print "$call->[0] $free: ", $fh ? 'a ' . ref($fh) . "\n" : "errno $errno: $@";
        close $fh if $fh;
    }
}
PERL
    my ($status, $out) = run_perl($code, args => [$dir], ulimit_n => 32);
    is($status, 0, 'fds exhausted: tempfile, tempfile_contents') or diag $out;
    my $emfile = "errno 24: failed to create tempfile: " . FFTest::errno_text(24) . "\n";
    is($out, "tempfile 0: $emfile" . "tempfile_contents 0: $emfile"
             . "tempfile 1: a IO::File\n" . "tempfile_contents 1: a IO::File\n",
       "... no fd free: the op's own error (EMFILE), not IO::File's loading; one free: a handle");
}

done_testing();
