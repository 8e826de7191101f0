use strict;
use warnings;

# The syscalls of PVE::File's helpers, seen with strace: tempfile_contents
# writes its data with exactly one write(2) at every size (the reference's
# print makes one per 8 KiB); file_read_last_line reads a 100 MiB log's last
# line with one pread(2) (the reference: a seek and a read per 4 KiB of the
# line); tempfile never names a file where O_TMPFILE works.

use Test::More;
use lib 't/lib';
use FFTest qw(:strace_tests tempdir spew strace_call calls_named io_calls);
use FastFile ();

my $dir = tempdir();
# the portable build has no O_TMPFILE: the reference's named file, unlinked
my $portable = FastFile::_build_info()->{portable};
my $OPEN = $portable ? qr/\AAT_FDCWD, "\Q$dir\E\/\.tmpfile\.\d+", O_RDWR\|O_CREAT\|O_EXCL\|O_CLOEXEC, 06[04]0\z/
                     : qr/\AAT_FDCWD, "\Q$dir\E", O_RDWR\|O_EXCL\|O_CLOEXEC\|O_TMPFILE, 06[04]0\z/;

sub show { my ($r) = @_; return join '', map { "  $_->{line}\n" } @{ $r->{calls} } }
sub last_arg { my ($c) = @_; return ($c->{args} =~ /,\s*(\d+)\z/)[0] }

# tempfile_contents: one write(2) of all the bytes, at every size; the rest
# is the open and what perl's open "&=" asks of any handle it makes
for my $size (1024, 65536, 1 << 20) {
    my $r = strace_call('my ($path, $fh) = tempfile_contents($data, undef, dir => $T); die "size\n" if -s $path != length $data',
                        attach => 1, target => $dir, setup => "require IO::File; my \$data = 'd' x $size");
    ok($r->{traced} && $r->{ok}, "$size bytes: traced call succeeded") or diag($r->{err}, $r->{stderr});
    my @w = grep { $_->{name} =~ /\A(?:write|writev|pwrite64)\z/ } @{ $r->{calls} };
    is(scalar @w, 1, "$size bytes: exactly one write") or diag(show($r));
    is($w[0] && last_arg($w[0]), $size, "$size bytes: ... of all $size bytes");
    is($w[0] && $w[0]->{ret}, $size, "$size bytes: ... which wrote them all");
    my ($open) = calls_named($r, 'openat');
    like($open ? $open->{args} : '', $OPEN,
         "$size bytes: one openat" . ($portable ? ' of <dir>/.tmpfile.<pid>' : ' of the directory with O_TMPFILE'));
    is(scalar(calls_named($r, 'openat')), 1, "$size bytes: no other open");
}

# $\ set: still one call, data and separator from their own buffers
{
    my $r = strace_call('local $\\ = "\\n"; my ($path, $fh) = tempfile_contents($data, undef, dir => $T)',
                        attach => 1, target => $dir, setup => 'require IO::File; my $data = "e" x 65536');
    ok($r->{ok}, '$\\: succeeded') or diag($r->{err});
    my @w = grep { $_->{name} =~ /\A(?:write|writev)\z/ } @{ $r->{calls} };
    is(scalar @w, 1, '$\\: one write call') or diag(show($r));
    is($w[0] && $w[0]->{ret}, 65537, '$\\: data and separator');
}

# file_read_last_line on a 100 MiB log (sparse, lines at its end): open,
# the seek to the end, one pread of the last 64 KiB, close
{
    my $log = "$dir/task.log";
    open my $fh, '>', $log or die "$log: $!";
    truncate $fh, 100 << 20 or die "truncate: $!";
    seek $fh, 0, 2;
    print {$fh} "line one\nline two\nTASK OK\n";
    close $fh or die "$log: $!";
    my $r = strace_call('my $l = file_read_last_line($T); die "got $l\n" if $l ne "TASK OK"', attach => 1, target => $log);
    ok($r->{traced} && $r->{ok}, '100 MiB log: traced call succeeded') or diag($r->{err}, $r->{stderr});
    my @names = map { $_->{name} } io_calls($r);
    is("@names", 'openat lseek pread64 close', '100 MiB log: open, lseek, one pread, close') or diag(show($r));
    my ($p) = calls_named($r, 'pread64');
    like($p ? $p->{args} : '', qr/, 65536, \d+\z/, '100 MiB log: the pread takes 64 KiB');

    # a last line of 200 KiB: the block doubles (64, +64, +128 KiB)
    spew($log, "first\n" . ('x' x (200 << 10)) . "\n");
    $r = strace_call('my $l = file_read_last_line($T); die "got " . length($l) . "\n" if length $l != 200 << 10',
                     attach => 1, target => $log);
    ok($r->{ok}, '200 KiB last line: succeeded') or diag($r->{err});
    my @sizes = map { ($_->{args} =~ /, (\d+), \d+\z/)[0] } calls_named($r, 'pread64');
    is("@sizes", '65536 65536 73735', '200 KiB last line: preads of 64 KiB, 64 KiB (doubled), then the rest')
        or diag(show($r));
    # ... then one lseek: a file cut while its blocks were read is read
    # again, never joined from bytes it held at different times (t/18)
    my @io = map { $_->{name} } io_calls($r);
    is("@io", 'openat lseek pread64 pread64 pread64 lseek close',
       '200 KiB last line: the end sought again after the blocks, once') or diag(show($r));
}

# tempfile: O_TMPFILE only, nothing named, no write
{
    my $r = strace_call('my $fh = tempfile(0640, dir => $T)', attach => 1, target => $dir, setup => 'require IO::File');
    ok($r->{ok}, 'tempfile: succeeded') or diag($r->{err});
    is(join(' ', map { $_->{name} } grep { $_->{name} =~ /\A(?:openat|unlink|unlinkat|write|memfd_create)\z/ } @{ $r->{calls} }),
       $portable ? 'openat unlink' : 'openat', 'tempfile: one openat' . ($portable ? ', unlinked at once' : ', nothing unlinked'))
        or diag(show($r));
}

done_testing();
