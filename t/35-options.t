#!perl
# The options hash of file_set_contents: perm, utf8, fsync, preserve,
# if_changed, mkdir, follow_symlinks, noclobber. For each option: the bytes,
# mode, owner and symlink state it leaves behind, its errors (no temp file
# left, target untouched), and -- under strace -- the exact syscalls it adds
# to a 64 KiB write and the ones it must not add. Run with prove -v to see
# the syscall sequence of each option (printed with note).
use strict;
use warnings;

use Test::More;
use Errno qw(EEXIST ENOENT ELOOP EIO EPERM EROFS EACCES EINVAL ENOSYS EOPNOTSUPP);
use File::Temp ();
use POSIX ();

use FastFile;
use lib 't/lib';
use FFTest qw(slurp spew temps_in errno_text strace_why strace_call in_child io_calls xattr_nr acl_of);

# $! texts are compared in English; children inherit the C locale too.
BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }
POSIX::setlocale(POSIX::LC_ALL(), 'C');

umask 022;
my $ROOT = File::Temp::tempdir('ff35-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $ROOT or die "chmod $ROOT: $!";    # 'nobody' must get through it

my $KiB64 = 'x' x 65536;

# ---------------------------------------------------------------- helpers

my $n_dir = 0;
sub newdir {
    my $d = "$ROOT/c" . ++$n_dir . (@_ ? "-$_[0]" : '');
    mkdir $d or die "mkdir $d: $!";
    return $d;
}

sub no_temps {
    my ($name, @dirs) = @_;
    my @t = temps_in(@dirs);
    ok(!@t, "$name: no temp file left") or diag("left: @t");
}

sub mode_of { my @s = lstat $_[0]; @s ? $s[2] & 07777 : undef }
sub owner_of { my @s = lstat $_[0]; @s ? "$s[4]:$s[5]" : undef }

# Runs code, returns (result, $@, $! as a number) like the traced runs do.
sub attempt {
    my ($code) = @_;
    my $r = eval { $code->() };
    return ($r, $@, $! + 0);
}

# ---------------------------------------------------------------- strace

# Runs $code (with $D = the case dir, $DATA = 64 KiB) under strace (with the
# given fault injections) and returns { ret, err, errno, calls, seq,
# complete }: calls are the syscalls made by the call, normalised (the case
# dir reads D, the pid PID, fds FD, buffers ...); memory management (brk,
# mmap, ...) is dropped. seq is calls without getpid (the contract allows one
# per call).
sub traced {
    my (%a) = @_;
    my $dir = $a{dir};
    # a perl of its own where the case changes the process (becomes nobody)
    die "traced: a quote in $dir\n" if $dir =~ /['\\]/;
    my $r = strace_call($a{code}, inject => $a{inject}, attach => !defined $a{pre},
                        setup => "use POSIX (); my \$D = '$dir'; my \$DATA = 'x' x 65536;" . ($a{pre} // ''));
    my @calls = io_calls($r);
    my %res = (ret => $r->{ret} // 'undef', err => $r->{err}, errno => $r->{errno}, pid => $r->{pid},
               complete => $r->{traced} && defined $r->{pid} ? 1 : 0,
               calls => [ map { normalise($_->{line}, $dir, $r->{pid}) } @calls ]);
    $res{seq} = [ grep { !/^getpid\(/ } @{ $res{calls} } ];
    return \%res;
}

sub normalise {
    my ($l, $dir, $pid) = @_;
    $l =~ s/\)\s+= /) = /;
    $l =~ s/"\Q$dir\E(?=["\/])/"D/g;
    $l =~ s/\.tmp\.\Q$pid\E(?=[".])/.tmp.PID/g if defined $pid;
    $l =~ s/^getpid\(\) = \d+/getpid() = PID/;
    $l =~ s/\{[^{}]*\}/{...}/g;
    $l =~ s/\b0x[0-9a-f]+\b/PTR/g;
    $l =~ s/^(write|read)\((\d+), "(?:[^"\\]|\\.)*"(?:\.\.\.)?, /$1($2, ..., /;
    $l =~ s/ = -1 (E\w+) \([^()]*\)/ = -1 $1/;
    $l =~ s/^(write|read|close|fchown|fchmod|fdatasync|fsync|fsetxattr|fremovexattr)\(\d+/$1(FD/;
    $l =~ s/^(openat\(.*\)) = \d+$/$1 = FD/;
    $l =~ s/^fstat\(\d+/fstat(FD/;
    return $l;
}

sub show {
    my ($label, $t) = @_;
    note("syscalls of $label:\n" . join '', map { "    $_\n" } @{ $t->{calls} }, @{ $t->{calls} } ? () : '(none)');
}

# the exact sequence, printed for the record
sub seq_is {
    my ($t, $want, $label) = @_;
    show($label, $t);
    ok($t->{complete}, "$label: traced run completed")
        or diag("child output: " . join " / ", map { $_ // "none" } @$t{qw(ret err)});
    is_deeply($t->{seq}, $want, "$label: exact syscall sequence")
        or diag(join "\n", 'got:', @{ $t->{seq} });
    my $getpid = grep { /^getpid\(/ } @{ $t->{calls} };
    cmp_ok($getpid, '<=', 1, "$label: at most one getpid");
}

my @TRACES_WITHOUT_FSYNC;    # checked together at the end: no fsync family

sub need_strace { my $why = strace_why(); plan skip_all => "strace unusable: $why" if $why }

# sequence pieces; P is a path as it appears normalised ("D/f")
sub T_OPEN  { my ($p, $m) = @_; $m //= '0644';
              qq{openat(AT_FDCWD, "$p.tmp.PID", O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, $m) = FD} }
sub T_ENOENT { qq{openat(AT_FDCWD, "$_[0].tmp.PID", O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0644) = -1 ENOENT} }
sub WRITE64 { 'write(FD, ..., 65536) = 65536' }
sub CLOSE   { 'close(FD) = 0' }
sub RENAME  { qq{rename("$_[0].tmp.PID", "$_[0]") = 0} }
sub NOREPL  { my ($p, $r) = @_; $r //= '0';
              qq{renameat2(AT_FDCWD, "$p.tmp.PID", AT_FDCWD, "$p", RENAME_NOREPLACE) = $r} }
sub UNLINK  { qq{unlink("$_[0].tmp.PID") = 0} }
sub STATDIR { qq{newfstatat(AT_FDCWD, "$_[0]", {...}, 0) = 0} }    # a link's directory (follow_symlinks)
# noclobber's publishing: renameat2(RENAME_NOREPLACE); a build without it
# (FF_PORTABLE) links the temp to the target, then unlinks the temp name
my $RENAMEAT2 = FastFile::_build_info()->{renameat2};
sub LINK    { my ($p, $r) = @_; $r //= '0'; qq{linkat(AT_FDCWD, "$p.tmp.PID", AT_FDCWD, "$p", 0) = $r} }
sub UNLINKAT { qq{unlinkat(AT_FDCWD, "$_[0].tmp.PID", 0) = 0} }   # the temp name, once linked
sub NOCLOBBER { my ($p, $r) = @_;
                return NOREPL($p, $r) if $RENAMEAT2;
                return defined $r ? LINK($p, $r) : ( LINK($p), UNLINKAT($p) ) }
sub LSTAT   { qq{newfstatat(AT_FDCWD, "$_[0]", {...}, AT_SYMLINK_NOFOLLOW) = 0} }
sub LSTAT_ENOENT { qq{newfstatat(AT_FDCWD, "$_[0]", PTR, AT_SYMLINK_NOFOLLOW) = -1 ENOENT} }
# @look: whose file it is (another user's: is the directory sticky?), by default ours
sub COMPARE { my ($p, @look) = @_; @look = ("geteuid() = $>") unless @look;
              ( qq{openat(AT_FDCWD, "$p", O_RDONLY|O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC) = FD},
                'fstat(FD, {...}) = 0', @look,
                # short at fstat's size: the end, no read of 0 after it
                'read(FD, ..., 65537) = 65536', CLOSE() ) }
sub DIRSYNC { my ($d, $r) = @_; $r //= '0';
              ( qq{openat(AT_FDCWD, "$d", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = FD},
                "fsync(FD) = $r", CLOSE() ) }
sub PLAIN   { my ($p, $m) = @_; ( T_OPEN($p, $m), WRITE64, CLOSE, RENAME($p) ) }
# preserve asks for the old file's ACL (none here), where the build has
# ACLs (not the portable one)
my $ACL = FastFile::_build_info()->{acl};
sub NOACL   { $ACL ? qq{lgetxattr("$_[0]", "system.posix_acl_access", NULL, 0) = -1 ENODATA} : () }
# ... and so none on the new file (not one inherited from the directory)
sub RMACL   { $ACL ? 'fremovexattr(FD, "system.posix_acl_access") = 0' : () }

# ================================================================ validation

subtest 'unknown option' => sub {
    my $d = newdir('unknown');
    my ($r, $e) = attempt(sub { file_set_contents("$d/f", 'data', { bogus => 1 }) });
    is($e, "unknown option 'bogus'\n", 'croak text');
    ok(!defined $r, 'no return value');
    ok(!-e "$d/f", 'no file made');
    no_temps('unknown option', $d);

    ($r, $e) = attempt(sub { file_set_contents("$d/f", 'data', { fsync => 1, Fsync => 1 }) });
    is($e, "unknown option 'Fsync'\n", 'keys are case-sensitive');
    ok(!-e "$d/f", 'no file made');

    ($r, $e) = attempt(sub { file_set_contents("$d/f", 'data', { force_utf8 => 1 }) });
    is($e, "unknown option 'force_utf8'\n", "the key is 'utf8', not 'force_utf8'");
};

subtest 'option names are whole strings (no NUL truncation)' => sub {
    my $d = newdir('nulkey');
    for my $key ("fsync\0x", "perm\0junk") {
        (my $shown = $key) =~ s/\0/\\0/g;
        my ($r, $e) = attempt(sub { file_set_contents("$d/f", 'data', { $key => 0600 }) });
        is($e, "unknown option '$key'\n", "key '$shown' is unknown");
        ok(!-e "$d/f", "key '$shown': no file made");
        unlink "$d/f";
    }
};

subtest 'perm validation' => sub {
    my $d = newdir('perm');
    for my $case (['abc', "'abc'"], ['', "''"], [-1, '-1'], [010000, '010000'],
                  [-0.5, '-0.5'], ['nan', "'nan'"], ['inf', "'inf'"],
                  [[], 'an array ref'], [{}, 'a hash ref'], [\0644, 'a scalar ref']) {
        my ($v, $name) = @$case;
        my ($r, $e) = attempt(sub { file_set_contents("$d/f", 'data', { perm => $v }) });
        is($e, "invalid value for option 'perm'\n", "perm => $name croaks");
        ok(!-e "$d/f", "perm => $name: no file made");
        unlink "$d/f";
    }
    for my $case ([0, 0, 0], [0600, 0600, 0600], [0666, 0644, 0644], [07777, 07755, 07755],
                  [undef, 0644, 0644], ['384', 0600, 0600]) {
        my ($v, $want) = @$case;
        my $name = defined $v ? sprintf('%#o', $v) : 'undef';
        unlink "$d/f";
        my ($r, $e) = attempt(sub { file_set_contents("$d/f", 'data', { perm => $v }) });
        is($e, '', "perm => $name accepted");
        my $got = mode_of("$d/f") // -1;
        # without CAP_FSETID the kernel may drop set-id bits at create time
        ($got, $want) = ($got & 0777, $want & 0777) if $> != 0 && $want & 06000;
        is(sprintf('%04o', $got), sprintf('%04o', $want),
           "perm => $name gives mode (umask 022 applied)");
    }
};

subtest 'boolean options refuse references' => sub {
    my $d = newdir('bool');
    for my $key (qw(utf8 fsync preserve if_changed mkdir follow_symlinks noclobber)) {
        for my $ref ([], {}, \1, sub { 1 }, bless({}, 'Some::Class')) {
            my ($r, $e) = attempt(sub { file_set_contents("$d/f", 'data', { $key => $ref }) });
            is($e, "invalid value for option '$key'\n", "$key => " . ref($ref) . ' croaks');
        }
        ok(!-e "$d/f", "$key: no file made by the refused calls");
        my ($r, $e) = attempt(sub { file_set_contents("$d/f", 'data', { $key => undef }) });
        is($e, '', "$key => undef is false, not an error");
        is(slurp("$d/f"), 'data', "$key => undef: file written");
        unlink "$d/f";
    }
};

subtest 'a 4th positional argument next to the options hash' => sub {
    my $d = newdir('fourth');
    spew("$d/f", 'old');
    for my $v (0, 1, '') {
        my ($r, $e) = attempt(sub { file_set_contents("$d/f", 'new', {}, $v) });
        like($e, qr/\S.*\n\z/s, "4th argument '$v' with a hash croaks");
        is(slurp("$d/f"), 'old', "4th argument '$v': target untouched");
    }
    no_temps('4th argument', $d);
};

subtest 'validation happens before the first syscall' => sub {
    need_strace();
    my $d = newdir('valid-strace');
    mkdir "$d/sub";
    symlink 'sub/real', "$d/link" or die;
    for my $opts ('{ follow_symlinks => 1, preserve => 1, if_changed => 1, mkdir => 1, bogus => 1 }',
                  '{ follow_symlinks => 1, mkdir => 1, if_changed => 1, perm => -1 }',
                  '{ follow_symlinks => 1, mkdir => 1, if_changed => 1, noclobber => [] }') {
        my $t = traced(dir => $d, code => qq{file_set_contents("\$D/link", \$DATA, $opts)});
        like($t->{err}, qr/^(?:unknown option|invalid value for option) '\w+'\n\z/, "$opts croaks");
        show("a refused options hash $opts", $t);
        ok($t->{complete}, "$opts: traced run completed");
        is_deeply($t->{seq}, [], "$opts: no syscall at all (no readlink, lstat, open)");
        push @TRACES_WITHOUT_FSYNC, [ "refused $opts", $t ];
    }
    ok(!-e "$d/sub/real" && -l "$d/link", 'nothing made');
};

# ================================================================ return value, perm, utf8

subtest 'return values' => sub {
    my $d = newdir('ret');
    is(file_set_contents("$d/f", 'a'), 1, 'positional form returns 1');
    is(file_set_contents("$d/f", 'a'), 1, 'positional form returns 1 for the same content');
    is(file_set_contents("$d/f", 'a', 0600), 1, 'positional form with perm returns 1');
    is(file_set_contents("$d/f", 'b', {}), 1, 'empty options hash returns 1');
    is(file_set_contents("$d/f", 'c', { if_changed => 1 }), 1, 'if_changed, different: 1');
    my $r = file_set_contents("$d/f", 'c', { if_changed => 1 });
    ok(defined $r && $r eq '0' && !$r, 'if_changed, identical: 0 (defined, false)');
    is(slurp("$d/f"), 'c', 'content');
};

subtest 'perm and utf8 options' => sub {
    my $d = newdir('perm-utf8');
    file_set_contents("$d/a", "caf\xe9", { perm => 0640 });
    is(slurp("$d/a"), "caf\xe9", 'bytes as given without utf8');
    is(sprintf('%04o', mode_of("$d/a")), '0640', 'perm 0640');
    file_set_contents("$d/b", "caf\xe9", { utf8 => 1 });
    is(slurp("$d/b"), "caf\xc3\xa9", 'utf8 => 1 encodes Latin-1 as UTF-8');
    file_set_contents("$d/c", "caf\xe9", { utf8 => 0 });
    is(slurp("$d/c"), "caf\xe9", 'utf8 => 0 writes the bytes');
    my $wide = "\x{263a}";
    file_set_contents("$d/e", $wide, { utf8 => 1 });
    is(slurp("$d/e"), "\xe2\x98\xba", 'utf8 => 1 with a wide char: its UTF-8, no warning');
    {
        my @w;
        local $SIG{__WARN__} = sub { push @w, @_ };
        file_set_contents("$d/g", $wide, {});
        is(scalar(@w), 1, 'no utf8: one warning for a wide character');
        like($w[0] // '', qr/^Wide character in file_set_contents/, 'the wide character warning');
    }
    {
        my $old_umask = umask 077;
        file_set_contents("$d/h", 'x', { perm => 0666 });
        is(sprintf('%04o', mode_of("$d/h")), '0600', 'perm goes through the umask');
        umask $old_umask;
    }
    no_temps('perm/utf8', $d);

    need_strace();
    my $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA)});
    seq_is($t, [ PLAIN('D/f') ], 'no options (positional form)');
    push @TRACES_WITHOUT_FSYNC, [ 'positional', $t ];
    $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA, {})});
    seq_is($t, [ PLAIN('D/f') ], 'an empty options hash');
    push @TRACES_WITHOUT_FSYNC, [ 'empty hash', $t ];
    $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA, { perm => 0600 })});
    seq_is($t, [ PLAIN('D/f', '0600') ], 'perm => 0600');
    push @TRACES_WITHOUT_FSYNC, [ 'perm', $t ];
    $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA, { utf8 => 1 })});
    seq_is($t, [ PLAIN('D/f') ], 'utf8 => 1');
    push @TRACES_WITHOUT_FSYNC, [ 'utf8', $t ];
};

