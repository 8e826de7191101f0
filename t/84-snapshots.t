#!perl
# What is written is what was passed: one generated matrix (t/lib/SnapshotCases.pm)
# of API x kind of value x where user code runs x what it does. Each case ends
# with exactly the bytes passed at the call (or, where the handler dies, the
# old content), no temp file and no fd more.
#
# The warn and overload sites run in this process; the eintr site in child
# perls under strace, which fails every other write (or read) with EINTR and
# sends SIGALRM, so that the handler runs in the middle of the call: before
# each case the child lines its next syscall up with an interrupted one, and
# the case fails unless its handler ran. Without RELEASE_TESTING or
# AUTHOR_TESTING a fixed sample runs (every 5th case of each site).
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Config;
use Test::More;
use lib 't/lib';
use FFTest qw(strace_why strace_calls full_testing tempdir temps_in);
use SnapshotCases qw(case_names run_case);
use FastFile qw(file_set_contents file_set_contents_many);
use FastFile::Writer;

my @names = case_names();
my %by_site;
push @{ $by_site{ (split m{/}, $_)[2] } }, $_ for @names;
my @run;
for my $site (sort keys %by_site) {
    my $i = 0;
    push @run, grep { full_testing() || $i++ % 5 == 0 } @{ $by_site{$site} };
}
note(scalar(@names) . ' cases in the matrix, ' . scalar(@run) . ' run');

my $root = tempdir();
my $seq = 0;
sub fresh { my $d = "$root/" . ++$seq; mkdir $d or die "mkdir $d: $!"; return $d }

# ------------------------------------------------------------ in this process
for my $name (grep { !m{/eintr/} } @run) {
    is(run_case($name, fresh()), '', $name);
}

# The same tied scalar for three files of a batch: FETCH runs once for each,
# in order, and each file has the value its FETCH gave (each is a snapshot
# of its own; the read-only hold pointed all three into the one scalar's
# buffer, which each FETCH replaced).
{
    package Counting { sub TIESCALAR { bless { n => 0 }, shift } sub FETCH { 'value ' . ++$_[0]{n} . ' ' . ('x' x (1000 * $_[0]{n})) } }
    my $d = fresh();
    tie my $t, 'Counting';
    is(file_set_contents_many([ "$d/1", $t, "$d/2", $t, "$d/3", $t ]), 3, 'a batch of one tied scalar thrice: 3 written');
    for my $i (1 .. 3) {
        open my $fh, '<', "$d/$i" or die "$d/$i: $!";
        my $got = do { local $/; <$fh> };
        is($got, "value $i " . ('x' x (1000 * $i)), "... file $i has what FETCH $i gave");
    }
}

