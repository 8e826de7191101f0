#!perl
# The throwaway builds of bench/results.md's "time against bare C" table:
# each drops one guarantee that file_set_contents pays for on its plain
# 1 KiB path, to measure what that guarantee costs (instructions with
# bench/instr.pl, time with bench/vsbare.pl). Never for a real build: each
# one breaks what t/ proves.
#
#   mkdir /tmp/abl && git archive HEAD | tar -x -C /tmp/abl
#   perl bench/ablate.pl /tmp/abl nopid,noclock     (or: all)
#   cd /tmp/abl && perl Makefile.PL && make
#   perl -Mblib bench/instr.pl --quick --no-write '^file_set_contents 1 KiB$'
#   perl -Mblib bench/vsbare.pl 1
#
# It refuses a directory that is a git checkout (the tree you work in).
use strict;
use warnings;

my %ablation = (
    # the private snapshot of issue 18: the data's buffer shared (copy on
    # write) and given back at the end, the name copied to the stack;
    # instead the caller's buffers are used as they are
    nosnapshot => [
        [ 'FastFile.xs', 'if (S_share_bytes(data, &call.share)) {',
          'if (SvPOK(data) && !SvUTF8(data) && !SvMAGICAL(data) && ((call.share.pv = SvPVX(data)), 1)) {' ],
        [ 'FastFile.xs', "    if (!share->pv)\n        return;\n    count",
          "    share->pv = NULL;\n    if (!share->pv)\n        return;\n    count" ],
        [ 'FastFile.xs', 'if (name_copy(filename, name_buf, &path))',
          'if (FF_PLAIN_STRING(filename) && SvCUR(filename) && ((path.pv = SvPVX(filename)), '
          . '(path.len = SvCUR(filename)), (path.utf8 = 0), (path.sv = NULL), 1))' ],
    ],
    # croak-safe cleanup: no savestack destructor (a croak, or a die in a
    # signal handler, would leave the temp behind); the share given back
    # by hand on the way out
    nodestructor => [
        [ 'FastFile.xs', 'SAVEDESTRUCTOR_X(S_call_done, &call);', '' ],
        [ 'FastFile.xs', "    LEAVE_SCOPE(done_ix);\n    PL_savestack_ix = call_ix;\n    S_call_done(aTHX_ &call);\n",
          "    S_unshare(&call.share);\n" ],
    ],
    # the cached pid's fork check (xs_pid.c: the page every child gets
    # zeroed, and $$ as the script may have set it): a static pid instead,
    # wrong in every child
    nopid => [
        [ 'FastFile.xs', 'pid = ffxs_pid_suffix(aTHX_ suffix, &suffix_len);',
          '{ static char s_suf[FF_PID_SUFFIX_MAX]; static size_t s_len; static IV s_pid; '
          . 'if (!s_len) { s_pid = getpid(); s_len = ff_temp_suffix(s_suf, (long)s_pid); } '
          . 'memcpy(suffix, s_suf, FF_PID_SUFFIX_MAX); suffix_len = s_len; pid = s_pid; }' ],
    ],
    # the EINTR hook: no perl signal handler runs before the rename (an
    # alarm's die would come after the target is replaced), no callback
    # on EINTR or a short write
    noeintr => [
        [ 'FastFile.xs', "intr.fn = ffxs_on_eintr;\n    intr.ctx = &guard;", "intr.fn = NULL;\n    intr.ctx = &guard;" ],
    ],
    # the orphan check's clock (ff_open_excl): after an EINTR an old empty
    # file of ours by the temp's name would be taken for our own orphan
    noclock => [
        [ 'ff_io.c', 'clock_gettime(CLOCK_REALTIME_COARSE, &started);', 'started.tv_sec = 0; started.tv_nsec = 0;' ],
    ],
    # the name's NUL check: a name with a NUL would be cut there by open
    nonul => [
        [ 'xs_common.c', "if (memchr(path->pv, '\\0', path->len))", 'if (0)' ],
    ],
);
my @order = qw(nosnapshot nodestructor nopid noeintr noclock nonul);

my ($dir, $which) = @ARGV;
die "usage: $0 DIR " . join(',', @order) . "|all\n" unless $dir && $which && -f "$dir/FastFile.xs";
die "$dir is a git checkout: ablate a throwaway copy (git archive HEAD | tar -x -C DIR)\n" if -e "$dir/.git";
for my $name ($which eq 'all' ? @order : split /,/, $which) {
    my $edits = $ablation{$name} or die "unknown ablation '$name'\n";
    for my $e (@$edits) {
        my ($file, $old, $new) = @$e;
        my $path = "$dir/$file";
        open my $in, '<', $path or die "$path: $!\n";
        my $text = do { local $/; <$in> };
        close $in;
        my $at = index $text, $old;
        die "$name: $file no longer has the text it replaces\n" if $at < 0;
        substr($text, $at, length $old) = $new;
        open my $out, '>', $path or die "$path: $!\n";
        print {$out} $text;
        close $out or die "$path: $!\n";
    }
    print "$name applied\n";
}