# ================================================================ fsync

subtest 'fsync' => sub {
    my $d = newdir('fsync');
    spew("$d/f", 'old');
    is(file_set_contents("$d/f", 'new', { fsync => 1 }), 1, 'returns 1');
    is(slurp("$d/f"), 'new', 'content');
    is(sprintf('%04o', mode_of("$d/f")), '0644', 'mode');
    file_set_contents("$d/g", 'new', { fsync => 0 });
    is(slurp("$d/g"), 'new', 'fsync => 0 writes too');
    no_temps('fsync', $d);

    need_strace();
    my $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA, { fsync => 1 })});
    is($t->{err}, '', 'traced call succeeds');
    seq_is($t, [ T_OPEN('D/f'), WRITE64, 'fdatasync(FD) = 0', CLOSE, RENAME('D/f'), DIRSYNC('D') ],
           'fsync => 1');

    $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA, { fsync => 0 })});
    seq_is($t, [ PLAIN('D/f') ], 'fsync => 0');
    push @TRACES_WITHOUT_FSYNC, [ 'fsync => 0', $t ];

    # fdatasync fails: temp removed, target untouched
    spew("$d/f", 'old');
    $t = traced(dir => $d, inject => ['fdatasync:error=EIO'],
                code => q{file_set_contents("$D/f", $DATA, { fsync => 1 })});
    is($t->{err}, "unable to sync '$d/f.tmp.$t->{pid}' - " . errno_text(EIO) . "\n",
       'fdatasync EIO: croak text names the temp');
    is($t->{err}, "unable to sync '$d/f.tmp.$t->{pid}' - Input/output error\n", '... in English');
    is($t->{errno}, EIO, '$! is EIO');
    is(slurp("$d/f"), 'old', 'target untouched');
    no_temps('fdatasync EIO', $d);
    seq_is($t, [ T_OPEN('D/f'), WRITE64, 'fdatasync(FD) = -1 EIO (INJECTED)', CLOSE, UNLINK('D/f') ],
           'fsync => 1, fdatasync fails');

    # the directory fsync fails: the file is in place already
    $t = traced(dir => $d, inject => ['fsync:error=EIO'],
                code => q{file_set_contents("$D/f", $DATA, { fsync => 1 })});
    is($t->{err}, "unable to sync directory of '$d/f' - Input/output error\n",
       'directory fsync EIO: croak text names the target');
    is($t->{errno}, EIO, '$! is EIO');
    is(slurp("$d/f"), $KiB64, 'the renamed file stays');
    no_temps('directory fsync EIO', $d);
    seq_is($t, [ T_OPEN('D/f'), WRITE64, 'fdatasync(FD) = 0', CLOSE, RENAME('D/f'),
                 DIRSYNC('D', '-1 EIO (INJECTED)') ], 'fsync => 1, directory fsync fails');

    # EINVAL / ENOSYS: the filesystem cannot sync, which is not an error
    for my $err (qw(EINVAL ENOSYS)) {
        spew("$d/f", 'old');
        $t = traced(dir => $d, inject => ["fdatasync:error=$err", "fsync:error=$err"],
                    code => q{file_set_contents("$D/f", $DATA, { fsync => 1 })});
        is($t->{err}, '', "fdatasync and fsync $err are ignored");
        is($t->{ret}, 1, "$err: returns 1");
        is(slurp("$d/f"), $KiB64, "$err: file written");
        is_deeply($t->{seq}, [ T_OPEN('D/f'), WRITE64, "fdatasync(FD) = -1 $err (INJECTED)", CLOSE,
                               RENAME('D/f'), DIRSYNC('D', "-1 $err (INJECTED)") ],
                  "$err: the sequence goes on after both failures");
        no_temps("sync $err", $d);
    }
};

