#!perl
# Leaks (make xtest): Test::LeakTrace's no_leaks_ok over the success and the
# croak paths of every function -- SVs that outlive the call. Test::LeakTrace
# does not see C memory (paths strdup'd by ff_io.c, buffers from Newx), so
# each path is then run many times and the process must not grow: that
# catches malloc'd memory forgotten on a croak. (valgrind, with
# xt/tools/leakcheck.sh, says where; this says whether, in seconds.)
use strict;
use warnings;

# `make xtest` runs this without -Mblib: use the build in the tree if there is one
BEGIN { if (-d "blib/arch" && !grep { m{blib/arch} } @INC) { require blib; blib->import } }

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
BEGIN {
    eval { require Test::LeakTrace; Test::LeakTrace->import(qw(no_leaks_ok leaked_count)); 1 }
        or plan skip_all => 'Test::LeakTrace not installed (apt-get install libtest-leaktrace-perl)';
}
use File::Spec ();
use File::Temp ();
use Math::BigInt ();
use FastFile qw(:all);
use FastFile::Writer;

# tmpfs when there is one: thousands of renames (and fsyncs) need no disk
my $base = -d '/dev/shm' && -w _ && -x _ ? '/dev/shm' : File::Spec->tmpdir;
my $dir = File::Temp::tempdir('ffleak-XXXXXX', DIR => $base, CLEANUP => 1);
my $f = "$dir/file";
file_set_contents($f, "seed\n");
mkdir "$dir/isdir" or die;
mkdir "$dir/fulldir" or die;
file_set_contents("$dir/fulldir/x", "x");          # rename over a non-empty dir: EISDIR/ENOTEMPTY
symlink 'file', "$dir/link" or die;
file_set_contents("$dir/empty", '');
file_set_contents("$dir/big", 'b' x 5000);

# the warnings the calls emit on purpose are not the subject here
$SIG{__WARN__} = sub { };

{
    package Leak::Tie;
    sub TIESCALAR { my ($c, $v) = @_; bless \$v, $c }
    sub FETCH { ${ $_[0] } }
    sub STORE { ${ $_[0] } = $_[1] }
}
{
    package Leak::Dies;
    sub TIESCALAR { bless {}, $_[0] }
    sub FETCH { die "FETCH died\n" }
}
{
    package Leak::Str;
    use overload '""' => sub { ${ $_[0] } }, fallback => 1;
}

my $latin  = "caf\xe9 " x 100;
my $upg    = $latin;  utf8::upgrade($upg);
my $wide   = "\x{263a}\x{1F600} smile " x 100;
tie my $tied, 'Leak::Tie', "tied data\n";
tie my $dies, 'Leak::Dies';
my $obj = bless \(my $s = "overloaded\n"), 'Leak::Str';

