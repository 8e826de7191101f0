package FastFile;

use strict;
use warnings;

our $VERSION = '0.03';

use Exporter 5.57 'import';
our @EXPORT      = qw(file_set_contents);
our @EXPORT_OK   = qw(file_set_contents file_set_contents_many file_get_contents
                      file_read_firstline atomic_writer
                      file_read_first_line file_copy safe_read_from
                      file_read_last_line tempfile tempfile_contents create_owned_file_fh);
# :pve, the helpers of Proxmox VE's PVE::File under its names
our @PVE_FILE    = qw(file_set_contents file_get_contents file_read_first_line
                      file_read_last_line file_copy safe_read_from tempfile
                      tempfile_contents create_owned_file_fh);
our %EXPORT_TAGS = (all => \@EXPORT_OK, pve => \@PVE_FILE);

require XSLoader;
XSLoader::load('FastFile', $VERSION);

# PVE::File's name of PVE::Tools' file_read_firstline
*file_read_first_line = \&file_read_firstline;

# safe_read_from($fh, $max, $oneline, $name): a regular file read to its
# end is read in C, fstat and one large read (it
# ends where the reference's 8 KiB sysreads end, at the end of the file or
# at the block that passes $max); any other handle, and $oneline, with the
# reference's own sysreads, since a caller can see what they consumed (a
# pipe's rest, a socket's).
sub safe_read_from {
    my ($fh, $max, $oneline, $name) = @_;
    my ($input, $total, $count) = ('', 0);

    if (!$oneline) {
        my ($read, $done) = _read_regular($fh, $max, $name);
        return $read if $done;
        ($input, $total) = ($read, length $read) if defined $read;
    }
    $max ||= 1024 * 1024;
    my $subject = defined $name ? "file '$name'" : 'input';
    while ($count = sysread($fh, $input, 8192, $total)) {
        $total += $count;
        die "$subject too long - aborting\n" if $total > $max;
        if ($oneline && $input =~ m/^(.*)\n/) {
            $input = $1;
            last;
        }
    }
    die "unable to read $subject - $!\n" if !defined $count;
    return $input;
}

# the streaming writer: FastFile::Writer->new(@_). Its XSUBs are loaded
# with FastFile; FastFile/Writer.pm adds the handle (fh) and its tie
# methods. Where that file cannot be opened now (no fd left: EMFILE), the
# caller gets new's own error, which says so as every FastFile error does
# (the temp's name, $!); if new works after all, the module is loaded
# again, and an error then is the installation's.
sub atomic_writer {
    return FastFile::Writer->new(@_) if $INC{'FastFile/Writer.pm'} || _load_writer();
    my $w = FastFile::Writer->new(@_);
    require FastFile::Writer;
    return $w;
}

# true when FastFile/Writer.pm is loaded now; the caller's $@ and die
# handler see nothing of a failure
sub _load_writer {
    local ($@, $SIG{__DIE__});
    return eval { require FastFile::Writer; 1 };
}

# ---- PVE::File's tempfile, tempfile_contents, create_owned_file_fh: the
# arguments taken as the reference takes them, the file made in C (one
# write(2) of the data), the fd made into the reference's handle here.

# tempfile's directory and flags: $opts{dir} when true (the reference's
# `if (!$dir)`: '' and '0' are none), else /run/user/<uid>, /run for root,
# /tmp; $opts{mode} (default O_RDWR: 2, Linux's, Fcntl not loaded)
sub _tempfile_args {
    my ($perm, $opts) = @_;
    my $given = $opts->{dir} ? 1 : 0;
    my $dir = $given ? $opts->{dir}
            : -d "/run/user/$<" ? "/run/user/$<"
            : $< == 0 ? '/run' : '/tmp';
    return ($perm // 0600, $dir, $given, $opts->{mode} // 2, $opts->{allow_links} ? 1 : 0);
}

# IO::File is the handle's class: loaded first where it can be; with no fd
# left to load it (EMFILE) the XSUB runs first, so that its own error
# ($! EMFILE) is the one seen, and the module is loaded after it if it can
# be (as atomic_writer does; perl loads it at a handle's first method call)
sub tempfile {
    my ($perm, %opts) = @_;
    my @args = _tempfile_args($perm, \%opts);
    return _tempfile(@args) if $INC{'IO/File.pm'} || _load_io_file();
    my $fh = _tempfile(@args);
    _load_io_file();    # (or perl loads it at the first method call)
    return $fh;
}

# The data is read once, by the XSUB (not copied here), but a tied one is
# FETCHed first, as the reference's my ($data, $perm, %opts) = @_ does: a
# FETCH that changes $perm or an option is seen, as there.
sub tempfile_contents {
    my @fetched = tied $_[0] ? ($_[0]) : ();
    my (undef, $perm, %opts) = @_;
    my @args = _tempfile_args($perm, \%opts);
    my $loaded = $INC{'IO/File.pm'} || _load_io_file();
    my $fh = _tempfile_contents(@fetched ? $fetched[0] : $_[0], @args);
    _load_io_file() unless $loaded;    # (or perl loads it at the first method call)
    return ("/proc/$$/fd/" . fileno($fh), $fh);
}

# true when IO/File.pm is loaded now; the caller's $@ and die handler see
# nothing of a failure
sub _load_io_file {
    local ($@, $SIG{__DIE__});
    return eval { require IO::File; 1 };
}

# the reference's signature ($file, $uid, $gid = -1, $perm = 0640): its
# counts refused with perl's text, at the caller's line; its defaults for
# missing arguments only. An undef $perm reaches its IO::File->new, which
# makes it 0666 (no warning). The handle is IO::File's, loaded as for
# tempfile.
sub create_owned_file_fh {
    _croak_caller(sprintf "Too %s arguments for subroutine 'FastFile::create_owned_file_fh' "
                  . '(got %d; expected %s)', @_ < 2 ? ('few', scalar @_, 'at least 2')
                                                    : ('many', scalar @_, 'at most 4'))
        if @_ < 2 || @_ > 4;
    my ($file, $uid, $gid, $perm) = @_;
    $gid = -1 if @_ < 3;
    $perm = 0640 if @_ < 4;
    $perm = 0666 if !defined $perm;
    return _create_owned_file_fh($file, $uid, $gid, $perm) if $INC{'IO/File.pm'} || _load_io_file();
    my $fh = _create_owned_file_fh($file, $uid, $gid, $perm);
    _load_io_file();    # (or perl loads it at the first method call)
    return $fh;
}

1;

__END__

=head1 NAME

FastFile - write whole files atomically with the fewest syscalls, read them back fast

=head1 SYNOPSIS

  use FastFile;                       # exports file_set_contents
  file_set_contents($file, $data, $perm, $force_utf8);

  use FastFile qw(:all);
  my $config = file_get_contents('/etc/pve/storage.cfg');
  my $first  = file_read_firstline('/proc/sys/kernel/hostname');
  file_set_contents($file, $data, { fsync => 1, preserve => 1, if_changed => 1 });
  file_set_contents_many([ $conf => $text, $fw => $rules ], { fsync => 1 });

  use FastFile qw(:pve);              # PVE::File's names
  file_copy($ovmf_vars, $vm_vars, -s $ovmf_vars);   # its size as $max
  my $pem = safe_read_from($fh, 65536, 0, $path);

=head1 DESCRIPTION

FastFile is a drop-in replacement, written in C, for the pure-Perl
C<file_set_contents> of Proxmox VE's tools: the same bytes, modes and error
texts, with one C<write(2)> for the whole file instead of a loop of small
writes. At every instant the target holds either its old or its new contents:
the data goes to a temporary file in the same directory, which is then renamed
over the target.

A normal call costs four syscalls (C<openat>, C<write>, C<close>, C<rename>)
(one C<getpid> more for the first call of a process, see L</THE PID>); the
data is written straight from the scalar's own
buffer unless an encoding needs new bytes. On a FUSE filesystem such as
pmxcfs (C</etc/pve>) this means one FUSE write request per C<max_write> bytes,
where Perl's C<print> makes one per 8 KiB and the filesystem stores the whole
file again for each.

=head1 FUNCTIONS

=head2 file_set_contents

  file_set_contents($filename, $data);
  file_set_contents($filename, $data, $perm);
  file_set_contents($filename, $data, $perm, $force_utf8);
  my $wrote = file_set_contents($filename, $data, \%options);

Writes C<$data> to C<"$filename.tmp.$$"> in the same directory and renames it
to C<$filename>. Exported by default. Returns 1 when it wrote; with
C<< if_changed => 1 >>, 0 when the file already held exactly these bytes.
Dies (see L</DIAGNOSTICS>) on any error, after removing the temporary file;
the target is then untouched. Extra arguments are ignored, as the reference
ignores them. The caller's scalars are never changed: a number passed as
C<$data>, C<$filename> or C<$max> gets no cached string form, a string C<$perm>
no number form (JSON encoders see the same types before and after the call).
A value with both forms is read as perl reads it where the reference uses
it: a dualvar C<$perm> (C<$!>, C<Scalar::Util::dualvar>) by its number, as
C<sysopen> numifies it, a dualvar name or data by its string.
Each argument is read once (C<FETCH>, overloading), on entry, into a private
copy: what is written is the value at the call, whatever user code does
meanwhile (see L</CAVEATS>). A number (data, a numeric name, a numeric C<$\>,
a number that an overloaded C<""> returns) is formatted as the reference formats it, in its own scope: C<1.5> is
C<"1.5"> even under the caller's C<use locale> with a comma radix. After
success C<$!> is what the reference leaves: 0, or C<ENOTTY> (from its
C<sysopen>, perl asks C<isatty>) when there were no bytes to write.

=over 4

=item C<$filename>

The path as perl's C<open> sees it (the string's bytes). Relative paths are
relative to the current directory. A symlink at C<$filename> is replaced by a
regular file, as the reference does (see C<follow_symlinks>).

=item C<$data>

Any scalar, stringified as C<print> would: numbers, objects with overloaded
C<"">, tied scalars (C<FETCH> runs once). C<undef> writes an empty file and
warns. Which bytes are written:

  string                        $force_utf8 false          $force_utf8 true
  bytes (no UTF8 flag)          the bytes                  Latin-1 encoded as UTF-8
  UTF8 flag, chars <= 0xFF      the Latin-1 bytes          the UTF-8 bytes
  UTF8 flag, a char > 0xFF      the UTF-8 bytes + warning  the UTF-8 bytes
  then, if $\ is defined       $\ (the same table)        nothing

C<$force_utf8> is perl's lax C<utf8> encoding: surrogates and non-characters
pass through unchanged.

