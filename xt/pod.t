use strict;
use warnings;
use File::Find ();
use Test::More;

plan skip_all => 'author test: set AUTHOR_TESTING' unless $ENV{AUTHOR_TESTING};
my @files;
File::Find::find(sub { push @files, $File::Find::name if /\.(?:pm|pod)\z/ }, 'lib');

# No formatting code in a verbatim paragraph (an indented example): there
# it is printed as it is, as a literal L</fh> was in FastFile::Writer's
# synopsis.
for my $file (sort @files) {
    open my $fh, '<', $file or die "$file: $!";
    my ($pod, @codes) = (0);
    while (<$fh>) {
        $pod = 1 if /^=[a-z]/;
        $pod = 0 if /^=cut/;
        push @codes, $_ if $pod && /^[ \t]/ && /[BCEFILSXZ]<[^>\s]/;
    }
    is_deeply \@codes, [], "$file: no formatting code in an example";
}

SKIP: {
    eval { require Test::Pod; Test::Pod->VERSION(1.22); 1 }
        or skip 'Test::Pod 1.22 required (Debian: libtest-pod-perl)', scalar @files;
    Test::Pod::pod_file_ok($_) for sort @files;
}
done_testing;
