package ReplaceRace;

# A writer that replaces a file in a loop (file_set_contents: a temp, then
# rename over it) against readers, each in a process of its own, for a
# while: what every reader got, counted. t/79-read-while-replaced.t and
# bench/replace-race.pl run it.
#
#   use ReplaceRace;
#   my $r = ReplaceRace::run(file => "$dir/f", copy_dir => $local,
#                            seconds => 0.5, readers => [ ReplaceRace::readers() ]);
#   $r->{get_contents}{reads}, {failed}, {torn}, {errors}{"can't open: ..."}
#   $r->{writes}: replaces made
#
# Three versions of different sizes (1 KiB, 24 KiB, 300 KiB: one FUSE READ
# request, several), every line naming its version: a result is whole when
# it is one version exactly (first and last lines: one version's), torn
# otherwise. A reader's failure is its die, or undef where the file exists
# at every moment. A reader's name with "ref_" is t/lib/Reference.pm's.

use strict;
use warnings;

use File::Basename ();
use lib File::Basename::dirname(__FILE__);
use FastFile qw(file_set_contents file_get_contents file_read_firstline
                file_read_last_line file_copy);
use POSIX ();
use Reference qw(ref_get_contents ref_read_firstline ref_read_last_line ref_file_copy);
use Time::HiRes ();

my @SIZES = (1024, 24 * 1024, 300 * 1024);

# Version $k: lines of 64 bytes, "v<k>:" then a letter of its own.
sub version {
    my ($k) = @_;
    my $line = "v$k:" . (chr(ord('a') + $k) x 60) . "\n";
    return $line x ($SIZES[$k] / 64);
}

my @VERSIONS = map { version($_) } 0 .. $#SIZES;
my %WHOLE = map { $_ => 1 } @VERSIONS;
my %FIRST = map { my $l = substr($_, 0, 63); $l => 1 } @VERSIONS;

sub _slurp {
    my ($file) = @_;
    open my $fh, '<', $file or die "can't open '$file' - $!\n";
    local $/;
    return scalar <$fh>;
}

# name => sub (file, copy target) returning [what it read, whole or not]
my %READERS = (
    get_contents => sub { my $c = file_get_contents($_[0]); return $WHOLE{$c} },
    firstline    => sub { my $l = file_read_firstline($_[0]); die "undef: $!\n" if !defined $l; return $FIRST{$l} },
    last_line    => sub { my $l = file_read_last_line($_[0]); die "undef: $!\n" if !defined $l; return $FIRST{$l} },
    copy         => sub { file_copy($_[0], $_[1]); return $WHOLE{ _slurp($_[1]) } },
    ref_get_contents => sub { my $c = ref_get_contents($_[0]); return $WHOLE{$c} },
    ref_firstline    => sub { my $l = ref_read_firstline($_[0]); die "undef: $!\n" if !defined $l; return $FIRST{$l} },
    ref_last_line    => sub { my $l = ref_read_last_line($_[0]); die "undef: $!\n" if !defined $l; return $FIRST{$l} },
    ref_copy         => sub { ref_file_copy($_[0], $_[1]); return $WHOLE{ _slurp($_[1]) } },
);

# FastFile's readers, in the order run takes them.
sub readers { return qw(get_contents firstline last_line copy) }

sub versions { return @VERSIONS }

# An error's kind: its text without the path ("can't open: No such file or
# directory").
sub _kind {
    my ($err) = @_;
    $err =~ s/\s+\z//;
    $err =~ s/ '[^']*'//;
    $err =~ s/ - /: /;
    return $err;
}

sub _child {
    my ($code) = @_;
    pipe my $rd, my $wr or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $rd;
        my $out = eval { $code->() } // "died: $@";
        print {$wr} $out;
        close $wr;
        POSIX::_exit(0);
    }
    close $wr;
    return [ $pid, $rd ];
}

sub _collect {
    my ($kid) = @_;
    my ($pid, $rd) = @$kid;
    my $out = do { local $/; <$rd> } // '';
    waitpid $pid, 0;
    return $out;
}

sub run {
    my (%o) = @_;
    my ($file, $secs) = @o{qw(file seconds)};
    file_set_contents($file, $VERSIONS[0]);
    # all start together, once every process is forked
    my $start = Time::HiRes::time() + 0.05;
    my $end = $start + $secs;
    my $wait = sub { my $d = $start - Time::HiRes::time(); Time::HiRes::sleep($d) if $d > 0 };
    my @kids;
    for my $i (0 .. $#{ $o{readers} }) {
        my $name = $o{readers}[$i];
        my $read = $READERS{$name} or die "no reader $name";
        my $copy = "$o{copy_dir}/copy.$i";
        push @kids, [ $name, _child(sub {
            my ($reads, $failed, $torn, %errors) = (0, 0, 0);
            $wait->();
            while (Time::HiRes::time() < $end) {
                $reads++;
                my $whole = eval { $read->($file, $copy) };
                if ($@) {
                    $failed++;
                    $errors{ _kind($@) }++;
                } elsif (!$whole) {
                    $torn++;
                }
            }
            unlink $copy;
            return join "\n", "$reads $failed $torn", map { "$_\t$errors{$_}" } sort keys %errors;
        }) ];
    }
    my $writer = _child(sub {
        my $writes = 0;
        $wait->();
        file_set_contents($file, $VERSIONS[++$writes % @VERSIONS]) while Time::HiRes::time() < $end;
        return $writes;
    });
    my %r;
    for my $k (@kids) {
        my ($name, $kid) = @$k;
        my ($head, @errors) = split /\n/, _collect($kid);
        my ($reads, $failed, $torn) = ($head // '') =~ /\A(\d+) (\d+) (\d+)\z/
            or die "reader $name: $head\n";
        $r{$name} = { reads => $reads, failed => $failed, torn => $torn,
                      errors => { map { split /\t/ } @errors } };
    }
    my $writes = _collect($writer);
    $r{writes} = $writes =~ /\A\d+\z/ ? $writes : die "writer: $writes\n";
    return \%r;
}

1;