The output record separator C<$\> (set by C<perl -l>, or by a script) is
appended when C<$force_utf8> is false, for empty or C<undef> data too: the
reference C<print>s the data into an in-memory file, and C<print> appends it.
Data and separator go out with one C<writev(2)>, without a copy.

=item C<$perm>

The mode of the new file, passed to C<open(2)> and so filtered by the umask.
Missing or C<undef> means C<0644>. Numified as perl does: an object through
its overloading (C<< Math::BigInt->new(0600) >>), a string that is no number
as its numeric prefix, with a C<numeric> warning. Under C<-T> a tainted
C<$perm> dies, as the reference's C<sysopen> does. (Newer upstream wrappers pass C<undef>
through to C<sysopen> and end up with C<0666>; FastFile keeps the documented
C<0644>.)

=item C<\%options>

An unblessed hash reference in place of C<$perm> selects options (an
object is a C<$perm>, numified). Unknown keys die with
C<unknown option 'KEY'>, bad values with C<invalid value for option 'KEY'>.
Each option adds only the syscalls named:

=over 4

=item C<< perm => $mode >>

As C<$perm>; an integer from 0 to 07777. Tainted, it dies under C<-T> as
C<$perm> does.

=item C<< utf8 => 1 >>

As C<$force_utf8>.

=item C<< fsync => 1 >>

C<fdatasync> the temporary file before the rename and C<fsync> its directory
after it (C<open>, C<fsync>, C<close>), so the new content survives a power
loss. If the directory sync fails, the call dies, but the target already holds
the new content (the rename is done). Without it no sync call is made. C<EINVAL> and C<ENOSYS> (filesystems
that cannot sync) are not errors. +4 syscalls. With C<mkdir>, each directory
it made is durable too: the parent of each is fsynced as well (+3 syscalls a
level).

=item C<< preserve => 1 >>

