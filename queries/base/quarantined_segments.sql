-- quarantined_segments: one row per segment file moved aside because it could not be read (truncated, not Parquet, corrupt pages) or did not have the segment schema's columns.
-- The rest of the store is read without it; the file itself is kept under DIR/quarantine/ for forensics.
--   segment: the file's path under segments/ before it was moved.
--   moved_to: where it is now, relative to the store folder.
--   bytes: the file's size when it was moved.
--   reason: what the reader that found it could not read.
--   quarantined_at: when it was moved (UTC).
create or replace view quarantined_segments as
select segment, moved_to, bytes, reason, quarantined_at
from read_json(
    {{quarantine_log}},
    format = 'newline_delimited',
    columns = {segment: 'varchar', moved_to: 'varchar', bytes: 'bigint', reason: 'varchar', quarantined_at: 'timestamptz'}
);
