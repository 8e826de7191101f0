package FastFile::Writer;

use strict;
use warnings;

our $VERSION = '0.03';

# new, print, printf, write, commit, abort, DESTROY, CLONE_SKIP and the
# tie methods PRINT, PRINTF and CLOSE are XSUBs in FastFile's shared object.
use FastFile ();

# A filehandle for code that wants one: a glob tied to this writer.
sub fh {
    my ($self) = @_;
    my $fh = \do { local *FH };    # a new glob: no module to load (no fd needed)
    tie *$fh, __PACKAGE__, $self;
    return $fh;
}

sub TIEHANDLE {
    my ($class, $writer, @new_args) = @_;
    return ref $writer ? $writer : $class->new($writer, @new_args);
}

# syswrite($fh, $data [, $length [, $offset]])
sub WRITE {
    my ($self, undef, $length, $offset) = @_;
    my $data = @_ > 2 ? substr($_[1], $offset || 0, $length) : $_[1];
    _croak('offset outside string') unless defined $data;
    $self->write($data);
    return length $data;
}

sub BINMODE {
    my ($self, $layer) = @_;
    return 1 if !defined $layer || $layer =~ /\A:(?:raw|bytes)\z/;
    _croak("layer '$layer' is not supported: use the utf8 option");
}

sub FILENO { return undef }    ## no critic (ProhibitExplicitReturnUndef): fileno's "no fd"

for my $method (qw(OPEN READ READLINE GETC EOF SEEK TELL)) {
    no strict 'refs';
    *$method = sub { _croak(lc($method) . ' is not supported on a writer handle') };
}

# Carp's croak where Carp is loaded or can be; with no fd left to load it
# (EMFILE) the same text by hand, at the first caller outside this
# package: an error never depends on opening a file.
sub _croak {
    my $msg = __PACKAGE__ . ": $_[0]\n";
    Carp::croak($msg) if $INC{'Carp.pm'} || eval { local $SIG{__DIE__}; require Carp };
    my $level = 1;
    $level++ while (caller $level)[0] && (caller $level)[0] eq __PACKAGE__;
    my (undef, $file, $line) = caller $level;
    my $tid = defined &threads::tid ? threads->tid : 0;
    die $file ? "$msg at $file line $line" . ($tid ? " thread $tid" : '') . ".\n" : $msg;
}

1;

__END__

=head1 NAME

FastFile::Writer - stream a file and replace the target atomically, one write(2) per MiB

=head1 SYNOPSIS

  use FastFile::Writer;
  my $w = FastFile::Writer->new($file, { perm => 0640 });
  $w->print($_, "\n") for @lines;
  $w->commit;          # until here $file keeps its old contents

  use FastFile qw(atomic_writer);
  my $w = atomic_writer($file, { utf8 => 1, buffer_size => 64 * 1024 });
  my $fh = $w->fh;
  printf {$fh} "%s=%d\n", $key, $value;
  close $fh;           # close commits (see "fh" below)

=head1 DESCRIPTION

A writer creates C<< "$file.tmp.$$" >> at once, collects what is printed in a
buffer of C<buffer_size> bytes (1 MiB by default) that is written with one
C<write(2)> each time it is full, and on L</commit> writes the rest, closes the
temp file and renames it over C<$file>: readers see the old file or the new
one, never a part. A writer that is destroyed without L</commit> -- an
exception, a C<return>, C<undef $w>, the end of the program -- removes its
temp file and leaves C<$file> alone.

Every chunk becomes bytes exactly as L<FastFile/file_set_contents> turns its
data into bytes, and every failure croaks with the text C<file_set_contents>
uses for the step that failed, with C<$!> set.

=head1 METHODS

=head2 new

  my $w = FastFile::Writer->new($filename);
  my $w = FastFile::Writer->new($filename, \%options);

