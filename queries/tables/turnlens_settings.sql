-- turnlens_settings: one row per threshold, as resolved when the catalog was written (defaults < DIR/settings.toml < TURNLENS_* environment).
--   name: the setting, and the SQL variable a reader may SET to override it for a session.
--   value: its value.
--   unit: ms, ratio or bool.
--   description: what it bounds.
create or replace table turnlens_settings as
select name, value, unit, description
from settings_rows;