# name => code; croaking ones are run inside eval
my @paths = (
    # file_set_contents, positional
    'fsc bytes'                  => sub { file_set_contents($f, "bytes\n") },
    'fsc empty data'             => sub { file_set_contents($f, '') },
    'fsc undef data (warns)'     => sub { file_set_contents($f, undef) },
    'fsc perm'                   => sub { file_set_contents($f, "x", 0600) },
    'fsc latin-1 as utf8 (copy)' => sub { file_set_contents($f, $latin, undef, 1) },
    'fsc upgraded -> latin-1 (copy)' => sub { file_set_contents($f, $upg) },
    'fsc upgraded + force_utf8'  => sub { file_set_contents($f, $upg, 0644, 1) },
    'fsc wide (warns)'           => sub { file_set_contents($f, $wide) },
    'fsc wide + force_utf8'      => sub { file_set_contents($f, $wide, 0644, 1) },
    'fsc tied data'              => sub { file_set_contents($f, $tied) },
    'fsc overloaded data'        => sub { file_set_contents($f, $obj) },
    'fsc number'                 => sub { file_set_contents($f, 42.5) },
    'fsc $\\ (writev)'            => sub { local $\ = "\n"; file_set_contents($f, "line") },
    'fsc $\\ upgraded (copy)'     => sub { local $\ = $upg; file_set_contents($f, "line") },
    'fsc string perm'            => sub { file_set_contents($f, "x", '384') },
    'fsc object perm'            => sub { file_set_contents($f, "x", Math::BigInt->new(0600)) },
    'fsc non-numeric perm (warns)' => sub { file_set_contents($f, "x", '384 rw') },
    'fsc temp name taken'        => sub { open my $h, '>', "$f.tmp.$$"; close $h;
                                          file_set_contents($f, "random\n"); unlink "$f.tmp.$$" },
    # options
    'fsc {perm, utf8}'           => sub { file_set_contents($f, $wide, { perm => 0640, utf8 => 1 }) },
    'fsc {fsync}'                => sub { file_set_contents($f, "sync\n", { fsync => 1 }) },
    'fsc {preserve}'             => sub { file_set_contents($f, "keep\n", { preserve => 1 }) },
    'fsc {if_changed} changed'   => sub { file_set_contents($f, "a\n"); file_set_contents($f, "b\n", { if_changed => 1 }) },
    'fsc {if_changed} same'      => sub { file_set_contents($f, "same\n", { if_changed => 1 }) },
    'fsc {mkdir}'                => sub { file_set_contents("$dir/m/n/o", "deep\n", { mkdir => 1 }) },
    'fsc {follow_symlinks}'      => sub { file_set_contents("$dir/link", "via link\n", { follow_symlinks => 1 }) },
    'fsc {noclobber} new'        => sub { unlink "$dir/nc"; file_set_contents("$dir/nc", "nc\n", { noclobber => 1 }) },
    # croaks
    'croak: undef name'          => sub { file_set_contents(undef, 'x') },
    'croak: empty name'          => sub { file_set_contents('', 'x') },
    'croak: NUL in name'         => sub { file_set_contents("$dir/a\0b", 'x') },
    'croak: open (no dir)'       => sub { file_set_contents("$dir/nodir/file", 'x') },
    'croak: open (wide copy)'    => sub { file_set_contents("$dir/nodir/file", $latin, 0644, 1) },
    'croak: rename (dir target)' => sub { file_set_contents("$dir/fulldir", 'x') },
    'croak: unknown option'      => sub { file_set_contents($f, 'x', { bogus => 1 }) },
    'croak: bad perm'            => sub { file_set_contents($f, 'x', { perm => 'rw' }) },
    'croak: force_utf8 + hash'   => sub { file_set_contents($f, 'x', { utf8 => 1 }, 1) },
    'croak: noclobber exists'    => sub { file_set_contents($f, 'x', { noclobber => 1 }) },
    'croak: mkdir fails'         => sub { file_set_contents("$f/sub/x", 'x', { mkdir => 1 }) },
    'croak: FETCH dies'          => sub { file_set_contents($f, $dies) },
    # file_set_contents_many
    'many'                       => sub { file_set_contents_many(["$dir/b1" => "x", "$dir/b2" => $latin, "$dir/m/b3" => $tied]) },
    'many {fsync, utf8}'         => sub { file_set_contents_many(["$dir/b1" => $wide, "$dir/b2" => $obj], { fsync => 1, utf8 => 1 }) },
    'many {if_changed, preserve}' => sub { file_set_contents_many(["$dir/b1" => "same", "$dir/b2" => "y"], { if_changed => 1, preserve => 1 }) },
    'many {mkdir} two dirs'      => sub { file_set_contents_many(["$dir/mm/x" => 1, "$dir/b1" => 2], { mkdir => 1 }) },
    'croak: many twice'          => sub { file_set_contents_many(["$dir/b1" => 1, "$dir/b1" => 2]) },
    'croak: many dir target'     => sub { file_set_contents_many(["$dir/b1" => 1, "$dir/isdir" => 2]) },
    'croak: many no dir'         => sub { file_set_contents_many(["$dir/b1" => 1, "$dir/nodir/x" => 2]) },
    'croak: many odd'            => sub { file_set_contents_many(["$dir/b1"]) },
    'croak: many FETCH dies'     => sub { file_set_contents_many(["$dir/b1" => 1, "$dir/b2" => $dies]) },
    'croak: many rename'         => sub { file_set_contents_many(["$dir/b1" => 1, "$dir/fulldir" => 2]) },
    # file_get_contents
    'fgc'                        => sub { file_get_contents($f) },
    'fgc max'                    => sub { file_get_contents("$dir/big", 10_000) },
    'fgc max nan'                => sub { file_get_contents("$dir/big", 'nan') },
    'fgc empty file'             => sub { file_get_contents("$dir/empty") },
    'fgc /proc (no size)'        => sub { file_get_contents('/proc/self/status') },
    'croak: fgc too long'        => sub { file_get_contents("$dir/big", 100) },
    'croak: fgc missing'         => sub { file_get_contents("$dir/missing") },
    'croak: fgc directory'       => sub { file_get_contents("$dir/isdir") },
    'croak: fgc undef name'      => sub { file_get_contents(undef) },
    # file_read_firstline
    'frf'                        => sub { file_read_firstline("$dir/big") },
    'frf missing (undef)'        => sub { file_read_firstline("$dir/missing") },
    'frf empty (undef)'          => sub { file_read_firstline("$dir/empty") },
    'frf directory (undef)'      => sub { file_read_firstline("$dir/isdir") },
    'frf $/ undef'               => sub { local $/; file_read_firstline("$dir/big") },
    'frf $/ paragraph'           => sub { local $/ = ''; file_read_firstline("$dir/big") },
    'frf $/ \\N'                 => sub { local $/ = \100; file_read_firstline("$dir/big") },
    'frf $/ string'              => sub { local $/ = 'xyz'; file_read_firstline("$dir/big") },
    'croak: frf $/ wide'         => sub { local $/ = "\x{263a}"; file_read_firstline("$dir/big") },
    'frf undef name (warns)'     => sub { file_read_firstline(undef) },
    'frf NUL (undef, ENOENT)'    => sub { file_read_firstline("a\0b") },
);
push @paths,
  'writer commit'            => sub { my $w = FastFile::Writer->new($f); $w->print("a", "b\n");
                                      $w->printf("%s\n", 'c'); $w->write("d\n"); $w->commit },
  'writer small buffer'      => sub { my $w = FastFile::Writer->new($f, { buffer_size => 16 });
                                      $w->print("x" x 100) for 1 .. 3; $w->commit },
  'writer utf8'              => sub { my $w = FastFile::Writer->new($f, { utf8 => 1 });
                                      $w->print($wide, $latin); $w->commit },
  'writer abort'             => sub { my $w = FastFile::Writer->new($f); $w->print("x"); $w->abort },
  'writer destroyed'         => sub { my $w = FastFile::Writer->new($f); $w->print("x") },
  'writer fh'                => sub { my $w = FastFile::Writer->new($f); my $fh = $w->fh;
                                      print {$fh} "via fh\n"; close $fh },
  'croak: writer new'        => sub { FastFile::Writer->new("$dir/nodir/f") },
  'croak: writer commit twice' => sub { my $w = FastFile::Writer->new($f); $w->commit; $w->commit },
  'croak: writer bad option' => sub { FastFile::Writer->new($f, { if_changed => 1 }) },
  'croak: writer rename'     => sub { my $w = FastFile::Writer->new("$dir/fulldir"); $w->print('x'); $w->commit };
