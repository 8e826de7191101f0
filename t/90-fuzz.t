#!perl
# Property tests, seeded and reproducible (FASTFILE_FUZZ_SEED=<n> replays a
# run; the seed is printed with note, and with diag when something fails).
# A plain run uses one fixed seed, the same cases every time; full testing
# (RELEASE_TESTING or AUTHOR_TESTING) a new seed each run and 10 times the cases.
#
# 1. 10,000 random strings -- bytes, Latin-1 and wide characters, surrogates,
#    non-characters, code points above Unicode; upgraded or downgraded; plain,
#    tied, overloaded, numbers or $1 (get-magic) -- written with force_utf8
#    0/1 (positional or the utf8 option): the file's bytes must equal the
#    reference's (Reference::ref_bytes: print into memory, or utf8::encode
#    with force_utf8), "Wide character" warned exactly when the reference warns,
#    FETCH/stringification run once, the caller's scalar left as it was.
# 2. Random option combinations (perm, umask, mkdir, if_changed, preserve,
#    fsync, utf8) checked against their documented effects: content, mode,
#    return value, inode kept or replaced, errors, no temp file.
use strict;
use warnings;

use Test::More;
use lib 't/lib';
use FFTest qw(temps_in slurp spew errno_text full_testing);
use Reference qw(ref_bytes);
use Counted;    # Counted (tie), Str (overloaded)
use Errno ();
use File::Spec ();
use File::Temp ();
use Time::HiRes qw(time);

use FastFile qw(:all);

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

my $SEED = $ENV{FASTFILE_FUZZ_SEED};
$SEED = full_testing() ? (time * 1000 ^ $$) % 2**31 : 20261201 unless defined $SEED && $SEED =~ /^\d+\z/;
srand $SEED;
note "fuzz seed: $SEED (FASTFILE_FUZZ_SEED=$SEED to replay)";

my $STRINGS = $ENV{FASTFILE_FUZZ_CASES} || (full_testing() ? 100_000 : 10_000);
my $COMBOS  = $ENV{FASTFILE_FUZZ_COMBOS} || (full_testing() ? 6_000 : 600);


# the bytes do not depend on the filesystem: tmpfs when there is one, so
# 10,000 renames do not wait for a disk's journal
my $base = -d '/dev/shm' && -w _ && -x _ ? '/dev/shm' : File::Spec->tmpdir;
my $dir = File::Temp::tempdir('ff90-XXXXXX', DIR => $base, CLEANUP => 1);
my $file = "$dir/fuzz";

# ------------------------------------------------------------ generators

my @RANGES = (    # [weight, lo, hi]
    [30, 0x20, 0x7e], [6, 0x00, 0x1f], [20, 0x80, 0xff], [15, 0x100, 0x7ff],
    [10, 0x800, 0xd7ff], [5, 0xd800, 0xdfff], [3, 0xfdd0, 0xfdef], [2, 0xfffe, 0xffff],
    [6, 0xe000, 0xfffd], [8, 0x10000, 0x10ffff], [1, 0x110000, 0x7fffffff],
);
my $WSUM = 0;
$WSUM += $_->[0] for @RANGES;

sub rand_char {
    my $w = rand $WSUM;
    for my $r (@RANGES) {
        return $r->[1] + int rand($r->[2] - $r->[1] + 1) if ($w -= $r->[0]) < 0;
    }
    return 0x41;
}

sub rand_len { my $r = rand; return $r < 0.05 ? 0 : $r < 0.7 ? int rand 40 : int rand 600 }

# a plain string (no magic); 2% are long (up to 200 KB: a random piece repeated)
sub rand_string {
    if (rand() < 0.02) {
        my $piece = rand_string();
        my $long = $piece x (1 + int rand(200_000 / (1 + length $piece)));
        return $long;
    }
    my $kind = int rand 4;
    my $len = rand_len();
    my $s;
    if ($kind == 0) {        # bytes
        $s = join '', map { chr int rand 256 } 1 .. $len;
    } elsif ($kind == 1) {   # Latin-1 only, then maybe upgraded
        $s = join '', map { chr int rand 256 } 1 .. $len;
        utf8::upgrade($s) if rand() < 0.5;
    } elsif ($kind == 2) {   # ASCII, upgraded (UTF8 flag, all invariant)
        $s = join '', map { chr(0x20 + int rand 95) } 1 .. $len;
        utf8::upgrade($s);
    } else {                 # any characters
        { no warnings qw(utf8 surrogate nonchar non_unicode);
          $s = join '', map { chr rand_char() } 1 .. $len; }
        utf8::downgrade($s, 1) if rand() < 0.3;   # a no-op when wide
    }
    return $s;
}

