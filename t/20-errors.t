use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }
use POSIX qw(setlocale LC_ALL);
BEGIN { setlocale(LC_ALL, 'C') }

use Test::More;
binmode(Test::More->builder->$_, ':encoding(UTF-8)') for qw(output failure_output todo_output);
use Errno qw(ENOENT EISDIR ENOTDIR ENAMETOOLONG EACCES EPERM);
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in warnings_of errno_text in_child);
use Reference qw(ref_file_set_contents);
use FastFile;

my $dir = tempdir();

sub check_error { FFTest::check_error($_[0], $_[1], dir => $dir, @_[2 .. $#_]) }

# missing directory
check_error('missing directory',
    sub { file_set_contents("$dir/nope/f", 'data') },
    text => "unable to open file '$dir/nope/f.tmp.$$' - " . errno_text(ENOENT) . "\n",
    errno => ENOENT, watch => ["$dir/nope"]);

# a directory as the target: the temp is written, the rename fails
{
    my $target = "$dir/a-directory";
    mkdir $target or die "mkdir: $!";
    spew("$target/inside", 'keep');
    check_error('directory as target',
        sub { file_set_contents($target, 'data') },
        text => "close (rename) atomic file '$target' failed: Is a directory\n",
        errno => EISDIR, watch => [$target, "$target/inside"]);
    is(errno_text(EISDIR), 'Is a directory', 'EISDIR text') if $^O eq 'linux';
}

# a path component is a file
{
    my $f = "$dir/plain-file";
    spew($f, 'plain');
    check_error('path component is a file',
        sub { file_set_contents("$f/x", 'data') },
        text => "unable to open file '$f/x.tmp.$$' - " . errno_text(ENOTDIR) . "\n",
        errno => ENOTDIR, watch => [$f]);
}

# name too long
{
    my $long = "$dir/" . ('n' x 300);
    check_error('name too long',
        sub { file_set_contents($long, 'data') },
        text => "unable to open file '$long.tmp.$$' - " . errno_text(ENAMETOOLONG) . "\n",
        errno => ENAMETOOLONG);
}

# NUL in the path: fails like open does (ENOENT), with perl's syscalls warning
{
    my $name = "$dir/nul\0byte";
    spew("$dir/nul", 'prefix file');
    my (@w, $line);
    check_error('NUL in path',
        sub { local $SIG{__WARN__} = sub { push @w, $_[0] }; $line = __LINE__; file_set_contents($name, 'data') },
        text => "unable to open file '$name.tmp.$$' - " . errno_text(ENOENT) . "\n",
        errno => ENOENT, watch => ["$dir/nul", "$dir/nul.tmp.$$"]);
    is(scalar @w, 1, 'NUL in path: one warning');
    (my $w = $w[0] // '') =~ s/\0/\\0/g;
    is($w, "Invalid \\0 character in pathname for file_set_contents: $dir/nul\\0byte at $0 line $line.\n",
       'NUL in path: the syscalls warning, as open gives it');
    {
        # what perl's open says for the same path, for comparison
        my @ow;
        local $SIG{__WARN__} = sub { push @ow, $_[0] };
        ok(!open(my $fh, '>', $name), 'open fails on the same path');
        is($! + 0, ENOENT, '... with ENOENT');
        like($ow[0] // '', qr/^Invalid \\0 character in pathname for open: /, '... and the same kind of warning');
    }
    my @nw = warnings_of {
        no warnings 'syscalls';
        eval { file_set_contents($name, 'data') };
    };
    is(scalar @nw, 0, 'NUL in path: no warning under no warnings "syscalls"');
    is($! + 0, ENOENT, '... still ENOENT');
    opendir my $dh, $dir or die;
    ok(!(grep { /^nul./ } readdir $dh), 'NUL in path: nothing created');
}

# non-ASCII file names: the message holds the name as perl would interpolate it
{
    my @names = (
        [ 'wide chars', "\x{263a}-name" ],
        [ 'upgraded Latin-1', do { my $x = "caf\x{e9}"; utf8::upgrade($x); $x } ],
        [ 'Latin-1 bytes', "caf\xe9-bytes" ],
    );
    for my $n (@names) {
        my ($label, $name) = @$n;
        my $path = "$dir/no-such-dir/$name";
        check_error("missing directory, $label name",
            sub { file_set_contents($path, 'data') },
            text => "unable to open file '$path.tmp.$$' - " . errno_text(ENOENT) . "\n",
            errno => ENOENT);
        my $target = "$dir/$name-dir";
        mkdir $target or die "mkdir: $!";
        check_error("directory as target, $label name",
            sub { file_set_contents($target, 'data') },
            text => "close (rename) atomic file '$target' failed: " . errno_text(EISDIR) . "\n",
            errno => EISDIR, watch => [$target]);
        rmdir $target;
    }
}

# undefined or empty file name
for my $name (undef, '') {
    my $label = defined $name ? 'empty file name' : 'undef file name';
    my $ok = eval { file_set_contents($name, 'data'); 1 };
    ok(!$ok, "$label: croaks");
    is($@, "file name is undefined or empty\n", "$label: message");
    is_deeply([ temps_in($dir) ], [], "$label: no temp");
}
{
    my $ok = eval { file_set_contents(); 1 };
    ok(!$ok, 'no arguments at all: croaks');
    like($@, qr/^Usage: FastFile::file_set_contents\(|^file name is undefined or empty\n/, '... usage or file name message');
}

# a directory we may not write to
SKIP: {
    my $ro = "$dir/read-only";
    mkdir $ro or die "mkdir: $!";
    my $target = "$ro/target";
    spew($target, 'old');
    chmod 0555, $ro or die "chmod: $!";

    if ($> != 0) {
        check_error('read-only directory',
            sub { file_set_contents($target, 'data') },
            text => "unable to open file '$target.tmp.$$' - " . errno_text(EACCES) . "\n",
            errno => EACCES, watch => [$target], dir => $ro);
        last SKIP;
    }

    # root ignores modes: drop to an unprivileged user in a child
    my @nobody = getpwnam('nobody');
    skip 'running as root and there is no user "nobody" to drop to', 12 unless @nobody;
    chmod 0711, $dir or die "chmod: $!";
    my $sticky = "$dir/sticky";
    mkdir $sticky or die "mkdir: $!";
    chmod 01777, $sticky or die "chmod: $!";
    my $root_file = "$sticky/roots";
    spew($root_file, 'root owns this');
    chmod 0644, $root_file;

    my $run_as_nobody = sub {
        my ($path) = @_;
        my $out = in_child(sub {
            my $ok = eval { file_set_contents($path, 'nobody was here'); 1 } ? 1 : 0;
            return join("\n", $ok, $! + 0, $$, unpack('H*', $@));
        }, @nobody[2, 3]);
        my ($ran, @res) = $out =~ /\Aok (.*)\z/s ? (1, split /\n/, $1, -1) : (0);
        return { ran => $ran, out => $out, ok => $res[0], errno => $res[1], pid => $res[2],
                 err => defined $res[3] ? pack('H*', $res[3]) : undef };
    };

    my $r = $run_as_nobody->($target);
    ok($r->{ran}, 'read-only directory (as nobody): child ran') or diag($r->{out});
    ok(!$r->{ok}, 'read-only directory (as nobody): croaks');
    is($r->{err}, "unable to open file '$target.tmp.$r->{pid}' - " . errno_text(EACCES) . "\n",
       'read-only directory (as nobody): message');
    is($r->{errno}, EACCES, 'read-only directory (as nobody): $! is EACCES');
    is(slurp($target), 'old', 'read-only directory (as nobody): target unchanged');
    is_deeply([ temps_in($ro) ], [], 'read-only directory (as nobody): no temp');

    # sticky directory, a file of root's at the target: the temp is made,
    # the rename is refused, and the temp must go
    my $ino = (stat $root_file)[1];
    $r = $run_as_nobody->($root_file);
    ok(!$r->{ok}, 'rename refused (sticky dir, as nobody): croaks');
    is($r->{err}, "close (rename) atomic file '$root_file' failed: " . errno_text(EPERM) . "\n",
       'rename refused (sticky dir, as nobody): message');
    is($r->{errno}, EPERM, 'rename refused (sticky dir, as nobody): $! is EPERM');
    is(slurp($root_file), 'root owns this', 'rename refused: target content unchanged');
    is((stat $root_file)[1], $ino, 'rename refused: same inode');
    is_deeply([ temps_in($sticky) ], [], 'rename refused: the temp was removed');
}

# a foreign file already at "<file>.tmp.$$" is never touched
{
    my $target = "$dir/foreign-target";
    spew($target, 'old');
    my $foreign = "$target.tmp.$$";
    spew($foreign, 'foreign, live writer');
    chmod 0444, $foreign;
    my $foreign_ino = (stat $foreign)[1];
    ok(file_set_contents($target, 'new data'), 'foreign temp present: write succeeds');
    is(slurp($target), 'new data', 'foreign temp present: target has the new data');
    is(slurp($foreign), 'foreign, live writer', 'foreign temp present: its content kept');
    is((stat $foreign)[1], $foreign_ino, 'foreign temp present: same inode');
    is_deeply([ temps_in($dir) ], ["foreign-target.tmp.$$"], 'foreign temp present: no other temp left');
    unlink $foreign;

    # a symlink at the temp name is not followed either
    my $victim = "$dir/victim";
    symlink($victim, $foreign) or die "symlink: $!";
    ok(file_set_contents($target, 'newer'), 'symlink at the temp name: write succeeds');
    ok(!-e $victim, 'symlink at the temp name: not followed (nothing created through it)');
    ok(-l $foreign, 'symlink at the temp name: left alone');
    is(slurp($target), 'newer', 'symlink at the temp name: target written');
    is_deeply([ temps_in($dir) ], ["foreign-target.tmp.$$"], 'symlink at the temp name: no other temp left');
    unlink $foreign;
}

# the pure-Perl reference fails the same way, in the same words
{
    my $isdir = "$dir/ref-is-dir";
    mkdir $isdir or die "mkdir: $!";
    spew("$dir/ref-file", 'x');
    for my $path ("$dir/nope/f", $isdir, "$dir/ref-file/x", "$dir/" . ('n' x 300), "$dir/\x{263a}/f",
                  undef, '') {
        my @got = do { eval { file_set_contents($path, 'data') }; ($@, $! + 0) };
        my @ref = do { eval { ref_file_set_contents($path, 'data') }; ($@, $! + 0) };
        my $label = !defined $path ? 'undef' : $path eq '' ? "''" : substr($path, length $dir);
        $label =~ s/n{300}/n x 300/;
        $label =~ s/([^\x20-\x7e])/sprintf '\\x{%x}', ord $1/ge;
        is($got[0], $ref[0], "same message as the reference: $label");
        is($got[1], $ref[1], "same errno as the reference: $label") if defined $path && length $path;
    }
}

# A tied $! (user code in its FETCH) is not read for the message's text:
# the text is perl's for the errno, formatted in the reference's scope,
# where user code may not run (its warn and caller there: SIGSEGV)
{
    my ($status, $out) = FFTest::run_perl(
        'package T; sub TIESCALAR { bless {} } sub FETCH { warn "fetched\n"; my @c = caller 0; "tied" } sub STORE {} '
        . 'package main; use FastFile; tie $!, "T"; '
        . 'for my $c (sub { file_set_contents("$ARGV[0]/none/x", "a") }, sub { FastFile::file_copy("$ARGV[0]/none", "x") }, '
        . '           sub { FastFile::create_owned_file_fh("$ARGV[0]", $<) }) { eval { $c->() }; print $@ =~ s/ at .*//sr }',
        args => [$dir]);
    is($status, 0, 'a tied $!: no crash') or diag($out);
    like($out, qr{\Aunable to open file '\Q$dir\E/none/x\.tmp\.\d+' - No such file or directory\n}, '... the errno\'s text');
    unlike($out, qr/fetched|tied/, '... its FETCH not run');
    is(() = $out =~ /No such file or directory\n|File exists\n/g, 3, '... for each function');
}

is_deeply([ temps_in($dir) ], [], 'no temp files left at the end');

done_testing;
