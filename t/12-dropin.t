use strict;
use warnings;

# Drop-in details a script swapping the reference for FastFile would notice:
# extra arguments, $\, warnings under FATAL, the caller's scalars left as
# they were (JSON encoders see the same types), objects as perm. Compared
# with the pure-Perl reference writer (t/lib/Reference.pm) where it applies.

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use B ();
use Errno qw(ENOENT);
use JSON::PP ();
use Math::BigInt;
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in warnings_of errno_text);
use Reference qw(ref_file_set_contents ref_bytes ref_read_firstline ref_get_contents);
use FastFile qw(:all);
use FastFile::Writer;

my $dir = tempdir();
my $file = "$dir/target";
my $reffile = "$dir/reference";
umask 022;

sub mode_of { return (stat $_[0])[2] & 07777 }

# ------------------------------------------------- item 2: extra arguments

{
    ok(eval { file_set_contents($file, "five\n", 0600, 0, 'extra', 'more'); 1 },
       'file_set_contents ignores extra arguments') or diag($@);
    ref_file_set_contents($reffile, "five\n", 0600, 0, 'extra', 'more');
    is(slurp($file), slurp($reffile), '... same bytes as the reference');
    is(mode_of($file), mode_of($reffile), '... same mode as the reference');
    is(eval { file_get_contents($file, 100, 'extra') }, "five\n", 'file_get_contents ignores extra arguments')
        or diag($@);
    is(eval { file_read_firstline($file, 'extra', 'more') }, 'five', 'file_read_firstline ignores extra arguments')
        or diag($@);
}

# ------------------------------------------------- item 3: $\

{
    my $latin1 = "caf\x{e9}";
    utf8::upgrade($latin1);
    my @data = ([ 'empty', '' ], [ 'ASCII', "line" ], [ 'bytes', "\xff\x00\x80" ],
                [ 'upgraded Latin-1', $latin1 ], [ 'wide', "\x{263a}x" ], [ 'undef', undef ],
                [ 'integer', 42 ]);
    my @ors = ([ '"\n"', "\n" ], [ '"XY"', 'XY' ], [ 'upgraded "\xe9"', do { my $e = "\x{e9}"; utf8::upgrade($e); $e } ],
               [ 'wide "\x{263a}"', "\x{263a}" ], [ "''", '' ], [ '"0"', '0' ]);
    for my $d (@data) {
        for my $o (@ors) {
            for my $force (0, 1) {
                my ($dl, $data) = @$d;
                my ($ol, $ors) = @$o;
                my $label = "\$\\ = $ol, $dl data, force_utf8 $force";
                my (@w, @rw);
                {
                    local $\ = $ors;
                    @w = warnings_of { file_set_contents($file, $data, 0644, $force) };
                    @rw = warnings_of { ref_file_set_contents($reffile, $data, 0644, $force) };
                }
                is(unpack('H*', slurp($file)), unpack('H*', slurp($reffile)), "$label: same bytes as the reference");
                is(scalar(grep { /^Wide character/ } @w) ? 1 : 0, scalar(grep { /^Wide character/ } @rw) ? 1 : 0,
                   "$label: warns for wide characters like the reference");
            }
        }
    }
    {
        local $\ = "\n";
        file_set_contents($file, 'abc');
        is(slurp($file), "abc\n", '$\ = "\n": appended (perl -l)');
        file_set_contents($file, '');
        is(slurp($file), "\n", '$\ = "\n": empty data writes the separator');
        file_set_contents($file, 'abc', 0644, 1);
        is(slurp($file), 'abc', '$\ = "\n", force_utf8: not appended');
        file_set_contents($file, 'abc', { utf8 => 1 });
        is(slurp($file), 'abc', '$\ = "\n", options utf8: not appended');
        file_set_contents($file, 'abc', {});
        is(slurp($file), "abc\n", '$\ = "\n", options hash: appended');
        is(file_set_contents($file, 'abc', { if_changed => 1 }), 0, 'if_changed compares data and $\ together');
        is(file_set_contents($file, 'abd', { if_changed => 1 }), 1, '... and sees a change');
        is(slurp($file), "abd\n", '... written with $\ ');
    }
    # a handler that replaces $\ while the write is in progress cannot free
    # the separator being written
    {
        my $big = 'b' x (8 << 20);
        local $\ = "END";
        local $SIG{ALRM} = sub { $\ = 'changed' x 1000 };
        require Time::HiRes;
        Time::HiRes::ualarm(500);
        file_set_contents($file, $big);
        Time::HiRes::ualarm(0);
        my $got = slurp($file);
        ok($got eq "${big}END", '$\ changed by a handler during the call: the one at the call is written');
    }
    is(file_set_contents($file, 'no separator'), 1, '$\ undef again');
    is(slurp($file), 'no separator', '... nothing appended');
}