sub hexs { my $s = shift; $s = substr($s, 0, 40); utf8::encode($s) if utf8::is_utf8($s); unpack 'H*', $s }

# ------------------------------------------------------- 1. the bytes

my ($bad, @report) = (0);
my %seen;
my $t0 = time;
for my $i (1 .. $STRINGS) {
    my $plain = rand_string();
    my $force = rand() < 0.5 ? 1 : 0;
    my $how = rand;
    my ($arg, $tie, $obj, $label);
    if ($how < 0.70) {
        $label = 'plain';
        $arg = $plain;
    } elsif ($how < 0.80) {
        $label = 'tied';
        $tie = tie $arg, 'Counted', $plain;
    } elsif ($how < 0.88) {
        $label = 'overloaded';
        $obj = Str->new(s => $plain);
        $arg = $obj;
    } elsif ($how < 0.94) {
        $label = '$1';
        $plain =~ /\A(.*)\z/s or die 'no match';
        $arg = $1;    # copied below through @_ aliasing: the call sees $1 itself
    } else {
        $label = 'number';
        my @n = (0, 1, -1, 42, 3.5, -0.25, 1e21, 2**53, 0.1 + 0.2, 18446744073709551615, 1 / 7);
        $plain = $n[ int rand @n ];
        $arg = $plain;
        $plain = "$plain";
    }
    $seen{$label}++;
    my $was_utf8 = utf8::is_utf8($plain) ? 1 : 0;
    my $copy = $plain;
    my @warn;
    my $ok = do {
        local $SIG{__WARN__} = sub { push @warn, $_[0] };
        my $opt = rand() < 0.3;
        eval {
            if ($label eq '$1') {
                $plain =~ /\A(.*)\z/s;
                $opt ? file_set_contents($file, $1, { utf8 => $force })
                     : file_set_contents($file, $1, undef, $force);
            } else {
                $opt ? file_set_contents($file, $arg, { utf8 => $force })
                     : file_set_contents($file, $arg, undef, $force);
            }
        };
    };
    my @why;
    push @why, "died: $@" unless $ok;
    my $got = slurp($file);
    push @why, 'bytes differ from ref_bytes' unless defined $got && $got eq ref_bytes($plain, $force);
    my $wide = !$force && utf8::is_utf8($plain) && $plain =~ /[^\x00-\xff]/;
    my @wide = grep { /^Wide character in file_set_contents at / } @warn;
    push @why, 'Wide character warning ' . ($wide ? 'missing' : 'unexpected') if !!@wide != !!$wide;
    push @why, 'more than one warning' if @wide > 1;
    push @why, "other warnings: @warn" if @warn > @wide;
    push @why, "FETCH ran $tie->{n} times" if $tie && $tie->{n} != 1;
    push @why, 'STORE on the tied argument' if $tie && $tie->{stores};
    push @why, "stringified $obj->{n} times" if defined $obj && $obj->{n} != 1;
    push @why, 'the caller\'s string changed'
        if $plain ne $copy || (utf8::is_utf8($plain) ? 1 : 0) != $was_utf8;
    if (@why) {
        $bad++;
        push @report, sprintf "#%d %s force=%d utf8=%d len=%d start=%s: %s",
            $i, $label, $force, $was_utf8, length $plain, hexs($plain), join('; ', @why)
            if @report < 10;
    }
    if ($tie) { undef $tie; untie $arg }
}
my @t = temps_in($dir);
is $bad, 0, "$STRINGS random strings: bytes, warnings and magic as the reference"
    or diag join "\n", "seed $SEED", @report;
is_deeply \@t, [], 'no temp file left';
note sprintf 'kinds: %s; %.1f s', join(', ', map { "$_ $seen{$_}" } sort keys %seen), time - $t0;

# ------------------------------------------- 2. the options' documented effects

