package RefWriter;

# The oracle for FastFile's byte-equality tests: a pure-Perl
# file_set_contents written from the contract (spec/contract.md), not from
# any other implementation. It does what the contract says with perl's own
# operators, so that "what would the reference write?" is answered by perl.
#
#   use lib 't/lib';
#   use RefWriter qw(ref_file_set_contents ref_bytes);
#
# ref_bytes($data, $force_utf8) gives the bytes that would be written:
#   - $force_utf8: perl's lax utf8 encoding of a copy (utf8::encode), which is
#     what Encode's "utf8" (not "UTF-8") gives: byte strings are taken as
#     Latin-1, surrogates and non-characters pass through;
#   - else what print() puts out on a handle without layers: a copy printed
#     into an in-memory file (Latin-1 downgrade; wide characters as UTF-8),
#     followed by the caller's $\ when it is defined, as print appends it
#     (undef data too: print writes nothing for it, then $\).

use strict;
use warnings;

use Exporter 'import';
use Errno ();
use Fcntl qw(O_WRONLY O_CREAT O_EXCL);

our @EXPORT_OK = qw(ref_file_set_contents ref_bytes);

# Returns ($bytes, $wide): $wide is true when print warned "Wide character".
sub _bytes {
    my ($data, $force_utf8) = @_;
    return ('', 0) if !defined $data && $force_utf8;
    $data = '' unless defined $data;    # the caller warns for undef
    if ($force_utf8) {
        my $copy = "$data";
        utf8::encode($copy);
        return ($copy, 0);
    }
    my $wide = 0;
    my $buf = '';
    {
        local $SIG{__WARN__} = sub {
            if ($_[0] =~ /^Wide character in print/) { $wide = 1; return }
            warn $_[0];
        };
        local $,;    # $\ is the caller's: print appends it
        use warnings 'utf8';
        open my $mem, '>', \$buf or die "in-memory handle: $!\n";
        print {$mem} $data or die "print to in-memory handle: $!\n";
        close $mem or die "close in-memory handle: $!\n";
    }
    return ($buf, $wide);
}

sub ref_bytes {
    my ($data, $force_utf8) = @_;
    my ($bytes) = _bytes($data, $force_utf8);
    return $bytes;
}

sub ref_file_set_contents {
    my ($filename, $data, $perm, $force_utf8) = @_;

    die "file name is undefined or empty\n" if !defined $filename || $filename eq '';
    $perm = 0644 unless defined $perm;

    if (!defined $data) {
        warnings::warnif('uninitialized', 'Use of uninitialized value in file_set_contents');
    }
    my ($bytes, $wide) = _bytes($data, $force_utf8);
    warnings::warnif('utf8', 'Wide character in file_set_contents') if $wide;

    # open: the plain name first; if it exists, never touch it, try others
    my $tmp = "$filename.tmp.$$";
    my $fh;
    my $tries = 0;
    {
        no warnings 'syscalls';    # a NUL in the path fails with ENOENT, as for open
        until (sysopen $fh, $tmp, O_WRONLY | O_CREAT | O_EXCL, $perm) {
            die "unable to open file '$tmp' - $!\n" unless $! == Errno::EEXIST() && $tries++ < 16;
            $tmp = sprintf '%s.tmp.%d.%08x%08x', $filename, $$, int rand 2**32, int rand 2**32;
        }
    }

    my $ok = eval {
        my ($off, $len) = (0, length $bytes);
        while ($off < $len) {
            my $n = syswrite $fh, $bytes, $len - $off, $off;
            if (!defined $n) {
                next if $! == Errno::EINTR();
                die "unable to write '$tmp' - $!\n";
            }
            if ($n == 0) {
                $! = Errno::ENOSPC();
                die "unable to write '$tmp' - $!\n";
            }
            $off += $n;
        }
        close $fh or die "closing file '$tmp' failed - $!\n";
        undef $fh;
        rename $tmp, $filename or die "close (rename) atomic file '$filename' failed: $!\n";
        1;
    };
    if (!$ok) {
        my ($err, $errno) = ($@, $! + 0);
        close $fh if $fh;
        unlink $tmp;
        $! = $errno;
        die $err;
    }
    return 1;
}

1;
