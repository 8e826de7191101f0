use strict;
use warnings;
use Test::More;

plan skip_all => 'author test: set AUTHOR_TESTING' unless $ENV{AUTHOR_TESTING};
eval { require Test::Pod::Coverage; 1 }
    or plan skip_all => 'Test::Pod::Coverage required (Debian: libtest-pod-coverage-perl)';
# XS functions are documented by name; the XS object must be loaded (make
# first). Perl's hooks are not API: DESTROY, CLONE_SKIP, and the tie methods
# that FastFile::Writer's fh documents together in one paragraph (Pod::Coverage
# 0.23 counts them private already, older versions do not).
my @hooks = qw(DESTROY CLONE CLONE_SKIP
               TIEHANDLE PRINT PRINTF WRITE CLOSE BINMODE FILENO
               OPEN READ READLINE GETC EOF SEEK TELL);
my $hooks = join '|', @hooks;
Test::Pod::Coverage::all_pod_coverage_ok({ also_private => [qr/^(?:$hooks)$/] });