# ------------------------------------------------- item 4: warnings never fatal

{
    my ($line, $ok, @w);
    spew($file, 'old');
    $ok = eval {
        use warnings FATAL => 'all';
        @w = warnings_of { $line = __LINE__; file_set_contents($file, 'new', 'rw') };
        1;
    };
    ok($ok, 'FATAL all: a non-numeric perm does not die') or diag($@);
    is_deeply(\@w, [qq{Argument "rw" isn't numeric in file_set_contents at $0 line $line.\n}],
              'FATAL all: the numeric warning is given');
    is(mode_of($file), 0, 'FATAL all: mode 0, as "rw" numifies to 0 for the reference');
    chmod 0600, $file or die "chmod: $!";    # mode 0 stops its non-root owner reading it
    is(slurp($file), 'new', '... and written');
    unlink $file;
    @w = warnings_of { no warnings 'numeric'; file_set_contents($file, 'new', '384 (rw-------)') };
    is_deeply(\@w, [], 'no warnings "numeric": silent');
    is(sprintf('%04o', mode_of($file)), '0600', '"384 (rw-------)" numifies to its numeric prefix, as perl does');

    spew($file, "0123456789");
    my $got;
    $ok = eval {
        use warnings FATAL => 'all';
        @w = warnings_of { $line = __LINE__; $got = file_get_contents($file, '20 bytes') };
        1;
    };
    ok($ok, 'FATAL all: a non-numeric max does not die') or diag($@);
    is($got, '0123456789', '... and uses its numeric prefix (20)');
    is_deeply(\@w, [qq{Argument "20 bytes" isn't numeric in file_get_contents at $0 line $line.\n}],
              'FATAL all: the numeric warning is given');
    @w = warnings_of { use warnings FATAL => 'all'; no warnings 'numeric'; file_get_contents($file, '20 bytes') };
    is_deeply(\@w, [], 'FATAL all, then no warnings "numeric": a non-numeric max is silent');

    my $path = "$dir/nul\0byte";
    (my $shown = $path) =~ s/\0/\\0/g;
    # the calls are compiled in the scope whose warnings they get
    for my $call ([ 'file_set_contents', 'file_set_contents($path, "x")', "unable to open file '$path.tmp.$$' - " ],
                  [ 'file_get_contents', 'file_get_contents($path)', "can't open '$path' - " ],
                  [ 'file_read_firstline', 'file_read_firstline($path)', undef ],
                  [ 'FastFile::Writer->new', 'FastFile::Writer->new($path)', "unable to open file '$path.tmp.$$' - " ]) {
        my ($name, $code, $text) = @$call;
        my $err;
        @w = warnings_of { eval "use warnings FATAL => 'all'; $code; 1" or $err = $@ };
        is($err, defined $text ? $text . errno_text(ENOENT) . "\n" : undef,
           "FATAL all, NUL in path, $name: " . (defined $text ? 'its own error text' : 'undef, no error'));
        s/\0/\\0/g for @w;
        is(scalar @w, 1, "FATAL all, NUL in path, $name: one warning");
        like($w[0] // '', qr/^Invalid \\0 character in pathname for \Q$name: $shown\E at \(eval \d+\) line 1\.\n\z/,
             "FATAL all, NUL in path, $name: the syscalls warning is given");
        @w = warnings_of { eval "use warnings FATAL => 'all'; no warnings 'syscalls'; $code; 1" };
        is_deeply(\@w, [], "no warnings 'syscalls', NUL in path, $name: silent");
    }
    is_deeply([ temps_in($dir) ], [], 'no temp files');
}

# ------------------------------------------------- item 5: the caller's scalars

# what the JSON encoders see, and perl's own flags (SVf_/SVp_ IOK NOK POK)
my @ENCODERS = (JSON::PP->new->allow_nonref->canonical);
push @ENCODERS, JSON::XS->new->allow_nonref->canonical if eval { require JSON::XS; 1 };
my $TYPE_FLAGS = B::SVf_IOK | B::SVf_NOK | B::SVf_POK | B::SVp_IOK | B::SVp_NOK | B::SVp_POK;
sub looks { my $f = B::svref_2object(\$_[0])->FLAGS & $TYPE_FLAGS; return join ' ', $f, map { $_->encode($_[0]) } @ENCODERS }

SKIP: {
    skip 'JSON::XS not installed (apt-get install libjson-xs-perl): checked with JSON::PP only', 1 if @ENCODERS < 2;
    pass('checked with JSON::PP and JSON::XS');
}

{
    chdir $dir or die "chdir: $!";
    my @calls = (
        # name, the argument's value, code that passes it ($_[0] is an alias)
        [ 'file_set_contents filename', 42, sub { file_set_contents($_[0], 'x') } ],
        [ 'file_set_contents filename (float)', 1.5, sub { file_set_contents($_[0], 'x') } ],
        [ 'file_set_contents data', 42, sub { file_set_contents($file, $_[0]) } ],
        [ 'file_set_contents data (float)', 0.5, sub { file_set_contents($file, $_[0]) } ],
        [ 'file_set_contents data (negative)', -7, sub { file_set_contents($file, $_[0], 0644, 1) } ],
        [ 'file_set_contents perm (string)', '384', sub { file_set_contents($file, 'x', $_[0]) } ],
        [ 'file_set_contents perm (integer)', 384, sub { file_set_contents($file, 'x', $_[0]) } ],
        [ 'file_set_contents perm (float)', 384.0, sub { file_set_contents($file, 'x', $_[0]) } ],
        [ 'file_set_contents force_utf8 (string)', '1', sub { file_set_contents($file, 'x', 0644, $_[0]) } ],
        [ 'file_set_contents force_utf8 (integer)', 1, sub { file_set_contents($file, 'x', 0644, $_[0]) } ],
        [ 'file_set_contents options perm (string)', '384', sub { file_set_contents($file, 'x', { perm => $_[0] }) } ],
        [ 'file_get_contents filename', 42, sub { file_get_contents($_[0]) } ],
        [ 'file_get_contents max (string)', '100', sub { file_get_contents($file, $_[0]) } ],
        [ 'file_get_contents max (integer)', 100, sub { file_get_contents($file, $_[0]) } ],
        [ 'file_read_firstline filename', 42, sub { file_read_firstline($_[0]) } ],
        [ 'Writer->new filename', 42, sub { FastFile::Writer->new($_[0])->commit } ],
        [ 'Writer->new options buffer_size (string)', '4096', sub { FastFile::Writer->new($file, { buffer_size => $_[0] })->commit } ],
        [ 'Writer print', 42, sub { my $w = FastFile::Writer->new($file); $w->print($_[0]); $w->commit } ],
        [ 'Writer write', 42, sub { my $w = FastFile::Writer->new($file); $w->write($_[0]); $w->commit } ],
        [ 'Writer printf format', 42, sub { my $w = FastFile::Writer->new($file); $w->printf($_[0]); $w->commit } ],
        [ 'Writer printf %d of a string', '42', sub { my $w = FastFile::Writer->new($file); $w->printf('%d', $_[0]); $w->commit } ],
        [ 'Writer printf %s of a number', 42, sub { my $w = FastFile::Writer->new($file); $w->printf('%s', $_[0]); $w->commit } ],
    );
    for my $c (@calls) {
        my ($name, $value, $code) = @$c;
        my $arg = $value;
        my $before = looks($arg);
        ok(eval { $code->($arg); 1 }, "$name: the call works") or diag($@);
        is(looks($arg), $before, "$name: flags and JSON the same after the call ($before)");
    }
    # option values: the caller's hash is not changed either
    my %o = (perm => '384');
    my $before = looks($o{perm});
    file_set_contents($file, 'x', \%o);
    is(looks($o{perm}), $before, "options hash perm '384': the hash value is the same after the call");
    %o = (buffer_size => '4096', perm => '384');
    my @before = map { looks($_) } @o{qw(buffer_size perm)};
    FastFile::Writer->new($file, \%o)->commit;
    is_deeply([ map { looks($_) } @o{qw(buffer_size perm)} ], \@before,
              "Writer options buffer_size and perm '4096', '384': the hash values are the same after the call");
    unlink '42', '1.5';
    chdir '/' or die;
}

# ------------------------------------------------- item 7: objects as perm

{
    unlink $file, $reffile;
    my $perm = Math::BigInt->new(0600);
    ok(eval { file_set_contents($file, 'big', $perm); 1 }, 'a Math::BigInt perm is a number, not options')
        or diag($@);
    ref_file_set_contents($reffile, 'big', $perm);
    is(sprintf('%04o', mode_of($file)), '0600', '... mode 0600');
    is(mode_of($file), mode_of($reffile), '... as the reference');
    {
        package Mode;
        use overload '0+' => sub { $_[0]{mode} }, fallback => 1;
    }
    my $obj = bless { mode => 0640, inner => 'key' }, 'Mode';
    unlink $file;
    ok(eval { file_set_contents($file, 'obj', $obj); 1 }, 'a blessed hash with 0+ is a number, not options')
        or diag($@);
    is(sprintf('%04o', mode_of($file)), '0640', '... mode 0640');
    ok(!eval { file_set_contents($file, 'obj', { inner => 'key' }); 1 }, 'an unblessed hash still is options');
    like($@, qr/^unknown option 'inner'/, '... and croaks for an unknown key');
}

# ------------------------------------------------- $! after a successful call

# The reference leaves its sysopen's ENOTTY (perl asks isatty), cleared by
# its syswrite when there are bytes; a command that later dies exits with
# $! as its status, so a stale value there changes it.
{
    my %setup = (
        fresh    => sub { unlink $_[0] },
        existing => sub { unlink $_[0]; spew($_[0], 'old') },
        foreign  => sub { unlink $_[0]; spew("$_[0].tmp.$$", 'another writer') },
    );
    for my $case (sort keys %setup) {
        for my $data ('data', '') {
            for my $perm (undef, 0600) {
                my $what = "$case file, " . ($data eq '' ? 'empty data' : 'data')
                         . (defined $perm ? ', a perm' : '');
                my %errno;
                for my $impl ([ff => \&file_set_contents, $file], [ref => \&ref_file_set_contents, $reffile]) {
                    my ($name, $sub, $f) = @$impl;
                    $setup{$case}->($f);
                    $! = Errno::ENOENT();
                    $sub->($f, $data, $perm);
                    $errno{$name} = $! + 0;
                    unlink "$f.tmp.$$";
                }
                is($errno{ff}, $errno{ref}, "\$! after success, $what: as the reference ($errno{ref})");
            }
        }
    }
    for my $data ('data', '') {
        $! = Errno::ENOENT();
        file_set_contents($file, $data, { perm => 0600, fsync => 1 });
        is($! + 0, $data eq '' ? Errno::ENOTTY() : 0, "\$! after success with options, "
           . ($data eq '' ? 'empty data' : 'data') . ': as without them');
    }
    for my $content ("line\n", "line", "a\n\nb", "") {
        for my $rs ("\n", undef, \3, '', 'zz') {
            local $/ = $rs;
            spew($file, $content);
            $! = Errno::ENOENT(); ref_read_firstline($file); my $want = $! + 0;
            $! = Errno::ENOENT(); file_read_firstline($file);
            is($! + 0, $want, sprintf "\$! after file_read_firstline of %s with \$/ = %s: as the reference (%d)",
               B::perlstring($content), defined $rs ? (ref $rs ? '\3' : B::perlstring($rs)) : 'undef', $want);
        }
    }
    spew($file, "line\n");
    for my $impl ([file_read_firstline => \&file_read_firstline, \&ref_read_firstline],
                  [file_get_contents => \&file_get_contents, \&ref_get_contents]) {
        my ($name, $ff, $ref) = @$impl;
        $! = Errno::ENOENT(); $ref->($file); my $want = $! + 0;
        $! = Errno::ENOENT(); $ff->($file);
        is($! + 0, $want, "\$! after a successful $name: as the reference ($want)");
    }
}

# ------------------------------------------------- file_read_firstline's edges

{
    my $got;
    my @w = warnings_of { $got = eval { file_read_firstline() } };
    is($@, '', 'file_read_firstline() without an argument: no croak');
    is($got, undef, '... undef, as the reference');
    like($w[0] // '', qr/^Use of uninitialized value/, '... with the warning the reference gives too');
    # the reference chomps only a true record: "0" keeps its separator
    spew($file, "0ab");
    for my $rs ("0", "\n", "b") {
        local $/ = $rs;
        is(file_read_firstline($file), ref_read_firstline($file), "a first record around \"0\" with \$/ = '$rs': as the reference");
    }
}

is_deeply([ temps_in($dir) ], [], 'no temp files left');

done_testing;
