package BenchSVG;

# A small hand-written SVG line-plot writer for bench/compare.pl: panels side
# by side, log-scaled axes, a legend under each panel. No dependencies.
#
#   my $svg = BenchSVG::plot(
#       title  => '...',
#       panels => [ { title => '...', xlabel => '...', ylabel => '...',
#                     xticks => [ [1024, '1 KiB'], ... ],
#                     series => [ { label => '...', color => '#c00', dash => '4 3',
#                                   points => [ [x, y], ... ] }, ... ] }, ... ]);

use strict;
use warnings;
use POSIX qw(floor ceil);

my ($PW, $PH) = (380, 250);           # plot area of one panel
my ($ML, $MR, $MT, $MB) = (64, 26, 46, 52);
my $LEGEND_ROW = 17;

sub _esc {
    my ($s) = @_;
    $s =~ s/&/&amp;/g;
    $s =~ s/</&lt;/g;
    $s =~ s/>/&gt;/g;
    $s =~ s/"/&quot;/g;
    return $s;
}

sub _num { my $s = sprintf '%.1f', $_[0]; $s =~ s/\.0\z//; $s }

sub _log10 { log($_[0]) / log(10) }

# 1-2-5 ticks covering [lo, hi] on a log axis
sub _log_ticks {
    my ($lo, $hi) = @_;
    my @t;
    for my $e (floor(_log10($lo)) - 1 .. ceil(_log10($hi)) + 1) {
        for my $m (1, 2, 5) {
            my $v = $m * 10**$e;
            push @t, $v if $v >= $lo * 0.999 && $v <= $hi * 1.001;
        }
    }
    return @t;
}

sub _tick_label { sprintf '%g', $_[0] }

sub _panel {
    my ($p, $ox, $oy) = @_;
    my @out;
    my @pts = map { @{ $_->{points} } } @{ $p->{series} };
    return '' unless @pts;
    my ($xmin, $xmax) = ($p->{xmin}, $p->{xmax});
    $xmin //= (sort { $a <=> $b } map { $_->[0] } @pts)[0];
    $xmax //= (sort { $b <=> $a } map { $_->[0] } @pts)[0];
    my @ys = sort { $a <=> $b } grep { $_ > 0 } map { $_->[1] } @pts;
    my ($ymin, $ymax) = ($p->{ymin} // $ys[0], $p->{ymax} // $ys[-1]);
    # round the y range out to 1-2-5 steps
    my @nice = map { $_ * 10**floor(_log10($ymin)) } (1, 2, 5, 10);
    $ymin = (grep { $_ <= $ymin * 1.0001 } @nice)[-1] // $ymin;
    @nice = map { $_ * 10**floor(_log10($ymax)) } (1, 2, 5, 10);
    $ymax = (grep { $_ >= $ymax * 0.9999 } @nice)[0] // $ymax;
    $ymax = $ymin * 2 if $ymax <= $ymin;

    my $lx0 = log($xmin);
    my $lxr = log($xmax) - $lx0 || 1;
    my $ly0 = log($ymin);
    my $lyr = log($ymax) - $ly0 || 1;
    my $X = sub { $ox + $ML + (log($_[0]) - $lx0) / $lxr * $PW };
    my $Y = sub { $oy + $MT + $PH - (log($_[0]) - $ly0) / $lyr * $PH };

    push @out, sprintf '<text x="%s" y="%s" text-anchor="middle" font-size="14" font-weight="bold">%s</text>',
        _num($ox + $ML + $PW / 2), _num($oy + 22), _esc($p->{title});
    push @out, sprintf '<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#444"/>',
        _num($ox + $ML), _num($oy + $MT), $PW, $PH;

    # grid and ticks
    for my $t (_log_ticks($ymin, $ymax)) {
        my $y = _num($Y->($t));
        push @out, sprintf '<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>',
            _num($ox + $ML), $y, _num($ox + $ML + $PW), $y;
        push @out, sprintf '<text x="%s" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>',
            _num($ox + $ML - 5), $y, _esc(_tick_label($t));
    }
    if (defined $p->{hline}) {
        my $y = _num($Y->($p->{hline}));
        push @out, sprintf '<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#888" stroke-width="1.2"/>',
            _num($ox + $ML), $y, _num($ox + $ML + $PW), $y;
    }
    for my $t (@{ $p->{xticks} }) {
        my ($v, $label) = @$t;
        next if $v < $xmin * 0.999 || $v > $xmax * 1.001;
        my $x = _num($X->($v));
        push @out, sprintf '<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>',
            $x, _num($oy + $MT), $x, _num($oy + $MT + $PH);
        push @out, sprintf '<text x="%s" y="%s" text-anchor="middle">%s</text>',
            $x, _num($oy + $MT + $PH + 16), _esc($label);
    }
    push @out, sprintf '<text x="%s" y="%s" text-anchor="middle">%s</text>',
        _num($ox + $ML + $PW / 2), _num($oy + $MT + $PH + 36), _esc($p->{xlabel});
    push @out, sprintf '<text transform="translate(%s,%s) rotate(-90)" text-anchor="middle">%s</text>',
        _num($ox + 16), _num($oy + $MT + $PH / 2), _esc($p->{ylabel});

    # the lines, clipped to the plot area
    my $clip = "clip$ox";
    push @out, sprintf '<clipPath id="%s"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath>',
        $clip, _num($ox + $ML), _num($oy + $MT), $PW, $PH;
    for my $s (@{ $p->{series} }) {
        my @xy = map { [ $X->($_->[0]), $Y->($_->[1]) ] } grep { $_->[1] > 0 } @{ $s->{points} };
        next unless @xy;
        push @out, sprintf '<g clip-path="url(#%s)">', $clip;
        push @out, sprintf '<polyline fill="none" stroke="%s" stroke-width="%s"%s%s points="%s"/>',
            $s->{color}, $s->{width} // 2,
            ($s->{dash} ? qq{ stroke-dasharray="$s->{dash}"} : ''),
            ($s->{opacity} ? qq{ stroke-opacity="$s->{opacity}"} : ''),
            join ' ', map { _num($_->[0]) . ',' . _num($_->[1]) } @xy;
        push @out, sprintf '<circle cx="%s" cy="%s" r="%s" fill="%s"%s/>',
            _num($_->[0]), _num($_->[1]), $s->{marker} // 3, $s->{color},
            ($s->{opacity} ? qq{ fill-opacity="$s->{opacity}"} : '')
            for @xy;
        push @out, '</g>';
    }

    if (defined $p->{note}) {
        my $ny = $oy + $MT + 16;
        for my $line (split /\n/, $p->{note}) {
            push @out, sprintf '<text x="%s" y="%s" fill="#333" font-size="11">%s</text>',
                _num($ox + $ML + 8), _num($ny), _esc($line);
            $ny += 14;
        }
    }

    # legend under the axis label, in one or two columns
    my $cols = $p->{legend_cols} // 2;
    my $i = 0;
    for my $s (@{ $p->{series} }) {
        my $col = $i % $cols;
        my $row = int($i / $cols);
        my $lx = $ox + $ML + $col * ($PW / $cols);
        my $ly = $oy + $MT + $PH + $MB + $row * $LEGEND_ROW;
        push @out, sprintf '<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s%s/>',
            _num($lx), _num($ly - 4), _num($lx + 24), _num($ly - 4), $s->{color}, $s->{width} // 2,
            ($s->{dash} ? qq{ stroke-dasharray="$s->{dash}"} : ''),
            ($s->{opacity} ? qq{ stroke-opacity="$s->{opacity}"} : '');
        push @out, sprintf '<text x="%s" y="%s">%s</text>', _num($lx + 30), _num($ly), _esc($s->{label});
        $i++;
    }
    return join "\n", @out;
}

sub plot {
    my (%a) = @_;
    my @panels = @{ $a{panels} };
    my $rows = 0;
    for my $p (@panels) {
        my $c = $p->{legend_cols} // 2;
        my $r = int((@{ $p->{series} } + $c - 1) / $c);
        $rows = $r if $r > $rows;
    }
    my $pw = $ML + $PW + $MR;
    my $top = $a{title} ? 30 : 0;
    my $w = $pw * @panels;
    my $h = $top + $MT + $PH + $MB + $rows * $LEGEND_ROW + 8 + ($a{footer} ? 18 : 0);
    my @out = (
        qq{<?xml version="1.0" encoding="UTF-8"?>},
        qq{<svg xmlns="http://www.w3.org/2000/svg" width="$w" height="$h" viewBox="0 0 $w $h" }
            . qq{font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">},
        qq{<rect width="$w" height="$h" fill="#fff"/>},
    );
    push @out, sprintf '<text x="%s" y="20" text-anchor="middle" font-size="15" font-weight="bold">%s</text>',
        _num($w / 2), _esc($a{title}) if $a{title};
    for my $i (0 .. $#panels) {
        push @out, _panel($panels[$i], $i * $pw, $top);
    }
    push @out, sprintf '<text x="%s" y="%s" text-anchor="middle" fill="#555" font-size="11">%s</text>',
        _num($w / 2), _num($h - 8), _esc($a{footer}) if $a{footer};
    push @out, '</svg>';
    return join("\n", @out) . "\n";
}

1;
