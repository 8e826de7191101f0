use strict;
use warnings;
use Test::More;

plan skip_all => 'author test: set AUTHOR_TESTING' unless $ENV{AUTHOR_TESTING};
eval { require Test::Pod; Test::Pod->VERSION(1.22); 1 }
    or plan skip_all => 'Test::Pod 1.22 required (Debian: libtest-pod-perl)';
Test::Pod::all_pod_files_ok('lib');
