package SnapshotCases;

# The cases of t/84-snapshots.t's matrix, run in the test's own process or,
# for the signal handler cases, in a child perl under strace (which lands
# EINTR and SIGALRM on a write or read):
#
#   API      fsc (file_set_contents), ors (fsc with $\ set), print, printf,
#            write (the writer's methods, then commit), batch
#            (file_set_contents_many of \@_, aliases of the caller's
#            variables), batchref (of the array that holds name and value:
#            "free" clears it), firstline (file_read_firstline's $/)
#   kind     of the value passed: plain, cow (shares a buffer by
#            copy-on-write), const (a read-only literal), capture ($1),
#            errno ($!), tied, shared (threads::shared), overloaded, ook (a
#            string with an offset), large (2 MiB, more than the writer's
#            buffer); for firstline the kinds of $/
#   site     where user code runs: eintr (a signal handler), warn (the
#            __WARN__ handler of a "Wide character" warning), overload
#            (another argument's "" overload)
#   action   what it does: read (the variable, so that its magic rewrites
#            it), append, assign, free (clear the array it is in), rs/ors
#            (assign $/ or $\), destroy (the writer's DESTROY), die
#
# run_case(name, dir) runs one case in a fresh directory and returns '' when
# it ended as it must - exactly the bytes passed at the call (or, where the
# handler dies, the old content) and no temp file, no fd more - or why not.
#
#   use SnapshotCases qw(case_names run_case);

use strict;
use warnings;

use Errno ();
use Exporter 'import';
use Config;
use FastFile qw(:all);
use FastFile::Writer;
use lib 't/lib';
use Reference qw(ref_read_firstline);

our @EXPORT_OK = qw(case_names run_case);

my $HAVE_THREADS = $Config{useithreads} && eval { require threads; require threads::shared; 1 };

my $OLD = "old contents\n";
my $WIDE = "\x{263a}";
my $WIDE_BYTES = do { my $b = $WIDE; utf8::encode($b); $b };

my @APIS    = qw(fsc ors print printf write batch batchref);
my @KINDS   = (qw(plain cow const capture errno tied), ($HAVE_THREADS ? 'shared' : ()),
               qw(overloaded ook large));
my @SITES   = qw(eintr warn overload);
my @ACTIONS = qw(read append assign free rs ors destroy die);
my @RS      = qw(newline ref3 undef para string);

# Every case name: "api/kind/site/action". Not every combination exists:
# destroy is the writer's, write has no other argument to overload.
sub case_names {
    my @names;
    for my $api (@APIS) {
        for my $kind (@KINDS) {
            for my $site (@SITES) {
                next if $site eq 'overload' && $api eq 'write';
                next if $site eq 'warn' && $api eq 'write' && $kind eq 'errno';   # no wide $!
                for my $action (@ACTIONS) {
                    next if $action eq 'destroy' && $api !~ /^(?:print|printf|write)$/;
                    push @names, "$api/$kind/$site/$action";
                }
            }
        }
    }
    for my $kind (@RS) {
        for my $site (qw(eintr overload)) {
            push @names, "firstline/$kind/$site/$_" for qw(read rs free die);
        }
    }
    return @names;
}

# -------------------------------------------------------------- the values

our (@A, $SH, $T, $W, $HOOK, $HANDLER_RAN);

# Set by a traced child: run right before the call, it makes the next write
# (or read) the one strace interrupts.
our $SYNC;

package SnapshotCases::Tied {
    sub TIESCALAR { my ($c, $v) = @_; return bless { v => $v, n => 0 }, $c }
    sub FETCH     { my ($s) = @_; return $s->{n}++ ? "$s->{v} fetched again $s->{n}" : $s->{v} }
    sub STORE     { $_[0]{v} = $_[1] }
}

package SnapshotCases::Str {
    use overload '""' => sub { $SnapshotCases::HOOK->() if $SnapshotCases::HOOK; $_[0]{s} },
                 fallback => 1;
    sub new { my ($c, $s) = @_; return bless { s => $s }, $c }
}