# ================================================================ preserve

subtest 'preserve: mode and owner of the replaced file' => sub {
    plan skip_all => 'needs root: the old file is given to another user' if $> != 0;
    my $d = newdir('preserve');
    for my $mode (0600, 0755, 04755, 02755, 01644, 0) {
        my $m = sprintf '%04o', $mode;
        spew("$d/f", 'old', $mode);
        chown 65534, 65534, "$d/f" or die "chown: $!";
        chmod $mode, "$d/f";                       # chown cleared the set-id bits
        is(sprintf('%04o', mode_of("$d/f")), $m, "$m: precondition");
        is(file_set_contents("$d/f", "new $m", { preserve => 1, perm => 0640 }), 1, "$m: returns 1");
        is(slurp("$d/f"), "new $m", "$m: content");
        is(sprintf('%04o', mode_of("$d/f")), $m, "$m: mode kept (perm ignored, set-id bits kept)");
        is(owner_of("$d/f"), '65534:65534', "$m: non-root owner and group kept");
        unlink "$d/f";
    }
    {
        spew("$d/f", 'old', 0640);
        chown 0, 65534, "$d/f";
        file_set_contents("$d/f", 'new', { preserve => 1 });
        is(owner_of("$d/f"), '0:65534', 'root owner with a non-root group kept');
    }
    {
        my $old_umask = umask 077;
        spew("$d/u", 'old', 0755);
        file_set_contents("$d/u", 'new', { preserve => 1 });
        is(sprintf('%04o', mode_of("$d/u")), '0755', 'umask 077 does not filter the preserved mode');
        umask $old_umask;
    }
    file_set_contents("$d/missing", 'new', { preserve => 1, perm => 0604 });
    is(sprintf('%04o', mode_of("$d/missing")), '0604', 'missing target: perm applies');
    is(owner_of("$d/missing"), "$>:" . (split ' ', $))[0], 'missing target: owned by us');
    {
        my $old_umask = umask 027;
        file_set_contents("$d/missing2", 'new', { preserve => 1 });
        is(sprintf('%04o', mode_of("$d/missing2")), '0640', 'missing target: 0644 & ~umask');
        umask $old_umask;
    }

    # a symlink is not a regular file: nothing to preserve, the link is replaced
    spew("$d/real", 'real', 0600);
    chown 65534, 65534, "$d/real";
    symlink 'real', "$d/link" or die;
    file_set_contents("$d/link", 'new', { preserve => 1, perm => 0640 });
    ok(!-l "$d/link", 'symlink target without follow_symlinks: replaced by a file');
    is(sprintf('%04o', mode_of("$d/link")), '0640', 'symlink: perm applies, not the linked mode');
    is(owner_of("$d/link"), "$>:" . (split ' ', $))[0], 'symlink: owner not copied');
    is(slurp("$d/real"), 'real', 'the file the link pointed to is untouched');

    # with follow_symlinks the final file's mode and owner are kept
    symlink 'real', "$d/link2" or die;
    file_set_contents("$d/link2", 'via link', { preserve => 1, follow_symlinks => 1 });
    ok(-l "$d/link2", 'follow_symlinks + preserve: link stays');
    is(slurp("$d/real"), 'via link', 'follow_symlinks + preserve: content');
    is(sprintf('%04o', mode_of("$d/real")), '0600', 'follow_symlinks + preserve: mode');
    is(owner_of("$d/real"), '65534:65534', 'follow_symlinks + preserve: owner');
    no_temps('preserve', $d);
};