# PVE::File's helpers (the handles they return closed with their scope)
file_set_contents("$dir/log", "first\n" . ('x' x 70_000) . "\nlast\n");
my $owned = 0;
push @paths,
  'last line'                => sub { file_read_last_line("$dir/log") },
  'last line, block doubled' => sub { file_read_last_line("$dir/big") },
  'last line missing (undef)' => sub { file_read_last_line("$dir/missing") },
  'last line empty file'     => sub { file_read_last_line("$dir/empty") },
  'croak: last line directory' => sub { file_read_last_line("$dir/isdir") },
  'croak: last line /proc'   => sub { file_read_last_line('/proc/self/status') },
  'tempfile'                 => sub { my $fh = tempfile(0600, dir => $dir) },
  'tempfile_contents'        => sub { my ($p, $fh) = tempfile_contents($latin, undef, dir => $dir) },
  'tempfile_contents wide $\\' => sub { local $\ = "\n"; my ($p, $fh) = tempfile_contents($wide, undef, dir => $dir) },
  'croak: tempfile no dir'   => sub { tempfile(undef, dir => "$dir/nodir") },
  'croak: tempfile_contents FETCH dies' => sub { tempfile_contents($dies, undef, dir => $dir) },
  'create_owned_file_fh'     => sub { my $fh = create_owned_file_fh("$dir/owned/" . ++$owned, $<) },
  'croak: create_owned exists' => sub { create_owned_file_fh($f, $<) },
  'croak: create_owned parent is a file' => sub { create_owned_file_fh("$f/x/y", $<) };

my %croaks;
for (my $i = 0; $i < @paths; $i += 2) {
    my ($name, $code) = @paths[$i, $i + 1];
    my $croaks = $name =~ /^croak:/;
    # make sure the path does what its name says before trusting "no leak"
    my $ok = eval { $code->(); 1 };
    if ($croaks) {
        ok !$ok, "$name: croaks" or next;
    } else {
        ok $ok, "$name: runs" or diag $@;
    }
    no_leaks_ok { eval { $code->() } } "$name: no SV leaked";
}

# C memory: run every path many times; the process must not keep growing
sub rss_kb {
    open my $fh, '<', '/proc/self/statm' or return;
    my (undef, $res) = split ' ', scalar <$fh>;
    return $res * 4;    # pages of 4 KiB
}
SKIP: {
    skip 'no /proc/self/statm', 1 unless defined rss_kb();
    my $N = $ENV{FASTFILE_LEAK_ITER} || 3000;
    my @grew;
    for (my $i = 0; $i < @paths; $i += 2) {
        my ($name, $code) = @paths[$i, $i + 1];
        eval { $code->() } for 1 .. 200;             # warm up: arenas, caches
        # a 32-byte leak per call would be ~100 KiB over 3000 calls; a
        # growth seen once is measured again over three times the calls:
        # the heap growing its top once (128 KiB) does not come back, a
        # leak grows with the calls
        my $grown;
        for my $calls ($N, 3 * $N) {
            my $before = rss_kb();
            eval { $code->() } for 1 .. $calls;
            $grown = rss_kb() - $before;
            last if $grown <= 64;
        }
        push @grew, "$name: +$grown KiB over " . 3 * $N . " calls" if $grown > 64;
    }
    is_deeply \@grew, [], 'no path grows the process (C heap included)'
        or diag join "\n", @grew;
}

done_testing;
