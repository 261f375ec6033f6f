-- layer_verdicts: one row per turn and layer: what that layer's own log says happened, so the five logs of a turn read side by side.
--   session_id: the session.
--   turn_id: the turn.
--   layer: http, stream, runtime, tool, third_party or billing (rows whose layer nothing tells are left out).
--   verdict: the layer's belief: completed, cancelled, client_disconnect, cancel_unacknowledged, failed, open (http/stream/runtime); succeeded, compensated, failed, discarded, cancelled, running (tool); acknowledged, failed, pending, no_ack (third_party); charged, not_charged (billing).
--   detail: one sentence with the facts behind the verdict.
--   spans: spans the layer logged in the turn.
--   events: span events the layer logged in the turn.
--   nodes: the nodes that logged them, sorted.
--   first_hlc: the layer's first row, packed HLC (order_hlc).
--   last_hlc: the layer's last row, packed HLC (order_hlc).
--   cancel_seen: the layer logged cancel.requested or cancel.received.
--   cancel_acknowledged: the layer logged cancel.acknowledged.
--   finish_reason: the last finish reason the layer logged (stream.completed), if any.
--   open_spans: spans that never ended.
--   error_spans: spans with status error.
--   commits: tool.committed events the layer logged.
--   third_party_status: the last third-party status the layer logged.
-- layer_verdicts_of(rows): the same rows over any relation with turn_events' columns, named by string (turn_events
-- for the view; a named query passes one turn's events, turn_events_in over the turn's traces).
create or replace macro layer_verdicts_of(rows) as table
with per_layer as (
    select
        session_id,
        turn_id,
        layer,
        count(*) filter (where source = 'span_start') as spans,
        count(*) filter (where source = 'event') as events,
        list_sort(list_distinct(list(node))) as nodes,
        min(order_hlc) as first_hlc,
        max(order_hlc) as last_hlc,
        bool_or(step in ('cancel.requested', 'cancel.received')) as cancel_seen,
        bool_or(step = 'cancel.acknowledged') as cancel_acknowledged,
        bool_or(cancel_origin = 'client_disconnect') as client_disconnect,
        arg_max(finish_reason, row(order_hlc, finish_reason)) filter (where finish_reason is not null) as finish_reason,
        count(*) filter (where source = 'span_start') - count(*) filter (where source = 'span_end') as open_spans,
        count(*) filter (where source = 'span_start' and status_code = 'error') as error_spans,
        count(*) filter (where step = 'tool.committed') as commits,
        count(*) filter (where step = 'tool.compensated') as compensations,
        count(*) filter (where step = 'tool.failed') as failures,
        count(*) filter (where step = 'tool.discarded') as discards,
        count(*) filter (where step = 'third_party.ack') as acks,
        count(*) filter (where step = 'billing.charged') as charges,
        arg_max(third_party_status, row(order_hlc, third_party_status)) filter (where third_party_status is not null)
            as third_party_status
    from query_table(rows)
    where layer is not null
    group by session_id, turn_id, layer
),

judged as (
    select
        *,
        case
            when layer = 'tool' then case
                when compensations > 0 then 'compensated'
                when commits > 0 then 'succeeded'
                when failures > 0 then 'failed'
                -- before the error spans: a framework's tool span ended by the cancellation (its CancelledError)
                -- has an error status, and acknowledged the cancel; it was stopped, it did not fail
                when cancel_acknowledged and discards = 0 then 'cancelled'
                when error_spans > 0 then 'failed'
                when discards > 0 then 'discarded'
                when open_spans > 0 then 'running'
                else 'succeeded'
            end
            when layer = 'third_party' then case
                when acks > 0 then 'acknowledged'
                when error_spans > 0 then 'failed'
                when open_spans > 0 then 'pending'
                else 'no_ack'
            end
            when layer = 'billing' then case when charges > 0 then 'charged' else 'not_charged' end
            else case
                when client_disconnect then 'client_disconnect'
                when cancel_acknowledged or finish_reason = 'cancelled' then 'cancelled'
                when cancel_seen then 'cancel_unacknowledged'
                when finish_reason = 'error' or error_spans > 0 then 'failed'
                when open_spans > 0 then 'open'
                else 'completed'
            end
        end as verdict
    from per_layer
)

select
    session_id,
    turn_id,
    layer,
    verdict,
    concat_ws(' ',
        format('{} span(s) and {} event(s) on {}.', spans, events, array_to_string(nodes, ', ')),
        case when finish_reason is not null then format('Finish reason {}.', finish_reason) end,
        case when cancel_acknowledged then 'Acknowledged the cancel.'
            when cancel_seen then 'Saw the cancel but never acknowledged it.' end,
        case when commits > 0 then format('{} commit(s).', commits) end,
        case when compensations > 0 then format('{} compensation(s).', compensations) end,
        case when failures > 0 then format('{} failure(s).', failures) end,
        case when acks > 0 then format('{} acknowledgement(s), last {}.', acks, coalesce(third_party_status, 'without status')) end,
        case when open_spans > 0 then format('{} span(s) never ended.', open_spans) end,
        case when error_spans > 0 then format('{} span(s) ended in error.', error_spans) end
    ) as detail,
    spans,
    events,
    nodes,
    first_hlc,
    last_hlc,
    cancel_seen,
    cancel_acknowledged,
    finish_reason,
    open_spans,
    error_spans,
    commits,
    third_party_status
from judged;

create or replace view layer_verdicts as
select * from layer_verdicts_of('turn_events');
