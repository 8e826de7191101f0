#!perl
# The attacker is a real second user: root writes and reads (the victim),
# uid 65534 (a forked child after setgid/setuid) attacks, in a sticky
# world-writable directory (01777) and in the victim's own directory (0755),
# with fs.protected_symlinks 0 and 1 (set here, restored in END and on
# signals). For every API (file_set_contents with each option, the writer,
# the batch, the readers) the attacker:
#   - plants a symlink or a FIFO at the temp name, at the target, at a
#     parent directory, before the call;
#   - during a call held open by strace (delay_enter on the temp's write,
#     or its open): opens the temp and reads it after the commit, swaps
#     symlinks and FIFOs in at the target and the temp name (only while the
#     victim is inside the held syscall, the times checked against
#     strace's), swaps a parent directory.
# Each case ends with the victim's files as intended, nothing readable that
# the final mode would not allow, nothing outside the target's directory
# written (a root file elsewhere, the attacker's symlinks' target, stays as
# it was), no temp of the victim's left. In a sticky group-writable
# directory (01770 of the attacker's group) the attacker, a member, plants
# the file that preserve and if_changed must not trust. The number of cases
# is printed.
# Without RELEASE_TESTING or AUTHOR_TESTING (FFTest::full_testing) the
# planted cases run in full and the held-open ones as a fixed sample.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use lib 't/lib';
use FFTest qw(slurp spew temps_in errno_text strace_why strace_call full_testing);
use Errno ();
use Fcntl ();
use File::Temp ();
use POSIX ();
use Time::HiRes ();

use FastFile qw(:all);
use FastFile::Writer;

plan skip_all => 'needs root: the victim is root, the attacker uid 65534 (setuid in a forked child)'
    if $> != 0;

my ($NOBODY, $NOGROUP) = (65534, 65534);
my $SYSCTL = '/proc/sys/fs/protected_symlinks';
# The sysctl is the machine's: another run of this test at the same time
# (another checkout, make test -j) would flip it under our cases. flock on
# the sysctl file itself serialises the runs and leaves no lock file.
open my $SYSCTL_LOCK, '<', $SYSCTL or plan skip_all => "no $SYSCTL: $!";
flock $SYSCTL_LOCK, Fcntl::LOCK_EX() or plan skip_all => "cannot lock $SYSCTL: $!";
my $SYSCTL_WAS = slurp($SYSCTL);
chomp $SYSCTL_WAS if defined $SYSCTL_WAS;

# fs.protected_symlinks back as it was, however the test ends
sub restore_sysctl {
    return unless defined $SYSCTL_WAS;
    if (open my $fh, '>', $SYSCTL) { print {$fh} "$SYSCTL_WAS\n"; close $fh }
}
END { restore_sysctl() }
$SIG{$_} = sub { restore_sysctl(); exit 1 } for qw(INT TERM HUP QUIT);    # END cleans up

sub set_sysctl {
    my ($v) = @_;
    open my $fh, '>', $SYSCTL or return 0;
    print {$fh} "$v\n";
    close $fh or return 0;
    chomp(my $now = slurp($SYSCTL) // '');
    return $now eq $v;
}

umask 022;
my $ROOT = File::Temp::tempdir('ff96-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $ROOT or die "chmod $ROOT: $!";    # the attacker must get through it

my $CASES = 0;
my $FULL = full_testing();
my $SECRET = "new secret\n";

# ----------------------------------------------------------------- helpers

my $n_case = 0;
# A fresh case: sticky (01777), sticky-group (01770, the attacker's group:
# fs.protected_regular=2's kind) or own (0755) directory, and an outside
# directory with a root-only file the attacker would like written.
sub new_case {
    my ($where) = @_;
    my $c = "$ROOT/case" . ++$n_case;
    mkdir $c or die "mkdir $c: $!";
    chmod 0755, $c or die;
    my $d = "$c/dir";
    mkdir $d or die;
    chmod $where eq 'sticky' ? 01777 : $where eq 'sticky-group' ? 01770 : 0755, $d or die;
    chown 0, $NOGROUP, $d or die "chown $d: $!" if $where eq 'sticky-group';    # the attacker's group
    mkdir "$c/outside" or die;
    chmod 0755, "$c/outside" or die;
    spew("$c/outside/precious", "precious\n", 0600);
    return { root => $c, dir => $d, outside => "$c/outside", where => $where };
}

sub fingerprint {
    my ($dir) = @_;
    opendir my $dh, $dir or die "opendir $dir: $!";
    my @e = sort grep { !/^\.\.?\z/ } readdir $dh;
    return join ',', map {
        my @s = lstat "$dir/$_";
        my $what = -l _ ? 'l:' . readlink("$dir/$_") : -p _ ? 'p' : -f _ ? 'f:' . slurp("$dir/$_") : 'd';
        sprintf '%s=%s:%d:%04o', $_, $what, $s[4], $s[2] & 07777;
    } @e;
}

# The attacker: one process, forked here while this one is small and made
# uid 65534 (all groups dropped), that does each deed it is sent (perl code
# as text, with its arguments) and answers as in_child: "ok <what it
# returned>" or "died <why>" (also when it could not become 65534). A fork
# per deed cost 12 ms of CPU, 250 of them per run.
my ($TO_ATTACKER, $FROM_ATTACKER, $ATTACKER_PID) = start_attacker();

sub start_attacker {
    pipe my $req_r, my $req_w or die "pipe: $!";
    pipe my $ans_r, my $ans_w or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $req_w;
        close $ans_r;
        $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP QUIT);
        my $became = eval {
            $) = "$NOGROUP $NOGROUP";    # drops root's supplementary groups too
            POSIX::setgid($NOGROUP) or die "setgid: $!\n";
            POSIX::setuid($NOBODY) or die "setuid: $!\n";
            die "still privileged\n" if $< != $NOBODY || $> != $NOBODY || $( != $NOGROUP;
            1;
        } ? '' : $@;
        while (defined(my $msg = read_message($req_r))) {
            my ($code, @args) = unpack '(N/a*)*', $msg;
            my $deed = $became ? undef : eval "sub { $code }";
            my $out = $deed ? eval { $deed->(@args) } : undef;
            my $why = $became || ($deed ? $@ : "the deed does not compile: $@");
            write_message($ans_w, defined $out ? "ok $out" : "died $why");
        }
        POSIX::_exit(0);
    }
    close $req_r;
    close $ans_w;
    return ($req_w, $ans_r, $pid);
}
# killed, not waited for: a test that dies in the middle of a held-open case
# leaves a process that could keep the attacker's pipe open
END { local $?; if ($ATTACKER_PID && $$ != $ATTACKER_PID) { kill 'KILL', $ATTACKER_PID; waitpid $ATTACKER_PID, 0 } }