# A writer that is not root keeps the old owner never, the old group only
# as a member of it (the second fchown). Where it keeps neither, the group
# bits would go to its own group: that group gets only what the old file
# gave both its group and everyone else (group & others), and no setgid;
# set-user-ID never (the owner is the writer).
# Run as a real second user (uid and gid 65533, no other group) in a
# directory it may write, over root's files of group 65534.
subtest 'preserve by a writer that cannot keep the group' => sub {
    plan skip_all => 'needs root: the old files are root\'s, the writer another user' if $> != 0;
    require FastFile::Writer;
    my $d = newdir('preserve-group');
    chmod 0777, $d or die "chmod: $!";
    my ($uid, $gid) = (65533, 65533);
    my %api = (
        file_set_contents => sub { FastFile::file_set_contents($_[0], "new\n", { preserve => 1 }) },
        writer => sub { my $w = FastFile::Writer->new($_[0], { preserve => 1 }); $w->print("new\n"); $w->commit },
        batch => sub { FastFile::file_set_contents_many([ $_[0] => "new\n" ], { preserve => 1 }) },
    );
    # old mode, old group, the mode and owner expected
    my @cases = (
        [ 02660, 65534, '0600', "$uid:$gid" ],     # the group's rw is not the writer's group's
        [ 0664,  65534, '0644', "$uid:$gid" ],     # what everyone could read, the group still can
        [ 02775, 65534, '0755', "$uid:$gid" ],
        [ 0604,  65534, '0604', "$uid:$gid" ],
        [ 02660, $gid,  '2660', "$uid:$gid" ],     # a member keeps the group: the mode as it was
        # the owner is never kept: set-user-ID would run the file as the
        # writer, not as root; dropped, the rest kept
        [ 04755, 65534, '0755', "$uid:$gid" ],
        [ 06775, $gid,  '2775', "$uid:$gid" ],     # the group kept: its setgid too
        [ 04700, 65534, '0700', "$uid:$gid" ],
    );
    for my $api (sort keys %api) {
        for my $c (@cases) {
            my ($old_mode, $old_gid, $want_mode, $want_owner) = @$c;
            my $label = sprintf '%s, old %04o of group %d', $api, $old_mode, $old_gid;
            my $f = "$d/f";
            spew($f, "old\n");
            chown 0, $old_gid, $f or die "chown: $!";
            chmod $old_mode, $f or die "chmod: $!";
            my $out = in_child(sub { $api{$api}->($f); 'written' }, $uid, $gid);
            is($out, 'ok written', "$label: the writer replaces root's file");
            is(slurp($f), "new\n", "$label: content");
            is(owner_of($f), $want_owner, "$label: owned by the writer");
            is(sprintf('%04o', mode_of($f)), $want_mode, "$label: mode");
            unlink $f;
        }
    }
    # with an ACL (that has a mask) the group bits are its mask, what named
    # users and groups get at most: kept. The owning group's right is the
    # ACL's group entry, which goes to the writer's group: limited to the
    # others' entry. User 65534 (a named entry) still reads; uid 65532 of
    # the writer's group, whom the old group's rw would let in, does not.
    SKIP: {
        skip 'the portable build keeps no ACL', 5 unless $ACL;
        skip 'no xattr syscall numbers for this architecture', 5 unless xattr_nr('set');
        my $acl = pack('V', 2) . join '', map { pack 'vvV', @$_ }
            [0x01, 6, 0xffffffff], [0x02, 6, 65534], [0x04, 6, 0xffffffff], [0x10, 6, 0xffffffff], [0x20, 0, 0xffffffff];
        my $f = "$d/acl";
        spew($f, "old\n", 0600);
        chown 0, 65534, $f or die "chown: $!";
        skip "no POSIX ACLs here: $!", 5
            if syscall(xattr_nr('set'), $f, my $name = 'system.posix_acl_access', $acl, length $acl, 0) < 0;
        chmod 02660, $f or die "chmod: $!";
        my $reads = sub { in_child(sub { open(my $fh, '<', $f) ? 'reads' : 'refused' }, $_[0], $_[1]) };
        is(in_child(sub { $api{file_set_contents}->($f); 'written' }, $uid, $gid), 'ok written',
           'ACL: the writer replaces the file');
        is($reads->(65534, 65534), 'ok reads', 'ACL: its named user 65534 still reads (the mask kept)');
        is($reads->(65532, $gid), 'ok refused', 'ACL: a member of the writer\'s group does not');
        is(sprintf('%04o', mode_of($f)), '0660', 'ACL: the mode shows the mask, no setgid');
        ok(defined acl_of($f), 'ACL: the new file has the ACL');
    }
    no_temps('preserve-group', $d);
};

