package Reference;

# The pure-Perl references FastFile is measured against, in one place: the
# tests (t/), the benchmarks and the demo (bench/) use these subs, and traced
# children load this module (inc_args puts t/lib in their @INC).
#
#   use lib 't/lib';
#   use Reference qw(ref_file_set_contents ref_bytes ref_get_contents ref_read_firstline);
#
# - ref_file_set_contents, ref_bytes: the oracle of the byte-equality tests,
#   written from the contract (spec/contract.md): what perl's own operators
#   do, so "what would the reference write?" is answered by perl.
# - print_era, syswrite_era: our reimplementations of Proxmox VE's
#   file_set_contents before and after the pve-devel patch "tools:
#   file_set_contents: use syswrite instead of print" (v2, 2024), from the
#   facts of those versions (which calls, which buffer sizes), not their code.
# - ref_get_contents: the reference reader, an 8 KiB sysread loop;
#   ref_read_firstline: <$fh> and chomp.
# - ref_read_last_line, ref_tempfile, ref_tempfile_contents,
#   ref_create_owned_file_fh: PVE::File's helpers (pve-common 9.2) from the
#   contract's facts (section "PVE::File's other helpers"), bugs included.
# - ref_safe_read_from, ref_file_copy: PVE::File's helpers of the same names,
#   from the contract's facts ("PVE::File's other helpers").

use strict;
use warnings;

use Errno ();
use Exporter 'import';
use Fcntl qw(O_WRONLY O_CREAT O_EXCL);
use Fcntl ();
use IO::File ();

our @EXPORT_OK = qw(ref_file_set_contents ref_bytes print_era syswrite_era
                    ref_get_contents ref_read_firstline
                    ref_read_last_line ref_tempfile ref_tempfile_contents ref_create_owned_file_fh
                    ref_safe_read_from ref_file_copy);

# ref_bytes($data, $force_utf8): the bytes that would be written.
#   - $force_utf8: perl's lax utf8 encoding of a copy (utf8::encode), which is
#     what Encode's "utf8" (not "UTF-8") gives: byte strings are taken as
#     Latin-1, surrogates and non-characters pass through;
#   - else what print() puts out on a handle without layers: a copy printed
#     into an in-memory file (Latin-1 downgrade; wide characters as UTF-8),
#     followed by the caller's $\ when it is defined, as print appends it
#     (undef data too: print writes nothing for it, then $\).
# _bytes also says whether print warned "Wide character".
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

# The print era: IO::File (sysopen O_WRONLY|O_CREAT, no O_EXCL), one print
# through PerlIO's 8 KiB buffer (so one write(2) per 8 KiB; print appends
# $\), close, rename.
sub print_era {
    my ($filename, $data, $perm) = @_;
    $perm //= 0644;
    my $tmp = "$filename.tmp.$$";
    my $fh = IO::File->new($tmp, O_WRONLY | O_CREAT, $perm)
        or die "unable to open file '$tmp' - $!\n";
    print {$fh} $data   or die "unable to write '$tmp' - $!\n";
    close $fh           or die "closing file '$tmp' failed - $!\n";
    rename $tmp, $filename
        or die "close (rename) atomic file '$filename' failed: $!\n";
    return;
}

# The syswrite era (the v2 patch): the data is first printed into an
# in-memory handle (which encodes wide characters like print does, appends
# $\ and makes a copy), then written with a syswrite loop on a sysopen'ed
# handle.
sub syswrite_era {
    my ($filename, $data, $perm) = @_;
    $perm //= 0644;
    my $tmp = "$filename.tmp.$$";
    sysopen my $fh, $tmp, O_WRONLY | O_CREAT, $perm
        or die "unable to open file '$tmp' - $!\n";
    my $bytes = '';
    open my $mem, '>', \$bytes or die "failed to open in-memory variable - $!\n";
    print {$mem} $data;
    close $mem;
    my ($off, $len) = (0, length $bytes);
    while ($off < $len) {
        my $n = syswrite $fh, $bytes, $len - $off, $off;
        die "unable to write '$tmp' - $!\n" unless $n;
        $off += $n;
    }
    close $fh or die "closing file '$tmp' failed - $!\n";
    rename $tmp, $filename
        or die "close (rename) atomic file '$filename' failed: $!\n";
    return;
}