sub write_message {
    my ($fh, $msg) = @_;
    my $buf = pack 'N/a*', $msg;
    while (length $buf) {
        my $n = syswrite $fh, $buf;
        die "to the attacker: $!\n" unless defined $n || $!{EINTR};
        substr($buf, 0, $n, '') if $n;
    }
}

# The next message on $fh; undef at its end.
sub read_message {
    my ($fh) = @_;
    my $buf = '';
    my $want = 4;
    while (length $buf < $want) {
        my $n = sysread $fh, $buf, $want - length $buf, length $buf;
        next if !defined $n && $!{EINTR};
        return undef unless $n;
        $want = 4 + unpack 'N', $buf if length $buf == 4 && $want == 4;
    }
    return substr $buf, 4;
}

# the attacker's deed ($code with @args as its @_), done before the call:
# returns "ok ..." or "died ..."
sub as_attacker {
    my ($code, @args) = @_;
    write_message($TO_ATTACKER, pack '(N/a*)*', $code, @args);
    return read_message($FROM_ATTACKER) // die "the attacker is gone\n";
}

my %API = (
    file_set_contents => 'file_set_contents($T, $D, $O)',
    writer            => 'my $w = FastFile::Writer->new($T, $O); $w->print($D); $w->commit',
    batch             => 'file_set_contents_many([ $T => $D ], $O)',
);
my @APIS = sort keys %API;

# the victim's call in this process: (ok, $@, $!). A call that blocks (a
# build that opened a planted FIFO) fails with "blocked" after 10 s
# instead of hanging the test.
sub victim {
    my ($api, $T, $D, $O) = @_;
    local $SIG{ALRM} = sub { die "blocked\n" };
    alarm 10;
    my $ok = eval "$API{$api}; 1";
    my @r = ($ok ? 1 : 0, $@, $! + 0);
    alarm 0;
    return @r;
}

my %OPTS = (
    plain      => {},
    perm       => { perm => 0600 },
    fsync      => { fsync => 1, perm => 0600 },
    preserve   => { preserve => 1 },
    if_changed => { if_changed => 1, perm => 0600 },
    mkdir      => { mkdir => 1, perm => 0600 },
    follow     => { follow_symlinks => 1, perm => 0600 },
    noclobber  => { noclobber => 1, perm => 0600 },
);
my @OPTS = sort keys %OPTS;

# The victim's layout for an option set in a case: the name given ($given),
# the file really written ($real), old content at $real (0600, root) unless
# noclobber. follow: $given is root's link to $real.
sub victim_files {
    my ($c, $opt) = @_;
    my $real = "$c->{dir}/file";
    my $given = $real;
    spew($real, "old secret\n", 0600) unless $opt eq 'noclobber';
    if ($opt eq 'follow') {
        $given = "$c->{dir}/link";
        symlink 'file', $given or die "symlink: $!";
    }
    return ($given, $real);
}

# The final mode the victim asked for: preserve keeps the old 0600.
sub final_mode { my ($opt) = @_; return $opt eq 'plain' ? 0644 : 0600 }