# Sets the value up for kind and returns (code that passes it, the string it
# has at the call). The code is the text of the argument in the call.
sub setup_value {
    my ($kind, $wide) = @_;
    my $w = $wide ? $WIDE : '';
    @A = ();
    if ($kind eq 'plain')    { $A[1] = "plain $w" . ('p' x 200); $A[1] .= 'q'; return ('$A[1]', $A[1]) }
    if ($kind eq 'cow')      { our $SRC = "cow $w" . ('c' x 300); $A[1] = $SRC; return ('$A[1]', $SRC) }
    if ($kind eq 'const')    { return $wide ? ('"const \x{263a} value"', "const $WIDE value")
                                            : ('"const value"', 'const value') }
    # (these two are set by the call's own code: $1 is scoped to its block)
    if ($kind eq 'capture')  { return ('$1', "captured $w value") }
    if ($kind eq 'errno')    { $! = Errno::ENOENT(); my $t = "$!"; return ('$!', $t) }
    if ($kind eq 'tied')     { tie $A[1], 'SnapshotCases::Tied', "tied $w value"; return ('$A[1]', "tied $w value") }
    if ($kind eq 'shared')   { $SH = "shared $w value"; return ('$SH', $SH) }
    if ($kind eq 'overloaded') { $A[1] = SnapshotCases::Str->new("overloaded $w value");
                                 return ('$A[1]', "overloaded $w value") }
    if ($kind eq 'ook')      { $A[1] = "XXXXXXXXook $w" . ('o' x 200); substr($A[1], 0, 8, '');
                               return ('$A[1]', $A[1]) }
    if ($kind eq 'large')    { $A[1] = "large $w" . ('L' x (2 << 20)); return ('$A[1]', $A[1]) }
    die "unknown kind $kind";
}

# The user code of action, on the value of kind.
sub action_code {
    my ($action, $kind) = @_;
    my $var = $kind eq 'shared' ? '$SH' : '$A[1]';
    return {
        read    => $kind eq 'capture' ? 'if ("pid 4242" =~ /pid (\d+)/) { my $x = $1 } ("y" x 5000) =~ /(y+)/;'
                 : $kind eq 'errno'   ? '$! = Errno::EINTR(); my $x = "$!";'
                 : "my \$x = \"$var\";",
        append  => $kind eq 'capture' ? '("z" x 9000) =~ /(z+)/;'
                 : $kind eq 'errno'   ? '$! = Errno::EPERM(); my $x = "$!";'
                 : "$var .= 'junk' x 5000;",
        assign  => $kind eq 'errno' ? '$! = 1;' : $kind eq 'capture' ? '"a=b" =~ /(b)/;'
                 : "$var = 'assigned';",
        free    => $kind eq 'shared' ? 'undef $SH;' : '@A = (); my @junk = map { "B" x 300 } 1 .. 200;',
        rs      => '$/ = "\n"; $/ = \1;',
        ors     => '$\ = "changed ors";',
        destroy => '$W->DESTROY; undef $W;',
        die     => 'die "handler died\n";',
    }->{$action};
}

sub fds { opendir my $d, '/proc/self/fd' or return -1; return scalar grep { /^\d+$/ } readdir $d }

sub slurp_raw { my ($f) = @_; open my $fh, '<:raw', $f or return undef; local $/; return scalar <$fh> }

sub temps_left { my ($d) = @_; opendir my $dh, $d or return 0; return scalar grep { /\.tmp\./ } readdir $dh }

sub bytes_of { my ($s) = @_; $s = "$s"; utf8::encode($s) if utf8::is_utf8($s) && $s =~ /[^\x00-\xff]/; return $s }

# The signal handler of the eintr site.
sub eintr_handler { my ($code) = @_; return sub { $HANDLER_RAN = 1; $code->() } }