# An argument whose FETCH (or "" overload) frees the arguments after it: they
# are aliases of an array that it clears, and new SVs take their place. Each
# call still sees the values it was passed (before, file_set_contents read
# the freed data and perm: other bytes, mode 0; the writer's new was blessed
# into a class named by the overload's result).
{
    package FreeingTie { sub TIESCALAR { my ($c, $v, $code) = @_; bless { v => $v, code => $code }, $c } sub FETCH { $_[0]{code}->(); $_[0]{v} } }
    package FreeingName { use overload '""' => sub { $_[0]{code}->(); $_[0]{v} }; }
    my $d = fresh();
    our @store;
    my $churn = sub { @store = (); my @junk = map { "junk $_" . ('j' x 50) } 1 .. 200; return };
    my $data = 'data ' x 30;
    my $mode = sub { sprintf '%04o', (stat $_[0])[2] & 07777 };
    my $slurp = sub { open my $fh, '<', $_[0] or return "$_[0]: $!"; local $/; scalar <$fh> };

    @store = ($data, 0600);
    tie my $name, 'FreeingTie', "$d/fsc", $churn;
    eval { file_set_contents($name, $store[0], $store[1]) };
    is($slurp->("$d/fsc") . ' ' . $mode->("$d/fsc"), "$data 0600", 'a FETCH that frees the later arguments: file_set_contents writes them as passed');

    @store = (100);     # the file has 150 bytes
    tie $name, 'FreeingTie', "$d/fsc", $churn;
    like(eval { FastFile::file_get_contents($name, $store[0]); 'read' } // $@, qr/too long/, '... file_get_contents keeps to the max passed');

    @store = ({ perm => 0600 });
    tie my $list, 'FreeingTie', ["$d/batch", $data], $churn;
    eval { file_set_contents_many($list, $store[0]) };
    is($slurp->("$d/batch") . ' ' . $mode->("$d/batch"), "$data 0600", '... file_set_contents_many uses the options passed');

    # a batch's element whose FETCH clears, grows (moves) or replaces its array
    for my $how ('clear', 'grow', 'replace') {
        my @list = ("$d/a-$how", 'x', "$d/b-$how", "b $data");
        tie $list[1], 'FreeingTie', "a $data", $how eq 'clear' ? sub { @list = () }
            : $how eq 'grow' ? sub { push @list, ('g') x 10000 } : sub { @list = ("$d/c", 'c') };
        is(eval { file_set_contents_many(\@list) } // $@, 2, "... a batch's element's FETCH that ${how}s the array: 2 written");
        is(join('|', map { $slurp->("$d/$_-$how") } 'a', 'b'), "a $data|b $data", '... each file as passed');
    }

    @store = ('FastFile::Writer', { perm => 0600 });
    tie $name, 'FreeingTie', "$d/new", $churn;
    my $w = eval { FastFile::Writer::new($store[0], $name, $store[1]) };
    is(ref $w, 'FastFile::Writer', "... the writer's new: the class passed") or diag($@);
    $w->commit if ref $w eq 'FastFile::Writer';
    is($mode->("$d/new"), '0600', '... and the options passed');

    @store = ('FastFile::Writer', bless({ v => "$d/new2", code => $churn }, 'FreeingName'));
    $w = eval { FastFile::Writer::new(@store) };
    is(ref $w, 'FastFile::Writer', "... the writer's new, the name's \"\" frees the class") or diag($@);
    $w->commit if ref $w eq 'FastFile::Writer';
    is_deeply([temps_in($d)], [], '... no temp left');
}

# ------------------------------------------------------------ no copy

# The snapshot of a plain string shares its buffer: a 32 MiB string built by
# appending (perl's own sv_setsv would copy it: its allocation has slack)
# costs no memory, peak RSS (VmHWM, reset through /proc/self/clear_refs)
# says so; a string with an offset (OOK) is copied, as the POD says.
SKIP: {
    skip 'peak RSS is not the program\'s under ASan or valgrind', 5
        if $ENV{FASTFILE_SANITIZED} || $ENV{FASTFILE_LEAKCHECK};
    my $reset = sub { open my $fh, '>', '/proc/self/clear_refs' or return; print {$fh} "5"; close $fh };
    my $hwm = sub { open my $fh, '<', '/proc/self/status' or return; while (<$fh>) { return $1 if /^VmHWM:\s+(\d+)/ } return };
    skip 'no /proc/self/clear_refs or VmHWM', 5 unless $reset->() && defined $hwm->();
    my $d = fresh();
    my $size = 32 << 20;
    my $data = '';
    $data .= 'a' x (1 << 20) for 1 .. 32;
    file_set_contents("$d/f", 'warm');
    my %grew;
    for my $api (qw(file_set_contents write batch)) {
        $reset->();
        my $before = $hwm->();
        if ($api eq 'file_set_contents') { file_set_contents("$d/f", $data) }
        elsif ($api eq 'batch')          { file_set_contents_many(["$d/f", $data]) }
        else { my $w = FastFile::Writer->new("$d/f"); $w->write($data); $w->commit }
        $grew{$api} = $hwm->() - $before;
        ok($grew{$api} < 4096, "$api: a 32 MiB string built by appending is not copied")
            or diag("peak RSS grew by $grew{$api} KiB");
    }
    $data .= 'b';
    is(-s "$d/f", $size, '... the file has the bytes at the call; the caller appends after');
    substr($data, 0, 1, '');        # an offset: perl cannot share it
    $reset->();
    my $before = $hwm->();
    file_set_contents("$d/f", $data);
    ok($hwm->() - $before >= ($size >> 10) - 1024, 'a string with an offset is copied (documented)');
}

# ------------------------------------------------------------ under strace
my @eintr = grep { m{/eintr/} } @run;
SKIP: {
    skip 'strace: ' . strace_why(), scalar @eintr if strace_why();
    my $child = <<'PERL';
use SnapshotCases qw(run_case);
$SIG{ALRM} = 'IGNORE';
my ($call, $root, @names) = @ARGV;
my $n = 0;
my @out;
for my $name (@names) {
    my $d = "$root/" . ++$n;
    mkdir $d or die "mkdir $d: $!";
    # reads: every case reads $root/lines, the one path strace looks at
    my $sync_file = $call eq 'read' ? "$root/lines" : "$d/sync";
    if ($call eq 'read') { open my $fh, '>', $sync_file or die "$sync_file: $!"; print {$fh} "\n\nab\ncd\n\nef\n" x 2000; close $fh }
    my $sync;
    open($sync, '+<', $sync_file) or open($sync, '+>', $sync_file) or die "$sync_file: $!";
    # strace fails every other call: call until one fails, then one more,
    # which goes through; the case's next call is a failing one
    local $SnapshotCases::SYNC = sub {
        my $hit;
        local $SIG{ALRM} = sub { $hit = 1 };
        my $one = $call eq 'write'  ? sub { syswrite($sync, 's') }
                : $call eq 'writev' ? sub { syscall(20, fileno($sync), pack('pQ', 's', 1), 1) }  # x86_64
                :                     sub { sysread($sync, my $b, 1) };
        for (1 .. 3) {
            $one->();
            last if $hit;
        }
        $one->();
    };
    seek $sync, 0, 0;
    my $r = eval { run_case($name, $call eq 'read' ? $root : $d) } // "died: $@";
    close $sync;
    unlink $sync_file if $call ne 'read';
    push @out, "CASE $name\t$r";
}
print join("\n", @out), "\n";
PERL
    my @specs;
    # $\ is written with the data by one writev(2)
    my %groups = (write => [ grep { !/^(?:firstline|ors)/ } @eintr ], read => [ grep { /^firstline/ } @eintr ],
                  writev => [ grep { /^ors/ } @eintr ]);
    if ($Config{archname} !~ /^x86_64-linux/) {
        my $n = @{ delete $groups{writev} };
        SKIP: { skip 'the writev sync calls syscall 20, x86_64 Linux only', $n }
    }
    for my $call (sort keys %groups) {
        my @list = @{ $groups{$call} };
        # 2 children at most (strace_calls runs 2 at a time): each child's
        # start under strace costs as much as 10 cases
        my $per = @list > 60 ? int((@list + 1) / 2) : 60;
        while (my @part = splice @list, 0, $per) {
            my $dir = fresh();
            push @specs, { code => $child, args => [ $call, $dir, @part ], names => \@part,
                           trace => [$call], inject => ["$call:error=EINTR:signal=SIGALRM:when=1+2"],
                           ($call eq 'read' ? (paths => ["$dir/lines"]) : ()),
                           timeout => 300, attach => 1 };
        }
    }
    my @names_of = map { delete $_->{names} } @specs;
    # strace_calls' workers end with _exit: the temp dirs they make go
    # into ours, which this process removes
    my $res = do { local $ENV{TMPDIR} = $root; strace_calls(\@specs, jobs => 2) };
    for my $i (0 .. $#specs) {
        my %got = $res->[$i]{stdout} =~ /^CASE (\S+)\t(.*)$/mg;
        for my $name (@{ $names_of[$i] }) {
            is($got{$name} // "no result: $res->[$i]{err}", '', $name);
        }
    }
}

# One $data for 300 files of a batch: its buffer shared more often than
# perl's 255, the later files have the first snapshot that shares it. A
# warning's handler (the undef data of the last pair, after every snapshot)
# changes $data in place and frees it: every file still has what was passed.
{
    my $d = fresh();
    my $data = 'shared data ' . ('y' x 1000);
    my $want = $data;
    my $other = 'other data ' . ('z' x 1000);      # every third file: not the same buffer
    my %want = map { ($_ => $_ % 3 ? $want : $other) } 1 .. 300;
    my @list = map { ("$d/f$_", $_ % 3 ? $data : $other) } 1 .. 300;
    push @list, "$d/last", undef;
    my $warned = 0;
    local $SIG{__WARN__} = sub { $warned++; substr($data, 0, 6) = 'CHANGED'; $data .= 'more'; @list = (); undef $data };
    is(eval { no warnings 'void'; use warnings 'uninitialized'; file_set_contents_many(\@list) } // $@, 301,
       'one data for 300 files of a batch: 301 written');
    is($warned, 1, '... the handler ran');
    my @wrong = grep { my $f = "$d/f$_"; open my $fh, '<', $f or die "$f: $!"; local $/; <$fh> ne $want{$_} } 1 .. 300;
    is("@wrong", '', '... every file has the bytes passed, whatever the handler did to the data');
    is(join(',', temps_in($d)), '', '... no temp left');
}

done_testing();