When the target exists as a regular file, the new file gets its exact mode
(set-id and sticky bits included, umask not applied) and, where permitted, its
owner and group (C<EPERM> from C<fchown>, as for a non-root user, is not an
error; a non-root member of the file's group then still sets the group, with
a second C<fchown>). Where neither owner nor group can be kept (a non-root
writer outside the old file's group), the new file's group is the
writer's, and the old group's bits do not go to it: the group bits are
those the old file gave both its group and everyone else (its group bits
and its others' bits in common), without the set-group-ID bit. So C<02660>
becomes C<0600>, C<0664> C<0644>, C<02775> C<0755>; the owner's and
others' bits (and sticky) are kept. Likewise, where the owner cannot be
kept (a non-root writer over another user's file), the new file is the
writer's and has no set-user-ID bit, which would run it as the writer
instead of its old owner: C<04755> becomes C<0755> (C<06775> C<02775> for
a member of the old group, who keeps the group); the writer's own
set-user-ID file keeps it. With an ACL (one with a
mask, which the group bits then are) the mask and the named users and
groups are kept, and the ACL's entry for the owning group is limited to
its entry for others, without the set-group-ID bit.
Otherwise C<perm> applies. +3 syscalls (C<lstat>,
C<fchown>, C<fchmod>; +1 C<geteuid> and C<fchown> when the first is refused); owner and mode are set after the data is written, since a write
by a user without C<CAP_FSETID> clears set-id bits. pmxcfs accepts only the modes and owners it assigns itself.

The rule for the new contents: at no moment is a file that holds them more
open than both the old file's mode and the final mode. So while it is
written, the temporary file has only the owner bits that both C<perm> and
the old file grant (C<0600> for an old C<0600> or C<0644> file, C<0400> for
an old C<0400> one; nothing for group and others, as the temporary file's
owner and group are still the writer's); the old mode is set at the commit,
after C<fchown>. Without C<preserve> (or without an old file) the temporary
file is created with the final mode, C<perm> filtered by the umask: a plain
call with C<0600> over an old C<0644> file never shows the new contents to
others, one with C<0644> over a C<0600> file shows them only as the final
file will. The same holds for L</atomic_writer> (for the whole stream) and
L</file_set_contents_many>.

The old file's POSIX access ACL is kept too, or its lack of one (+1
C<lgetxattr> of C<system.posix_acl_access>; before C<fchmod>, C<fsetxattr>
of the old ACL, or C<fremovexattr> of one the new file inherited from the
directory's default ACL): with an ACL the mode's group bits are the ACL's
mask, and that mode alone would open the file to the owning group, which
the ACL may deny; an inherited ACL would open it to users the old file kept
out. Where the filesystem has no ACLs, only the C<lgetxattr>.

In a sticky directory that others may write, world-writable (such as
F</tmp>) or group-writable (mode C<01770>, a directory a group shares), an
old file is preserved only when it belongs to the caller (the effective
uid) or to the directory's owner, the rule of the kernel's
C<fs.protected_regular> (at its level 2, which covers group-writable
ones), applied whatever that sysctl says: anyone (any member of the group)
may plant a file there, and taking its owner and mode would hand its
planter the new contents. And only with one link: anyone may give a file
of the caller's a second name there (C<fs.protected_hardlinks> lets them
link a file they may read and write, any file when it is 0), so a hard
link to root's C<0666> file planted at the target would give root's new
contents that mode. Any other dies
with C<EACCES>, C<unable to preserve owner and mode of 'FILE' - Permission
denied>, before anything is written; the file is left alone. +1 C<geteuid>,
and +1 C<stat> of the directory when the old file is another user's or
has more than one link.

=item C<< if_changed => 1 >>

When the target already holds exactly these bytes, nothing is created, written
or renamed and the call returns 0. The sizes are compared first (C<lstat>);
the file is read (one read of the whole size, as L</file_get_contents> does)
only when they match. Unchanged: C<lstat>, C<openat>, C<fstat>, C<geteuid>,
2 C<read>, C<close>. Changed: +1 syscall (C<lstat>), or +7 when only the bytes
differ. Another user's file in a sticky world-writable or group-writable
directory (such as F</tmp>, or a C<01770> one: anyone, or any member of the
group, may plant one there; see C<preserve>) is never taken as unchanged,
whatever it holds, nor one with more than one link (a hard link to the
caller's file may be a plant too): it is replaced, so that the file is then the caller's (+1 C<stat>
of the directory for another user's file or one with more links).
The file is opened with C<O_NONBLOCK> and C<O_NOFOLLOW> and compared only if
C<fstat> shows a regular file of that size: a FIFO or symlink swapped in after
the C<lstat> is replaced, never waited on or followed. On pmxcfs,
where every modifying request is a sqlite transaction and, on a cluster, a
corosync message every node stores, this is the cheapest write of all: a
rewrite with the same bytes otherwise costs what a change costs (1 KiB file,
3 nodes: 3 messages, 9 transactions, 36 KiB written, ~12 ms of cluster CPU;
pve-cluster 9.1.6, 2026-12-01); with C<if_changed> it sends no modifying
request at all, only the read (one READ request up to 128 KiB).

A skipped write leaves the file as it was (only its atime may move, as a
read moves it): inode (hard links stay), mode and owner (even when C<perm>
differs), mtime, ctime, pmxcfs' version counters; inotify sees only an open, an access and a close-nowrite; it
syncs nothing, even with C<fsync>. So do not pass it where the write itself
is the signal: readers that wait for a new mtime, an inotify event or a
version bump, trigger and lock files, a rewrite meant to set the mode. See
the README's Proxmox VE section.

=item C<< mkdir => 1 >>

Create missing parent directories (mode C<0777> filtered by the umask, like
C<mkdir -p>); another process creating them at the same time is fine. Costs
nothing while the directory exists: the directories are made only when
creating the temporary file fails with C<ENOENT>. A target that ends in C</>
(with C<follow_symlinks>, a link to C<x/>) names a directory and cannot be
written: no directory is made, the call fails as without C<mkdir>.

=item C<< follow_symlinks => 1 >>

When C<$filename> is a symlink (or a chain of them), replace the file it
finally points to, in that file's directory, and keep the links. A loop dies
with C<ELOOP>'s text. +1 C<readlink> for the final file; per link +1
C<readlink> and +1 C<stat> of the directory that holds it, and in a sticky
world- or group-writable directory +1 C<lstat>, C<geteuid> and a second C<readlink>.

Links are followed only where the kernel's C<fs.protected_symlinks> would
follow them, whatever that sysctl is set to, and in sticky group-writable
directories too: a link in a sticky directory others may write,
world-writable (such as F</tmp>) or group-writable (C<01770>), is followed
only when it belongs to the caller (the effective uid) or to the
directory's owner, and has one link (see C<preserve>). (The kernel's rule
stops at world-writable ones; followed, a group member's link would make
the caller replace any file it names.) Any other
dies with C<EACCES>, C<unable to follow symlinks of 'FILE' - Permission
denied>, as C<open> through that link would under the sysctl; the link and
the file it names are left alone. (Only C<$filename>'s own chain is
resolved here; links among its parent directories are the kernel's, as for
C<open>.)

=item C<< noclobber => 1 >>

Fail with C<EEXIST>'s text if the target exists, atomically: C<renameat2>
with C<RENAME_NOREPLACE>, or where the filesystem or the build
(L</SYSTEMS AND BUILDS>) lacks it C<link> and
C<unlink> of the temporary file (if that C<unlink> fails, the link is undone
and the call dies with C<close (rename) atomic file> and the C<unlink>'s
error). The two are one step, as a rename is: once the C<link> is made no
signal handler runs until the C<unlink> is done (its C<EINTR> is retried at
once), so none sees the target with two names, and a signal that comes then
is handled after the call returns. An C<EINTR> of the C<link> itself runs
the pending handlers as an interrupted rename does, after a look that the
C<link> was not made after all: nothing is published yet, so one that dies
leaves no target (in L</file_set_contents_many>, whose renames hold a
C<die> to their end, it is thrown once the target is made). As after any
interrupted rename (C<renameat2> too), the retry first checks that the
temporary file is still the call's own: a handler may have replaced it by
name (see L</DIAGNOSTICS>). A C<link> or C<unlink> that answers C<EINTR>
after the server did it (NFS, FUSE) counts as done. Where neither works (pmxcfs has neither), dies saying so. The temporary file is removed on failure. Together with
C<if_changed>, an existing target is an error even when it holds the same
bytes.

=back

=back

=head2 file_get_contents

  my $bytes = file_get_contents($filename);
  my $bytes = file_get_contents($filename, $max);

Reads the whole file as bytes (no decoding; the result never has the UTF8
flag). C<$max> defaults to 1 MiB (1048576, the pmxcfs file limit); a false
C<$max> means the default, one that is no finite number (C<'nan'>, C<'inf'>)
no limit. A file with more than C<$max> bytes dies with
C<file 'FILENAME' too long - aborting>, decided on the bytes read: C<fstat>'s
size is only a hint (sysfs files report 4096 whatever they hold). Extra
arguments are ignored. Exported on request.

A regular file is read with C<openat>, C<fstat>, one C<read> of its whole size
(plus a byte that would show it grew), and C<close>: a C<read> that comes
back short at the size C<fstat> gave is the end of the file, and no C<read>
that returns 0 follows. Four syscalls; five above 124 KiB (an C<fstatfs>:
is it FUSE?), where an 8 KiB C<sysread> loop needs 130 for 1 MiB. Files
whose size C<fstat> cannot tell (C</proc>, C</sys>, pipes, sockets), or that
hold less or grew past it, are read on until a C<read> returns 0, in blocks
that start at 64 KiB and double.

B<On pmxcfs (C</etc/pve>) and other FUSE filesystems> a read never returns a
mix of two versions of the file. pmxcfs answers each FUSE READ request (at
most 128 KiB) from one version, but a change that comes from another cluster
node can land between two requests of one C<read>: measured on 2026-12-06
on a two-node pmxcfs cluster (pve-cluster 9.1.6), FastFile 0.03 returned torn
files in 1.6% of reads at 200 KiB and 12% at 1 MiB, and about 1% at any size
when the size changed (its extra C<read> of 0 was a second request); pve-common's
readers 4.5% at 20 KiB to 86% at 1 MiB. Now a file of up to 128 KiB less one
byte is one request (the buffer starts on a page, no C<read> of 0), so it is
always one version, with no extra cost. A read that may take more
requests (a file of 128 KiB or more, one that grew while read, or one that
came back short of C<fstat>'s size and was read on) is read a
second time on FUSE (C<fstatfs> tells), in 124 KiB pieces compared with the
first, and returned only when both reads agree byte for byte; when they do
not it is read whole again and checked again, 8 reads at most, then
dies C<unable to read file 'NAME' - changed while read, 8 reads:
Resource temporarily unavailable> (C<$!> C<EAGAIN>) rather than return bytes
that may be torn. That doubles the READ requests of such files on FUSE
(1 MiB: 18 instead of 10, about twice the CPU); local filesystems are read
once. On FUSE a file of 124 to 128 KiB comes back as an OOK string (its
start moved to a page), which perl copies when it is assigned. On one node
(local mode) pmxcfs never tore a read (libfuse keeps a replaced open file);
what holds for C<file_get_contents> holds for C<safe_read_from> of a
regular file, C<file_copy>'s source and the comparison of C<if_changed>
(which writes unless two reads agree that the file holds the data already).
C<file_read_firstline> reads one 8 KiB block (one request) for a first line
shorter than that, and checks a longer one (or a record of another C<$/>)
the same way; C<file_read_last_line>
reads one 64 KiB block: one request, one version, for a last line shorter than
that (a longer one is not checked). The check compares two reads: a file that
changes back to an earlier version while it is read twice (A, B, A, B at
the same points of both reads) could pass it; a file that moves forward
(A, then B) cannot. Under taint mode (C<-T>) the
result is tainted, like C<sysread>'s. C<$!> is 0 after a successful read, as
the reference leaves it.

=head2 file_read_firstline

  my $line = file_read_firstline($filename);

Returns the first record as C<< <$fh> >> reads it under the caller's C<$/>,
C<chomp>ed, like the reference: with the default C<"\n"> the first line
without its newline, the whole content if there is no newline; C<$/ = undef>
the whole file, C<''> the first paragraph (without its trailing newlines),
C<\N> the first N bytes, any other string the text up to it. C<undef> for an
empty file, one that does not exist, a directory (C<$!> C<EISDIR>: the
reference opens it and reads nothing), and an C<undef> (with an
C<uninitialized> warning) or empty C<$filename>, and without an argument.
As the reference's C<chomp $res if $res>, a first record C<"0"> is not
C<chomp>ed (with C<$/ = "0">, the file C<"0abc"> gives C<"0">). C<$/> is taken
when the read starts, after the name: a signal handler that sets C<$/> during
the read changes nothing. Under taint mode (C<-T>) the result is tainted, like
C<readline>'s. C<$!> is left as the reference's C<readline> leaves it: 0 when
the read reached the end of the file, C<ENOTTY> (from its C<open>) when the
record ended before. Reads one 8 KiB block (more only for a longer line).
Extra arguments are ignored. Exported on request.

=head2 file_read_first_line

  my $line = file_read_first_line($filename);

L</file_read_firstline> under the name of Proxmox VE's C<PVE::File> (the
same function: texts and warnings name C<file_read_firstline>). Exported on
request and by C<:pve>.

=head2 file_copy

  file_copy($src, $dst);
  file_copy($src, $dst, $max);
  file_copy($src, $dst, $max, $perm);
  my $wrote = file_copy($src, $dst, $max, \%options);

What C<file_set_contents($dst, file_get_contents($src, $max), $perm)> does,
as the reference C<file_copy> of C<PVE::File> and C<PVE::Tools>: the same
bytes (C<$\> appended, as the reference's C<print> appends it), mode, C<$max>
check (default 1 MiB: pass the source's size for larger files), texts
(the reader's first, then the writer's) and atomic replace, and the
options hash of L</file_set_contents> in place of C<$perm>. The bytes never
pass through a perl string: the kernel moves them from the source into the
temporary file (C<copy_file_range>), so a 4 MiB file costs C<openat>,
C<fstat>, C<openat> of the temp, C<fstatfs>, two C<copy_file_range>, C<close>,
C<rename>, C<close>: nine syscalls, against some 1030 for the reference's
8 KiB reads and one write. Where the kernel refuses (C<EXDEV>, C<EINVAL>,
C<EOPNOTSUPP>, C<ENOSYS>: another filesystem on older kernels, C</proc>,
C</sys>, pipes) and into FUSE (where the kernel would send a C<WRITE> request
per 64 KiB: FastFile's one C<write(2)> sends one per C<max_write>), the
source is read and written in blocks of its whole size, up to 4 MiB. A source
that grows past C<$max> while it is copied dies C<file 'SRC' too long -
aborting>, the target untouched, no temp left. With C<if_changed> or
C<utf8> the bytes are needed in memory (compared, encoded): the source is
read into a private string first, as C<file_get_contents> reads it. Returns
1, or 0 when C<if_changed> found the target holding the bytes already;
under C<-T> that value is tainted when an argument is (perl taints what
is made while a tainted value is used): test it for truth, do not build
names from it. C<$!> afterwards is what the reference leaves. Errors come
in the reference's order, the source's first: when the target cannot be
made, the rest of the source is read (up to a byte past C<$max>) before
the target's error is reported, so a source that is too long or fails to
read says so. Exported on request and by C<:pve>.

=head2 safe_read_from

  my $bytes = safe_read_from($fh);
  my $bytes = safe_read_from($fh, $max, $oneline, $name);

Reads from an open handle, as C<PVE::File>'s C<safe_read_from>: at most
C<$max> bytes (false: 1 MiB), or dies C<file 'NAME' too long - aborting>
(C<input too long - aborting> without C<$name>); with C<$oneline> the first
line without its newline. A plain handle (C<$oneline> false) on a regular
file gets one C<fstat> and one C<read> of its size and a byte more, short at
that size: the end (two syscalls at any size, where the reference makes 129
for 1 MiB and two for a file under 8 KiB; a handle not at the start reads
on to a C<read> of 0), stopping where the reference's 8 KiB C<sysread>s
stop: the handle's offset afterwards is the same, also when it dies C<too
long>. Any other plain handle gets the reference's first 8 KiB C<read>.
Everything else is read exactly as the
reference reads it, with 8 KiB C<sysread>s, because a caller can see what
was consumed: pipes and sockets (with C<$oneline>, what the read that
brought the newline took beyond it is gone, as in the reference), tied
handles (C<READ>), in-memory handles, handles with a C<:utf8> layer
(C<sysread> dies there from perl 5.30 on, and reads characters before),
closed or write-only handles (C<sysread>'s warning and C<EBADF>). Like
C<sysread> it reads from the file descriptor: bytes that a C<readline> left
in the handle's PerlIO buffer are skipped. The result is tainted under
C<-T>; C<$!> is 0 afterwards. Exported on request and by C<:pve>.

=head2 :pve

  use FastFile qw(:pve);

Exports the helpers of Proxmox VE's C<PVE::File> under its names:
C<file_set_contents>, C<file_get_contents>, C<file_read_first_line>,
C<file_read_last_line>, C<file_copy>, C<safe_read_from>, C<tempfile>,
C<tempfile_contents>, C<create_owned_file_fh>.
C<PVE::Tools>' names (C<file_read_firstline>) stay available by name and in
C<:all>.

=head2 file_read_last_line

  my $line = file_read_last_line($file);

PVE::File's C<file_read_last_line> (C<PVE::UPID> reads a task log's status
with it): the last line of C<$file> without its newline. One newline at the
very end of the file is not where the last line starts: C<"one\ntwo\n">
gives C<'two'>, C<"\n"> and C<"a\n\n"> give C<''>, a file without a newline
gives all of it, C<"x\r\ny\r\n"> gives C<"y\r">; an empty file C<''>; a file
that does not exist C<undef>. Bytes, not decoded.

It costs C<open>, C<lseek> to the end, one C<pread> of the last 64 KiB and
C<close>, whatever the file's size (a 100 MiB log: one read); a longer last
line doubles the block read until it starts in it, and then seeks to the end
once more: a file found shorter than the bytes read (cut meanwhile: a log
rotated by copytruncate) is read again, so the line is not joined from
bytes the file held at different times. A file cut while it is read gives
its new last line, or C<''> when it is empty now, never bytes read before
the cut (t/18-last-line.t). Not told apart: a file cut and written again
up to its old size or past it between two blocks of a line longer than
64 KiB (its size then says nothing of the cut: a 200 KiB line rewritten
whole gives 136 KiB of its new bytes, then 64 KiB of the old). The reference reads 4 KiB blocks backwards,
a seek and a read each. The end is where C<lseek> says, as
in the reference: a file whose size reads 0 (some of F</proc>) gives C<''>,
one that cannot seek to its end (F</proc>'s generated files, C<EINVAL>) dies
C<sysseek failed>, a directory dies C<sysread failed - Is a directory> (or
C<sysseek failed> where its filesystem cannot seek to a directory's end);
a file shorter than its size says (sysfs: 4096) gives its real last line
(see L</CAVEATS>). C<$!> afterwards is what the reference leaves: 0 (its
C<sysread>), C<ENOTTY> where the size is 0 and nothing is read (its
C<IO::File> open asks C<isatty>), C<ENOENT> for a missing file. One
argument, as the reference's signature C<($file)>: other counts die with
perl's text, C<Too few arguments for subroutine
'FastFile::file_read_last_line' (got 0; expected 1) at FILE line N.>
Exported on request and by C<:pve> and C<:all>.

=head2 Reading a file that a writer replaces

C<file_get_contents>, C<file_read_firstline> (C<file_read_first_line>),
C<file_read_last_line> and C<file_copy>'s source return the whole old file
or the whole new one when a writer replaces it while they read, by renaming
a new file over it (as C<file_set_contents> and the reference's writers do):
never a mix of the two, and never a spurious C<No such file or directory>.
On FUSE (pmxcfs, F</etc/pve>) the C<open>, or a C<read> of the open file,
can fail with C<ENOENT> (pmxcfs) or C<ESTALE> (FUSE servers with
C<hard_remove>) while the rename is under way, although a file of that name
exists throughout: the kernel asks the server for the replaced file, which
it has dropped. The reference's readers then die (C<can't open 'FILE' - No
such file or directory>; on pmxcfs up to 42% of reads against a writer that
replaces the file in a loop). FastFile's readers retry those two errors and
start over with the new file (what they had read of the old one is
dropped): the first retry at once, then after pauses that double from
0.1 ms, 10 retries at most (51 ms of pauses), after which the error stands. A file that does not exist
still fails at once, with the reference's text and C<$!>: after the failed
C<open>, one C<statx> from the kernel's cache tells a missing name from a
replaced file. Builds without C<statx> (the portable build, C libraries
before glibc 2.28) look the name up with C<fstatat>, which asks the FUSE
server, and pmxcfs answers that with C<ENOENT> too in the same window: there
an C<ENOENT> from C<open> is not retried (C<ESTALE>, and a C<read>'s
failures, still are). A relative name is retried only in the directory it was
first looked up in: a signal handler that changes the working directory
meanwhile ends the retries, and the error stands. A read that succeeds
makes no syscall more. C<safe_read_from>
reads a handle its caller opened, which it cannot open again: its reads are
not retried. C<file_copy> retries its source's reads also where it reads
the source into a string (C<if_changed>, C<utf8>, a FUSE source of 124 KiB
or more). Measured on t/fusefs' pmxcfs mode in F<bench/results.md>
(failed reads per 10,000 against a replacing writer).

=head2 tempfile

  my $fh = tempfile($perm, %opts);

PVE::File's C<tempfile>: an unnamed file, open, as an C<IO::File>
(C<print>, C<flush>, C<seek>, C<fileno>, C<close> and the other methods
work as on the reference's). C<$perm> defaults to C<0600> (the umask
filters it). It is made with C<O_TMPFILE> in C<< $opts{dir} >> when it is
true, else (also for C<''> and C<'0'>, as the reference's C<if (!$dir)>)
F</run/user/E<lt>uidE<gt>> if that is a directory, else F</run> for root,
else F</tmp>; C<< $opts{mode} >> gives the open flags (default C<O_RDWR>;
the handle reads, writes or appends as C<sysopen> with those flags would
make it), C<O_EXCL> unless C<< $opts{allow_links} >>. Where the filesystem
does not support C<O_TMPFILE> (C<EOPNOTSUPP>) the reference creates
F<E<lt>dirE<gt>/.tmpfile.E<lt>pidE<gt>> and unlinks it at once (in F</tmp>
without a C<dir> option); FastFile does so with a C<dir> option, and without
one makes a C<memfd_create> file, so nothing ever appears in a directory
(the named file where C<memfd_create> is missing, before Linux 3.17). The
portable build (L</SYSTEMS AND BUILDS>) always makes the named file.
Exported on request and by C<:pve> and C<:all>.

=head2 tempfile_contents

  my ($path, $fh) = tempfile_contents($data, $perm, %opts);

PVE::File's C<tempfile_contents>: a L</tempfile> holding C<$data>, for
another program to read through C<$path>, C<"/proc/$$/fd/N"> (valid while
C<$fh> is open). The bytes are those C<print> writes on a handle without
layers (wide characters as UTF-8, with a C<Wide character> warning in the
C<utf8> category, never fatal; then C<$\>), written with one C<write(2)>
whatever their size (one C<writev> with C<$\>), where the reference's
C<print> makes one per 8 KiB. C<$fh> is at the end of the data: a later
C<print> appends, C<seek($fh, 0, 0)> reads it back. C<$data> is read once
(tied, overloaded). Exported on request and by C<:pve> and C<:all>.

=head2 create_owned_file_fh

  my $fh = create_owned_file_fh($file, $uid, $gid, $perm);

PVE::File's C<create_owned_file_fh> (task logs): makes the missing parent
directories (as C<File::Path::make_path> of C<File::Basename::dirname>,
mode C<0777> less the umask: for C<'a/b/'> only C<a>, then the create
dies C<Is a directory>), creates C<$file> with C<O_WRONLY|O_CREAT|O_EXCL>
and C<$perm>, sets its owner to C<$uid> and group C<$gid> (default C<-1>:
left as it is) on the open file, and returns the write handle, an
C<IO::File> as the reference's C<< IO::File->new >> makes it (C<ref> says
C<IO::File>, it stringifies C<IO::File=GLOB(0x...)>). C<$perm> missing is
C<0640>; passed as C<undef> it is C<< IO::File->new >>'s C<0666> (C<0644>
under umask 022), as in the reference, whose default applies only to a
missing argument. C<$!> afterwards is C<ENOTTY>, as the reference's open
leaves it. Two to four arguments, as the reference's signature: other
counts die with perl's text (C<Too few arguments for subroutine
'FastFile::create_owned_file_fh' (got 1; expected at least 2) at FILE
line N.>). The file is made in its directory held open (C<O_PATH>); its
handle gets the fd the reference's open gets (the lowest free: 0 with
C<STDIN> closed, inherited across C<exec> as C<$^F> says). If
the owner cannot be set, that file is removed before it dies, from that
directory and only while the name there is still it (see L</CAVEATS>).
Exported on request and by C<:pve> and C<:all>.

=head2 atomic_writer

  my $w = atomic_writer($filename, \%options);
  $w->print(...) for ...;
  $w->commit;

The streaming form of L</file_set_contents>: the same as
C<< FastFile::Writer->new($filename, \%options) >>, see L<FastFile::Writer>.
Data goes to a C buffer (1 MiB by default) that is written with one
C<write(2)> each time it fills; C<commit> publishes the file, and a writer
destroyed without C<commit> removes its temporary file. A relative
C<$filename> names a file in the working directory of this call, whatever
C<chdir> comes before C<commit>. It loads L<FastFile::Writer>'s Perl part
when first called; with no file descriptor left for that (C<EMFILE>) it
fails as C<new> does, naming the temporary file, with C<$!> set. Exported
on request.

=head2 file_set_contents_many

  my $written = file_set_contents_many([ $file1 => $data1, $file2 => $data2, ... ]);
  my $written = file_set_contents_many([ ... ], \%options);

Replaces several files, each atomically, with one durability barrier for all
of them. Each file gets exactly the bytes C<file_set_contents> would write for
it (with the options' C<utf8>), and the options are those of
C<file_set_contents>, applying to every file. Returns the number of files
written (with C<if_changed>, the identical ones are not counted). Exported on
request and with C<:all>.

In this order:

=over 4

=item 1.

Every argument is read (get-magic and overloading once each), and every
target is looked at: a file given twice (under any name of the same
directory; on a directory that folds case, ext4 or tmpfs C<casefold>, vfat,
cifs, names that differ only in case are one file: that is found in step 2,
when the second temporary file's name turns out to be the first's, and is
the same error, with nothing replaced), a target that is a directory (or ends in C</>), a missing
directory (without C<mkdir>), an existing target under C<noclobber> are errors
here, before anything is created: no directory is made until every pair has
passed these checks, and a target ending in C</> never gets its directory
made (as with C<file_set_contents>).

=item 2.

With C<mkdir>, the missing directories are made; then every temporary file
is created and written in full. If one of these steps fails, every temporary
file of the batch is removed, then every directory the batch made (deepest
first, with C<rmdir>, which removes only what is still empty), and no target
has been touched: the tree is as it was. The error is C<file_set_contents>'s,
naming that file, or names the directory that failed.

=item 3.

With C<< fsync => 1 >>: one barrier covers the data of all the temporary
files: C<sync_file_range> (not in the portable build, L</SYSTEMS AND BUILDS>)
starts each one's writeback as soon as it is written,
then C<fdatasync> of each mostly finds its data on disk already (on ext4 one
journal commit serves many files). With 8 or more temporary files these
C<fdatasync> calls run from up to 16 short-lived threads (which take no
signals), so that they wait on one commit together and share its disk cache
flush (one after the other, each would send a flush of its own). This
flushes only the batch's own files, never other processes' data.

=item 4.

The renames, in the caller's order (a signal handler that became pending
meanwhile runs first: if it dies, no target has been touched). While
more than one target is renamed, signals are blocked: none is lost, each
waits and its handler runs once every target is replaced, so that no
handler that calls C<exit>, nor a signal whose default action ends the
process (C<SIGTERM> with no handler), leaves some targets new and the
others old (a signal blocked counts, for an interrupted rename, as one
handled). Blocking holds only the calling thread: in a process with
another thread (an ithread, or a C library's: librados, glib), a signal
sent to the process goes to a thread that does not block it, whose
handler runs there at once, and may end the process (C<exit>, or
C<SIGTERM>'s default action). There (on Linux, where a thread was started
and C</proc/self/task> counts more than one) the renames run in a
short-lived child process that shares the caller's memory, descriptors and
working directory (C<clone>, as C<posix_spawn>'s child) with every signal
blocked, while the caller waits for it: a signal to the process does not
reach it, and it renames every target even if the process ends meanwhile
(t/89-batch-signal-renames.t). That costs a C<stat>, a C<clone> and a
C<wait4> a batch: a batch of two 1 KiB files on tmpfs without C<fsync>
took 94 microseconds of CPU instead of 41 (C<perf stat>, 4000 batches); a
process that never started a thread pays nothing, one whose threads have
all ended the C<stat> (46). Not covered: C<SIGKILL>
or C<SIGSTOP> sent to that child itself (to the process group or cgroup:
systemd's final C<SIGKILL>; killed, the call dies naming the targets
replaced, the next one failed with C<EINTR>, no temporary file left, or
returns when the last rename was made), where C<clone> fails (then the caller renames,
as before), and off Linux or in the portable build, where another thread
may take the signal as described. From the first rename to the end of the call the renames are
never cut short: the directory syncs with C<fsync>, and the rename of a
batch of one file, interrupted (C<EINTR>), run the pending handlers (so that signals
however frequent never fail the batch, and perl never holds more than it
can) and is retried, but a handler that dies there has its C<die> held
until every target is replaced (and, with C<fsync>, durable), then thrown:
it reports a complete batch, as does one that dies in a handler that
became pending during the renames and runs at their end. A handler that
forks there gets C<FastFile: a process forked by a signal handler may not
go on ...> in the child, which leaves the parent's temporary files and
directories alone. If rename I<k> fails, the error lists the
targets already replaced (C<file_set_contents_many: replaced 'A', 'B', then
close (rename) atomic file 'C' failed: $!>); the others are untouched, no
temporary file is left, and a directory the batch made stays only if a
target was renamed into it. If the first rename fails, the message is
C<file_set_contents>'s.

=item 5.

With C<< fsync => 1 >>: each distinct directory is fsynced once, and with
C<mkdir> also the parent of each directory the call made (else a crash could
lose the new directory with everything in it). When the call returns, every
file is durable.

=back

B<What survives a crash.> With C<fsync>, at any moment of the call every
target is its old or its new contents, also after a power loss; all are new
and durable once the call has returned (targets in one directory become
durable together, with its fsync). Without C<fsync>, the files are replaced
atomically for every running process, but a crash can lose the new contents
(the old remain) and, if the directory reaches the disk before the data
(another program fsyncs it, or the filesystem commits it), leave a target
empty or partly written. F<t/72-batch-crash.t> checks this after every
request of a batch on a filesystem that models exactly these rules.

B<Directories.> Every step on a file (the look at the old target, the
creation of the temporary file, the rename, C<noclobber>'s C<renameat2> or
C<linkat> fallback, the removal of temporary files on failure) is relative
to a descriptor of its directory, opened with C<O_PATH> (no read permission
needed: a write-only directory, mode 0300, works as with
C<file_set_contents>); only the C<fsync> of a directory opens it for
reading. So a parent directory renamed while the call runs leaves no
temporary file behind, as long as the batch's directories fit its share of
descriptors (below); a directory that had to be closed and is needed again
is reopened by its name and must still be the same directory (device and
inode), or the batch fails (C<ESTALE>, or C<ENOENT> when nothing has that
name any more; in the renames, after the targets before it were replaced, as
any failing rename) and what it had in that directory, moved away meanwhile,
can no longer be found. The directories made by
C<mkdir> are removed by their names. Relative names (directories reopened,
temporary files removed by full name, directories made and removed) are
taken from the working directory the batch had before user code first ran
in it (a signal handler, or with C<mkdir> the C<$SIG{__DIE__}> hook of a
failure): a C<chdir> there changes nothing of what the batch touches. That
directory is held open from then on (one C<open>; none where no user code
runs, or every name is absolute).

B<Descriptors.> The batch keeps a bounded number of file descriptors open,
whatever the number of files and directories: half of C<RLIMIT_NOFILE>
(C<ulimit -n>), the rest left to the program. Directories stay open in a
cache of that size; temporary files are open only while written, with
C<fsync> in windows of at most 256 (or a quarter of the limit) whose barrier
runs before the next window is written, still all before the first rename.
If the program itself runs out of descriptors (C<EMFILE>), the batch closes
a directory or runs a window's barrier early and goes on. It works under
C<ulimit -n 32>. Directories are grouped by name with one sort and told
apart by device and inode with another; duplicates are found with a hash.

B<Cost.> Per file without C<fsync>: C<statx>, C<openat>, C<write>,
C<close>, C<renameat>, relative to the descriptor of its directory (so the
kernel does not walk the path again for each), plus per batch C<openat> and
C<close> of each directory (and C<fstat> of the directories that hold a file
name also found in another directory, which could be the same directory, or
of all directories with C<fsync>), at most
one C<getpid> and, for more than 4 files, one C<prlimit64>. With C<fsync>,
per file C<sync_file_range> and C<fdatasync>, per directory one C<openat>
and C<fsync>. A directory that leaves the cache costs an C<fstat> and
C<close>, and an C<openat> and C<fstat> each time it is needed again (seven
eighths of the cache stay filled with the first directories, the last eighth,
at least four slots or half of a smaller cache, turns over: with more
directories than the cache holds, the others are opened up to three times,
once per step, unless the caller's order goes back and forth between more of
them than turn over). The C<statx> is what lets a directory target fail
before anything is renamed. It asks only for the type, from the kernel's
cache (C<AT_STATX_DONT_SYNC>), so on FUSE (pmxcfs) a target looked up in the
last second costs no request (the rename's lookup of its target is sent
anyway, so one not looked up costs a C<LOOKUP>). There the type can be as
old as that cache: a target another host turned into a directory within
that second fails at its rename, after the targets before it were replaced,
as one made a directory after the look does anywhere. C<preserve> and
C<if_changed> need the whole stat: C<newfstatat> instead, as where the
kernel or the build has no C<statx> (before Linux 4.11, or C<EPERM> from a
seccomp filter, or the portable build). Memory: about 0.5 KiB per file besides the list itself
(F<bench/batch.md>). Every name and data is taken into a private copy first
(see L</CAVEATS>): what user code does later to the array or its scalars
changes nothing.

B<Speed.> With C<fsync>, 64 files of 1 KiB take 0.08 of the time per file
that 64 C<file_set_contents> calls with C<fsync> take (F<bench/batch.md>,
ext4). Without C<fsync>, a batch in one directory costs about what that loop
costs: 0.93 to 1.00 of its time for 64 files of 1 KiB, 0.74 to 1.25 for
1,000 to 100,000 files (five runs on one VM, whose noise is most of that
spread). It saves the Perl work of each call, but all its temporary files
exist before the first rename, which the kernel pays for (the same syscalls
from C cost up to a fifth more in that order than file by file,
F<bench/bare.c>'s staged mode). Spread over many directories it is mostly slower
than the loop (0.95 to 2 times its time for 1,000 to 100,000 files, one to
ten in each of up to 10,000 directories, under C<ulimit -n 1024>): each
directory is opened and closed, and one the cache cannot hold is opened
again in each step, and in the renames for each of its files when the
caller's order goes round all the directories. There a batch is for what
it promises, not for speed. On FUSE with pmxcfs' caching, 64 targets
written a moment ago take 0.96 to 1.02 of the loop's time (new ones, or
ones not looked up for a second, a C<LOOKUP> each more: 1.05 to 1.1).

=head1 DIAGNOSTICS

=head2 Exceptions

Each ends in a newline; C<$!> is left set to the failing call's error. The
C<$!> text in the message is perl's own as the reference's code gets it,
which has no C<use locale>: English (from perl 5.22 on) whatever the
caller's locale, for every function alike (under the caller's C<use
locale>, C<"$!"> of the C<$!> left set gives the caller's language).
Whatever the error, the target is untouched (but where an
entry says otherwise) and no temporary file is left. Each entry says what
causes it, then what to do.

=over 4

=item C<file name is undefined or empty>

C<$filename> is C<undef> or C<"">. Check the variable that should hold the
path (C<file_read_firstline> returns C<undef> for it instead; for C<"">,
C<create_owned_file_fh> fails as the reference's C<sysopen> does, C<No
such file or directory>, and C<tempfile>'s C<dir> of C<""> or C<"0"> means
no C<dir>, as the reference's C<if (!$dir)>).

=item C<unable to open file 'TEMP' - $!>

Creating C<"$filename.tmp.$$"> failed: the directory is missing, not
writable, or on a read-only or full filesystem; a C<"\0"> in the path fails
here with C<ENOENT>, as perl's C<open> does (with its C<syscalls> warning).
Create the directory (or pass C<< mkdir => 1 >>) and make it writable for
the user that writes.

=item C<unable to write 'TEMP' - $!>

The data did not fit: C<ENOSPC>, C<EDQUOT>, C<EFBIG> (pmxcfs's file size
limit), or C<EIO>; a C<write> that returns 0 counts as C<ENOSPC>. Free space,
raise the quota or write less, then call again. C<Interrupted system call>
(C<EINTR>), here or from any other step: the filesystem answered C<EINTR>
100 times in a row with no signal pending (a FUSE server or an NFS C<intr>
mount that misbehaves; see L</CAVEATS>). Repair or remount it.

=item C<closing file 'TEMP' failed - $!>

The filesystem reported a delayed write error at C<close> (NFS and FUSE do).
Treat it as a failed write: fix the filesystem's problem, then call again.

=item C<close (rename) atomic file 'FILENAME' failed: $!>

The rename onto C<$filename> failed: it is a directory (C<EISDIR>) or a
mount point (C<EBUSY>), or, with C<noclobber>, it exists (C<EEXIST>). Name a
plain file, or remove what is in the way.

=item C<unable to sync 'TEMP' - $!>, C<unable to sync directory of 'FILENAME' - $!>

With C<fsync>: the storage could not make the data (or, after the rename,
the directory entry) durable, usually C<EIO>. After the directory's, the
target already holds the new content but may not survive a crash. Check the
device (the kernel log), then call again.

=item C<unable to set owner of 'TEMP' - $!>, C<unable to set mode of 'TEMP' - $!>

With C<preserve>: C<fchown> or C<fchmod> of the new file failed with
something other than C<EPERM> (C<EROFS>, C<EIO>). Fix the filesystem, or
drop C<preserve>.

=item C<unable to stat 'FILENAME' - $!>

Looking at the existing target (with C<preserve> or C<if_changed>; for every
target of a batch) failed with something other than C<ENOENT>, e.g.
C<EACCES> on a directory of the path. Make the path searchable for the user
that writes.

=item C<unable to create parent directories of 'FILENAME' - $!>

With C<mkdir>: a missing directory could not be made (C<EACCES>, C<EROFS>,
C<ENOTDIR> when a file is in the way). Fix the permissions or remove what is
in the way.

=item C<unable to preserve owner and mode of 'FILENAME' - Permission denied>

With C<preserve>: the target is another user's file in a sticky
world-writable or group-writable directory, whose owner and mode are not taken (see
C<preserve>); it may be a trap planted there. Remove it, or write without
C<preserve>.

=item C<unable to follow symlinks of 'FILENAME' - $!>

With C<follow_symlinks>: a link could not be read, or the chain is longer
than 40 links or loops (C<ELOOP>). Repair the chain of links. With
C<Permission denied> (C<EACCES>): a link in a sticky world- or
group-writable directory belongs neither to the caller nor to the directory's owner, and
is not followed (see C<follow_symlinks>); it may be another user's trap.
Point the caller at a link it owns, or at the file itself.

=item C<noclobber is not supported by the filesystem of 'FILENAME' - $!>

With C<noclobber>: the filesystem has neither C<renameat2>'s
C<RENAME_NOREPLACE> nor hard links (pmxcfs). Drop C<noclobber> there;
nothing else can refuse an existing target atomically.

=item C<unknown option 'KEY'>, C<invalid value for option 'KEY'>

A key that is not in the list under L</\%options>, or a value it does not
take (a reference, a C<perm> outside 0 to 07777). Correct the options hash.

=item C<force_utf8 argument given with an options hash: use its 'utf8' key>

A fourth argument next to an options hash. Put C<< utf8 => 1 >> in the hash
instead.

=item C<can't open 'FILENAME' - $!>

C<file_get_contents> (or C<file_copy>, for its source) could not open the
file (C<ENOENT>, C<EACCES>). Check that it exists and is readable, or use
C<file_read_firstline>, which returns C<undef> for a missing file.

=item C<unable to read file 'FILENAME' - $!>

A read of an open file failed (C<EIO>; C<EISDIR> for C<file_get_contents> of
a directory). Name a readable regular file, or check the device.

=item C<file 'FILENAME' too long - aborting>, C<input too long - aborting>

C<file_get_contents>, C<file_copy> (its source, also one that grew while it
was copied) or C<safe_read_from> read more than C<$max> bytes (default 1
MiB, pmxcfs's limit); the second for C<safe_read_from> without a name.
Nothing was written. C<$!> is 0, as the reference leaves it. Pass a larger
C<$max> if the file may be that big.

=item C<unable to read file 'NAME' - changed while read, 8 reads: Resource temporarily unavailable>

On FUSE (pmxcfs), a file of 128 KiB or more changed during each of 8 reads
in a row, so no read could be shown to hold one version of it (see
L</file_get_contents>). C<$!> is C<EAGAIN>. Try again later.
C<file_read_last_line>, whose last block came back short and was read on
(another version may have answered the rest) in each of 8 reads, dies
C<sysread failed - Resource temporarily unavailable>.

=item C<unable to read file 'NAME' - $!>, C<unable to read input - $!>

C<safe_read_from>'s read failed (C<EIO>; C<EBADF> for a closed, write-only
or in-memory handle, C<EISDIR> for a directory). Pass a handle open for
reading.

=item C<sysread() isn't allowed on :utf8 handles>

C<safe_read_from> of a handle with a C<:utf8> layer (perl 5.30 and later),
as the reference's C<sysread> dies. Read with C<binmode($fh)> first, and
decode the bytes.

=item C<file 'FILENAME' exists but open for reading failed - $!>

C<file_read_firstline> or C<file_read_last_line> could not open an existing
file (C<EACCES>). Make it readable for the user that reads.

=item C<file_set_contents_many: replaced 'A', 'B', then close (rename) atomic file 'FILENAME' failed: $!>

A rename of a batch failed after others had succeeded: the targets listed
are new, all others untouched. Fix the cause given by C<$!>, then write the
batch again (the files already replaced are simply written once more).

=item C<file_set_contents_many: 'FILENAME' is given twice>, C<file_set_contents_many: 'A' and 'B' are the same file>

Two pairs name one file (the second: through another name of its
directory, or, where the directory folds case, a name that differs only in
case); nothing is written. Keep one pair per file. A pair whose target is
named like another pair's temporary file (C<x> and C<x.tmp.PID>) is not an
error: that temporary file takes a random name.

=item C<unable to replace 'FILENAME' - its temporary file 'TEMP' was replaced or removed during the call - $!>

User code that ran while the call owned the temporary file (a signal
handler, or with L</atomic_writer> any code between it and C<commit>)
replaced or removed it by name: the file at that name is not the one the
call wrote, so it is not published. The target is untouched; the file found
at the temporary name is left alone (only the call's own file is removed).
C<$!> is C<ESTALE>. Do not write to a name ending in C<.tmp.$$> while a
write is under way.

=item C<unable to replace 'FILENAME' - its temporary file 'TEMP' was written to during the call - $!>

User code that ran while the call owned the temporary file wrote into it
by name: C<file_set_contents> and C<file_set_contents_many> found other
bytes than the ones passed when they read it back, C<commit> of
L</atomic_writer> another size than it wrote (see L</CAVEATS>). Nothing is
published, the target is untouched, and the temporary file (the call's own)
is removed. C<$!> is C<ESTALE>.

=item C<unable to replace 'FILENAME' - unable to check its temporary file 'TEMP' - $!>

User code ran while the call owned the temporary file, and the check
before its rename (see L</CAVEATS>) could not be made: looking at its name
or reading it back failed (C<EIO>, C<ENOMEM>, C<EMFILE> when a handler kept
every descriptor), or a handler took the owner's read bit away from a
temporary file the call made readable, so that a user other than root
cannot read it back (C<EACCES>). A check not made is never taken as
passed: nothing is published, the target is untouched, and the temporary
file is removed where it can still be told to be the call's own. C<$!>
says what failed.

=item C<unable to replace 'FILENAME' - Is a directory>

A target of a batch is a directory, or ends in C</>; nothing is written (no
directory is made). Name a file.

=item C<unable to open directory 'DIR' - $!>, C<unable to create directory 'DIR' - $!>

A directory of a batch could not be opened (C<ENOENT> without C<mkdir>,
C<ENOTDIR>, C<EACCES> without search permission) or made (C<mkdir>: C<DIR> is
the level that failed); nothing is written and the directories the batch had
made are removed again. Create the directory, or fix its permissions.

=item C<unable to open directory 'DIR' again, it was moved or replaced during the call - Stale file handle>

A batch with more directories than its share of descriptors had to reopen
C<DIR> by name and found another directory there (C<ESTALE>). Targets listed
as replaced (C<file_set_contents_many: replaced 'A', then ...>) are new,
others untouched; temporary files in the moved directory can stay. Do not
move a batch's directories while it runs.

=item C<unable to sync directory 'DIR' - $!>

The C<fsync> of a directory (with C<mkdir>, of the parent of one made)
failed after the renames (C<EIO>; C<EACCES> when the directory is not
readable, as for C<file_set_contents>): every target is replaced (the error
says so) but may not be durable. Check the device, then write the batch
again.

=item C<file_set_contents_many: expects an array reference of file =E<gt> data pairs>, C<file_set_contents_many: odd number of elements: expects file =E<gt> data pairs>, C<file_set_contents_many: options must be a hash reference>

The arguments are not C<< [ file => data, ... ], \%options >>. Pass an array
reference of pairs and, if any, a hash reference of options.

=item C<file_set_contents_many: $!>

The batch found no memory for its bookkeeping (C<ENOMEM>). Write fewer files
per call.

=item C<sysseek failed - $! at ...>, C<sysread failed - $! at ...>

C<file_read_last_line> could not seek to the end of the file (C<EINVAL>: a
file of F</proc> generated on reading, or a directory on a filesystem that
cannot seek in one) or read it (C<EISDIR>: a directory; C<EIO>). The
reference's texts. Read such files with C<file_get_contents>.

=item C<failed to create tempfile: $!>

C<tempfile> or C<tempfile_contents> could not make the file: the directory
is missing (C<ENOENT>), not a directory (C<ENOTDIR>), not writable
(C<EACCES>), or the process is out of descriptors (C<EMFILE>). Give a
C<dir> that exists and is writable, or close descriptors.

=item C<unable to write to tempfile: $!>, C<unable to flush to tempfile: $!>

C<tempfile_contents> could not write the data (C<ENOSPC>, C<EFBIG>,
C<EIO>); the file is closed, nothing is left. The reference's texts, as its
C<print> through an 8 KiB buffer fails: "write" when the kernel stopped
within the data's whole 8 KiB blocks (its C<print> fails), "flush" when
only in the rest after them, or for data under 8 KiB (its C<flush> fails). Free space in the directory, or give another C<dir>.

=item C<unable to create file 'FILE' - $!>

C<create_owned_file_fh> could not create C<FILE>: it exists already
(C<EEXIST>: the handle is only ever for a new file), or the directory is
not writable (C<EACCES>).

=item C<mkdir DIR: $! at ...>

C<create_owned_file_fh> could not make the parent directory C<DIR> (the
level that failed, as C<File::Path::make_path> names it; C<File exists>: a
file is in the way). Create it, or remove what is in the way.

=item C<failed to change owner of 'FILE' to UID:GID - $! at ...>

C<create_owned_file_fh> could not set the new file's owner (C<EPERM>: only
root may give a file away; root on FUSE, vfat, NFS with root squash); the
file it made has been removed, unless a warning says otherwise. Run as
root on a filesystem that keeps owners, or pass your own uid.

=item C<Too few arguments for subroutine 'FastFile::NAME' (got N; expected M) at ...>, C<Too many arguments ...>

C<file_read_last_line> (one argument) or C<create_owned_file_fh> (two to
four) was called with another count, which the reference's signatures
refuse with these texts. Pass the arguments the function takes.

=item C<FastFile: a process forked by a signal handler may not go on with the write of process N>

=item C<FastFile: a process forked by a signal handler may not go on with the read of process N>

A signal handler forked and the child returned into the write, or into a
read of C<file_get_contents> or C<file_read_firstline> (whose file offset it
shares with the parent; see L</CAVEATS>); the parent's call goes on. End the
child in the handler (C<exit> or C<exec>).

=item C<Insecure dependency in file_set_contents while running with -T switch>

Under C<-T>, a tainted C<$filename>, as for C<open>, or a tainted C<$perm>
(positional or the C<perm> option), as for C<sysopen> (C<... in
file_set_contents_many> for a batch, C<... in FastFile::Writer-E<gt>new> for
the writer). Untaint it with a pattern match that checks it.

=item C<Wide character in $/>

C<file_read_firstline> under a C<$/> with characters above 0xFF, as
C<readline> says on a file of bytes. Use a C<$/> of bytes (encode it).

=back

=head2 Warnings

Warnings follow the caller's lexical C<no warnings> and reach
C<$SIG{__WARN__}>, but are never fatal: under C<use warnings FATAL =E<gt> 'all'>
(or C<use strictures>) the call still does its work, as the reference's
warnings come from its own scope. The texts name FastFile's functions where
the reference's name C<print> or C<open>.

=over 4

=item C<failed to unlink 'FILE' after failing to set owner: $!>

C<create_owned_file_fh> set no owner and did not remove the file it had
created; it dies after this warning. C<Stale file handle>: another file
had been moved to that name meanwhile, and was left alone. C<Too many open
files>, C<Permission denied>: its directory could not be held (see
L</CAVEATS>), so nothing was removed. Remove C<FILE> by hand once you know
which it is.

=item C<Wide character in file_set_contents> (category C<utf8>)

(C<... in file_set_contents_many> for a batch.)

The data has characters above 0xFF and C<$force_utf8> is false: it is written
as UTF-8, as C<print> does. On by default. Encode the data first, pass
C<$force_utf8>, or say C<no warnings 'utf8'> if UTF-8 is what you want.

=item C<Use of uninitialized value in file_set_contents> (category C<uninitialized>)

C<$data> is C<undef>; an empty file is written (also from
C<file_read_firstline> for an C<undef> C<$filename>). Pass C<""> for an
empty file.

=item C<Argument "%s" isn't numeric in %s> (category C<numeric>)

A C<$perm>, C<$max> or option value that is no number; its numeric prefix is
used, as perl does. Pass a number (C<oct> a mode string first).

=item C<Invalid \0 character in pathname for %s: %s> (category C<syscalls>)

A C<"\0"> in a file name: the call fails with C<ENOENT> (its own exception;
C<file_read_firstline> returns C<undef>), as perl's C<open> does. Remove the
NUL byte from the name (it often comes from unchecked input).

=back

=head1 THREADS

FastFile keeps no global state: it is safe to call from several ithreads at
once. Threads share C<$$>, so two threads writing the same C<$filename> at the
same time collide on the temporary name; the second one then picks a random
suffix and both writes stay atomic.

=head1 THE PID

Temporary names carry C<$$>. Perl asks the kernel for C<$$> each time it is
read (C<getpid>); FastFile asks once per process and keeps the answer in a
memory page of each interpreter that is mapped with
C<madvise(MADV_WIPEONFORK)> (Linux 4.14 and later): the kernel gives every
child of a fork a zeroed copy of that page, so a child never uses its
parent's pid, however it was made - perl's C<fork> (in a signal handler
too, or from another ithread), C<open> with C<-|>, C<system>, a C library's
C<fork()> in another XS module, even a raw C<fork> or C<clone(SIGCHLD)>
through C<syscall()>. No handler is registered with the C library and no
state is shared between interpreters; each interpreter unmaps its page
when it is destroyed. A script that assigns to C<$$> gets its value in the
names, as with the reference. Not covered: a process made by a raw
C<clone> with C<CLONE_VM> (sharing this memory) through C<syscall()> keeps
its parent's pid in the names; the clash is then refused by C<O_EXCL> and a
random name taken, as for any name that exists. On kernels before 4.14, in
the portable build and off Linux, C<$$> is read each call (one C<getpid>
a call); C<_build_info()> says which with C<pid_cache>.

The page is released by a hook perl calls when the interpreter ends, code
of FastFile's shared object, as are the functions a script has imported.
The object therefore makes itself permanent when it is loaded (C<dlopen>
of itself with C<RTLD_NODELETE>, glibc and musl):
C<DynaLoader::dl_unload_file> on it (a plugin unloader) keeps it mapped, so
the exit stays clean and an imported function still works; loaded again,
it maps no second page and adds no second hook (t/06-unload.t). Where the
C library has no C<RTLD_NODELETE> (or C<dladdr>), the object must not be
unloaded while perl runs.

=head1 SYSTEMS AND BUILDS

FastFile is built and tested on Linux, with glibc or musl, gcc or clang
(C<perl Makefile.PL CC=clang>). Elsewhere it needs POSIX.1-2008: C<openat>,
C<fstatat>, C<renameat>, C<link>, C<fsync>, C<writev>,
C<clock_gettime(CLOCK_MONOTONIC)> and C<O_CLOEXEC>, C<O_DIRECTORY>,
C<O_NOFOLLOW>. F<Makefile.PL> compiles a probe of these and, where one is
missing, or on Windows (including Cygwin), VMS, OS/2 or DOS, where C<rename>
cannot replace a file atomically or a directory cannot be synced, it prints
C<OS unsupported> with what is missing and exits 0 (CPAN testers report NA).
The BSDs, macOS and illumos have these calls; they get the portable build,
untested by us.

Debian 12 (Proxmox VE 8: perl 5.36.0, glibc 2.36) and Debian 13 (Proxmox VE
9: perl 5.40.1, glibc 2.41) are tested, both last on 2026-12-06; the module
behaves the same on both. What differs for a user: the FUSE packages (on 12
C<fuse>, FUSE 2, which PVE 8's pmxcfs needs, and C<fuse3> remove each other;
on 13 C<fuse> is a transitional package for C<fuse3>, and PVE 9's pmxcfs uses
libfuse3; FastFile needs neither), and the names C<strace> shows: glibc 2.41
makes C<fstat> with the C<fstat> syscall, glibc 2.36 with
C<newfstatat(fd, "", ..., AT_EMPTY_PATH)>.

The portable build, C<perl Makefile.PL FF_PORTABLE=1> on Linux (always so
elsewhere), uses no Linux-only call; the test suite passes in it. What changes:

=over 4

=item *

C<noclobber> always uses C<link> and C<unlink> instead of C<renameat2>: an
existing target is still never replaced, but the filesystem needs hard links
(else the call dies with C<noclobber is not supported>), and a crash between
the two calls leaves C<"$filename.tmp.$$"> as a second name of the new,
complete file.

=item *

C<file_set_contents_many> with C<fsync> starts no writeback early
(C<sync_file_range>): each C<fdatasync> writes and waits for its own file, so
the barrier is slower for many files; it is as durable.

=item *

C<file_set_contents_many> opens each directory for reading instead of with
C<O_PATH>: a write-only directory (mode 0300) fails with C<unable to open
directory> (C<EACCES>), where C<file_set_contents> still writes.

=item *

C<preserve> keeps the old file's owner and mode but not its POSIX ACL (Linux
keeps it in an extended attribute, which the portable build does not use).

=item *

A temporary file's random suffix (needed only when the plain name is taken)
comes from the clock instead of C<getrandom>; C<O_EXCL> still refuses any
existing name.

=item *

A temporary file's identity, checked before its rename once user code ran,
is its device and inode without its file handle (C<name_to_handle_at>): a
file a signal handler made with the temporary file's inode number is taken
for it (see L</CAVEATS>).

=item *

Where POSIX synchronized I/O is not advertised (macOS, musl), C<fsync>
replaces C<fdatasync>: it also writes metadata, never less. On macOS,
C<fsync> does not flush the drive's own cache (C<F_FULLFSYNC> would).

=back

C<FastFile::_build_info()> returns what the build uses, for tests: a hash
reference with C<portable>, C<renameat2>, C<sync_file_range>, C<getrandom>,
C<fdatasync>, C<O_PATH>, C<acl>, C<statx>, C<file_handle> and C<pid_cache> (the pid is kept,
L</THE PID>), each 1 or 0.

=head1 CAVEATS

=over 4

=item *

PVE::File's helpers, intended differences: C<file_read_last_line> gives a
sysfs file's real last line (the reference reads at the size the file
claims, 4096, and returns C<''>); it retries C<EINTR>. C<tempfile> without
a C<dir> option makes a C<memfd_create> file where the directory refuses
C<O_TMPFILE> (the reference names a file in F</tmp> for a moment); the
memfd's mode is C<$perm> without the umask (only the owner and root can
open F</proc/E<lt>pidE<gt>/fd>), and it is always open for reading and
writing, whatever C<< $opts{mode} >>. C<tempfile_contents> writes its data
with one C<write(2)> (the reference: one per 8 KiB), and its warnings
follow FastFile's scope (they are on) and say C<tempfile_contents>, not
C<print>. C<create_owned_file_fh> removes the file when setting its owner
fails (the reference passes its handle to C<unlink>, which removes
nothing, and warns): the file it made, in the directory it made it in
(held open since), checked by C<fstatat> to be the file its descriptor
still has open just before C<unlinkat>. A parent directory swapped for a
symlink meanwhile moves nothing; another file moved to the name is left
alone, with the reference's warning (C<Stale file handle>). Not covered:
another process that replaces the name between that check and the
C<unlinkat> (one system call apart; it needs write permission on the
directory). In the portable build, a parent directory it may write but
not read cannot be held (no C<O_PATH>): the file is then made by its path
and nothing is removed (the warning says C<Permission denied>); so too with
one fd left, which the reference's open needs and the file gets (C<Too
many open files>). It does
not load C<File::Path> or C<File::Basename>. Under C<-T> it refuses
a tainted C<$uid>, C<$gid> or C<$perm> before making anything (the
reference dies in its C<sysopen> or C<chown>, after making the directories
and, for C<chown>, the file).

=item *

C<file_copy> writes the temporary file while it reads the source (the
reference reads all of it first): a source whose read fails midway
(C<EIO>) fails the same way, but after the temp was made (and removed
again), so with C<< mkdir => 1 >> the target's missing directories exist
afterwards. Sources that C<fstat> says are longer than C<$max> fail
before anything is made, when a byte past C<$max> is there (a sysfs file,
which says 4096 bytes, is copied when what it holds fits); so do sources
of unknown size (pipes, devices, C</proc>) that pass C<$max> or fail
within their first block (64 KiB); a longer one that passes C<$max> later
fails after the temp was made (and removed). When the target cannot be
made (its name refused too: C<undef>, C<''>, tainted, a NUL byte in it),
the rest of the source is read before its error is reported, so the
source's error (too long, a failed read) comes first, as in the
reference. A source that fails after a write to the temp failed
(C<ENOSPC>) is not read on: the write's error is reported, where the
reference, which read everything first, reports the source's.

=item *

C<file_copy> with a sysfs source (C<fstat> says 4096 bytes, fewer are
there) copies what is there, as the reference does. A FIFO or a
character device as source is read to its end, as the reference reads it.

=item *

C<safe_read_from> on a plain regular file reads in one go where the
reference reads 8 KiB at a time: a file that another process appends to
during the call may be read to a different end. Its C<EINTR>s are retried
(the reference dies); the 8 KiB path keeps the reference's behaviour.

=item *

The umask filters C<$perm>, as for C<open>.

=item *

Without C<< fsync => 1 >> the new content is atomic but not durable: after a
power loss the file may hold its old contents (or, on some filesystems, be
empty).

When C<< fsync => 1 >> is needed, by what a power cut left on real
filesystems (F<t/92-crash-block.t>, every disk state a crash could leave,
F<bench/results.md>): without it, a replaced file was its old or its new
bytes on ext4 with its default options, xfs and btrfs, but could be empty,
or its new size of zeros, on ext4 with C<data=writeback> and
C<noauto_da_alloc>; a new file could be missing, empty or zeros on ext4 and
btrfs. With it, every target was old or new in full during the call and new
once it returned, on all of them. So pass C<< fsync => 1 >> when the new
content must survive a power loss, when a created file must never be found
empty, or when the filesystem's options are not known; leave it out for
files that may go back to their old content (or, created, go missing) after
a crash.

=item *

A writer killed with C<SIGKILL> leaves its C<"$filename.tmp.$$"> behind: no
code runs to remove it. The target itself is never partial.

=item *

If C<"$filename.tmp.$$"> already exists (another live writer, perhaps on
another cluster node with the same PID), FastFile never removes it: it tries
C<"$filename.tmp.$$.RANDOM"> instead. The reference unlinks it. Where that
longer name would not fit (a file name of about 230 bytes or more, past
C<NAME_MAX>, or a filesystem that says it is too long), the random part
takes the place of the file name's last 17 bytes instead
(C<"${shortened}.tmp.$$.RANDOM">, as long as C<"$filename.tmp.$$">): the
fallback fits wherever the plain name does. One
exception: when the exclusive create was interrupted (C<EINTR>) and the
retry finds the name taken, NFS or a FUSE server may have created the file
before answering C<EINTR>. That file is removed (never opened), but only
when it looks exactly like what that create makes: a regular file with one
link, owned by the effective uid, empty, no mode bit beyond the mode asked
for, changed since the call began (within the second); then a random name
is taken, never that name again. Nobody else can make a file owned by the
caller; at worst another writer of the same uid and PID (another PID
namespace or node, another thread) that has just created that name and
written nothing yet fails its rename with C<ENOENT>, its target untouched.
(Creating the name again would let that writer's rename publish this
call's half-written file.)

=item *

C<EINTR> is retried after running perl's pending signal handlers, so an
C<alarm> still fires; a handler that dies leaves no temporary file. The
reference dies on C<EINTR>. An C<EINTR> that comes with no signal pending
(a misbehaving FUSE server, an NFS C<intr> mount) is retried too, but after
100 of them in a row the call dies with C<EINTR>'s text (target untouched,
no temporary file) instead of spinning at full CPU; a signal handled starts
the count again, so signals however frequent never make a call fail. A signal that cuts a C<write> short is handled
before the rest is written, too. C<EINTR> from C<close> is not an error
(Linux has closed the descriptor); pending handlers then run before the rename.
A handler that changes the working directory (C<chdir>) moves nothing of a
call with a relative name: before handlers first run in the middle of
L</file_set_contents>, L</file_copy>, L</tempfile> or L</tempfile_contents>,
the working directory is held open (one C<open>, C<O_PATH>; none where no
handler runs or the name is absolute), and the rest of the call (the look
at the old target that C<follow_symlinks>, C<preserve> and C<if_changed>
take, the temporary file's creation, C<mkdir>, the rename or
C<noclobber>'s link, the directory's C<fsync>, the removal of the
temporary file on an error) happens in the directory the call started in.
For L</file_copy> that holds from the source's open on: a handler that runs
while the source is opened (a FIFO, an C<EINTR>) or read, before any
temporary file exists, moves neither a relative source's open nor the
target. With no descriptor left for the hold (C<EMFILE>), the call
fails before its handlers run ("unable to hold the directory of 'NAME'
while signal handlers run - Too many open files", or L</tempfile>'s
"failed to create tempfile: ...", C<$!> set), the target untouched and
no temporary file left; the handlers run once it is done. The
reference's C<rename> and cleanup follow such a C<chdir> and leave its
temporary file behind.

=item *

What is written is what was passed, as in the reference, which copies its
arguments on entry (C<my ($filename, $data, ...) = @_>). Every argument (each
name and data of a batch, C<$\>; C<$/> when a reader starts reading) is taken
once, get-magic and all, into a private copy the call owns, before any user
code can run but their own C<FETCH>es, which run in order; one that frees the
arguments after it (clears the array they are aliases of) changes nothing
either: they are held until taken. User code that runs in the middle of a call (signal handlers, a
C<$SIG{__WARN__}> handler for its warnings, overloading, C<FETCH>) may then
read, assign, append to, free or re-tie the caller's variables, clear the
array they are in, or set C<$/> or C<$\>: that changes nothing of what is
written, and nothing of the caller's is made read-only (a C<__WARN__> logger
that appends to the buffer being written works, as with the reference).
The copy costs no copy of the bytes for a plain string: perl's
copy-on-write shares the caller's buffer (also a string built by appending,
whose allocation has room to spare, which perl's own C<$x = $y> would copy),
and a later change un-shares it on the caller's side. Copied are: a string
with an offset (after C<substr($s, 0, N, '')> or C<s/^...//>), one whose
buffer has no room for the share count (its allocation ends right after the
string), a read-only string that is not shared already, one shared 256 times
already; magical values (tied, C<$1>, C<$!>, C<threads::shared>, tainted)
unless perl's own C<$x = $y> would share them; and the string forms of
numbers and references (overloading runs once, on the copy). A handler that
dies leaves the old file, no temporary file and no descriptor or memory of the
call. A child forked by a handler never removes or writes to its parent's
temporary files (C<file_set_contents_many>'s too): if it returns into the call,
that dies in the child with
C<< FastFile: a process forked by a signal handler may not go on with the write
of process PID >>. The readers likewise: a child that returns into a read dies
(C<... with the read of process PID>) instead of reading on from the offset it
shares with the parent, so the parent still gets the whole file.

=item *

A signal that arrives while the data is written has its handler run after
the C<close> and before the C<rename>, as in the reference: an C<alarm>
handler that dies leaves the target untouched and no temporary file. A
signal after the rename is handled after the call returns.

=item *

Nothing is published but what the call wrote. Before user code can run
while a call owns temporary files (a signal handler, and for
L</atomic_writer> everything between it and C<commit>), the identity of
each is noted: its device and inode and, where the filesystem gives one
(C<name_to_handle_at>: ext4, xfs, btrfs, tmpfs), its file handle, which
holds the inode's generation (a call that fails removes its temporary files
before it dies, so a C<$SIG{__DIE__}> hook never sees one); the rename, and the
removal of a temporary file on an error, first check that its name still
is that file. A handler that replaces a temporary file by name (writes
C<"$file.tmp.$$"> with C<file_set_contents>, renames over it, removes it,
removes it and creates that name again) makes the call fail
(C<... its temporary file 'TEMP' was replaced or removed during the call>),
target untouched, the other file left alone, also where the new file got
the temporary file's inode number (ext4 and xfs give a freed number to the
next file made).

A handler that writes I<into> a temporary file by name (opens
C<"$file.tmp.$$"> with C<< > >>, C<<< >> >>>, C<< +< >>: the call's own
file) is found too. Once a handler ran, C<file_set_contents> and
C<file_set_contents_many> read each temporary file back before its rename
and compare it with the bytes passed (and C<$\>): any difference makes the
call fail (C<... its temporary file 'TEMP' was written to during the
call>), target untouched, the temporary file removed. L</atomic_writer>
keeps no copy of its bytes: C<commit> fails the same way when the file's
size is not where the writer's own descriptor ended (a write with
C<< > >> or C<<< >> >>> after the writer's last one changes it); other
writes into it are published: bytes changed in place, and a C<< > >>
followed by more of the writer's own bytes (which land after a hole). C<file_copy> checks the identity only: bytes
written into its temporary file are published.

The cost: none where no handler runs (C<file_set_contents> stays at 4
system calls, a batch at 5 a file); when a handler first runs, one C<fstat>
(C<fstatat> in a batch) and one C<name_to_handle_at> per temporary file; before its rename one
C<name_to_handle_at> (C<fstatat> without a handle) and, for the single call
and the batch, C<openat>, C<read> of the whole file, C<close>. The writer
always pays C<fstat> and C<name_to_handle_at> in C<atomic_writer>, and
C<lseek>, C<name_to_handle_at> and C<fstatat> in C<commit>.

Not covered: where there is no file handle (a filesystem without them,
such as overlayfs; a build without C<name_to_handle_at>, such as the
portable one), and on FUSE, whose handle is the server's node id, given
anew to the same file after the kernel forgot its inode (memory pressure),
the identity is the device and inode alone, and a file a handler made that got the temporary file's
inode number is taken for it: the single call and the batch still fail when
its bytes are not the call's, the writer when its size is not, and the call
removes that file as its own. A temporary file the call made without the
owner's read bit (a C<perm> such as C<0200>, or C<preserve>'s old mode),
which a user other than root may not read back, is checked by its identity
and its size: bytes changed in place at the same size are published. Another
process, or another ithread of this one, that replaces a temporary file
between that check and the rename (nothing can close that window with
C<rename>), and C<noclobber>'s link fallback retried after C<EINTR>. Within a
batch, a temporary file whose name is another pair's target takes a random
name, so one pair's rename never replaces another's temporary file.

=item *

Cleanup always finishes: a batch out of file descriptors, that cannot
reopen a directory that left its cache, removes the temporary files there by
their full name, once that name is seen to lead to the same directory (and
where user code ran, to the same file). A child forked by a signal handler
leaves everything its parent made, temporary files and new directories,
at every step.

=item *

An C<undef> or empty C<$filename> dies early with a clear message
(C<file_read_firstline> returns C<undef>, as the reference does).
C<file_read_firstline> dies on a read error other than C<EISDIR>, where the
reference returns C<undef>.

=item *

C<$@> is left alone on success (the reference's internal C<eval> clears it).

=item *

Overloaded and tied arguments are read once (the reference reads some twice).

=item *

The return value is 1 (the reference returns an empty value).

=item *

Warning texts name FastFile's functions (the reference's name C<print>,
C<open> or its own file and line).

=item *

C<$SIG{__DIE__}> runs once per failure (twice in the reference, which dies
inside its C<eval> and again outside).

=item *

On C</etc/pve> the C<fsync> option changes nothing: pmxcfs answers FUSE
C<fsync> with C<ENOSYS>, which the kernel reports as success (measured), so
durability there is pmxcfs's own sqlite (WAL, C<synchronous=NORMAL>).

=item *

pmxcfs limits files to 1 MiB and accepts only the modes and owners it sets
itself; it has neither C<renameat2> flags nor hard links, so C<noclobber>
dies there.

=back

=head1 SEE ALSO

=over 4

=item L<File::Slurper>

Clean API for reading and writing, but not atomic on write.

=item L<Path::Tiny>

C<spew> is atomic (temp + rename) but writes through PerlIO's buffer and
copies the data.

=item L<File::Slurp>

C<write_file> with C<atomic> is close in spirit; pure Perl, buffered.

=item L<IO::AtomicFile>

A handle that commits on close; buffered, and its destructor commits
whatever was written when the handle just goes out of scope.

=back

=head1 AUTHOR

The FastFile developers.

=head1 LICENSE

This library is free software; you can redistribute it and/or modify it under
the same terms as Perl itself.

=cut
