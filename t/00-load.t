use strict;
use warnings;

use Test::More;
use Config;
use POSIX ();
use lib 't/lib';
use FFTest qw(run_perl);

BEGIN { use_ok('FastFile') or BAIL_OUT('FastFile does not load') }

diag("FastFile $FastFile::VERSION, perl $], $^X");

ok(defined $FastFile::VERSION && length $FastFile::VERSION, '$FastFile::VERSION is set');
is(FastFile->VERSION, $FastFile::VERSION, 'FastFile->VERSION eq $FastFile::VERSION');

# The shared object was built with its own XS_VERSION; XSLoader compares it
# with the bootstrap parameter and croaks on a mismatch. Ask a child perl to
# load the same .so with a bogus version: the croak names the object's own.
{
    my $code = 'package FastFile; our $VERSION = "999.999"; require XSLoader;'
             . ' eval { XSLoader::load("FastFile", "999.999"); 1 } and die "loaded anyway\n";'
             . ' print $@';
    my (undef, $out) = run_perl($code);
    like($out, qr/^FastFile object version (\S+) does not match bootstrap parameter 999\.999/,
         'XSLoader checks the object version against the bootstrap parameter');
    my ($so_version) = $out =~ /object version (\S+) does not match/;
    is($so_version, $FastFile::VERSION, 'shared object version agrees with the .pm');
}

is_deeply(\@FastFile::EXPORT, ['file_set_contents'], '@EXPORT is file_set_contents only');
ok((grep { $_ eq 'file_set_contents' } @FastFile::EXPORT_OK), 'file_set_contents is in @EXPORT_OK');
is_deeply([sort @{ $FastFile::EXPORT_TAGS{all} }], [sort @FastFile::EXPORT_OK], ':all is @EXPORT_OK');

{
    package Default;
    FastFile->import;
    ::ok(defined &Default::file_set_contents, 'exported by default');
    ::is(\&Default::file_set_contents, \&FastFile::file_set_contents, '... the XS function');
}
{
    package All;
    FastFile->import(':all');
    ::ok(defined &All::file_set_contents, 'importable via :all');
}
{
    package ByName;
    FastFile->import('file_set_contents');
    ::ok(defined &ByName::file_set_contents, 'importable by name');
}
{
    package Nothing;
    ::ok(!defined &Nothing::file_set_contents, 'not imported into a package that did not ask');
}
ok(!eval { FastFile->import('no_such_function'); 1 }, 'importing an unknown name fails');

# :pve, the PVE::File set under its names: every helper exported by it, the
# XS function itself
{
    my @pve = qw(file_set_contents file_get_contents file_read_first_line file_read_last_line
                 file_copy safe_read_from tempfile tempfile_contents create_owned_file_fh);
    is_deeply([sort @FastFile::PVE_FILE], [sort @pve], '@PVE_FILE: the nine helpers of PVE::File');
    is_deeply([sort @{ $FastFile::EXPORT_TAGS{pve} }], [sort @pve], ':pve has them all');
    package Pve;
    ::ok(eval { FastFile->import(':pve'); 1 }, 'use FastFile ":pve" works') or ::diag($@);
    for my $name (@{ $FastFile::EXPORT_TAGS{pve} }) {
        no strict 'refs';
        ::ok(defined &{"FastFile::$name"}, "$name is defined");
        ::is(\&{"Pve::$name"}, \&{"FastFile::$name"}, ":pve exports $name");
    }
    ::ok(!defined &Pve::file_read_firstline, ':pve does not export the PVE::Tools name');
}
is(\&FastFile::file_read_first_line, \&FastFile::file_read_firstline,
   'file_read_first_line is file_read_firstline under PVE::File\'s name');

is(prototype('FastFile::file_set_contents'), undef, 'file_set_contents has no prototype');

# which build this is (README "Systems and builds"): the portable one has no
# Linux-only call; a Linux build on glibc 2.28+ or musl has them all
{
    my $info = FastFile::_build_info();
    diag('build: ' . join ' ', map { "$_=$info->{$_}" } sort keys %$info);
    is_deeply([sort keys %$info], [sort qw(portable renameat2 sync_file_range getrandom fdatasync O_PATH acl statx pid_cache copy_file_range file_handle)],
              '_build_info: what it tells');
    my @linux = grep { $info->{$_} } qw(renameat2 sync_file_range getrandom O_PATH acl statx copy_file_range file_handle);
    if ($info->{portable}) {
        is("@linux", '', 'the portable build: no Linux-only call');
    } elsif ($^O eq 'linux' && sprintf('%03d%03d', split /\./, $Config{gnulibc_version} || '0.0') ge '002028') {
        is("@linux", 'renameat2 sync_file_range getrandom O_PATH acl statx copy_file_range file_handle', 'a Linux build on glibc 2.28+: every Linux call');
    }
    # the pid kept in a MADV_WIPEONFORK page (xs_pid.c): Linux 4.14 and later,
    # not in the portable build
    my ($kmaj, $kmin) = (POSIX::uname())[2] =~ /^(\d+)\.(\d+)/;
    if ($info->{portable} || $^O ne 'linux') {
        is($info->{pid_cache}, 0, 'the portable build: $$ read each call, no pid page');
    } elsif (defined $kmaj && ($kmaj > 4 || $kmaj == 4 && $kmin >= 14)) {
        is($info->{pid_cache}, 1, 'Linux 4.14+: the pid kept in a page every fork\'s child gets zeroed');
    }
    # the build that was configured here, if it was (make test, prove -b)
    if (open my $fh, '<', 'Makefile') {
        my ($define) = map { /^DEFINE = (.*)$/ ? $1 : () } <$fh>;
        is(!!$info->{portable}, !!(($define // '') =~ /-DFF_PORTABLE\b/), '_build_info agrees with the Makefile\'s DEFINE');
    }
}

done_testing;
