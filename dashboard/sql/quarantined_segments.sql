-- Segment files moved aside because they could not be read, newest first (the Overview's notice).
select segment, moved_to, bytes, reason, quarantined_at
from quarantined_segments
order by quarantined_at desc;