# The old file's POSIX access ACL, as the raw xattr: with an ACL the mode's
# group bits are its mask, so a mode copied without the ACL gave the owning
# group the mask's rights, which the ACL denied it. Set and read with the
# xattr syscalls (no setfacl needed: FFTest's xattr_nr, acl_of).
subtest 'preserve: the old file\'s ACL' => sub {
    require Config;
    require FastFile::Writer;
    plan skip_all => 'no xattr syscall numbers for this architecture' unless xattr_nr('set') && xattr_nr('get');
    my $d = newdir('preserve-acl');
    # owner rw, user 65534 rw, owning group nothing, mask rw, others nothing:
    # the mode shows 0660
    my $acl = pack('V', 2) . join '', map { pack 'vvV', @$_ }
        [0x01, 6, 0xffffffff], [0x02, 6, 65534], [0x04, 0, 0xffffffff], [0x10, 6, 0xffffffff], [0x20, 0, 0xffffffff];
    spew("$d/probe", 'x');
    plan skip_all => 'the portable build keeps no ACL (POD: SYSTEMS AND BUILDS)' unless $ACL;
    plan skip_all => "no POSIX ACLs here: $!"
        if syscall(xattr_nr('set'), "$d/probe", my $name = 'system.posix_acl_access', $acl, length $acl, 0) < 0;
    my %api = (
        file_set_contents => sub { file_set_contents($_[0], "new\n", { preserve => 1 }) },
        writer => sub { my $w = FastFile::Writer->new($_[0], { preserve => 1 }); $w->print("new\n"); $w->commit },
        batch => sub { FastFile::file_set_contents_many([ $_[0] => "new\n" ], { preserve => 1 }) },
    );
    for my $api (sort keys %api) {
        my $f = "$d/$api";
        spew($f, "old\n", 0600);
        syscall(xattr_nr('set'), $f, my $name2 = 'system.posix_acl_access', $acl, length $acl, 0) == 0 or die "setxattr: $!";
        is(sprintf('%04o', mode_of($f)), '0660', "$api: the old file's mode shows the mask");
        ok(eval { $api{$api}->($f); 1 }, "$api: preserve writes") or diag($@);
        is(slurp($f), "new\n", "$api: content");
        is(unpack('H*', acl_of($f) // ''), unpack('H*', $acl), "$api: the ACL kept: the owning group still gets nothing");
        is(sprintf('%04o', mode_of($f)), '0660', "$api: the mode");
    }
    # no ACL before, none after
    spew("$d/plain", "old\n", 0640);
    file_set_contents("$d/plain", "new\n", { preserve => 1 });
    ok(!defined acl_of("$d/plain"), 'no ACL before: none after');
    # not even one inherited from the directory's default ACL (user 65534
    # may read what is made there): the old file had none, user 65534 could
    # not read it, nor may it read the new contents
    my $sub = "$d/default";
    mkdir $sub or die "mkdir: $!";
    my %old;
    for my $api (sort keys %api) {
        $old{$api} = "$sub/$api";
        spew($old{$api}, "old\n", 0640);
    }
    my $default = pack('V', 2) . join '', map { pack 'vvV', @$_ }
        [0x01, 7, 0xffffffff], [0x02, 4, 65534], [0x04, 5, 0xffffffff], [0x10, 5, 0xffffffff], [0x20, 5, 0xffffffff];
    syscall(xattr_nr('set'), $sub, my $dname = 'system.posix_acl_default', $default, length $default, 0) == 0
        or die "setxattr: $!";
    for my $api (sort keys %api) {
        ok(eval { $api{$api}->($old{$api}); 1 }, "$api, a directory with a default ACL: preserve writes") or diag($@);
        ok(!defined acl_of($old{$api}), "$api: the new file has no ACL, as the old one")
            or diag(unpack 'H*', acl_of($old{$api}));
        is(sprintf('%04o', mode_of($old{$api})), '0640', "$api: the mode");
    }
    no_temps('preserve-acl', $sub);
    no_temps('preserve-acl', $d);
};

subtest 'preserve: syscalls and errors' => sub {
    need_strace();
    my $d = newdir('preserve-strace');
    # root gives the old file to another user; anyone else keeps it
    my ($ou, $og) = $> == 0 ? (65534, 65534) : ($>, (split ' ', $))[0]);
    my $old = sub { spew("$d/f", 'old', 0640); chown $ou, $og, "$d/f" or die "chown: $!" };
    # whose file it is; another user's makes preserve look at the directory
    # (a sticky world-writable one keeps only the caller's or its owner's)
    my @LOOK = ("geteuid() = $>", $ou == $> ? () : 'newfstatat(AT_FDCWD, "D", {...}, 0) = 0');

    $old->();
    my $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA, { preserve => 1 })});
    seq_is($t, [ LSTAT('D/f'), @LOOK, NOACL('D/f'), T_OPEN('D/f', '0600'), WRITE64, "fchown(FD, $ou, $og) = 0", RMACL, 'fchmod(FD, 0640) = 0',
                 CLOSE, RENAME('D/f') ], 'preserve => 1 (target exists)');
    push @TRACES_WITHOUT_FSYNC, [ 'preserve', $t ];
    is(sprintf('%04o', mode_of("$d/f")), '0640', 'mode kept');

    unlink "$d/f";
    $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA, { preserve => 1 })});
    seq_is($t, [ LSTAT_ENOENT('D/f'), PLAIN('D/f') ], 'preserve => 1 (target missing)');
    push @TRACES_WITHOUT_FSYNC, [ 'preserve, missing', $t ];

    # fchmod fails
    $old->();
    $t = traced(dir => $d, inject => ['fchmod:error=EPERM'],
                code => q{file_set_contents("$D/f", $DATA, { preserve => 1 })});
    is($t->{err}, "unable to set mode of '$d/f.tmp.$t->{pid}' - Operation not permitted\n",
       'fchmod EPERM: croak text');
    is($t->{errno}, EPERM, '$! is EPERM');
    is(slurp("$d/f"), 'old', 'target untouched');
    is(sprintf('%04o', mode_of("$d/f")), '0640', 'target mode untouched');
    no_temps('fchmod EPERM', $d);
    seq_is($t, [ LSTAT('D/f'), @LOOK, NOACL('D/f'), T_OPEN('D/f', '0600'), WRITE64, "fchown(FD, $ou, $og) = 0",
                 RMACL, 'fchmod(FD, 0640) = -1 EPERM (INJECTED)', CLOSE, UNLINK('D/f') ],
           'preserve => 1, fchmod fails');

    # fchown fails with something else than EPERM
    $t = traced(dir => $d, inject => ['fchown:error=EIO'],
                code => q{file_set_contents("$D/f", $DATA, { preserve => 1 })});
    is($t->{err}, "unable to set owner of '$d/f.tmp.$t->{pid}' - Input/output error\n",
       'fchown EIO: croak text');
    is($t->{errno}, EIO, '$! is EIO');
    is(slurp("$d/f"), 'old', 'target untouched');
    no_temps('fchown EIO', $d);

    # fchown EPERM is not an error
    $t = traced(dir => $d, inject => ['fchown:error=EPERM'],
                code => q{file_set_contents("$D/f", $DATA, { preserve => 1 })});
    is($t->{err}, '', 'fchown EPERM is ignored');
    is(slurp("$d/f"), $KiB64, 'fchown EPERM: file written');
    # neither owner nor group kept: the group bits are not given to the
    # writer's group (0640: the group's r is not everyone's)
    is(sprintf('%04o', mode_of("$d/f")), '0600', 'fchown EPERM: mode set, less the old group\'s bits');
    is_deeply($t->{seq}, [ LSTAT('D/f'), @LOOK, NOACL('D/f'), T_OPEN('D/f', '0600'), WRITE64, "fchown(FD, $ou, $og) = -1 EPERM (INJECTED)",
                           "geteuid() = $>", "fchown(FD, -1, $og) = -1 EPERM (INJECTED)", RMACL, 'fchmod(FD, 0600) = 0', CLOSE, RENAME('D/f') ],
              'fchown EPERM: fchmod and the rest follow');
    no_temps('fchown EPERM', $d);
};

subtest 'preserve as a non-root user: EPERM from fchown is ignored' => sub {
    my ($uid, $gid) = (getpwnam('nobody'))[2, 3];
    ($uid, $gid) = (65534, 65534) unless defined $uid;
    plan skip_all => 'needs root to switch to nobody' if $> != 0;
    my $d = newdir('nobody');
    chmod 0777, $d or die;                             # writable for nobody, not sticky
    spew("$d/f", 'old', 0640);                         # owned by root
    mkdir "$d/ro" or die;                              # root's, 0755: nobody cannot mkdir there
    spew("$d/suid", 'old', 0644);                      # nobody's own set-id file
    chown $uid, $gid, "$d/suid" or die "chown: $!";
    chmod 06750, "$d/suid" or die "chmod: $!";

    my $out = in_child(sub {
        my @out;
        push @out, 'ret=' . (eval { file_set_contents("$d/f", 'by nobody', { preserve => 1 }) } // 'undef');
        push @out, "err=$@";
        # the write itself clears set-id bits for a user without
        # CAP_FSETID: the mode must be copied after it
        push @out, 'suidret=' . (eval { file_set_contents("$d/suid", 'new', { preserve => 1 }) } // 'undef'),
                   "suiderr=$@";
        my $r = eval { file_set_contents("$d/ro/a/b", 'x', { mkdir => 1 }) };
        push @out, 'mkret=' . ($r // 'undef'), "mkerr=$@", 'mkerrno=' . ($! + 0);
        return join "\0", @out;
    }, $uid, $gid);
    my %r = $out =~ /\Aok (.*)\z/s ? map { /^(\w+)=(.*)\z/s ? ($1, $2) : () } split /\0/, $1
          : (setup => $out);
    like($out, qr/\A(?:ok|died) /, 'child exited cleanly');
    is($r{setup}, undef, 'child became nobody');
    is($r{err}, '', 'preserve as nobody over a root-owned file succeeds');
    is($r{ret}, 1, 'returns 1');
    is(slurp("$d/f"), 'by nobody', 'content');
    is(owner_of("$d/f"), "$uid:$gid", 'owner could not be copied: the file is nobody\'s');
    is(sprintf('%04o', mode_of("$d/f")), '0600', 'mode copied, less the group bits root\'s group had');
    is($r{suiderr}, '', 'preserve of a set-id file as its non-root owner succeeds');
    is(slurp("$d/suid"), 'new', '... content');
    is(sprintf('%04o', mode_of("$d/suid")), '6750', '... set-id bits kept (copied after the write)');
    is($r{mkerr}, "unable to create parent directories of '$d/ro/a/b' - " . errno_text(EACCES) . "\n",
       'mkdir as nobody in a root directory: croak text');
    is($r{mkerrno}, EACCES, 'mkdir: $! is EACCES');
    ok(!-e "$d/ro/a", 'mkdir: nothing created');
    no_temps('nobody', $d);

    need_strace();
    spew("$d/g", 'old', 0640);
    my $t = traced(dir => $d, pre => qq{\$) = "$gid $gid"; POSIX::setgid($gid) or die; POSIX::setuid($uid) or die},
                   code => q{file_set_contents("$D/g", $DATA, { preserve => 1 })});
    is($t->{err}, '', 'traced as nobody: no error');
    # root's file: preserve looks at the directory first (sticky: refused)
    seq_is($t, [ LSTAT('D/g'), "geteuid() = $uid", 'newfstatat(AT_FDCWD, "D", {...}, 0) = 0', NOACL('D/g'),
                 T_OPEN('D/g', '0600'), WRITE64, 'fchown(FD, 0, 0) = -1 EPERM', "geteuid() = $uid",
                 'fchown(FD, -1, 0) = -1 EPERM', RMACL, 'fchmod(FD, 0600) = 0',
                 CLOSE, RENAME('D/g') ], 'preserve => 1 as nobody over a root file');
    is(owner_of("$d/g"), "$uid:$gid", 'owned by nobody');
};

# ================================================================ if_changed

subtest 'if_changed' => sub {
    my $d = newdir('if-changed');
    spew("$d/f", 'same', 0600);
    my @before = stat "$d/f";
    is(file_set_contents("$d/f", 'same', { if_changed => 1, perm => 0644 }), 0, 'identical: returns 0');
    my @after = stat "$d/f";
    is("$after[1]", "$before[1]", 'identical: same inode (not replaced)');
    is(sprintf('%04o', $after[2] & 07777), '0600', 'identical: mode untouched (perm not applied)');

    is(file_set_contents("$d/f", 'diff', { if_changed => 1 }), 1, 'same size, different: returns 1');
    is(slurp("$d/f"), 'diff', 'same size, different: content');
    isnt((stat "$d/f")[1], $before[1], 'same size, different: replaced');
    is(file_set_contents("$d/f", 'longer', { if_changed => 1 }), 1, 'other size: returns 1');
    is(slurp("$d/f"), 'longer', 'other size: content');
    is(file_set_contents("$d/f", 'longe', { if_changed => 1 }), 1, 'prefix of the old content: returns 1');
    is(slurp("$d/f"), 'longe', 'prefix: content');

    spew("$d/e", '');
    is(file_set_contents("$d/e", '', { if_changed => 1 }), 0, 'empty over empty: 0');
    is(file_set_contents("$d/n", 'x', { if_changed => 1 }), 1, 'missing target: 1');
    is(slurp("$d/n"), 'x', 'missing target: content');

    spew("$d/u8", "caf\xc3\xa9");
    is(file_set_contents("$d/u8", "caf\xe9", { if_changed => 1, utf8 => 1 }), 0,
       'compares the bytes that would be written (utf8 => 1)');

    spew("$d/real", 'same');
    symlink 'real', "$d/link" or die;
    is(file_set_contents("$d/link", 'same', { if_changed => 1 }), 1,
       'symlink with the same content, no follow_symlinks: written');
    ok(!-l "$d/link", '... and the link is replaced by a file');
    symlink 'real', "$d/link2" or die;
    is(file_set_contents("$d/link2", 'same', { if_changed => 1, follow_symlinks => 1 }), 0,
       'with follow_symlinks the final file is compared: 0');
    ok(-l "$d/link2", '... link stays');
    no_temps('if_changed', $d);

    need_strace();
    spew("$d/f", $KiB64);
    my $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA, { if_changed => 1 })});
    is($t->{ret}, 0, 'traced, identical: returns 0');
    seq_is($t, [ LSTAT('D/f'), COMPARE('D/f') ], 'if_changed => 1, identical 64 KiB');
    push @TRACES_WITHOUT_FSYNC, [ 'if_changed identical', $t ];
    ok(!grep({ /^open\w*\(.*O_CREAT/ } @{ $t->{seq} }), 'identical: no open with O_CREAT');
    ok(!grep({ /^write\(/ } @{ $t->{seq} }), 'identical: no write');
    ok(!grep({ /^(?:rename|renameat2?|link|unlink)\(/ } @{ $t->{seq} }), 'identical: no rename, link or unlink');

    spew("$d/f", 'y' x 65536);
    $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA, { if_changed => 1 })});
    is($t->{ret}, 1, 'traced, same size different: returns 1');
    seq_is($t, [ LSTAT('D/f'), COMPARE('D/f'), PLAIN('D/f') ], 'if_changed => 1, changed, same size');
    push @TRACES_WITHOUT_FSYNC, [ 'if_changed same size', $t ];

    spew("$d/f", 'old');
    $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA, { if_changed => 1 })});
    seq_is($t, [ LSTAT('D/f'), PLAIN('D/f') ], 'if_changed => 1, changed, other size');
    push @TRACES_WITHOUT_FSYNC, [ 'if_changed other size', $t ];
};