# The common end of every case.
sub end_checks {
    my ($label, $c, %e) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    $CASES++;
    is(slurp("$c->{outside}/precious"), "precious\n", "$label: the file outside is untouched");
    is(fingerprint($c->{outside}), $e{outside} // 'precious=f:precious' . "\n" . ':0:0600',
       "$label: nothing written outside the target's directory");
    my %planted = map { $_ => 1 } @{ $e{planted} || [] };
    my @left = grep { !$planted{$_} } temps_in($c->{root});
    is_deeply(\@left, [], "$label: no temp of the victim left") or diag("left: @left");
    if (defined $e{real}) {
        is(-f $e{real} ? slurp($e{real}) : 'not a file', $e{content},
           "$label: the victim's file holds what it should");
        ok(!-l $e{real} && -f $e{real}, "$label: a regular file");
        is(sprintf('%04o', (lstat $e{real})[2] & 07777), sprintf('%04o', $e{mode}), "$label: its mode")
            if defined $e{mode};
    }
}

# ------------------------------------------------------- planted beforehand

# (1) a symlink, a FIFO at the temp name; (2) a symlink, a FIFO at the
# target; (3) a symlink at a parent directory. As root, with
# fs.protected_symlinks as given.
sub planted_cases {
    my ($ps) = @_;
    for my $where (qw(sticky own)) {
        for my $api (@APIS) {
            for my $opt (@OPTS) {
                next if $api eq 'writer' && $opt eq 'if_changed';    # not a writer's option
                # the sample: O_EXCL never looks at the sysctl, and the
                # victim's own directory refuses every plant alike
                my $sampled = $FULL || $ps && ($where eq 'sticky' || $opt eq 'plain');
                for my $thing ($sampled ? qw(symlink fifo) : ()) {
                    my $label = "ps=$ps $where $api $opt: $thing at the temp name";
                    my $c = new_case($where);
                    my ($given, $real) = victim_files($c, $opt);
                    my $temp = "$real.tmp.$$";
                    my $planted = as_attacker(q{
                        my ($thing, $precious, $temp) = @_;
                        $thing eq 'symlink' ? symlink($precious, $temp)
                                            : POSIX::mkfifo($temp, 0666) or die "$!\n";
                        return 'planted';
                    }, $thing, "$c->{outside}/precious", $temp);
                    if ($where eq 'own') {
                        is($planted, 'died ' . errno_text(Errno::EACCES()) . "\n",
                           "$label: the attacker cannot plant in the victim's directory");
                    } else {
                        is($planted, 'ok planted', "$label: planted");
                    }
                    my ($ok, $err) = victim($api, $given, $SECRET, $OPTS{$opt});
                    ok($ok, "$label: the victim's write succeeds") or diag($err);
                    ok($where eq 'own' || ($thing eq 'symlink' ? -l $temp : -p $temp),
                       "$label: the planted $thing is left alone");
                    end_checks($label, $c, real => $real, content => $SECRET, mode => final_mode($opt),
                               planted => [ $where eq 'sticky' ? ("dir/" . ($real =~ s{.*/}{}r) . ".tmp.$$") : () ]);
                }

                # at the target: the attacker's own entry in the sticky dir
                next if $where eq 'own' || $opt eq 'noclobber';
                for my $thing (qw(symlink fifo)) {
                    my $label = "ps=$ps $where $api $opt: $thing at the target";
                    my $c = new_case($where);
                    my $t = "$c->{dir}/theirs";
                    my $planted = as_attacker(q{
                        my ($thing, $precious, $t) = @_;
                        $thing eq 'symlink' ? symlink($precious, $t)
                                            : POSIX::mkfifo($t, 0666) or die "$!\n";
                        return 'planted';
                    }, $thing, "$c->{outside}/precious", $t);
                    is($planted, 'ok planted', "$label: planted");
                    my ($ok, $err, $errno) = victim($api, $t, $SECRET, $OPTS{$opt});
                    if ($opt eq 'follow' && $thing eq 'symlink') {
                        # fs.protected_symlinks' rule, whatever the sysctl says
                        ok(!$ok, "$label: the attacker's link is not followed");
                        is($errno, Errno::EACCES(), "$label: EACCES, as the kernel's rule");
                        like($err, qr/ - \Q${\ errno_text(Errno::EACCES())}\E\n\z/, "$label: Permission denied");
                        ok(-l $t, "$label: the link is still there");
                        end_checks($label, $c);
                    } else {
                        ok($ok, "$label: the victim's write succeeds (replaces the $thing)") or diag($err);
                        end_checks($label, $c, real => $t, content => $SECRET,
                                   mode => $opt eq 'preserve' ? 0644 : final_mode($opt));
                    }
                }
            }
        }
        next if $where eq 'own';

        # follow_symlinks through a link the rule allows: owned by the
        # follower (root), or by the sticky directory's owner
        for my $owner (qw(follower dir-owner)) {
            my $label = "ps=$ps sticky file_set_contents follow: a link owned by the $owner";
            my $c = new_case('sticky');
            chown $NOBODY, $NOGROUP, $c->{dir} or die if $owner eq 'dir-owner';
            spew("$c->{dir}/real", "old\n");
            if ($owner eq 'follower') { symlink 'real', "$c->{dir}/link" or die }
            else { as_attacker(q{ symlink('real', $_[0]) or die "$!\n"; 1 }, "$c->{dir}/link") }
            my ($ok, $err) = victim('file_set_contents', "$c->{dir}/link", $SECRET, { follow_symlinks => 1 });
            ok($ok, "$label: followed") or diag($err);
            ok(-l "$c->{dir}/link", "$label: the link kept");
            end_checks($label, $c, real => "$c->{dir}/real", content => $SECRET, mode => 0644);
        }

        # preserve of a file the attacker planted at the target name: its
        # owner and mode are not taken (they would hand the attacker the
        # new contents); refused with EACCES as fs.protected_regular would
        # refuse root's open of it, whatever that sysctl says. A file of
        # the follower or of the directory's owner is preserved.
        planted_file_not_preserved('sticky', "ps=$ps sticky $_ preserve: the attacker's file at the target", $_, 0666)
            for @APIS;
        # if_changed over the attacker's file holding exactly the bytes: not
        # "unchanged" (the attacker would keep writing the victim's file);
        # replaced by the victim's own, with the victim's mode
        planted_file_replaced('sticky', "ps=$ps sticky $_ if_changed: the attacker's identical file", $_)
            for grep { $_ ne 'writer' } @APIS;    # the writer has no if_changed
        for my $owner (qw(follower dir-owner)) {
            my $label = "ps=$ps sticky file_set_contents preserve: a file of the $owner";
            my $c = new_case('sticky');
            my $t = "$c->{dir}/report";
            chown $NOBODY, $NOGROUP, $c->{dir} or die if $owner eq 'dir-owner';
            spew($t, "old\n", 0640);
            chown $NOBODY, $NOGROUP, $t or die if $owner eq 'dir-owner';
            my ($ok, $err) = victim('file_set_contents', $t, $SECRET, { preserve => 1 });
            ok($ok, "$label: preserved") or diag($err);
            is((lstat $t)[4], $owner eq 'dir-owner' ? $NOBODY : 0, "$label: its owner kept");
            end_checks($label, $c, real => $t, content => $SECRET, mode => 0640);
        }

        # the readers through the attacker's link: as perl's own open
        for my $reader (qw(file_get_contents file_read_firstline)) {
            my $label = "ps=$ps sticky $reader: the attacker's link at the name";
            my $c = new_case('sticky');
            as_attacker(q{ symlink($_[0], $_[1]) or die "$!\n"; 1 }, "$c->{outside}/precious", "$c->{dir}/name");
            my $perl_ok = open(my $fh, '<', "$c->{dir}/name") ? 1 : 0;
            my $perl_errno = $! + 0;
            my $got = eval { no strict 'refs'; &{"FastFile::$reader"}("$c->{dir}/name") };
            is(defined $got ? 1 : 0, $perl_ok, "$label: reads where perl's open reads, refused where it is");
            is($! + 0, $perl_errno, "$label: the same errno") unless $perl_ok;
            is($perl_ok, $ps ? 0 : 1, "$label: the kernel decides (fs.protected_symlinks=$ps)");
            end_checks($label, $c);
        }

        # a symlink at a parent directory: resolved by the kernel, as open does
        for my $api (@APIS) {
            my $label = "ps=$ps sticky $api: the attacker's symlink as the parent";
            my $c = new_case('sticky');
            as_attacker(q{ symlink($_[0], $_[1]) or die "$!\n"; 1 }, $c->{outside}, "$c->{dir}/sub");
            my $perl_ok = -w "$c->{dir}/sub/." && open(my $fh, '>>', "$c->{dir}/sub/probe") ? 1 : 0;
            unlink "$c->{outside}/probe";
            my ($ok, $err, $errno) = victim($api, "$c->{dir}/sub/file", $SECRET, {});
            # the kernel's rule covers only a path's last link: perl's open
            # follows a parent link whatever the sysctl says. The batch opens
            # the directory itself (its last component): refused under 1.
            my $batch_refused = $api eq 'batch' && $ps;
            is($perl_ok, 1, "$label: perl's open writes through a parent link");
            is($ok, $batch_refused ? 0 : $perl_ok, "$label: as perl's open"
               . ($batch_refused ? ', but the batch opens the link as its directory: refused' : ''))
                or diag($err);
            is($errno, Errno::EACCES(), "$label: EACCES") unless $ok;
            end_checks($label, $c, outside => join ',', ($ok ? "file=f:$SECRET:0:0644" : ()),
                                                       "precious=f:precious\n:0:0600");
        }
    }
}

