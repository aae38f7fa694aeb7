
# One initdb for a whole TAP suite on every major: from 17 on,
# PostgreSQL::Test::Cluster copies the data directory that INITDB_TEMPLATE
# names where it would run initdb for a cluster that gets no initdb
# options; 15's runs initdb each time (about 1.2 s of CPU here, for some
# thirty clusters a suite).  Loaded into prove and every test by the
# Makefile (PERL5OPT), this makes 15's init copy the template in the same
# case, in the tests only; it does nothing where Cluster.pm copies the
# template itself (it never asks for that initdb) or where INITDB_TEMPLATE
# is unset.  test/installcheck.sh makes the template.
package InitdbTemplate;

use strict;
use warnings FATAL => 'all';

if ($0 =~ /\.pl\z/)
{
	require PostgreSQL::Test::Utils;
	my $system_or_bail = \&PostgreSQL::Test::Utils::system_or_bail;

	no warnings 'redefine';
	*PostgreSQL::Test::Utils::system_or_bail = sub {
		my @cmd = @_;
		return $system_or_bail->('cp', '-RPp', $ENV{INITDB_TEMPLATE}, $cmd[2])
		  if defined $ENV{INITDB_TEMPLATE}
		  && @cmd == 6
		  && join(' ', @cmd[ 0, 1, 3, 4, 5 ]) eq 'initdb -D -A trust -N';
		return $system_or_bail->(@cmd);
	};
}

1;
