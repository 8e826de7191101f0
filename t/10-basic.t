use strict;
use warnings;

use Test::More;
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in warnings_of);
use Reference qw(ref_bytes);
use Counted;    # Counted (tie), Str (overloaded)
use FastFile;

my $dir = tempdir();
my $file = "$dir/target";

my $all_bytes = join '', map { chr } 0 .. 255;
my $upgraded = $all_bytes;
utf8::upgrade($upgraded);
my $surrogate = do { no warnings 'surrogate'; "a\x{D800}b\x{DFFF}" };
my $nonchar = do { no warnings 'nonchar'; "\x{FFFE}\x{FDD0}\x{10FFFF}" };
my $big = $all_bytes x (8 * 4096);    # 8 MiB
my $big_wide = ("\x{263a}" . ('x' x 1021) . "\x{e9}\x{100}") x 4096;    # 4 MiB chars, wide

my @corpus = (
    [ 'empty', '' ],
    [ 'ASCII', "hello, world\n" ],
    [ 'all 256 byte values', $all_bytes ],
    [ 'upgraded Latin-1', $upgraded ],
    [ 'upgraded ASCII', do { my $x = "plain ascii"; utf8::upgrade($x); $x } ],
    [ 'wide characters', "a\x{263a}\x{e9}\x{1F600}z", 'wide' ],
    [ 'surrogates', $surrogate, 'wide' ],
    [ 'non-characters', $nonchar, 'wide' ],
    [ '8 MiB of bytes', $big ],
    [ '8 MiB wide string', $big_wide, 'wide' ],
    [ 'integer', 42 ],
    [ 'negative integer', -7 ],
    [ 'float', 1.5 ],
    [ 'computed float', 0.1 + 0.2 ],
    [ 'big float', 1e100 ],
    [ 'v-string', v1.22.333, 'wide' ],
    [ 'v-string, bytes', v1.22.255 ],
    [ 'dualvar ($! copy)', do { local $! = 2; my $x = $!; $x } ],
    [ 'glob', *STDOUT ],
    [ 'code ref', \&main::ok ],
);

for my $case (@corpus) {
    my ($name, $data, $wide) = @$case;
    for my $force (0, 1) {
        unlink $file;
        my $expect = ref_bytes($data, $force);
        my $ret;
        my @w = warnings_of { $ret = file_set_contents($file, $data, undef, $force) };
        ok($ret, "$name, force_utf8=$force: returns true");
        my $got = slurp($file);
        is(length $got, length $expect, "$name, force_utf8=$force: length");
        ok($got eq $expect, "$name, force_utf8=$force: bytes equal the reference");
        if ($wide && !$force) {
            is(scalar @w, 1, "$name, force_utf8=0: one warning");
            like($w[0], qr/^Wide character in file_set_contents at /, "$name: Wide character warning");
        } else {
            is(scalar @w, 0, "$name, force_utf8=$force: no warning") or diag(@w);
        }
    }
}