Creates the temp file in the directory of C<$filename> (with the same open
flags, name collisions handling and errors as C<file_set_contents>) and returns
the writer. C<FastFile::atomic_writer(...)> (exported on request) is the same
call. The options are those of C<file_set_contents> that make sense for a
stream:

=over 4

=item perm

The mode of the new file, filtered by the umask. Default C<0644>.

=item utf8

Encode characters as UTF-8 (the C<$force_utf8> column of the bytes table).

=item fsync, preserve, mkdir, follow_symlinks, noclobber

As for C<file_set_contents>; they act in L</new> (mkdir, follow_symlinks,
and the look at the old file for preserve) and L</commit> (the old owner and
mode are given to the new file after its data is written, so a write cannot
clear its set-id bits; fsync; noclobber). With preserve and an old file, the
temporary file is created with only the owner bits that C<perm> and the old
file both grant, for the whole stream: nobody else can read it before the
commit gives it the old mode.

=item buffer_size

Bytes collected before a C<write(2)>: a positive integer, default 1048576
(1 MiB). The buffer is allocated as it fills, doubling, never more than
C<buffer_size>.

=back

C<if_changed> croaks: a stream cannot be compared before it is complete.

A relative C<$filename> names a file in the working directory of C<new>: the
writer holds that directory open (an C<O_PATH> descriptor, from before C<new>
makes the temporary file to the writer's end) and makes the temporary file,
commits, aborts and cleans up there, whatever C<chdir> comes in between --
from the script, from code a call runs (a signal handler, an overloaded or
tied argument, a C<DESTROY>), or from another thread. Such a writer uses
two descriptors, the temp file's and the directory's (an absolute name:
one), and one C<open> and C<close> more.

=head2 print

  $w->print(LIST);

Appends the items of LIST joined with C<$,> and followed by C<$\>, as
C<print> does. Returns true. The items, C<$,> and C<$\> are taken on entry
(get-magic once each, in order, into private copies): user code that one of
them runs (overloading, C<FETCH>, a warning's or a signal's handler) cannot
change what the others write. (Perl's own C<print> reads each item, and
C<$\>, only when it gets to it.) Numbers are formatted as
L<FastFile/file_set_contents> formats them, without the caller's locale.

=head2 printf

  $w->printf(FORMAT, LIST);

Appends C<sprintf(FORMAT, LIST)>, formatted from private copies of FORMAT
and LIST taken on entry (get-magic once each). Returns true. As C<sprintf>,
it formats numbers in the caller's locale (C<use locale>).

=head2 write

  $w->write($data);

Appends C<$data> (no C<$,> or C<$\>), taken as C<print> takes an item.
Returns true.

A chunk that does not fit in the free space of the buffer fills it, the buffer
is written, and the rest goes into the empty buffer; a rest of at least
C<buffer_size> bytes is written straight from the private copy (which shares
the caller's buffer by copy-on-write where perl can), without a copy.

=head2 commit

  $w->commit;

Writes what is buffered, runs C<fdatasync> (C<fsync> option), closes the temp
file and renames it to the target. Returns true. A second C<commit> croaks, so
does a C<commit> after L</abort> or after an error.

=head2 abort

  $w->abort;

Closes and removes the temp file; the target is not touched. Returns true if
the writer was open, false if it was already committed or aborted: calling it
again is harmless.

=head2 fh

  my $fh = $w->fh;
  print {$fh} "text\n";
  close $fh or die;    # commits

Returns a new glob tied to the writer (each call returns another one; keep it
in a variable rather than calling C<fh> for every print). C<print>, C<printf>,
C<say> and C<syswrite> on it call L</print>, L</printf> and L</write>, and
C<close> calls L</commit>: closing the handle is what publishes the file, as
C<close> is where a checked write ends. A handle that goes out of scope without
C<close> does not commit; the writer it holds aborts when its last reference
goes. C<binmode> accepts no layer, C<:raw> or C<:bytes>; C<fileno> returns
C<undef>; reading, seeking and C<open> croak.

The tie interface, for completeness: C<TIEHANDLE> takes a writer (or the
arguments of L</new>), C<PRINT>, C<PRINTF>, C<WRITE>, C<CLOSE>, C<BINMODE>
and C<FILENO> are described above, and C<OPEN>, C<READ>, C<READLINE>,
C<GETC>, C<EOF>, C<SEEK> and C<TELL> croak.

=head1 DIAGNOSTICS

=head2 Exceptions

Each ends in a newline, so no " at FILE line N" is added. For the ones with a
C<$!> text, C<$!> holds the error number and the temp file has been removed;
the target is untouched (but after the last of L</commit>'s). Each entry says
what causes it, then what to do.

=over 4

=item C<unable to open file 'E<lt>tmpE<gt>' - E<lt>$!E<gt>>

From L</new>: the temporary file could not be created (the directory is
missing, not writable, or read-only), or with a relative name its directory
could not be held (C<EMFILE>: no descriptor left for it). Create the
directory (or pass C<< mkdir => 1 >>) and make it writable; close files
(or raise C<ulimit -n>) for C<EMFILE>. The other texts of a failed creation
(C<mkdir>, C<follow_symlinks>) are those of C<file_set_contents>, with the
same remedies; C<preserve>'s C<unable to set owner/mode> texts come from
L</commit>.

=item C<unable to write 'E<lt>tmpE<gt>' - E<lt>$!E<gt>>

A C<write(2)> of the buffer failed (C<ENOSPC>, C<EDQUOT>, C<EIO>): in
L</print>, L</printf> or L</write> when the buffer fills, or in L</commit>.
Free space, then write the file again with a new writer.

=item C<unable to sync 'E<lt>tmpE<gt>' - E<lt>$!E<gt>>

From L</commit> with C<fsync>: the storage could not make the data durable.
Check the device (the kernel log), then write again.

=item C<closing file 'E<lt>tmpE<gt>' failed - E<lt>$!E<gt>>

From L</commit>: the filesystem reported a delayed write error at C<close>
(NFS, FUSE). Treat it as a failed write: fix the cause, then write again.

=item C<close (rename) atomic file 'E<lt>filenameE<gt>' failed: E<lt>$!E<gt>>

From L</commit>: the rename onto the target failed (a directory, a mount
point, or with C<noclobber> an existing file). Name a plain file, or remove
what is in the way.

=item C<unable to sync directory of 'E<lt>filenameE<gt>' - E<lt>$!E<gt>>

From L</commit> with C<fsync>: the new file is in place, but its directory
entry may not survive a crash. Check the device, then write again.

=item C<FastFile::Writer: already committed>

=item C<FastFile::Writer: already aborted>

Data or L</commit> after the end of the writer (after an error too: a failed
step aborts the writer). Make a new writer for new content.

=item C<FastFile::Writer: busy (called while it writes)>

A signal handler that ran while the writer waited in C<write(2)> used the same
writer. Let handlers set a flag, and write from the main code.

=item C<FastFile::Writer: the writer belongs to process N>

A forked child tried to write or commit its copy of the parent's writer.
Make the writer in the process that commits it.

=item C<FastFile::Writer: option 'if_changed' is not supported by the writer>

The writer cannot know the whole content before it writes. Use
C<file_set_contents> with C<if_changed> for that.

=item C<FastFile::Writer: options must be a hash reference>

The second argument of L</new> is not a hash reference. Pass C<\%options>.

=item C<invalid value for option 'buffer_size'>

C<buffer_size> is not a whole number of at least 1. Pass a byte count.

=item C<file name is undefined or empty>, C<unknown option '...'>, C<invalid value for option '...'>

As for C<file_set_contents>: check the file name and the options hash.

=item C<FastFile::Writer: layer '...' is not supported: use the utf8 option>

C<binmode> on the writer's handle with a layer. Pass C<< utf8 => 1 >> to
L</new> for UTF-8, or encode the data yourself.

=item C<FastFile::Writer: ... is not supported on a writer handle>

Reading, seeking or C<open> on the writer's handle: it only writes. Read the
file after L</commit>.

=back

=head2 Warnings

Both name the method that got the value, as in C<Wide character in
FastFile::Writer::print> (C<::printf>, C<::write>; through the handle too).

=over 4

=item C<Wide character in ...> (category C<utf8>)

A string with characters above 0xFF without the C<utf8> option: it is written
as UTF-8, as C<print> does. Pass C<< utf8 => 1 >> to L</new>, or encode the
data first.

=item C<Use of uninitialized value in ...> (category C<uninitialized>)

An undefined item; it adds nothing. Pass C<""> or skip the item.

=back

=head1 CAVEATS

=over 4

=item Destruction is the safety net

The temp file is removed when the writer is destroyed, which perl does on
C<die>, on scope exit, on C<exit> and in global destruction - whatever
class the object is blessed into (a subclass whose C<DESTROY> does not call
this one's, C<< FastFile::Writer::new('Other', ...) >>, an object reblessed
after C<new>): the cleanup hangs on the object itself (free magic), not only on
the C<DESTROY> method. It cannot happen
on C<POSIX::_exit>, C<exec>, C<kill -9> or a crash: such a temp file stays
(named C<< "$file.tmp.<pid>" >>), the target is still intact.

=item fork

The writer remembers the C<$$> that created it. A forked child's copy never
touches the temp file: destroying or aborting it only closes the child's
descriptor and frees its memory, and writing or committing from the child
croaks. Data buffered before the fork is written once, by the parent.

=item threads

Writers are not cloned into new threads (C<CLONE_SKIP>): in the new thread
the variable holds an unblessed reference to C<undef>. It is true, so test it
with C<blessed> (L<Scalar::Util>), not with C<if ($w)>: a method call on it
dies with C<Can't call method ... on unblessed reference>. Use a writer in the
thread that created it. A writer blessed into a class that lets threads copy
it (C<FastFile::Writer::new("Other", ...)>, a subclass whose C<CLONE_SKIP>
returns 0) is copied as an object that holds no writer: in the new thread it
dies with C<not a writer object>, and the copy's end leaves the parent's
writer alone.

=item Signals

A signal that interrupts C<write(2)> runs perl's handlers and the write is
retried, so an C<alarm> still fires. A handler that dies aborts the writer
(temp file removed). What is written is a private copy of what was passed,
as for C<file_set_contents>: a handler that frees, assigns or appends to the
caller's variable, or assigns a new C<$\>, changes nothing already passed to
the writer, and nothing of the caller's is made read-only. A handler that
calls C<< $w->DESTROY >> while the writer is inside a write changes nothing
(the writer is cleaned up when its object is freed); called from user code
that a method runs elsewhere (a warning's handler, an overload), it removes
the temp and the method dies with C<already aborted>. After C<DESTROY> the
object is no writer (C<not a writer object>); its memory goes with it. A child
forked by a handler never touches the temp file (see fork).

=item Memory

Until it is full the buffer lives in C memory: up to C<buffer_size> bytes per
writer.

=back

=head1 SEE ALSO

L<FastFile> -- C<file_set_contents> when the data is already one string.

L<IO::AtomicFile> -- an IO::File on a temp file whose C<close> renames it; its
destructor renames too, so an exception publishes a half-written file.

PVE::AtomicFile (Proxmox) -- IO::AtomicFile with a destructor that does
nothing: an exception leaves the temp file behind. Both write through PerlIO
in 8 KiB pieces.

L<File::Temp> plus C<rename> -- the same by hand, with the same small writes.

=head1 AUTHOR

FastFile developers

=head1 LICENSE

This library is free software; you can redistribute it and/or modify it under
the same terms as Perl itself.

=cut