# The reference reader: open, then sysread 8 KiB at a time, appending.
sub ref_get_contents {
    my ($filename, $max) = @_;
    $max ||= 1048576;
    open(my $fh, '<', $filename) or die "can't open '$filename' - $!\n";
    my ($content, $total, $count) = ('', 0);
    while ($count = sysread($fh, $content, 8192, $total)) {
        $total += $count;
        die "file '$filename' too long - aborting\n" if $total > $max;
    }
    die "unable to read file '$filename' - $!\n" if !defined $count;
    close $fh;
    return $content;
}

# The reference file_read_firstline: undef for a missing file, else the
# first line (as <$fh> reads it with the caller's $/), chomped.
sub ref_read_firstline {
    my ($filename) = @_;
    my $fh;
    if (!open($fh, '<', $filename)) {
        return undef if $!{ENOENT};
        die "file '$filename' exists but open for reading failed - $!\n";
    }
    my $res = <$fh>;
    chomp $res if $res;
    close $fh;
    return $res;
}

# ------------------------------------------------ PVE::File's other helpers

# O_TMPFILE, which Fcntl does not export: Linux's (__O_TMPFILE | O_DIRECTORY)
sub O_TMPFILE () { 020000000 | Fcntl::O_DIRECTORY() }

# The reference's signatures (PVE::File has `use v5.36`): a count they
# refuse dies with perl's text, at the caller's line, naming the
# reference's sub (t/18 checks this text against perl's own signatures
# where the perl has them as the reference has, 5.36 and later).
sub _signature {
    my ($name, $got, $min, $max) = @_;
    return if $got >= $min && $got <= $max;
    my (undef, $file, $line) = caller 1;
    die sprintf "Too %s arguments for subroutine 'PVE::File::%s' (got %d; expected %s%d) at %s line %d.\n",
        $got < $min ? ('few', $name, $got, $min == $max ? '' : 'at least ', $min)
                    : ('many', $name, $got, $min == $max ? '' : 'at most ', $max), $file, $line;
}

# file_read_last_line($file): seek to the end, then 4096-byte blocks
# backwards, each prepended, until the bytes before the file's last byte
# hold a newline. The sysfs bug: a file shorter than the size its seek
# reports reads as ''. $! afterwards: its sysread's 0, or the IO::File
# open's ENOTTY when the size is 0 (no read).
sub ref_read_last_line {
    _signature('file_read_last_line', scalar @_, 1, 1);
    my ($file) = @_;
    my $fh = IO::File->new($file, '<');
    if (!$fh) {
        return undef if $! == Errno::ENOENT();
        die "file '$file' exists but open for reading failed - $!\n";
    }
    my $size = sysseek($fh, 0, Fcntl::SEEK_END()) // die "sysseek failed - $!";
    return '' if !$size;
    my ($buf, $pos) = ('', $size);
    while ($pos > 0) {
        my $n = $pos < 4096 ? $pos : 4096;
        $pos -= $n;
        sysseek($fh, $pos, Fcntl::SEEK_SET()) // die "sysseek failed - $!";
        my $block;
        defined sysread($fh, $block, $n) or die "sysread failed - $!";
        return '' if length $block < $n;          # the claimed size: sysfs
        $buf = $block . $buf;
        my $nl = rindex($buf, "\n", length($buf) - 2);
        return substr($buf, $nl + 1, length($buf) - $nl - 1 - ($buf =~ /\n\z/ ? 1 : 0))
            if $nl >= 0 && length($buf) >= 2;
    }
    $buf =~ s/\n\z//;
    return $buf;
}

