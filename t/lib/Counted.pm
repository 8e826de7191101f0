# Arguments with magic that count what FastFile does to them, for the
# "read each argument once" tests (use Counted; then the three classes):
#
#   tie my $x, 'Counted', $value;   (tied $x)->{n}: FETCHes, {stores}: STOREs,
#                                   {die} = "text": FETCH dies
#   my $o = Str->new(s => $value);  $o->{n}: stringifications, {num}: numifications,
#                                   die => "text": stringification dies
#   my $p = Num->new($value);       $Num::n / $Num::num: stringifications /
#                                   numifications (not a hash: a hash ref is the options form)
use strict;
use warnings;

package Counted;
sub TIESCALAR { my ($c, $v) = @_; return bless { v => $v, n => 0 }, $c }
sub FETCH     { my $s = shift; $s->{n}++; die $s->{die} if $s->{die}; return $s->{v} }
sub STORE     { my $s = shift; $s->{stores}++; $s->{v} = shift }

package Str;
use overload
    '""' => sub { $_[0]{n}++; die $_[0]{die} if $_[0]{die}; $_[0]{s} },
    '0+' => sub { $_[0]{num}++; $_[0]{s} },
    fallback => 1;
sub new { my ($c, %a) = @_; return bless { n => 0, num => 0, %a }, $c }

package Num;
our ($n, $num) = (0, 0);
use overload '0+' => sub { $num++; ${ $_[0] } }, '""' => sub { $n++; ${ $_[0] } }, fallback => 1;
sub new { my ($c, $v) = @_; return bless \$v, $c }

1;