my ($cbad, @creport) = (0);
my %combo_seen;
my $umask_before = umask;
for my $i (1 .. $COMBOS) {
    my $sub = "$dir/opt$i";
    my %o;
    $o{perm}       = (undef, 0600, 0640, 0644, 0664, 0666, 0700, 0755, 0400)[int rand 9] if rand() < 0.6;
    $o{mkdir}      = int rand 2 if rand() < 0.5;
    $o{if_changed} = int rand 2 if rand() < 0.5;
    $o{preserve}   = int rand 2 if rand() < 0.5;
    $o{fsync}      = rand() < 0.1 ? 1 : 0 if rand() < 0.5;
    $o{utf8}       = int rand 2 if rand() < 0.5;
    my $umask = (022, 027, 002, 077, 0)[int rand 5];
    my $dir_exists = rand() < 0.7;
    my $old_exists = $dir_exists && rand() < 0.7;
    my $old_mode = (0600, 0640, 0644, 0604, 0660, 0755)[int rand 6];
    my $data = rand_string();
    my $bytes = ref_bytes($data, $o{utf8});
    my $same = $old_exists && rand() < 0.4;
    my $target = $dir_exists ? "$sub/f" : "$sub/new/f";
    mkdir $sub or die "mkdir $sub: $!";
    if ($old_exists) {
        spew($target, $same ? $bytes : "previous\n", $old_mode);
    }
    my @old_stat = $old_exists ? stat $target : ();
    $combo_seen{ join ',', map { "$_=" . ($o{$_} // 'undef') } sort keys %o }++;

    umask $umask;
    my (@warn, $ret, $err, $errno);
    {
        local $SIG{__WARN__} = sub { push @warn, $_[0] unless $_[0] =~ /^Wide character/ };
        $! = 0;
        $ret = eval { file_set_contents($target, $data, {%o}) };
        ($err, $errno) = ($@, $! + 0);
    }
    umask $umask_before;

    # what the documentation says must have happened
    my @why;
    my $perm = defined $o{perm} ? $o{perm} : 0644;
    if (!$dir_exists && !$o{mkdir}) {
        my $tmp = "$target.tmp.$$";
        my $text = "unable to open file '$tmp' - " . errno_text(Errno::ENOENT()) . "\n";
        push @why, "expected croak '$text', got " . ($err ? "'$err'" : 'success') if $err ne $text;
        push @why, "\$! $errno, not ENOENT" if $errno != Errno::ENOENT();
        push @why, 'target created' if -e $target;
    } elsif ($err) {
        push @why, "croaked: $err";
    } else {
        my $unchanged = $o{if_changed} && $same;
        my @st = stat $target;
        push @why, 'content' unless (slurp($target) // "\0undef") eq $bytes;
        push @why, "returned $ret, expected " . ($unchanged ? 0 : 1)
            unless defined $ret && $ret == ($unchanged ? 0 : 1);
        my $mode = $unchanged ? $old_mode
                 : $o{preserve} && $old_exists ? $old_mode
                 : $perm & ~$umask;
        push @why, sprintf('mode %04o, expected %04o', $st[2] & 07777, $mode)
            if ($st[2] & 07777) != $mode;
        if ($old_exists) {
            push @why, 'inode replaced though unchanged' if $unchanged && $st[1] != $old_stat[1];
            push @why, 'inode kept though rewritten' if !$unchanged && $st[1] == $old_stat[1];
        }
        if (!$dir_exists) {
            my $dmode = (stat "$sub/new")[2] & 07777;
            push @why, sprintf('mkdir made mode %04o, expected %04o', $dmode, 0777 & ~$umask)
                if $dmode != (0777 & ~$umask);
        }
    }
    push @why, "warnings: @warn" if @warn;
    my @left = map { temps_in($_) } grep { -d } $sub, "$sub/new";
    push @why, "temps left: @left" if @left;
    if (@why) {
        $cbad++;
        push @creport, sprintf '#%d %s umask=%03o dir=%d old=%d same=%d: %s', $i,
            join(',', map { "$_=" . (defined $o{$_} ? sprintf('%o', $o{$_}) : 'undef') } sort keys %o),
            $umask, $dir_exists ? 1 : 0, $old_exists ? 1 : 0, $same ? 1 : 0, join('; ', @why)
            if @creport < 10;
    }
}
is $cbad, 0, "$COMBOS random option combinations (" . scalar(keys %combo_seen)
    . ' distinct) have their documented effects'
    or diag join "\n", "seed $SEED", @creport;

note "fuzz: $STRINGS strings + $COMBOS option combinations, seed $SEED";
done_testing;
