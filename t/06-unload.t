use strict;
use warnings;

# DynaLoader::dl_unload_file on FastFile's shared object (what a plugin
# unloader does): perl keeps pointers into it, the exit hook that releases
# the pid page (xs_pid.c, call_atexit) and the XSUBs (imported ones too).
# The object makes itself permanent at boot (dlopen of itself with
# RTLD_NODELETE, xs_pid.c), so dlclose leaves it mapped: the exit
# is clean (it was SIGSEGV, status 139, in perl_destruct), a kept XSUB
# still runs, and a reload (its boot runs again) maps no new pid page and
# adds no exit hook: the pages wiped on fork stay one per interpreter over
# many reloads.

use Test::More;
use lib 't/lib';
use FFTest qw(tempdir slurp run_perl);
use FastFile ();

my $dir = tempdir();

# the child's code: $unload->() unloads FastFile's object as a plugin
# unloader does (the libref out of DynaLoader's lists, then dlclose);
# $reload->() loads it again as FastFile.pm does; $wiped->() is the size
# of the mappings this process has that a fork's child gets zeroed (smaps
# VmFlags "wf"), the pid pages
my $prelude = <<'PERL';
use strict; use warnings;
use FastFile qw(file_set_contents);
$| = 1;
my $unload = sub {
    my ($i) = grep { $DynaLoader::dl_modules[$_] eq 'FastFile' } 0 .. $#DynaLoader::dl_modules;
    die "FastFile is not in DynaLoader's list\n" unless defined $i;
    my $ref = splice @DynaLoader::dl_librefs, $i, 1;
    splice @DynaLoader::dl_modules, $i, 1;
    DynaLoader::dl_unload_file($ref) or die "dl_unload_file: " . DynaLoader::dl_error() . "\n";
    delete $FastFile::{bootstrap};    # else XSLoader calls the old boot
};
# (the XSUBs are defined again: kept by the unload, not deleted here)
my $reload = sub { no warnings 'redefine'; XSLoader::load('FastFile', $FastFile::VERSION) };
my $wiped = sub {
    open my $fh, '<', '/proc/self/smaps' or return -1;
    my ($kb, $size) = (0, 0);
    while (<$fh>) {
        $size = $1 if /^Size:\s+(\d+) kB/;
        $kb += $size if /^VmFlags:.*\bwf\b/;
    }
    return $kb;
};
my $d = shift;
PERL

my $cached = FastFile::_build_info()->{pid_cache};

# unloaded, then the process exits: perl_destruct runs the exit hooks
# (the unload as a plugin unloader does it: the libref out of DynaLoader's
# lists, dlclose, FastFile::bootstrap deleted)
{
    my ($status, $out) = run_perl($prelude . 'file_set_contents("$d/a", "a"); $unload->(); print "unloaded\n";',
                                  args => [$dir]);
    is($status, 0, 'exit after dl_unload_file: status 0 (no SIGSEGV)') or diag($out);
    is($out, "unloaded\n", 'exit after dl_unload_file: nothing said');
    is(slurp("$dir/a"), 'a', 'exit after dl_unload_file: the file written before');
}

# an XSUB kept (imported) over the unload still runs
{
    my ($status, $out) = run_perl($prelude . '$unload->(); file_set_contents("$d/b", "b"); print "called\n";',
                                  args => [$dir]);
    is($status, 0, 'an imported XSUB called after dl_unload_file: status 0') or diag($out);
    is($out, "called\n", '... it returned');
    is(slurp("$dir/b"), 'b', '... and wrote the file');
}

# unloaded and loaded again 50 times: each load works, the process has one
# pid page all along (the page of the first load), the exit is clean
{
    my $code = $prelude . <<'PERL';
my @wiped = ($wiped->());
for my $i (1 .. 50) {
    $unload->();
    $reload->();
    file_set_contents("$d/c", "c$i");
    push @wiped, $wiped->() if $i == 1 || $i == 50;
}
$unload->();
print "wiped @wiped\n";
PERL
    my ($status, $out) = run_perl($code, args => [$dir]);
    is($status, 0, '50 reloads, then unloaded: status 0') or diag($out);
    is(slurp("$dir/c"), 'c50', '50 reloads: each load writes');
    my ($before, $first, $last) = $out =~ /^wiped (-?\d+) (-?\d+) (-?\d+)$/m;
    SKIP: {
        skip 'no pid page in this build (pid_cache 0)', 2 unless $cached;
        skip 'no /proc/self/smaps VmFlags wf', 2 unless defined $before && $before > 0;
        is($first, $before, 'a reload maps no new pid page') or diag($out);
        is($last, $before, '50 reloads: still one pid page') or diag($out);
    }
}

# a thread made after a reload has its own page; its end and the exit are clean
SKIP: {
    require Config;
    skip 'a perl without ithreads', 2 unless $Config::Config{useithreads};
    my ($status, $out) = run_perl($prelude . <<'PERL', args => [$dir]);
require threads;
$unload->();
$reload->();
threads->create(sub { file_set_contents("$d/t", "t"); 1 })->join or die "thread\n";
$unload->();
print "done\n";
PERL
    is($status, 0, 'ithreads: a thread after a reload, then unloaded: status 0') or diag($out);
    is(slurp("$dir/t"), 't', 'ithreads: the thread wrote');
}

done_testing();
