# MANIFEST lists exactly the tracked files (make distcheck, without the noise)
use strict;
use warnings;
use Test::More;

plan skip_all => 'author test: set AUTHOR_TESTING' unless $ENV{AUTHOR_TESTING};
use lib 't/lib';
use FFTest qw(which);

# .git is a directory in a clone, a file in a worktree; a tarball has none
plan skip_all => 'not a git checkout (a tarball: its MANIFEST is what make dist used)' unless -e '.git';
plan skip_all => 'git is not installed (apt-get install git): cannot list the tracked files' unless which('git');

open my $fh, '<', 'MANIFEST' or die "MANIFEST: $!";
my %manifest = map { /^(\S+)/ ? ($1 => 1) : () } grep { !/^#/ } <$fh>;
my %tracked  = map { chomp; $_ => 1 } grep { !m{^\.|/\.|^MANIFEST\.SKIP$} } `git ls-files`;

is_deeply([sort grep { !$manifest{$_} } keys %tracked], [], 'every tracked file is in MANIFEST');
is_deeply([sort grep { !$tracked{$_} && !-e $_ } keys %manifest], [], 'every MANIFEST entry exists');
done_testing;
