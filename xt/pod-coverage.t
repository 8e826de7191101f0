use strict;
use warnings;
use Test::More;

plan skip_all => 'author test: set AUTHOR_TESTING' unless $ENV{AUTHOR_TESTING};
eval { require Test::Pod::Coverage; 1 }
    or plan skip_all => 'Test::Pod::Coverage required (Debian: libtest-pod-coverage-perl)';
# XS functions are documented by name; the XS object must be loaded (make first)
Test::Pod::Coverage::all_pod_coverage_ok({ also_private => [qr/^(?:DESTROY|CLONE|CLONE_SKIP)$/] });
