
# Waiting in one session: poll_query_until starts a psql, and the server a
# backend, ten times a second, which on 2 cores takes CPU from the test
# running beside it for as long as the wait lasts (up to a minute for
# pg_cron, whose schedules go by the minute).  Here one DO block asks, and
# sleeps, on the server.
package Poll;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(wait_until);

# True once $condition, an SQL boolean expression, holds in $dbname of
# $node, asked every 0.1 s, each time in a transaction of its own; false
# after $PostgreSQL::Test::Utils::timeout_default seconds, or on an error,
# with what psql said.
sub wait_until
{
	my ($node, $dbname, $condition) = @_;
	my $tries = 10 * $PostgreSQL::Test::Utils::timeout_default;
	my ($ret, $stdout, $stderr) = $node->psql(
		$dbname, qq{DO \$wait\$
BEGIN
  FOR i IN 1 .. $tries LOOP
    IF ($condition) THEN
      RETURN;
    END IF;
    COMMIT;
    PERFORM pg_catalog.pg_sleep(0.1);
  END LOOP;
  RAISE EXCEPTION 'timed out';
END \$wait\$});
	diag("waiting for $condition: $stderr") if $ret != 0;
	return $ret == 0;
}

1;