# tempfile: O_TMPFILE in $opts{dir}, /run/user/<uid>, /run for root or
# /tmp; on EOPNOTSUPP "<dir>/.tmpfile.<pid>" (/tmp without a dir option),
# created and unlinked. An IO::File.
sub ref_tempfile {
    my ($perm, %opts) = @_;
    $perm //= 0600;
    my $dir = $opts{dir};
    $dir = -d "/run/user/$<" ? "/run/user/$<" : $< == 0 ? '/run' : '/tmp' if !$dir;
    my $mode = $opts{mode} // Fcntl::O_RDWR();
    $mode |= O_EXCL if !$opts{allow_links};
    my $fh = IO::File->new($dir, $mode | O_TMPFILE, $perm);
    if (!$fh && $! == Errno::EOPNOTSUPP()) {
        my $path = ($opts{dir} || '/tmp') . "/.tmpfile.$$";
        $fh = IO::File->new($path, $mode | O_CREAT | O_EXCL, $perm);
        unlink $path if $fh;
    }
    die "failed to create tempfile: $!\n" if !$fh;
    return $fh;
}

# tempfile_contents: print (PerlIO: 8 KiB writes, wide characters as UTF-8
# with a warning, $\ appended), flush; the handle closed before a die.
sub ref_tempfile_contents {
    my ($data, $perm, %opts) = @_;
    my $fh = ref_tempfile($perm, %opts);
    if (!print {$fh} $data) {
        my $err = $!;
        close $fh;
        die "unable to write to tempfile: $err\n";
    }
    if (!$fh->flush) {
        my $err = $!;
        close $fh;
        die "unable to flush to tempfile: $err\n";
    }
    return ("/proc/$$/fd/" . $fh->fileno, $fh);
}

# create_owned_file_fh($file, $uid, $gid = -1, $perm = 0640): make_path
# of dirname (a trailing slash is no level), IO::File->new with
# O_WRONLY|O_CREAT|O_EXCL (an undef $perm: IO::File's 0666; $! ENOTTY
# after, from its isatty), chown on the handle; the bug: the cleanup
# unlinks the handle (its name as a string), so the file stays, with a
# warning.
sub ref_create_owned_file_fh {
    _signature('create_owned_file_fh', scalar @_, 2, 4);
    my ($file, $uid, $gid, $perm) = @_;
    $gid = -1 if @_ < 3;
    $perm = 0640 if @_ < 4;
    require File::Basename;
    require File::Path;
    File::Path::make_path(File::Basename::dirname($file));
    my $fh = IO::File->new($file, O_WRONLY | O_CREAT | O_EXCL, $perm)
        or die "unable to create file '$file' - $!\n";
    if (!chown($uid, $gid, $fh)) {
        my $err = $!;
        no warnings 'misc';     # (unlink of a handle: its string)
        unlink($fh) or warn "failed to unlink '$file' after failing to set owner: $!\n";
        $! = $err;
        die "failed to change owner of '$file' to $uid:$gid - $err";
    }
    return $fh;
}

# PVE::File's safe_read_from: sysreads of 8 KiB appended; past $max (false:
# 1 MiB) it dies, naming the file when there is a name; with $oneline the
# first line (without "\n") once a read brings one, whatever else that read
# took from the handle.
sub ref_safe_read_from {
    my ($fh, $max, $oneline, $name) = @_;
    $max = 1048576 if !$max;
    my $subject = defined $name ? "file '$name'" : 'input';
    my $buf = '';
    my $count;
    while ($count = sysread($fh, $buf, 8192, length $buf)) {
        die "$subject too long - aborting\n" if length($buf) > $max;
        next unless $oneline;
        if ($buf =~ /^(.*)\n/) {
            $buf = $1;
            last;
        }
    }
    die "unable to read $subject - $!\n" unless defined $count;
    return $buf;
}

# PVE::File's file_copy: the source read whole (the reader's limit and
# texts), then written as file_set_contents writes it.
sub ref_file_copy {
    my ($src, $dst, $max, $perm) = @_;
    my $content = ref_get_contents($src, $max);
    return ref_file_set_contents($dst, $content, $perm);
}

1;