sub run_case {
    my ($name, $dir) = @_;
    my ($api, $kind, $site, $action) = split m{/}, $name;
    return run_firstline($kind, $site, $action, $dir) if $api eq 'firstline';
    share_setup() if $kind eq 'shared';

    my $f = "$dir/target";
    { open my $fh, '>', $f or return "spew: $!"; print {$fh} $OLD; close $fh }
    my $wide_value = $site eq 'warn' && $api eq 'write';
    my $format = $site eq 'warn' && $api eq 'printf' ? "%s$WIDE" : '%s';
    my ($expr, $value) = setup_value($kind, $wide_value);
    my $ors = $api eq 'ors' ? 'the ors' . ($site eq 'warn' ? $WIDE : '') : $site eq 'warn' && $api =~ /^(?:fsc|batch|batchref|print)$/ ? $WIDE : undef;
    my $prefix = $api =~ /^(?:print|printf)$/ && $site eq 'overload' ? 'obj' : '';
    my $expect = $prefix . bytes_of($value . ($format eq '%s' ? '' : $WIDE)) . (defined $ors ? bytes_of($ors) : '');

    my $user = action_code($action, $kind);
    my $code = eval "sub { no warnings; $user }" or die "action $action: $@";
    local $HOOK;
    local $SIG{__WARN__} = sub { };
    local $SIG{ALRM} = 'IGNORE';
    local $HANDLER_RAN = 0;
    local $\ = $ors;
    local $/ = $/;
    if ($site eq 'eintr')    { $SIG{ALRM} = eintr_handler($code) }
    if ($site eq 'warn')     { $SIG{__WARN__} = sub { $HANDLER_RAN = 1; $code->() } }
    my $once = sub { return if $HANDLER_RAN++; $code->() };
    my $fname = $site eq 'overload' && $api ne 'print' && $api ne 'printf'
        ? SnapshotCases::Str->new($f) : $f;
    my $obj = SnapshotCases::Str->new('obj');
    $HOOK = $once if $site eq 'overload';

    my $call = {
        fsc    => "file_set_contents(\$fname, $expr)",
        ors    => "file_set_contents(\$fname, $expr)",
        batch  => "sub { file_set_contents_many(\\\@_) }->(\$fname, $expr)",
        batchref => ($expr eq '$A[1]' ? '' : "\$A[1] = $expr; ") . "\$A[0] = \$fname; file_set_contents_many(\\\@A)",
        print  => ($prefix ? "\$W->print(\$obj, $expr); \$W->commit" : "\$W->print($expr); \$W->commit"),
        printf => ($prefix ? "\$W->printf('%s%s', \$obj, $expr); \$W->commit"
                           : "\$W->printf(\$format, $expr); \$W->commit"),
        write  => "\$W->write($expr); \$W->commit",
    }->{$api};
    my $pre = $kind eq 'capture' ? ($wide_value ? '"key=captured \x{263a} value\n"' : '"key=captured  value\n"')
                                   . ' =~ /^key=(.*)$/m or die "no match";'
            : $kind eq 'errno' ? '$! = Errno::ENOENT();' : '';
    my $n0 = fds();
    local $W = $api =~ /^(?:print|printf|write)$/ ? FastFile::Writer->new($fname) : undef;
    $SYNC->() if $SYNC && $site eq 'eintr';
    $HANDLER_RAN = 0;
    my $ok = eval "$pre $call; 1";
    my $err = $@;
    my $ran = $HANDLER_RAN;
    $HOOK = undef;
    undef $W;
    untie $A[1] if $kind eq 'tied' && @A > 1;
    @A = ();
    my $n1 = fds();
    my $got = slurp_raw($f);

    return "the user code did not run" unless $ran;
    return "an fd more ($n0 -> $n1)" if $n1 != $n0;
    return 'a temp file left' if temps_left($dir);
    if ($action eq 'die') {
        return "no die: $err" unless !$ok && $err =~ /handler died/;
        return 'the target changed' unless defined $got && $got eq $OLD;
        return '';
    }
    if ($action eq 'destroy') {          # the handler freed the writer: what it wrote is gone
        return "died: $err" unless $ok || $err =~ /not a writer object|already aborted|on an undefined value/;
        return 'the target changed' if !$ok && !(defined $got && $got eq $OLD);
        return '' if !$ok;
    }
    return "died: $err" unless $ok;
    return '' if defined $got && $got eq $expect;
    return sprintf 'wrote %s bytes (%s...), expected %d (%s...)', defined $got ? length $got : 'no',
        defined $got ? substr($got, 0, 24) : '', length $expect, substr($expect, 0, 24);
}

my $SHARED_READY;
sub share_setup {
    return if $SHARED_READY++;
    threads::shared::share(\$SH);
}

# firstline: the kind is the $/ in effect at the call.
sub run_firstline {
    my ($kind, $site, $action, $dir) = @_;
    my $f = "$dir/lines";
    { open my $fh, '>', $f or return "spew: $!"; print {$fh} "\n\nab\ncd\n\nef\n" x 2000; close $fh }
    my $rs = { newline => "\n", ref3 => \3, undef => undef, para => '', string => "c" }->{$kind};
    my $user = action_code($action, 'plain');
    my $code = eval "sub { no warnings; $user }" or die "action $action: $@";
    # the reference reads $/ at its readline, after it opened the file: an
    # overloaded name that assigns $/ changes the record it returns
    my $expect = do {
        local $/ = $rs;
        local $HOOK = $site eq 'overload' && $action ne 'die' ? $code : undef;
        ref_read_firstline($site eq 'overload' ? SnapshotCases::Str->new($f) : $f);
    };
    local $HOOK;
    local $SIG{ALRM} = 'IGNORE';
    local $HANDLER_RAN = 0;
    local $/ = $rs;
    my $fname = $f;
    if ($site eq 'eintr') { $SIG{ALRM} = eintr_handler($code) }
    else                  { $fname = SnapshotCases::Str->new($f); $HOOK = sub { return if $HANDLER_RAN++; $code->() } }
    my $n0 = fds();
    $SYNC->() if $SYNC && $site eq 'eintr';
    my $got = eval { file_read_firstline($fname) };
    my ($ok, $err) = (!$@, $@);
    my $ran = $HANDLER_RAN;
    $HOOK = undef;
    $/ = "\n";
    my $n1 = fds();
    return "the user code did not run" unless $ran;
    return "an fd more ($n0 -> $n1)" if $n1 != $n0;
    if ($action eq 'die') { return $ok || $err !~ /handler died/ ? "no die: $err" : '' }
    return "died: $err" unless $ok;
    return '' if defined $got && defined $expect && $got eq $expect;
    return sprintf 'got %s, expected %s', map { defined $_ ? "'" . substr($_, 0, 20) . "'" : 'undef' } $got, $expect;
}

1;