# ------------------------------------------------- during a call held open

my $STRACE = strace_why();

# The victim's call in a child perl under strace, its write to the temp
# (hold => 'openat': its first open, the temp's or if_changed's compare,
# right after the checks) held for 0.15 s (hold_us), while the attacker's $deed runs in a loop (as uid 65534)
# until the call is over; then the attacker's $after. window => $dir: the
# deed runs only while the victim is inside the held syscall, as strace's
# log (in $dir, which the attacker can read) shows it: strace writes a
# call's name and arguments on entry, before the delay, the rest on return.
# Nothing is done while the victim's perl starts (it takes longer than the
# hold: a deed done then races nothing), nothing after; the log has -ttt
# -T times to check it against. paths: what strace traces (-P), the held
# syscall's first match. Returns the victim's strace_call result and the
# attacker's report.
sub during {
    my (%a) = @_;
    my $hold = $a{hold} // 'write';
    my $log = $a{window} ? "$a{window}/strace.log" : undef;
    pipe my $r, my $w or die "pipe: $!";
    my $test = $$;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $r;
        close $TO_ATTACKER;
        close $FROM_ATTACKER;
        my $report = eval {
            $) = "$NOGROUP $NOGROUP";
            POSIX::setgid($NOGROUP) or die "setgid: $!\n";
            POSIX::setuid($NOBODY) or die "setuid: $!\n";
            my ($stop, %state) = (0);
            local $SIG{USR1} = sub { $stop = 1 };
            # (and not on after the test died: nobody would stop it)
            until ($stop || getppid() != $test) {
                $a{deed}->(\%state) if !$log || inside_held($log, $hold);
                select undef, undef, undef, 0.001;
            }
            $a{after} ? $a{after}->(\%state) : 'done';
        } // "died $@";
        print {$w} $report;
        close $w;
        POSIX::_exit(0);
    }
    close $w;
    my $res = strace_call($a{code}, target => $a{target}, data => $SECRET, opts => $a{opts},
                          pid => $FFTest::PID, paths => $a{paths} || ['%TMP%', $a{target}],
                          $log ? (log => $log, strace => ['-ttt', '-T']) : (),
                          inject => [ "$hold:delay_enter=" . ($a{hold_us} // 150_000) . ':when=1' ], timeout => 30);
    kill 'USR1', $pid;
    my $report = do { local $/; <$r> } // '';
    waitpid $pid, 0;
    unlink $log if $log;
    return ($res, $report);
}

# Is the victim inside its held $syscall now: the first $syscall in the
# strace log entered (a line begun) and not returned (no end of line yet)?
sub inside_held {
    my ($log, $syscall) = @_;
    open my $fh, '<', $log or return 0;
    my $text = do { local $/; <$fh> } // '';
    return 0 unless $text =~ /^\d+ +[\d.]+ \Q$syscall\E\(/mg;
    return index($text, "\n", pos $text) < 0 ? 1 : 0;
}

# The held syscall in a log of during(window => ...): (its line, when it
# was entered, how long it took), the delay included.
sub held_syscall {
    my ($log, $syscall) = @_;
    my ($line, $start, $took) = $log =~ /^(\d+ +([\d.]+) \Q$syscall\E\(.*<([\d.]+)>)$/m;
    return ($line // '', $start, $took);
}

# The attacker's own entry as the target in the sticky directory: a
# symlink, a FIFO and a file swapped in at the target, a symlink planted at
# the temp name, while the victim is held between its checks and the
# temp's open ($hold 'openat'), or in the temp's write ('write'). Only then:
# a symlink at the temp name planted while the victim's perl starts sends
# it to a random temp name (which strace does not hold) before any race,
# and a check made after the plant sees it. At the start a file (preserve:
# a symlink, as preserve refuses the attacker's file before the window,
# planted_file_not_preserved). Whatever is swapped in, the call succeeds,
# the target becomes root's file, nothing outside is touched. On a loaded
# machine the attacker may not get to run inside the hold: then once more
# with the hold twice as long (the victim's outcome checked each time).
sub swapped_in_held {
    my ($ps, $api, $opt, $hold) = @_;
    my $label = "ps=$ps sticky $api $opt: symlinks and FIFOs swapped in, $hold held";
    my @want = ('target-symlink', 'target-fifo', $hold eq 'openat' ? 'temp-symlink' : ());
    my ($inside, $why) = ('');
    for my $hold_us (150_000, 300_000, 600_000, 1_200_000) {
        my $c = new_case('sticky');
        my $t = "$c->{dir}/theirs";
        my $precious = "$c->{outside}/precious";
        is(as_attacker(q{ my ($t, $link_to) = @_;
                          ($link_to ? symlink($link_to, $t) : spew($t, "their old\n", 0644)) or die "$!\n";
                          'made' }, $t, $opt eq 'preserve' ? $precious : ()),
           'ok made', "$label: the attacker's target made");
        my $temp = "$t.tmp.$FFTest::PID";
        my ($res, $report) = during(
            code => $API{$api}, target => $t, hold => $hold, hold_us => $hold_us, window => $c->{root},
            opts => { %{ $OPTS{$opt} }, perm => 0644, noclobber => 0 },
            # the batch's names, relative to its directory fd
            paths => [ '%TMP%', $t, "theirs.tmp.$FFTest::PID", 'theirs' ],
            deed => sub {
                my ($s) = @_;
                my $stamp = sub { my ($what, $t0) = @_; push @{ $s->{done} }, sprintf '%s:%.6f:%.6f', $what, $t0, Time::HiRes::time() };
                my $t0 = Time::HiRes::time();
                $stamp->('temp-symlink', $t0) if symlink $precious, $temp;
                # all three each time, the last a different one
                my @kinds = qw(symlink fifo file);
                push @kinds, shift @kinds for 1 .. $s->{k}++ % 3;
                for my $kind (@kinds) {
                    my $new = "$c->{dir}/swap.$kind";
                    unlink $new;
                    $kind eq 'symlink' ? symlink($precious, $new)
                  : $kind eq 'fifo' ? POSIX::mkfifo($new, 0666) : spew($new, "their old\n", 0644);
                    $t0 = Time::HiRes::time();
                    $stamp->("target-$kind", $t0) if rename $new, $t;
                }
            },
            after => sub { join ' ', @{ $_[0]{done} || [] } });
        ok($res->{ok}, "$label: the victim's call succeeds") or diag($res->{err});
        my ($line, $start, $took) = held_syscall($res->{log}, $hold);
        # (the batch's open names the temp relative to its directory fd)
        like($line, qr/^\d+ +\S+ (?:openat\(\w+, "(?:\Q$c->{dir}\E\/)?\Qtheirs.tmp.$FFTest::PID\E"|write\()/,
             "$label: the victim's $hold of the temp was held")
            or diag($res->{log});
        is((lstat $t)[4], 0, "$label: the target is the victim's");
        end_checks($label, $c, real => $t, content => $SECRET, mode => 0644,
                   planted => [ -l $temp ? "dir/theirs.tmp.$FFTest::PID" : () ]);
        # done between the hold's start and its end, by the clocks of
        # strace (-ttt) and the attacker
        my %in;
        for (split ' ', $report) {
            my ($what, $t0, $t1) = split /:/;
            $in{$what}++ if defined $start && $t0 >= $start && $t1 <= $start + $took;
        }
        $inside = join ',', grep { $in{$_} } @want;
        $why = "$report\n$res->{log}";
        last if $inside eq join ',', @want;
        diag("$label: the attacker missed the ${hold_us}us hold ($inside): again, held longer");
    }
    is($inside, join(',', @want), "$label: swapped in while the $hold was held") or diag($why);
}

sub windowed_cases {
    my ($ps) = @_;
    # the sample: the sysctl matters for none of these (no link is
    # followed), so under 1 only; the old leak (preserve, all APIs) and the
    # plain perm 0600 write, in the sticky directory
    my $sampled = sub { my ($where, $api, $opt) = @_;
                        $FULL || $ps && $where eq 'sticky' && ($opt eq 'preserve' || $opt eq 'perm') };
    for my $where (qw(sticky own)) {
        for my $api (@APIS) {
            for my $opt (@OPTS) {
                next if $api eq 'writer' && $opt eq 'if_changed';
                # the default sample: every API with preserve in the sticky
                # directory (the old leak), a few others
                next unless $sampled->($where, $api, $opt);

                # open the temp during the write, read it after the commit
                my $label = "ps=$ps $where $api $opt: the attacker opens the temp during the write";
                my $c = new_case($where);
                my ($given, $real) = victim_files($c, $opt);
                my ($res, $report) = during(
                    code => $API{$api}, target => $real, opts => $OPTS{$opt},
                    deed => sub {
                        my ($s) = @_;
                        for my $temp (glob "$real.tmp.*") {
                            next if $s->{fh}{$temp};
                            if (open my $fh, '<', $temp) { $s->{fh}{$temp} = $fh } else { $s->{refused}++ }
                        }
                    },
                    after => sub {
                        my ($s) = @_;
                        my $got = join '', map { local $/; readline($_) // '' } values %{ $s->{fh} || {} };
                        return sprintf 'opened=%d refused=%d read=%s', scalar keys %{ $s->{fh} || {} },
                            $s->{refused} // 0, unpack('H*', $got);
                    });
                ok($res->{ok}, "$label: the victim's write succeeds") or diag($res->{err});
                my ($opened, $refused, $read) = $report =~ /opened=(\d+) refused=(\d+) read=(\S*)/;
                ok(defined $opened && $refused > 0 || $opened, "$label: the attacker tried") or diag($report);
                my $allowed = final_mode($opt) & 004;
                if ($allowed) {
                    pass("$label: the final mode lets others read: nothing to hide");
                } else {
                    is($opened, 0, "$label: the temp could not be opened") or diag($report);
                    is(pack('H*', $read // ''), '', "$label: nothing of the new contents read");
                }
                end_checks($label, $c, real => $real, content => $SECRET, mode => final_mode($opt));

                next if $where eq 'own' || !$FULL && $api ne 'file_set_contents';
                # the attacker's own entry as the target: swap a symlink, a
                # FIFO and a file in at the target, a symlink at the temp
                # name, while the victim is held between its checks and the
                # temp's open, or in the temp's write. Only then: a symlink
                # at the temp name planted earlier sends the victim to a
                # random temp name (which strace does not hold) before any
                # race, a check made after it sees it. At the start a file
                # (preserve: a symlink, as preserve refuses the attacker's
                # file before the window, planted_file_not_preserved).
                for my $hold (qw(openat write)) {
                    swapped_in_held($ps, $api, $opt, $hold);
                }
            }
        }
    }

    # a parent directory (the attacker's, in the sticky dir) swapped for a
    # symlink to the outside directory during the call
    for my $api ($FULL || $ps ? @APIS : ()) {
        my $label = "ps=$ps sticky $api: the parent directory swapped during the call";
        my $c = new_case('sticky');
        my $p = "$c->{dir}/theirdir";
        as_attacker(q{ mkdir $_[0] or die "$!\n"; chmod 0777, $_[0]; 1 }, $p);
        my ($res, $report) = during(
            code => $API{$api}, target => "$p/file", opts => {},
            deed => sub {
                my ($s) = @_;
                return if $s->{done} || !glob("$p/file.tmp.*");
                rename $p, "$p.moved" or return;
                symlink $c->{outside}, $p or die "symlink: $!";
                $s->{done} = 1;
            },
            after => sub { 'swapped=' . ($_[0]{done} // 0) });
        like($report, qr/swapped=1/, "$label: the attacker swapped the parent");
        ok($res->{ok} || $res->{err} =~ / - |: /, "$label: the call succeeds or fails cleanly")
            or diag($res->{err});
        # The batch renames through its directory fd, inside the moved
        # directory. A single call names its temp by path: once the parent
        # is swapped, neither the rename nor the cleanup finds it, and it
        # stays in the attacker's own (moved) directory, with the final
        # mode: nothing the target would not show. (Only a directory fd
        # would avoid it, 2 more syscalls a call.)
        my @stuck = $api eq 'batch' || $res->{ok} ? () : ("dir/theirdir.moved/file.tmp.$FFTest::PID");
        if (@stuck) {
            is(sprintf('%04o', (lstat "$c->{root}/$stuck[0]")[2] & 07777), '0644',
               "$label: the temp stuck in the attacker's directory has the final mode");
        }
        end_checks($label, $c, planted => \@stuck);
    }
}

# ---------------------------------- a sticky group-writable directory

# A file the attacker planted at the target in a shared sticky directory
# ($kind: new_case's 'sticky' or 'sticky-group'), mode $mode: preserve
# refuses it with EACCES and leaves it as it was.
sub planted_file_not_preserved {
    my ($kind, $label, $api, $mode) = @_;
    my $c = new_case($kind);
    my $t = "$c->{dir}/report";
    my $planted = as_attacker(q{ my ($t, $mode) = @_; spew($t, "bait\n"); chmod $mode, $t or die "$!\n"; 'planted' },
                              $t, $mode);
    is($planted, 'ok planted', "$label: planted");
    my ($ok, $err, $errno) = victim($api, $t, $SECRET, { preserve => 1, perm => 0600 });
    ok(!$ok, "$label: refused");
    is($errno, Errno::EACCES(), "$label: EACCES");
    like($err, qr/^unable to preserve owner and mode of '\Q$t\E' - \Q${\ errno_text(Errno::EACCES())}\E\n/,
         "$label: the message says why");
    is(fingerprint($c->{dir}), sprintf("report=f:bait\n:$NOBODY:%04o", $mode), "$label: the planted file left as it was");
    end_checks($label, $c);
}

# The attacker's file holding exactly the victim's bytes, planted there:
# if_changed does not take it as unchanged (the attacker would keep writing
# the victim's file) but replaces it with the victim's own, mode 0600.
sub planted_file_replaced {
    my ($kind, $label, $api) = @_;
    my $c = new_case($kind);
    my $t = "$c->{dir}/conf";
    my $planted = as_attacker(q{ spew($_[0], $_[1]); chmod 0666, $_[0] or die "$!\n"; 'planted' }, $t, $SECRET);
    is($planted, 'ok planted', "$label: planted");
    my ($ok, $err) = victim($api, $t, $SECRET, { if_changed => 1, perm => 0600 });
    ok($ok, "$label: the call succeeds") or diag($err);
    is((lstat $t)[4], 0, "$label: the file is the victim's now");
    like(as_attacker(q{ open(my $fh, '>>', $_[0]) ? 'wrote' : "refused\n" }, $t), qr/^ok refused/,
         "$label: the attacker can no longer write it");
    end_checks($label, $c, real => $t, content => $SECRET, mode => 0600);
}

# 01770, root's, of the attacker's group (a directory a team shares): every
# member may plant a file there, as anyone in /tmp. preserve and if_changed
# treat it as a sticky world-writable one (fs.protected_regular=2's rule,
# whatever the sysctl says): a member's file is neither preserved (that
# handed the planter the new contents: their own file, mode 04777) nor left
# as unchanged; a file of the directory's owner is.
sub group_sticky_cases {
    planted_file_not_preserved('sticky-group', "sticky-group $_ preserve: a group member's file at the target", $_, 04777)
        for @APIS;
    planted_file_replaced('sticky-group', "sticky-group $_ if_changed: a group member's identical file", $_)
        for grep { $_ ne 'writer' } @APIS;    # the writer has no if_changed
    # follow_symlinks: a member's link is not followed (the kernel's
    # fs.protected_symlinks stops at world-writable directories; followed,
    # the link made root replace any file it named)
    for my $api (@APIS) {
        my $label = "sticky-group $api follow_symlinks: a group member's link at the target";
        my $c = new_case('sticky-group');
        my $t = "$c->{dir}/conf";
        my $planted = as_attacker(q{ symlink $_[0], $_[1] or die "$!\n"; 'planted' }, "$c->{outside}/precious", $t);
        is($planted, 'ok planted', "$label: planted");
        my ($ok, $err, $errno) = victim($api, $t, $SECRET, { follow_symlinks => 1, perm => 0600 });
        ok(!$ok, "$label: refused");
        is($errno, Errno::EACCES(), "$label: EACCES");
        like($err, qr/^unable to follow symlinks of '\Q$t\E' - /, "$label: the message says why");
        is(fingerprint($c->{dir}), "conf=l:$c->{outside}/precious:$NOBODY:0777", "$label: the link left");
        end_checks($label, $c);
    }
    for my $api (@APIS) {
        my $label = "sticky-group $api preserve: a file of the directory's owner";
        my $c = new_case('sticky-group');
        chown $NOBODY, $NOGROUP, $c->{dir} or die;
        my $t = "$c->{dir}/report";
        my $planted = as_attacker(q{ spew($_[0], "old\n"); chmod 0640, $_[0] or die "$!\n"; 'planted' }, $t);
        is($planted, 'ok planted', "$label: made");
        my ($ok, $err) = victim($api, $t, $SECRET, { preserve => 1 });
        ok($ok, "$label: preserved") or diag($err);
        is(join(':', (lstat $t)[4, 5]), "$NOBODY:$NOGROUP", "$label: its owner and group kept");
        end_checks($label, $c, real => $t, content => $SECRET, mode => 0640);
    }
}

# ------------------------------------------- a hard link at the target

# A sticky directory's rule trusts the caller's (and the directory owner's)
# files: but anyone may give a file of the caller's a second name there
# (fs.protected_hardlinks lets them link a file they may read and write,
# any file when it is 0). root's 0666 file (0660 of the attacker's group
# in the group-writable directory), linked at the target by the attacker:
# preserve took its mode (root's new secret readable and writable by the
# attacker through both names: 0666), if_changed left it as the victim's
# file. A file with more than one link there is trusted by neither.
sub hardlink_cases {
    for my $where (qw(sticky sticky-group)) {
        my $shared_mode = $where eq 'sticky' ? 0666 : 0660;
        my $plant = sub {
            my ($c, $t, $content) = @_;
            my $shared = "$c->{root}/shared";
            spew($shared, $content, $shared_mode);
            chown 0, $NOGROUP, $shared or die "chown: $!";
            chmod $shared_mode, $shared or die "chmod: $!";
            my $planted = as_attacker(q{ link $_[0], $_[1] or die "link: $!\n"; 'linked' }, $shared, $t);
            return ($planted, $shared);
        };
        for my $api (@APIS) {
            my $label = "$where $api preserve: a hard link to root's file at the target";
            my $c = new_case($where);
            my $t = "$c->{dir}/report";
            my ($planted, $shared) = $plant->($c, $t, "bait\n");
            is($planted, 'ok linked', "$label: linked");
            my ($ok, $err, $errno) = victim($api, $t, $SECRET, { preserve => 1, perm => 0600 });
            ok(!$ok, "$label: refused");
            is($errno, Errno::EACCES(), "$label: EACCES");
            like($err, qr/^unable to preserve owner and mode of '\Q$t\E' - /, "$label: the message says why");
            is(slurp($shared), "bait\n", "$label: the linked file left as it was");
            is(fingerprint($c->{dir}), sprintf("report=f:bait\n:0:%04o", $shared_mode), "$label: the link left");
            end_checks($label, $c);
        }
        for my $api (grep { $_ ne 'writer' } @APIS) {
            my $label = "$where $api if_changed: a hard link to root's identical file";
            my $c = new_case($where);
            my $t = "$c->{dir}/conf";
            my ($planted, $shared) = $plant->($c, $t, $SECRET);
            is($planted, 'ok linked', "$label: linked");
            my ($ok, $err) = victim($api, $t, $SECRET, { if_changed => 1, perm => 0600 });
            ok($ok, "$label: the call succeeds") or diag($err);
            is((lstat $t)[3], 1, "$label: replaced: the target has one link, the victim's file");
            end_checks($label, $c, real => $t, content => $SECRET, mode => 0600);
        }
    }
}

# ------------------------------------------------------------------ run

group_sticky_cases();
hardlink_cases();

for my $ps (0, 1) {
    SKIP: {
        skip "cannot set fs.protected_symlinks to $ps", 1 unless set_sysctl($ps);
        planted_cases($ps);
        SKIP: {
            skip "strace unusable: $STRACE", 1 if $STRACE;
            windowed_cases($ps);
        }
    }
}
restore_sysctl();
diag "$CASES attack cases ran";

done_testing;