# ================================================================ mkdir

subtest 'mkdir' => sub {
    my $d = newdir('mkdir');
    my ($r, $e, $n) = attempt(sub { file_set_contents("$d/a/b/f", 'x') });
    like($e, qr{^unable to open file '\Q$d\E/a/b/f\.tmp\.\d+' - No such file or directory\n\z},
         'without mkdir: open fails');
    is($n, ENOENT, 'without mkdir: $! is ENOENT');
    ok(!-e "$d/a", 'without mkdir: nothing created');

    is(file_set_contents("$d/a/b/c/f", 'deep', { mkdir => 1 }), 1, 'mkdir => 1 returns 1');
    is(slurp("$d/a/b/c/f"), 'deep', 'file written below the new directories');
    is(sprintf('%04o', mode_of("$d/$_")), '0755', "$_ made with 0777 & ~umask (022)")
        for qw(a a/b a/b/c);
    {
        my $old_umask = umask 027;
        file_set_contents("$d/u/v/f", 'x', { mkdir => 1, perm => 0600 });
        is(sprintf('%04o', mode_of("$d/$_")), '0750', "$_ made with 0777 & ~umask (027)") for qw(u u/v);
        is(sprintf('%04o', mode_of("$d/u/v/f")), '0600', 'the file gets perm');
        umask $old_umask;
    }
    is(file_set_contents("$d/a/b/c/f", 'again', { mkdir => 1 }), 1, 'existing directory: fine');
    is(slurp("$d/a/b/c/f"), 'again', 'existing directory: content');

    spew("$d/plain", 'file');
    ($r, $e, $n) = attempt(sub { file_set_contents("$d/plain/x/f", 'x', { mkdir => 1 }) });
    like($e, qr{^unable to open file '\Q$d\E/plain/x/f\.tmp\.\d+' - Not a directory\n\z},
         'a file in the way: ENOTDIR from open, no mkdir attempted');
    is(slurp("$d/plain"), 'file', 'the file in the way is untouched');

    my $rel = "$d/rel";
    mkdir $rel or die;
    {
        require Cwd;
        my $cwd = Cwd::getcwd();
        chdir $rel or die;
        my $ok = eval { file_set_contents('p/q/f', 'rel', { mkdir => 1 }) };
        chdir $cwd or die;
        is($ok, 1, 'relative path with mkdir');
        is(slurp("$rel/p/q/f"), 'rel', 'relative path: content');
    }
    no_temps('mkdir', $d);

    need_strace();
    my $t = traced(dir => $d, code => q{file_set_contents("$D/a/f", $DATA, { mkdir => 1 })});
    seq_is($t, [ PLAIN('D/a/f') ], 'mkdir => 1, directory exists');
    push @TRACES_WITHOUT_FSYNC, [ 'mkdir, dir exists', $t ];

    $t = traced(dir => $d, code => q{file_set_contents("$D/new/f", $DATA, { mkdir => 1 })});
    seq_is($t, [ T_ENOENT('D/new/f'), 'mkdir("D/new", 0777) = 0', PLAIN('D/new/f') ],
           'mkdir => 1, directory missing');
    push @TRACES_WITHOUT_FSYNC, [ 'mkdir, dir missing', $t ];

    $t = traced(dir => $d, code => q{file_set_contents("$D/n1/n2/f", $DATA, { mkdir => 1 })});
    seq_is($t, [ T_ENOENT('D/n1/n2/f'), 'mkdir("D/n1/n2", 0777) = -1 ENOENT', 'mkdir("D/n1", 0777) = 0',
                 'mkdir("D/n1/n2", 0777) = 0', PLAIN('D/n1/n2/f') ],
           'mkdir => 1, two directories missing');

    $t = traced(dir => $d, inject => ['mkdir:error=EROFS'],
                code => q{file_set_contents("$D/ro/f", $DATA, { mkdir => 1 })});
    is($t->{err}, "unable to create parent directories of '$d/ro/f' - Read-only file system\n",
       'mkdir EROFS: croak text');
    is($t->{errno}, EROFS, '$! is EROFS');
    ok(!-e "$d/ro", 'nothing created');
    no_temps('mkdir EROFS', $d);
    is_deeply($t->{seq}, [ T_ENOENT('D/ro/f'), 'mkdir("D/ro", 0777) = -1 EROFS (INJECTED)' ],
              'mkdir EROFS: stops there');
};

# ================================================================ follow_symlinks