# explicit expectations, so the oracle itself is checked too
my @fixed = (
    [ "\x{e9}", "\xe9", "\xc3\xa9" ],
    [ do { my $x = "\x{e9}"; utf8::upgrade($x); $x }, "\xe9", "\xc3\xa9" ],
    [ "\x{263a}", "\xe2\x98\xba", "\xe2\x98\xba" ],
    [ $surrogate, "a\xed\xa0\x80b\xed\xbf\xbf", "a\xed\xa0\x80b\xed\xbf\xbf" ],
    [ 42, '42', '42' ],
    [ 1.5, '1.5', '1.5' ],
);
for my $f (@fixed) {
    my ($data, @want) = @$f;
    for my $force (0, 1) {
        my $label = sprintf 'fixed %s (%s), force_utf8=%d', join('.', map { sprintf '%x', ord } split //, $data),
            utf8::is_utf8($data) ? 'utf8' : 'bytes', $force;
        warnings_of { file_set_contents($file, $data, undef, $force) };
        is(unpack('H*', slurp($file)), unpack('H*', $want[$force]), $label);
        is(unpack('H*', ref_bytes($data, $force)), unpack('H*', $want[$force]), "$label (oracle)");
    }
}

# the oracle's force_utf8 is Encode's lax "utf8" (when Encode is there)
SKIP: {
    skip 'Encode not available (a core module: Debian\'s perl package has it)', 1 unless eval { require Encode; 1 };
    my @bad = grep { ref_bytes($_->[1], 1) ne Encode::encode('utf8', $_->[1]) } @corpus;
    is_deeply([ map { $_->[0] } @bad ], [], 'oracle force_utf8 bytes equal Encode::encode("utf8", ...)');
}

# data that must be stringified: tied scalar, overloaded object, reference
for my $force (0, 1) {
    tie my $tied, 'Counted', "tied \x{e9}\x{263a}";
    my @w = warnings_of { file_set_contents($file, $tied, undef, $force) };
    is((tied $tied)->{n}, 1, "tied data, force_utf8=$force: FETCH once");
    ok(!(tied $tied)->{stores}, "tied data, force_utf8=$force: no STORE");
    ok(slurp($file) eq ref_bytes("tied \x{e9}\x{263a}", $force), "tied data, force_utf8=$force: bytes");
    is(scalar @w, $force ? 0 : 1, "tied data, force_utf8=$force: warnings");

    for my $s ("obj \x{e9}", do { my $x = "obj \x{e9}"; utf8::upgrade($x); $x }, "obj \x{263a}") {
        my $obj = Str->new(s => $s);
        my @w = warnings_of { file_set_contents($file, $obj, undef, $force) };
        my $label = sprintf 'overloaded object (%s), force_utf8=%d', utf8::is_utf8($s) ? 'utf8' : 'bytes', $force;
        is($obj->{n}, 1, "$label: stringified once");
        ok(slurp($file) eq ref_bytes($s, $force), "$label: bytes");
    }

    my $ref = [1];
    file_set_contents($file, $ref, undef, $force);
    is(slurp($file), "$ref", "plain reference, force_utf8=$force: written as its string");
}

# undef data and missing data: empty file, uninitialized warning
for my $force (undef, 0, 1) {
    spew($file, 'old');
    my @w = warnings_of { file_set_contents($file, undef, undef, $force) };
    is(-s $file, 0, 'undef data, force_utf8=' . ($force // 'undef') . ': empty file');
    is(scalar @w, 1, '... one warning');
    like($w[0], qr/^Use of uninitialized value in file_set_contents at /, '... uninitialized');
}
{
    spew($file, 'old');
    my @w = warnings_of { file_set_contents($file) };
    is(-s $file, 0, 'no data argument: empty file');
    is(scalar @w, 1, '... one warning');
    like($w[0] // '', qr/^Use of uninitialized value in file_set_contents at /, '... uninitialized');
}

# permissions: missing/undef perm is 0644, filtered by the umask
{
    my $old_umask = umask;
    for my $umask (022, 077, 000) {
        umask $umask;
        for my $p ([ 'missing' ], [ 'undef', undef ], [ '0600', 0600 ], [ '0755', 0755 ], [ '0666', 0666 ],
                   [ '0', 0 ], [ '0640 as string', '416' ]) {
            my ($label, @perm) = @$p;
            my $want = (@perm && defined $perm[0] ? $perm[0] : 0644) & ~$umask;
            unlink $file;
            @perm ? file_set_contents($file, 'x', @perm) : file_set_contents($file, 'x');
            is(sprintf('%04o', (stat $file)[2] & 07777), sprintf('%04o', $want),
               sprintf('umask %03o, perm %s: mode', $umask, $label));
        }
        # perm is for the new file: replacing a file does not keep the old mode
        spew($file, 'old');
        chmod 0600, $file;
        file_set_contents($file, 'x');
        is(sprintf('%04o', (stat $file)[2] & 07777), sprintf('%04o', 0644 & ~$umask),
           sprintf('umask %03o: a replaced 0600 file gets the new mode', $umask));
    }
    umask $old_umask;
}

# replacing an existing file: new inode, new content
{
    spew($file, 'old content that is longer than the new one');
    my $ino = (stat $file)[1];
    ok(file_set_contents($file, 'new'), 'replace: returns true');
    is(slurp($file), 'new', 'replace: new content, old one fully gone');
    isnt((stat $file)[1], $ino, 'replace: a new inode (renamed into place, not rewritten)');
}

# a symlink at the target is replaced by a regular file; its target untouched
{
    my $link_target = "$dir/link-target";
    spew($link_target, 'link target content');
    unlink $file;
    symlink($link_target, $file) or die "symlink: $!";
    file_set_contents($file, 'through the link?');
    ok(!-l $file, 'symlink: target is no longer a symlink');
    ok(-f $file, 'symlink: target is a regular file');
    is(slurp($file), 'through the link?', 'symlink: new content');
    is(slurp($link_target), 'link target content', 'symlink: link target untouched');

    unlink $file;
    symlink("$dir/does-not-exist", $file) or die "symlink: $!";
    file_set_contents($file, 'dangling');
    ok(!-l $file && -f $file, 'dangling symlink replaced by a regular file');
    ok(!-e "$dir/does-not-exist", 'dangling symlink target not created');
}

# relative paths are relative to the current directory
{
    require POSIX;
    my $cwd = POSIX::getcwd();
    mkdir "$dir/sub" or die "mkdir: $!";
    chdir $dir or die "chdir: $!";
    my $ok = file_set_contents('rel.txt', 'relative');
    my $ok2 = file_set_contents('sub/../sub/rel2.txt', 'relative 2');
    chdir $cwd or die "chdir back: $!";
    ok($ok && $ok2, 'relative paths: true');
    is(slurp("$dir/rel.txt"), 'relative', 'relative path written in the cwd');
    is(slurp("$dir/sub/rel2.txt"), 'relative 2', 'relative path with components');
}

# the return value
{
    my @r = file_set_contents($file, 'list');
    is(scalar @r, 1, 'list context: one value');
    ok($r[0], '... true');
    my @args = ($file, 'from an array', 0600);
    ok(file_set_contents(@args), 'called with an array (no prototype)');
    is(slurp($file), 'from an array', '... content');
}

# file names are bytes, the way perl's own open sees them
{
    my $d1 = "$dir/open";
    my $d2 = "$dir/ffsc";
    mkdir $_ or die "mkdir $_: $!" for $d1, $d2;
    my @names = (
        [ 'wide chars', "caf\x{e9}-\x{263a}.txt", "caf\xc3\xa9-\xe2\x98\xba.txt" ],
        [ 'upgraded Latin-1', do { my $x = "\x{e9}t\x{e9}.txt"; utf8::upgrade($x); $x }, undef ],
        [ 'Latin-1 bytes', "\x{e9}t\x{e9}2.txt", "\xe9t\xe92.txt" ],
    );
    for my $n (@names) {
        my ($label, $name, $bytes) = @$n;
        {
            no warnings 'utf8';
            open my $fh, '>', "$d1/$name" or die "open: $!";
            close $fh;
        }
        ok(file_set_contents("$d2/$name", 'named'), "filename, $label: written");
    }
    my $list = sub { opendir my $dh, $_[0] or die; sort grep { !/^\./ } readdir $dh };
    my @want = $list->($d1);
    my @got = $list->($d2);
    is_deeply([ map { unpack 'H*', $_ } @got ], [ map { unpack 'H*', $_ } @want ],
              'file names are the same bytes perl\'s open uses');
    ok((grep { $_ eq $names[0][2] } @got), 'a UTF-8 flagged name is written as its UTF-8 bytes');
    ok((grep { $_ eq $names[2][2] } @got), 'a byte name is written as its bytes');
    is(slurp("$d2/$names[0][2]"), 'named', 'content under the UTF-8 name');
}

is_deeply([ temps_in($dir) ], [], 'no temp files left');

done_testing;
