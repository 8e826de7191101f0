package FastFile;

use strict;
use warnings;

our $VERSION = '0.01';

use Exporter 5.57 'import';
our @EXPORT      = qw(file_set_contents);
our @EXPORT_OK   = qw(file_set_contents file_get_contents file_read_firstline);
our %EXPORT_TAGS = (all => \@EXPORT_OK);

require XSLoader;
XSLoader::load('FastFile', $VERSION);

1;

__END__

=head1 NAME

FastFile - write whole files atomically with the fewest syscalls

=head1 SYNOPSIS

  use FastFile;
  file_set_contents($file, $data, $perm, $force_utf8);

=cut