subtest 'follow_symlinks' => sub {
    my $d = newdir('follow');
    mkdir "$d/sub" or die;
    mkdir "$d/links" or die;
    spew("$d/sub/real", 'old', 0600);
    symlink 'l2', "$d/l1" or die;                      # relative, same dir
    symlink 'sub/real', "$d/l2" or die;                # relative, into sub
    symlink '../sub/real', "$d/links/up" or die;       # relative to the link's dir, not the cwd
    symlink "$d/sub/real", "$d/abs" or die;            # absolute

    is(file_set_contents("$d/l1", 'via l1', { follow_symlinks => 1 }), 1, 'two hops: returns 1');
    is(slurp("$d/sub/real"), 'via l1', 'two hops: the final file has the data');
    is(readlink("$d/l1"), 'l2', 'l1 is still a link to l2');
    is(readlink("$d/l2"), 'sub/real', 'l2 is still a link to sub/real');
    is(sprintf('%04o', mode_of("$d/sub/real")), '0644', 'without preserve: perm applies to the new file');

    file_set_contents("$d/links/up", 'via up', { follow_symlinks => 1 });
    is(slurp("$d/sub/real"), 'via up', "'../sub/real' resolved against the link's directory");
    is(readlink("$d/links/up"), '../sub/real', 'link kept');
    ok(!-e "$d/../sub", 'nothing made relative to the wrong directory');

    file_set_contents("$d/abs", 'via abs', { follow_symlinks => 1 });
    is(slurp("$d/sub/real"), 'via abs', 'absolute link');
    ok(-l "$d/abs", 'absolute link kept');

    symlink 'sub/new', "$d/dangling" or die;
    is(file_set_contents("$d/dangling", 'created', { follow_symlinks => 1 }), 1, 'dangling: returns 1');
    is(slurp("$d/sub/new"), 'created', 'dangling link: the file it names is created');
    is(readlink("$d/dangling"), 'sub/new', 'dangling link kept');

    symlink 'loop2', "$d/loop1" or die;
    symlink 'loop1', "$d/loop2" or die;
    my ($r, $e, $n) = attempt(sub { file_set_contents("$d/loop1", 'x', { follow_symlinks => 1 }) });
    is($e, "unable to follow symlinks of '$d/loop1' - Too many levels of symbolic links\n", 'loop: croak text');
    is($n, ELOOP, 'loop: $! is ELOOP');
    is(readlink("$d/loop1"), 'loop2', 'loop: link untouched');

    # a chain of 40 links is followed, 41 is too many (as the kernel does)
    mkdir "$d/chain" or die;
    spew("$d/chain/end", 'end');
    my $prev = 'end';
    for my $i (1 .. 41) { symlink $prev, "$d/chain/c$i" or die; $prev = "c$i" }
    is(eval { file_set_contents("$d/chain/c40", '40 hops', { follow_symlinks => 1 }) }, 1,
       '40 links: followed') or diag($@);
    is(slurp("$d/chain/end"), '40 hops', '40 links: final file written');
    ($r, $e, $n) = attempt(sub { file_set_contents("$d/chain/c41", '41 hops', { follow_symlinks => 1 }) });
    is($e, "unable to follow symlinks of '$d/chain/c41' - Too many levels of symbolic links\n",
       '41 links: ELOOP');
    is($n, ELOOP, '41 links: $! is ELOOP');
    is(slurp("$d/chain/end"), '40 hops', '41 links: final file untouched');

    # default: the link itself is replaced
    spew("$d/sub/other", 'other');
    symlink 'sub/other', "$d/plainlink" or die;
    file_set_contents("$d/plainlink", 'replaced');
    ok(!-l "$d/plainlink" && -f _, 'default: the link became a regular file');
    is(slurp("$d/plainlink"), 'replaced', 'default: content');
    is(slurp("$d/sub/other"), 'other', 'default: the old link target untouched');
    file_set_contents("$d/sub/plainfile", 'p', { follow_symlinks => 1 });
    is(slurp("$d/sub/plainfile"), 'p', 'follow_symlinks on a path that is no link');
    no_temps('follow_symlinks', $d);

    need_strace();
    my $t = traced(dir => $d, code => q{file_set_contents("$D/l2", $DATA, { follow_symlinks => 1 })});
    seq_is($t, [ 'readlink("D/l2", "sub/real", 4096) = 8', STATDIR('D'),
                 'readlink("D/sub/real", PTR, 4096) = -1 EINVAL', PLAIN('D/sub/real') ],
           'follow_symlinks => 1 (one link)');
    push @TRACES_WITHOUT_FSYNC, [ 'follow_symlinks', $t ];
    ok(-l "$d/l2", 'traced: link kept');
    is(slurp("$d/sub/real"), $KiB64, 'traced: final file written');

    $t = traced(dir => $d, code => q{file_set_contents("$D/l1", $DATA, { follow_symlinks => 1 })});
    seq_is($t, [ 'readlink("D/l1", "l2", 4096) = 2', STATDIR('D'), 'readlink("D/l2", "sub/real", 4096) = 8',
                 STATDIR('D'), 'readlink("D/sub/real", PTR, 4096) = -1 EINVAL', PLAIN('D/sub/real') ],
           'follow_symlinks => 1 (two links, temp in the final directory)');

    $t = traced(dir => $d, code => q{file_set_contents("$D/sub/real", $DATA, { follow_symlinks => 1 })});
    seq_is($t, [ 'readlink("D/sub/real", PTR, 4096) = -1 EINVAL', PLAIN('D/sub/real') ],
           'follow_symlinks => 1 (no link)');
    no_temps('follow_symlinks traced', $d);
};

# ================================================================ noclobber

subtest 'noclobber' => sub {
    my $d = newdir('noclobber');
    is(file_set_contents("$d/f", 'first', { noclobber => 1 }), 1, 'missing target: returns 1');
    is(slurp("$d/f"), 'first', 'missing target: created');
    is(sprintf('%04o', mode_of("$d/f")), '0644', 'missing target: mode');

    my ($r, $e, $n) = attempt(sub { file_set_contents("$d/f", 'second', { noclobber => 1 }) });
    is($e, "close (rename) atomic file '$d/f' failed: File exists\n", 'existing target: croak text');
    is($n, EEXIST, 'existing target: $! is EEXIST');
    is(slurp("$d/f"), 'first', 'existing target: unchanged');
    no_temps('noclobber', $d);

    symlink 'nowhere', "$d/dangling" or die;
    ($r, $e, $n) = attempt(sub { file_set_contents("$d/dangling", 'x', { noclobber => 1 }) });
    is($n, EEXIST, 'a dangling symlink exists too: EEXIST');
    is(readlink("$d/dangling"), 'nowhere', 'dangling symlink untouched');
    ok(!-e "$d/nowhere", 'nothing created through it');
    no_temps('noclobber dangling', $d);

    need_strace();
    unlink "$d/f";
    my $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA, { noclobber => 1 })});
    seq_is($t, [ T_OPEN('D/f'), WRITE64, CLOSE, NOCLOBBER('D/f') ],
           $RENAMEAT2 ? 'noclobber => 1' : 'noclobber => 1 (no renameat2 in this build: link)');
    is((stat "$d/f")[3], 1, 'noclobber => 1: one link (no temp name left)');
    push @TRACES_WITHOUT_FSYNC, [ 'noclobber', $t ];

    $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA, { noclobber => 1 })});
    is($t->{err}, "close (rename) atomic file '$d/f' failed: File exists\n", 'traced existing: croak');
    seq_is($t, [ T_OPEN('D/f'), WRITE64, CLOSE, NOCLOBBER('D/f', '-1 EEXIST'), UNLINK('D/f') ],
           'noclobber => 1, target exists');

    # renameat2 unsupported: the link fallback (the only way in a build
    # without renameat2, traced above)
    for my $err ($RENAMEAT2 ? qw(EINVAL ENOSYS EOPNOTSUPP) : ()) {
        unlink "$d/f";
        $t = traced(dir => $d, inject => ["renameat2:error=$err"],
                    code => q{file_set_contents("$D/f", $DATA, { noclobber => 1 })});
        is($t->{err}, '', "renameat2 $err: no error");
        is(slurp("$d/f"), $KiB64, "renameat2 $err: file created by link");
        is((stat "$d/f")[3], 1, "renameat2 $err: one link left (temp name unlinked)");
        seq_is($t, [ T_OPEN('D/f'), WRITE64, CLOSE, NOREPL('D/f', "-1 $err (INJECTED)"),
                     LINK('D/f'), UNLINKAT('D/f') ],
               "noclobber => 1, renameat2 fails with $err (link fallback)");
        no_temps("renameat2 $err", $d);
    }

    # fallback with an existing target
    spew("$d/f", 'keep');
    $t = traced(dir => $d, inject => [ $RENAMEAT2 ? 'renameat2:error=EINVAL' : () ],
                code => q{file_set_contents("$D/f", $DATA, { noclobber => 1 })});
    is($t->{err}, "close (rename) atomic file '$d/f' failed: File exists\n", 'link fallback, target exists');
    is($t->{errno}, EEXIST, 'link fallback: $! is EEXIST');
    is(slurp("$d/f"), 'keep', 'link fallback: target unchanged');
    no_temps('link fallback exists', $d);

    # neither works
    unlink "$d/f";
    $t = traced(dir => $d, inject => [ ($RENAMEAT2 ? 'renameat2:error=EINVAL' : ()), 'linkat:error=EPERM' ],
                code => q{file_set_contents("$D/f", $DATA, { noclobber => 1 })});
    is($t->{err}, "noclobber is not supported by the filesystem of '$d/f' - Operation not permitted\n",
       'no renameat2, no link: croak text');
    is($t->{errno}, EPERM, '$! is EPERM');
    ok(!-e "$d/f", 'no target made');
    no_temps('noclobber unsupported', $d);
    seq_is($t, [ T_OPEN('D/f'), WRITE64, CLOSE, ($RENAMEAT2 ? NOREPL('D/f', '-1 EINVAL (INJECTED)') : ()),
                 LINK('D/f', '-1 EPERM (INJECTED)'), UNLINK('D/f') ],
           'noclobber => 1, neither renameat2 nor link');
};

