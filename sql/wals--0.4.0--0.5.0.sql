/* sql/wals--0.4.0--0.5.0.sql */
\echo Use "ALTER EXTENSION wals UPDATE TO '0.5.0'" to load this file. \quit

-- 0.5.0: packaging (a Debian package, LICENSE, META.json, OpenBLAS found
-- through pkg-config).  No object of the extension changes: this script
-- only moves a database to the version the library serves.