# ================================================================ combinations

subtest 'fsync + preserve + if_changed' => sub {
    my $d = newdir('combo1');
    # root gives the old file to another user; anyone else keeps it
    my ($ou, $og) = $> == 0 ? (65534, 65534) : ($>, (split ' ', $))[0]);
    spew("$d/f", 'y' x 65536, 04750);
    chown $ou, $og, "$d/f" or die "chown: $!";
    chmod 04750, "$d/f";
    is(file_set_contents("$d/f", $KiB64, { fsync => 1, preserve => 1, if_changed => 1 }), 1,
       'changed: returns 1');
    is(slurp("$d/f"), $KiB64, 'changed: content');
    is(sprintf('%04o', mode_of("$d/f")), '4750', 'changed: mode kept');
    is(owner_of("$d/f"), "$ou:$og", 'changed: owner kept');
    my $ino = (stat "$d/f")[1];
    is(file_set_contents("$d/f", $KiB64, { fsync => 1, preserve => 1, if_changed => 1 }), 0,
       'unchanged: returns 0');
    is((stat "$d/f")[1], $ino, 'unchanged: not replaced');
    no_temps('combo1', $d);

    need_strace();
    spew("$d/f", 'y' x 65536, 0640);
    chown $ou, $og, "$d/f" or die "chown: $!";
    my @look = ("geteuid() = $>", $ou == $> ? () : 'newfstatat(AT_FDCWD, "D", {...}, 0) = 0');
    my $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA, { fsync => 1, preserve => 1, if_changed => 1 })});
    seq_is($t, [ LSTAT('D/f'), COMPARE('D/f', @look), @look, NOACL('D/f'), T_OPEN('D/f', '0600'), WRITE64, "fchown(FD, $ou, $og) = 0",
                 RMACL, 'fchmod(FD, 0640) = 0', 'fdatasync(FD) = 0', CLOSE, RENAME('D/f'), DIRSYNC('D') ],
           'fsync + preserve + if_changed, changed');
    is(scalar(grep { /^newfstatat\(AT_FDCWD, "D\/f"/ } @{ $t->{seq} }), 1, 'one lstat serves preserve and if_changed');

    $t = traced(dir => $d, code => q{file_set_contents("$D/f", $DATA, { fsync => 1, preserve => 1, if_changed => 1 })});
    is($t->{ret}, 0, 'traced unchanged: returns 0');
    seq_is($t, [ LSTAT('D/f'), COMPARE('D/f', @look) ], 'fsync + preserve + if_changed, unchanged');
    push @TRACES_WITHOUT_FSYNC, [ 'fsync+preserve+if_changed, unchanged (nothing to sync)', $t ];
};

subtest 'mkdir + follow_symlinks' => sub {
    my $d = newdir('combo2');
    symlink 'new/deep/f', "$d/l" or die;
    is(file_set_contents("$d/l", 'deep', { mkdir => 1, follow_symlinks => 1 }), 1, 'returns 1');
    is(slurp("$d/new/deep/f"), 'deep', 'the directories of the link target were made');
    is(readlink("$d/l"), 'new/deep/f', 'link kept');
    is(sprintf('%04o', mode_of("$d/new/deep")), '0755', 'directory mode');
    no_temps('combo2', $d);

    need_strace();
    symlink 'n2/n3/f', "$d/m" or die;
    my $t = traced(dir => $d, code => q{file_set_contents("$D/m", $DATA, { mkdir => 1, follow_symlinks => 1 })});
    seq_is($t, [ 'readlink("D/m", "n2/n3/f", 4096) = 7', STATDIR('D'), 'readlink("D/n2/n3/f", PTR, 4096) = -1 ENOENT',
                 T_ENOENT('D/n2/n3/f'), 'mkdir("D/n2/n3", 0777) = -1 ENOENT', 'mkdir("D/n2", 0777) = 0',
                 'mkdir("D/n2/n3", 0777) = 0', PLAIN('D/n2/n3/f') ], 'mkdir + follow_symlinks');
    push @TRACES_WITHOUT_FSYNC, [ 'mkdir+follow_symlinks', $t ];
    ok(-l "$d/m", 'traced: link kept');
};

subtest 'noclobber wins over if_changed' => sub {
    my $d = newdir('noclobber-if-changed');
    spew("$d/f", 'same', 0600);
    my $ok = eval { file_set_contents("$d/f", 'same', { noclobber => 1, if_changed => 1 }); 1 };
    my ($err, $errno) = ($@, $! + 0);
    ok(!$ok, 'identical content still fails: the target exists');
    is($err, "close (rename) atomic file '$d/f' failed: " . errno_text(EEXIST) . "\n", 'EEXIST text');
    is($errno, EEXIST, '$! is EEXIST');
    is(slurp("$d/f"), 'same', 'target untouched');
    no_temps('noclobber + if_changed', $d);
};

subtest 'noclobber + mkdir' => sub {
    my $d = newdir('combo3');
    is(file_set_contents("$d/a/b/f", 'one', { noclobber => 1, mkdir => 1 }), 1, 'missing dirs: returns 1');
    is(slurp("$d/a/b/f"), 'one', 'missing dirs: created');
    my ($r, $e, $n) = attempt(sub { file_set_contents("$d/a/b/f", 'two', { noclobber => 1, mkdir => 1 }) });
    is($e, "close (rename) atomic file '$d/a/b/f' failed: File exists\n", 'second time: EEXIST croak');
    is($n, EEXIST, '$! is EEXIST');
    is(slurp("$d/a/b/f"), 'one', 'second time: unchanged');
    no_temps('combo3', $d);

    need_strace();
    my $t = traced(dir => $d, code => q{file_set_contents("$D/c/f", $DATA, { noclobber => 1, mkdir => 1 })});
    seq_is($t, [ T_ENOENT('D/c/f'), 'mkdir("D/c", 0777) = 0', T_OPEN('D/c/f'), WRITE64, CLOSE,
                 NOCLOBBER('D/c/f') ], 'noclobber + mkdir');
    push @TRACES_WITHOUT_FSYNC, [ 'noclobber+mkdir', $t ];
};

# ================================================================ no fsync without fsync

subtest 'no fsync family without fsync' => sub {
    need_strace();
    ok(scalar(@TRACES_WITHOUT_FSYNC) >= 10, 'traces collected') or return;
    for my $c (@TRACES_WITHOUT_FSYNC) {
        my ($label, $t) = @$c;
        my @sync = grep { /^(?:fsync|fdatasync|sync|syncfs|sync_file_range|msync)\(/ } @{ $t->{calls} };
        ok(!@sync, "$label: no fsync, fdatasync, sync, syncfs, sync_file_range, msync")
            or diag("@sync");
    }
};

done_testing();
